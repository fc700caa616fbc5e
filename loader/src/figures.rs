//! Figures every layer computes: rounding for evidence and latency summaries of the shared
//! log2 histograms. Kept below host/, traps/ and report/ so that gathering code need not import
//! the layers that judge or render (see docs/DESIGN.md, "Layers").

use serde::Serialize;

/// Rounds for evidence: numbers are measured, but 17 significant digits help nobody.
pub fn round(v: f64, decimals: i32) -> f64 {
    let m = 10f64.powi(decimals);
    (v * m).round() / m
}

/// A count with thousands separators (`20,000`), for titles and text renderings.
pub fn fmt_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Latency summary; all in microseconds.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Latency {
    /// Mean (exact: summed latency ÷ count).
    pub mean_us: f64,
    /// Median, interpolated within a log2 bucket.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest (exact).
    pub max_us: f64,
}

/// Percentile estimate from a log2 histogram: linear interpolation inside the bucket that holds
/// the rank, clamped to the exact maximum.
pub fn percentile_us(hist: &[u64], q: f64, max_ns: u64) -> f64 {
    use trapdetect_common::hist::{bucket_high_ns, bucket_low_ns};
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = (q * total as f64).ceil().max(1.0);
    let mut seen = 0u64;
    for (b, &n) in hist.iter().enumerate() {
        if n == 0 {
            continue;
        }
        if (seen + n) as f64 >= rank {
            let lo = bucket_low_ns(b as u32) as f64;
            let hi = (bucket_high_ns(b as u32) as f64).min(max_ns as f64).max(lo);
            let frac = (rank - seen as f64) / n as f64;
            return (lo + (hi - lo) * frac) / 1000.0;
        }
        seen += n;
    }
    max_ns as f64 / 1000.0
}

/// Adds histogram `h` into `into` bucket by bucket (growing `into` if it is shorter).
pub fn merge_hist(into: &mut Vec<u64>, h: &[u64]) {
    if into.len() < h.len() {
        into.resize(h.len(), 0);
    }
    for (i, v) in h.iter().enumerate() {
        into[i] += v;
    }
}

/// Builds a latency summary from a histogram and exact sum/max.
pub fn latency(hist: &[u64], count: u64, sum_ns: u64, max_ns: u64) -> Latency {
    let r = |v: f64| round(v, 2);
    Latency {
        mean_us: if count == 0 {
            0.0
        } else {
            r(sum_ns as f64 / count as f64 / 1000.0)
        },
        p50_us: r(percentile_us(hist, 0.50, max_ns)),
        p90_us: r(percentile_us(hist, 0.90, max_ns)),
        p99_us: r(percentile_us(hist, 0.99, max_ns)),
        max_us: r(max_ns as f64 / 1000.0),
    }
}
