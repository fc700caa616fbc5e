//! Results of other load generators (`run --load-results FILE`, or what `run -- COMMAND`
//! prints), read into one shape so the run can join them with the kernel's seconds.
//!
//! Pure: bytes in, per-second buckets and totals out. Per-request formats (vegeta's results
//! as JSON lines or CSV, k6's `--out json` lines, hey's CSV) give per-second columns; summary
//! formats (oha's JSON, vegeta's `report -type=json`, k6's `--summary-export`, wrk's and hey's
//! text) give totals only, and the columns they lack are named so the timeline can say so.
//! Every figure comes from the file; nothing is guessed.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::Value;

use super::time::rfc3339;

/// Load-side columns of the joined timeline (defined beside `traps::run::RunSecond`).
pub use crate::traps::run::LOAD_COLUMNS as COLUMNS;

/// A results format trapdetect reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `oha --output-format json` (summary).
    OhaJson,
    /// `vegeta encode` (JSON lines, one per request).
    VegetaJsonLines,
    /// `vegeta encode --to csv` (one line per request).
    VegetaCsv,
    /// `vegeta report -type=json` (summary).
    VegetaReport,
    /// `k6 run --summary-export` (summary).
    K6Summary,
    /// `k6 run --out json` (JSON lines, one point per metric sample).
    K6JsonLines,
    /// wrk's text summary.
    WrkText,
    /// hey's text summary.
    HeyText,
    /// `hey -o csv` (one line per answered request).
    HeyCsv,
    /// The JSON of `trapdetect load` (per second).
    TrapdetectLoad,
    /// Several generators' results, merged on wall-clock seconds (`merge`).
    Merged,
}

impl Format {
    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Format::OhaJson => "oha JSON summary",
            Format::VegetaJsonLines => "vegeta results (JSON lines)",
            Format::VegetaCsv => "vegeta results (CSV)",
            Format::VegetaReport => "vegeta JSON report",
            Format::K6Summary => "k6 summary export",
            Format::K6JsonLines => "k6 JSON output",
            Format::WrkText => "wrk text summary",
            Format::HeyText => "hey text summary",
            Format::HeyCsv => "hey CSV results",
            Format::TrapdetectLoad => "trapdetect load JSON",
            Format::Merged => "several generators' results, merged on wall-clock seconds",
        }
    }
}

/// Why a file is not results trapdetect can read (bad input, exit 2).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    /// Nothing recognisable.
    #[error(
        "not a results format trapdetect reads (oha JSON, vegeta JSON lines/CSV/JSON report, k6 summary export/JSON lines, wrk or hey text, hey CSV, trapdetect load JSON)"
    )]
    Unknown,
    /// Recognised, but a required field is missing or malformed.
    #[error("{format}: {why}")]
    Bad {
        /// The format it looked like.
        format: &'static str,
        /// What is wrong, with the line where it applies.
        why: String,
    },
}

fn bad(format: Format, why: impl Into<String>) -> ParseError {
    ParseError::Bad {
        format: format.describe(),
        why: why.into(),
    }
}

/// One second of the generator's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ResultSecond {
    /// Requests sent (intended) in this second.
    pub offered: u64,
    /// 2xx that ended in it.
    pub ok_2xx: u64,
    /// Other statuses that ended in it.
    pub non_2xx: u64,
    /// Requests that got no status.
    pub errors: u64,
    /// 99th percentile latency of the 2xx, µs.
    pub p99_us: Option<f64>,
    /// Highest in-flight count.
    pub in_flight: u64,
}

/// Totals over the generator's whole run, as far as the format states them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Totals {
    /// Requests (answered or not).
    pub requests: Option<u64>,
    /// 2xx (wrk: 2xx and 3xx; k6: responses not marked failed).
    pub ok_2xx: Option<u64>,
    /// Other statuses.
    pub non_2xx: Option<u64>,
    /// Requests without a status.
    pub errors: Option<u64>,
    /// Length of the run, s.
    pub duration_s: Option<f64>,
    /// Offered rate, requests per second (open-loop tools only).
    pub offered_per_s: Option<f64>,
    /// 99th percentile latency, µs.
    pub p99_us: Option<f64>,
}

impl Totals {
    /// 2xx per second of the run.
    pub fn delivered_per_s(&self) -> Option<f64> {
        match (self.ok_2xx, self.duration_s) {
            (Some(n), Some(d)) if d > 0.0 => Some(n as f64 / d),
            _ => None,
        }
    }
}

/// Where bucket 0 is.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Origin {
    /// Buckets are seconds from the window start given to [`parse`] (the file has absolute
    /// timestamps).
    Window,
    /// Buckets are seconds from the generator's own start (the file has only offsets); the
    /// caller places that start with [`LoadResults::shift`]. `length_s`: the run's length.
    Relative {
        /// Length of the run the offsets cover, s.
        length_s: f64,
    },
}

/// A results file, read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadResults {
    /// What it was.
    pub format: Format,
    /// Per-second buckets (empty for a summary).
    pub seconds: BTreeMap<i64, ResultSecond>,
    /// Which [`COLUMNS`] the buckets carry.
    pub columns: Vec<&'static str>,
    /// Whole-run figures.
    pub totals: Totals,
    /// Where the buckets start.
    pub origin: Origin,
    /// The first request, Unix s, when the file says.
    pub start_unix_s: Option<f64>,
    /// Lines that were not results (headers of other tools' sections, metrics other than
    /// requests) are skipped; lines that looked like results but could not be read are counted.
    pub skipped_lines: u64,
    /// Per second, the 2xx latencies (per-request formats): what several generators' p99 is
    /// merged from, never their percentiles averaged.
    #[serde(skip)]
    pub hists: BTreeMap<i64, Histogram<u64>>,
    /// The whole run's 2xx latencies (per-request formats).
    #[serde(skip)]
    pub all_hist: Option<Histogram<u64>>,
    /// Seconds in which the generator fell behind its own schedule (trapdetect load JSON:
    /// its lag beyond its budget): its arrivals there went out late.
    pub lagged: Vec<i64>,
    /// Why the generator itself did not trust its measurement (a trapdetect load JSON's
    /// `measurement.problems`, where `trusted` is false): the run's load side is then no
    /// more trusted than that.
    pub problems: Vec<String>,
}

impl LoadResults {
    /// Columns of the timeline this file cannot fill.
    pub fn missing(&self) -> Vec<&'static str> {
        COLUMNS
            .iter()
            .filter(|c| !self.columns.contains(c))
            .copied()
            .collect()
    }

    /// Moves relative buckets by `by_s` seconds (rounded to whole seconds): where the
    /// generator's start falls in the window. A file with absolute times is left alone.
    pub fn shift(&mut self, by_s: f64) {
        if !matches!(self.origin, Origin::Relative { .. }) || !by_s.is_finite() {
            return;
        }
        let k = by_s.round() as i64;
        self.seconds = std::mem::take(&mut self.seconds)
            .into_iter()
            .map(|(t, s)| (t.saturating_add(k), s))
            .collect();
        self.hists = std::mem::take(&mut self.hists)
            .into_iter()
            .map(|(t, h)| (t.saturating_add(k), h))
            .collect();
        for t in &mut self.lagged {
            *t = t.saturating_add(k);
        }
    }
}

/// Most seconds a file may span (a day): beyond, the timestamps are not one run.
pub const MAX_SECONDS: i64 = 86_400;

/// Per-request accumulation into seconds.
#[derive(Default)]
struct Buckets {
    seconds: BTreeMap<i64, (ResultSecond, Option<Histogram<u64>>)>,
    totals: [u64; 4],
    all: Option<Histogram<u64>>,
    first: Option<f64>,
    last: Option<f64>,
    refused: bool,
}

impl Buckets {
    fn second(&mut self, t: f64) -> Option<&mut (ResultSecond, Option<Histogram<u64>>)> {
        if !t.is_finite() || t.abs() > MAX_SECONDS as f64 * 2.0 {
            self.refused = true;
            return None;
        }
        if self.seconds.len() as i64 > MAX_SECONDS * 2 {
            self.refused = true;
            return None;
        }
        Some(self.seconds.entry(t.floor() as i64).or_default())
    }

    /// A request sent at `sent` (None: unknown) that ended at `end` with `status`
    /// (0: no status) after `latency_us`.
    fn request(&mut self, sent: Option<f64>, end: f64, status: u16, latency_us: Option<f64>) {
        if let Some(s) = sent
            && let Some(b) = self.second(s)
        {
            b.0.offered += 1;
        }
        let from = sent.unwrap_or(end);
        self.first = Some(self.first.map_or(from, |f| f.min(from)));
        self.last = Some(self.last.map_or(end, |l| l.max(end)));
        let Some(b) = self.second(end) else { return };
        let kind = match status {
            0 => 3,
            200..=299 => 1,
            _ => 2,
        };
        match kind {
            1 => b.0.ok_2xx += 1,
            2 => b.0.non_2xx += 1,
            _ => b.0.errors += 1,
        }
        let mut recorded = None;
        if kind == 1
            && let Some(l) = latency_us.filter(|l| l.is_finite() && *l >= 0.0)
        {
            let v = (l.round() as u64).clamp(1, 3_600_000_000);
            let _ = b.1.get_or_insert_with(new_hist).record(v);
            recorded = Some(v);
        }
        if let Some(v) = recorded {
            let _ = self.all.get_or_insert_with(new_hist).record(v);
        }
        self.totals[0] += 1;
        self.totals[kind] += 1;
    }

    fn finish(
        self,
        format: Format,
        columns: Vec<&'static str>,
        origin: Origin,
        skipped: u64,
    ) -> Result<LoadResults, ParseError> {
        if self.refused {
            return Err(bad(
                format,
                format!("timestamps span more than {MAX_SECONDS} s: not one run"),
            ));
        }
        if self.totals[0] == 0 {
            return Err(bad(format, "no request in the file"));
        }
        let span = match (self.first, self.last) {
            (Some(f), Some(l)) => (l - f).max(0.0),
            _ => 0.0,
        };
        let mut hists = BTreeMap::new();
        let seconds = self
            .seconds
            .into_iter()
            .map(|(t, (mut s, h))| {
                s.p99_us = h.as_ref().map(|h| h.value_at_quantile(0.99) as f64);
                if let Some(h) = h {
                    hists.insert(t, h);
                }
                (t, s)
            })
            .collect();
        let origin = match origin {
            Origin::Relative { .. } => Origin::Relative { length_s: span },
            o => o,
        };
        Ok(LoadResults {
            format,
            seconds,
            columns,
            totals: Totals {
                requests: Some(self.totals[0]),
                ok_2xx: Some(self.totals[1]),
                non_2xx: Some(self.totals[2]),
                errors: columns_have_errors(format).then_some(self.totals[3]),
                duration_s: (span > 0.0).then_some(span),
                offered_per_s: None,
                p99_us: self.all.as_ref().map(|h| h.value_at_quantile(0.99) as f64),
            },
            origin,
            start_unix_s: match origin {
                Origin::Window => self.first,
                Origin::Relative { .. } => None,
            },
            skipped_lines: skipped,
            hists,
            all_hist: self.all,
            lagged: vec![],
            problems: vec![],
        })
    }
}

fn columns_have_errors(f: Format) -> bool {
    !matches!(f, Format::HeyCsv)
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds")
}

/// Reads a results file of any supported format. `window_start_unix`: the Unix time of the
/// run's second 0, where files with absolute timestamps are bucketed from.
pub fn parse(data: &[u8], window_start_unix: f64) -> Result<LoadResults, ParseError> {
    let text = String::from_utf8_lossy(data);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        // One JSON document, or JSON lines.
        if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
            if v.get("schema").and_then(Value::as_str) == Some(crate::load::SCHEMA) {
                return trapdetect_load(&v, window_start_unix);
            }
            if v.pointer("/summary/successRate").is_some() {
                return oha(&v);
            }
            if v.get("latencies").is_some() && v.get("status_codes").is_some() {
                return vegeta_report(&v);
            }
            if v.pointer("/metrics/http_reqs").is_some() {
                return k6_summary(&v);
            }
        }
        let first: Option<Value> = trimmed
            .lines()
            .find(|l| !l.trim().is_empty())
            .and_then(|l| serde_json::from_str(l).ok());
        if let Some(f) = first {
            if f.get("type").is_some() && (f.get("metric").is_some() || f.get("data").is_some()) {
                return k6_lines(trimmed, window_start_unix);
            }
            if f.get("code").is_some() && f.get("timestamp").is_some() {
                return vegeta_lines(trimmed, window_start_unix);
            }
        }
        return Err(ParseError::Unknown);
    }
    if trimmed.starts_with("response-time,DNS+dialup") {
        return hey_csv(trimmed);
    }
    if trimmed
        .split(',')
        .next()
        .is_some_and(|f| f.len() >= 16 && f.bytes().all(|b| b.is_ascii_digit()))
    {
        return vegeta_csv(trimmed, window_start_unix);
    }
    if trimmed.contains(" requests in ") && trimmed.contains("Requests/sec:") {
        return wrk(trimmed);
    }
    if trimmed.starts_with("Summary:") && trimmed.contains("Requests/sec:") {
        return hey_text(trimmed);
    }
    Err(ParseError::Unknown)
}

fn u(v: &Value, p: &str) -> Option<u64> {
    v.pointer(p).and_then(|x| {
        x.as_u64()
            .or_else(|| x.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

fn f(v: &Value, p: &str) -> Option<f64> {
    v.pointer(p)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
}

/// Sums of a `{"200": n, "503": m}` map: (2xx, other, status 0).
fn status_sums(m: Option<&serde_json::Map<String, Value>>) -> (u64, u64, u64) {
    let (mut ok, mut other, mut zero) = (0u64, 0u64, 0u64);
    for (k, v) in m.into_iter().flatten() {
        let n = v.as_u64().unwrap_or(0);
        match k.trim().parse::<u16>() {
            Ok(0) => zero = zero.saturating_add(n),
            Ok(200..=299) => ok = ok.saturating_add(n),
            _ => other = other.saturating_add(n),
        }
    }
    (ok, other, zero)
}

fn summary(format: Format, totals: Totals, start: Option<f64>) -> LoadResults {
    LoadResults {
        format,
        seconds: BTreeMap::new(),
        columns: vec![],
        totals,
        origin: Origin::Relative { length_s: 0.0 },
        start_unix_s: start,
        skipped_lines: 0,
        hists: BTreeMap::new(),
        all_hist: None,
        lagged: vec![],
        problems: vec![],
    }
}

fn oha(v: &Value) -> Result<LoadResults, ParseError> {
    let fm = Format::OhaJson;
    let duration = f(v, "/summary/total").ok_or_else(|| bad(fm, "no summary.total"))?;
    let (ok, other, _) = status_sums(v.get("statusCodeDistribution").and_then(Value::as_object));
    let errors: u64 = v
        .get("errorDistribution")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(_, n)| n.as_u64().unwrap_or(0))
        .fold(0, u64::saturating_add);
    let mut t = summary(
        fm,
        Totals {
            requests: Some(ok.saturating_add(other).saturating_add(errors)),
            ok_2xx: Some(ok),
            non_2xx: Some(other),
            errors: Some(errors),
            duration_s: Some(duration),
            offered_per_s: None,
            // oha's percentiles cover every answered request, not only the 2xx.
            p99_us: f(v, "/latencyPercentiles/p99").map(|s| s * 1e6),
        },
        None,
    );
    t.origin = Origin::Relative { length_s: duration };
    Ok(t)
}

fn vegeta_report(v: &Value) -> Result<LoadResults, ParseError> {
    let fm = Format::VegetaReport;
    let requests = u(v, "/requests").ok_or_else(|| bad(fm, "no requests"))?;
    let (ok, other, zero) = status_sums(v.get("status_codes").and_then(Value::as_object));
    let duration = f(v, "/duration").map(|ns| ns / 1e9);
    let wait = f(v, "/wait").map(|ns| ns / 1e9).unwrap_or(0.0);
    let start = v.get("earliest").and_then(Value::as_str).and_then(rfc3339);
    let mut t = summary(
        fm,
        Totals {
            requests: Some(requests),
            ok_2xx: Some(ok),
            non_2xx: Some(other),
            errors: Some(zero),
            // Attack plus the wait for the last response: the span 2xx are counted over.
            duration_s: duration.map(|d| d + wait),
            offered_per_s: f(v, "/rate"),
            p99_us: f(v, "/latencies/99th").map(|ns| ns / 1e3),
        },
        start,
    );
    t.origin = Origin::Relative {
        length_s: duration.unwrap_or(0.0) + wait,
    };
    Ok(t)
}

fn k6_summary(v: &Value) -> Result<LoadResults, ParseError> {
    let fm = Format::K6Summary;
    let count = u(v, "/metrics/http_reqs/count").ok_or_else(|| bad(fm, "no http_reqs.count"))?;
    let rate = f(v, "/metrics/http_reqs/rate");
    // A Rate metric exports `passes` as the samples that were true: the failed requests.
    let failed = u(v, "/metrics/http_req_failed/passes");
    let p99 = f(v, "/metrics/http_req_duration/p(99)").map(|ms| ms * 1e3);
    let duration = rate.filter(|r| *r > 0.0).map(|r| count as f64 / r);
    let mut t = summary(
        fm,
        Totals {
            requests: Some(count),
            ok_2xx: failed.map(|fl| count.saturating_sub(fl)),
            non_2xx: None,
            errors: None,
            duration_s: duration,
            offered_per_s: None,
            p99_us: p99,
        },
        None,
    );
    t.origin = Origin::Relative {
        length_s: duration.unwrap_or(0.0),
    };
    Ok(t)
}

/// A number with a unit as wrk prints it (`635.91us`, `1.23ms`, `2.01s`, `1.2m`), to µs.
fn wrk_duration_us(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let k = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(n * k)
}

fn wrk(text: &str) -> Result<LoadResults, ParseError> {
    let fm = Format::WrkText;
    let (mut requests, mut duration, mut non, mut errors, mut p99) = (None, None, 0u64, 0u64, None);
    for line in text.lines() {
        let l = line.trim();
        if let Some((n, rest)) = l.split_once(" requests in ") {
            requests = n.trim().parse::<u64>().ok();
            duration = rest
                .split(',')
                .next()
                .and_then(wrk_duration_us)
                .map(|us| us / 1e6);
        } else if let Some(r) = l.strip_prefix("Non-2xx or 3xx responses:") {
            non = r
                .trim()
                .parse()
                .map_err(|_| bad(fm, format!("bad line {l:?}")))?;
        } else if let Some(r) = l.strip_prefix("Socket errors:") {
            // connect 0, read 0, write 0, timeout 0
            for part in r.split(',') {
                if let Some(n) = part
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    errors = errors.saturating_add(n);
                }
            }
        } else if let Some(r) = l.strip_prefix("99%") {
            p99 = wrk_duration_us(r);
        }
    }
    let requests = requests.ok_or_else(|| bad(fm, "no \"N requests in T\" line"))?;
    let duration = duration.ok_or_else(|| bad(fm, "no duration on the requests line"))?;
    let mut t = summary(
        fm,
        Totals {
            // wrk counts every response; socket errors are not among them.
            requests: Some(requests.saturating_add(errors)),
            ok_2xx: Some(requests.saturating_sub(non)),
            non_2xx: Some(non),
            errors: Some(errors),
            duration_s: Some(duration),
            offered_per_s: None,
            p99_us: p99,
        },
        None,
    );
    t.origin = Origin::Relative { length_s: duration };
    Ok(t)
}

fn hey_text(text: &str) -> Result<LoadResults, ParseError> {
    let fm = Format::HeyText;
    let (mut duration, mut p99) = (None, None);
    let (mut ok, mut other, mut errors) = (0u64, 0u64, 0u64);
    let mut section = "";
    for line in text.lines() {
        let l = line.trim();
        if l.ends_with(':') && !l.starts_with('[') {
            section = l;
            continue;
        }
        if let Some(r) = l.strip_prefix("Total:") {
            duration = r
                .trim()
                .strip_suffix("secs")
                .and_then(|s| s.trim().parse::<f64>().ok());
        } else if let Some(r) = l.strip_prefix("99% in ") {
            p99 = r
                .strip_suffix("secs")
                .and_then(|s| s.trim().parse::<f64>().ok())
                .map(|s| s * 1e6);
        } else if let Some(r) = l.strip_prefix('[') {
            let Some((k, rest)) = r.split_once(']') else {
                continue;
            };
            match section {
                "Status code distribution:" => {
                    let code: u16 = k.parse().map_err(|_| bad(fm, format!("bad line {l:?}")))?;
                    let n: u64 = rest
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                        .ok_or_else(|| bad(fm, format!("bad line {l:?}")))?;
                    if (200..300).contains(&code) {
                        ok = ok.saturating_add(n);
                    } else {
                        other = other.saturating_add(n);
                    }
                }
                "Error distribution:" => {
                    errors = errors.saturating_add(k.parse::<u64>().unwrap_or(0));
                }
                _ => {}
            }
        }
    }
    let duration = duration.ok_or_else(|| bad(fm, "no \"Total: N secs\" line"))?;
    let mut t = summary(
        fm,
        Totals {
            requests: Some(ok.saturating_add(other).saturating_add(errors)),
            ok_2xx: Some(ok),
            non_2xx: Some(other),
            errors: Some(errors),
            duration_s: Some(duration),
            offered_per_s: None,
            p99_us: p99,
        },
        None,
    );
    t.origin = Origin::Relative { length_s: duration };
    Ok(t)
}

fn hey_csv(text: &str) -> Result<LoadResults, ParseError> {
    let fm = Format::HeyCsv;
    let mut b = Buckets::default();
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate().skip(1) {
        let c: Vec<&str> = line.trim().split(',').collect();
        if c.len() < 8 {
            if !line.trim().is_empty() {
                skipped += 1;
            }
            continue;
        }
        let (Ok(rt), Ok(code), Ok(off)) = (
            c[0].parse::<f64>(),
            c[6].parse::<u16>(),
            c[7].parse::<f64>(),
        ) else {
            return Err(bad(fm, format!("line {}: not a hey result", i + 1)));
        };
        // The offset is when the request started, from hey's start.
        b.request(None, off + rt, code, Some(rt * 1e6));
    }
    b.finish(
        fm,
        vec!["ok_2xx", "non_2xx", "p99_us"],
        Origin::Relative { length_s: 0.0 },
        skipped,
    )
}

fn vegeta_lines(text: &str, w0: f64) -> Result<LoadResults, ParseError> {
    let fm = Format::VegetaJsonLines;
    let mut b = Buckets::default();
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            skipped += 1;
            continue;
        };
        let (Some(ts), Some(code), Some(lat)) = (
            v.get("timestamp").and_then(Value::as_str).and_then(rfc3339),
            u(&v, "/code"),
            f(&v, "/latency"),
        ) else {
            return Err(bad(
                fm,
                format!("line {}: no timestamp, code or latency", i + 1),
            ));
        };
        b.request(
            Some(ts - w0),
            ts - w0 + lat / 1e9,
            code.min(999) as u16,
            Some(lat / 1e3),
        );
    }
    let cols = vec!["offered", "ok_2xx", "non_2xx", "errors", "p99_us"];
    let mut r = b.finish(fm, cols, Origin::Window, skipped)?;
    r.start_unix_s = r.start_unix_s.map(|t| t + w0);
    Ok(r)
}

fn vegeta_csv(text: &str, w0: f64) -> Result<LoadResults, ParseError> {
    let fm = Format::VegetaCsv;
    let mut b = Buckets::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // timestamp (Unix ns), code, latency (ns), bytes out, bytes in, error, body, ...
        let mut c = line.split(',');
        let (Some(Ok(ts)), Some(Ok(code)), Some(Ok(lat))) = (
            c.next().map(|x| x.trim().parse::<i64>()),
            c.next().map(|x| x.trim().parse::<u16>()),
            c.next().map(|x| x.trim().parse::<u64>()),
        ) else {
            return Err(bad(fm, format!("line {}: not a vegeta result", i + 1)));
        };
        let t = ts as f64 / 1e9 - w0;
        b.request(Some(t), t + lat as f64 / 1e9, code, Some(lat as f64 / 1e3));
    }
    let cols = vec!["offered", "ok_2xx", "non_2xx", "errors", "p99_us"];
    let mut r = b.finish(fm, cols, Origin::Window, 0)?;
    r.start_unix_s = r.start_unix_s.map(|t| t + w0);
    Ok(r)
}

fn k6_lines(text: &str, w0: f64) -> Result<LoadResults, ParseError> {
    let fm = Format::K6JsonLines;
    // Requests come as `http_reqs` points; their latency as `http_req_duration` points with
    // the same time and tags: pair them per (time, status) in order.
    let mut b = Buckets::default();
    let mut durations: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut reqs: Vec<(String, f64, u16)> = vec![];
    let mut skipped = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            skipped += 1;
            continue;
        };
        if v.get("type").and_then(Value::as_str) != Some("Point") {
            continue;
        }
        let metric = v.get("metric").and_then(Value::as_str).unwrap_or("");
        if metric != "http_reqs" && metric != "http_req_duration" {
            continue;
        }
        let Some(ts_s) = v.pointer("/data/time").and_then(Value::as_str) else {
            skipped += 1;
            continue;
        };
        let status = v
            .pointer("/data/tags/status")
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_string();
        if metric == "http_req_duration" {
            if let Some(ms) = f(&v, "/data/value") {
                durations
                    .entry((ts_s.to_string(), status))
                    .or_default()
                    .push(ms);
            }
            continue;
        }
        let Some(ts) = rfc3339(ts_s) else {
            skipped += 1;
            continue;
        };
        if reqs.len() >= 50_000_000 {
            return Err(bad(fm, "more than 50 million requests"));
        }
        reqs.push((ts_s.to_string(), ts, status.parse().unwrap_or(0)));
    }
    for (ts_s, ts, code) in reqs {
        let lat = durations
            .get_mut(&(ts_s, code.to_string()))
            .and_then(|v| v.pop())
            .map(|ms| ms * 1e3);
        b.request(None, ts - w0, code, lat);
    }
    let mut r = b.finish(
        fm,
        vec!["ok_2xx", "non_2xx", "errors", "p99_us"],
        Origin::Window,
        skipped,
    )?;
    r.start_unix_s = r.start_unix_s.map(|t| t + w0);
    Ok(r)
}

fn trapdetect_load(v: &Value, window_start_unix: f64) -> Result<LoadResults, ParseError> {
    let fm = Format::TrapdetectLoad;
    let series = v
        .get("series")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(fm, "no series"))?;
    // Where the file says when its second 0 was on the wall clock, its seconds are placed
    // in the window by it; older files (offsets only) are placed by the caller.
    let start = f(v, "/window/start_unix_s").filter(|s| *s > 0.0);
    let by = match start {
        // Each of its seconds into the window's second it overlaps most, as `shift` does.
        Some(s) if (s - window_start_unix).abs() <= MAX_SECONDS as f64 => {
            (s - window_start_unix).round() as i64
        }
        Some(_) => {
            return Err(bad(
                fm,
                "window.start_unix_s is more than a day from the window",
            ));
        }
        None => 0,
    };
    let budget = u(v, "/plan/lag_budget_us");
    let mut seconds = BTreeMap::new();
    let mut lagged = vec![];
    // Each second's 2xx latencies where the file has them (`--shard`); the whole run's only
    // where every second with 2xx has them.
    let mut hists = BTreeMap::new();
    let mut all: Option<Histogram<u64>> = Some(new_hist());
    for p in series {
        let t = u(p, "/t_s").ok_or_else(|| bad(fm, "a series point without t_s"))?;
        if t > MAX_SECONDS as u64 {
            return Err(bad(fm, format!("t_s {t} is beyond a day")));
        }
        let t = t as i64 + by;
        if budget.is_some_and(|b| u(p, "/sched_lag_max_us").is_some_and(|l| l > b)) {
            lagged.push(t);
        }
        match hist_of(p.get("lat_2xx_hist_ns")) {
            Some(h) => {
                if let Some(a) = all.as_mut() {
                    let _ = a.add(&h);
                }
                hists.insert(t, h);
            }
            None if u(p, "/ok_2xx").unwrap_or(0) > 0 => all = None,
            None => {}
        }
        seconds.insert(t, load_second(p));
    }
    let measured = f(v, "/window/measured_s").ok_or_else(|| bad(fm, "no window.measured_s"))?;
    // Its run is the window and the drain after it, as another tool's run is its first
    // request to its last answer: the 2xx of `ok_2xx` ended in both, and the file was written
    // after the drain (its last write less this length is its start).
    let span = measured + f(v, "/window/drain_s").unwrap_or(0.0).max(0.0);
    Ok(LoadResults {
        format: fm,
        seconds,
        columns: COLUMNS.to_vec(),
        totals: Totals {
            requests: u(v, "/scheduled"),
            ok_2xx: u(v, "/ok_2xx"),
            non_2xx: u(v, "/non_2xx"),
            errors: u(v, "/errors_total"),
            duration_s: Some(span),
            offered_per_s: f(v, "/offered_rate_per_s"),
            p99_us: f(v, "/latency_2xx/p99_us"),
        },
        origin: match start {
            Some(_) => Origin::Window,
            None => Origin::Relative { length_s: span },
        },
        start_unix_s: start,
        skipped_lines: 0,
        hists,
        all_hist: all.filter(|a| !a.is_empty()),
        lagged,
        problems: load_problems(v),
    })
}

/// One second of a trapdetect load JSON's series.
fn load_second(p: &Value) -> ResultSecond {
    let errors = p
        .get("errors")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(_, n)| n.as_u64().unwrap_or(0))
        .fold(0, u64::saturating_add);
    ResultSecond {
        offered: u(p, "/scheduled").unwrap_or(0),
        ok_2xx: u(p, "/ok_2xx").unwrap_or(0),
        non_2xx: u(p, "/non_2xx").unwrap_or(0),
        errors,
        p99_us: f(p, "/lat_2xx_p99_us"),
        in_flight: u(p, "/in_flight_max").unwrap_or(0),
    }
}

/// Why a trapdetect load JSON did not trust its own measurement (none where it did).
fn load_problems(v: &Value) -> Vec<String> {
    if v.pointer("/measurement/trusted") != Some(&Value::Bool(false)) {
        return vec![];
    }
    v.pointer("/measurement/problems")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(crate::escape::text)
        .collect()
}

/// A second's `lat_2xx_hist_ns` (`[[highest value in the bucket, ns], count], ...]`) as a
/// histogram of µs, as the per-request formats' are; `None` where absent, empty or malformed.
fn hist_of(v: Option<&Value>) -> Option<Histogram<u64>> {
    let mut h = new_hist();
    for b in v?.as_array()? {
        let (ns, n) = (b.get(0)?.as_u64()?, b.get(1)?.as_u64()?);
        let us = (ns / 1_000).clamp(1, 3_600_000_000);
        h.record_n(us, n).ok()?;
    }
    (!h.is_empty()).then_some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-05-09T12:34:45Z, the window start the vegeta and k6 fixtures are written against.
    const W: f64 = 1_715_258_085.0;

    fn fixture(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/load_results")
            .join(name);
        std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn counts(r: &LoadResults) -> Vec<(i64, u64, u64, u64, u64)> {
        r.seconds
            .iter()
            .map(|(t, s)| (*t, s.offered, s.ok_2xx, s.non_2xx, s.errors))
            .collect()
    }

    /// Within HdrHistogram's 3 significant digits.
    fn near(got: Option<f64>, want: f64) -> bool {
        got.is_some_and(|g| (g - want).abs() <= want * 1e-3 + 1.0)
    }

    #[test]
    fn wrk_text_recorded_here() {
        let r = parse(&fixture("wrk.txt"), W).unwrap();
        assert_eq!(r.format, Format::WrkText);
        assert_eq!(r.totals.requests, Some(2529));
        assert_eq!(r.totals.ok_2xx, Some(2529));
        assert_eq!(r.totals.duration_s, Some(2.02));
        assert_eq!(r.totals.p99_us, None);
        assert!(r.seconds.is_empty());
        assert_eq!(r.missing(), COLUMNS.to_vec());
        assert_eq!(r.origin, Origin::Relative { length_s: 2.02 });
        // --latency, every answer a 404.
        let r = parse(&fixture("wrk-latency-404.txt"), W).unwrap();
        assert_eq!(
            (r.totals.requests, r.totals.ok_2xx, r.totals.non_2xx),
            (Some(1937), Some(0), Some(1937))
        );
        assert!(near(r.totals.p99_us, 107_290.0), "{:?}", r.totals.p99_us);
        let r = parse(
            b"Running 1s test @ http://x/\n  10 requests in 1.00s, 1KB read\n  Socket errors: connect 0, read 2, write 0, timeout 3\nRequests/sec: 10\n",
            W,
        )
        .unwrap();
        assert_eq!(
            (r.totals.requests, r.totals.ok_2xx, r.totals.errors),
            (Some(15), Some(10), Some(5))
        );
    }

    #[test]
    fn hey_text_and_csv_recorded_here() {
        let r = parse(&fixture("hey.txt"), W).unwrap();
        assert_eq!(r.format, Format::HeyText);
        assert_eq!((r.totals.ok_2xx, r.totals.errors), (Some(40), Some(0)));
        assert_eq!(r.totals.duration_s, Some(2.0129));
        // hey prints "0% in 0.0000 secs" where too few samples leave no 99th percentile.
        assert_eq!(r.totals.p99_us, None);
        let r = parse(&fixture("hey-refused.txt"), W).unwrap();
        assert_eq!(
            (r.totals.requests, r.totals.ok_2xx, r.totals.errors),
            (Some(18792), Some(0), Some(18792))
        );
        // One line per answered request; offsets from hey's start, bucketed by completion.
        let mut r = parse(&fixture("hey-404.csv"), W).unwrap();
        assert_eq!(r.format, Format::HeyCsv);
        assert_eq!(
            counts(&r),
            [(0, 0, 0, 18, 0), (1, 0, 0, 20, 0), (2, 0, 0, 2, 0)]
        );
        assert_eq!(r.missing(), ["offered", "errors", "in_flight"]);
        assert_eq!(r.totals.errors, None);
        // Placed where the generator started in the window.
        r.shift(2.4);
        assert_eq!(r.seconds.keys().copied().collect::<Vec<_>>(), [2, 3, 4]);
    }

    #[test]
    fn vegeta_results_as_json_lines_and_csv_agree() {
        // 30 requests at 10/s from W + 0.05 s: #7 got a 500, #12 no status, #29 took 1 s.
        for (name, format) in [
            ("vegeta-results.jsonl", Format::VegetaJsonLines),
            ("vegeta-results.csv", Format::VegetaCsv),
        ] {
            let r = parse(&fixture(name), W).unwrap();
            assert_eq!(r.format, format);
            assert_eq!(r.origin, Origin::Window);
            assert_eq!(
                counts(&r),
                [
                    (0, 10, 9, 1, 0),
                    (1, 10, 9, 0, 1),
                    (2, 10, 9, 0, 0),
                    (3, 0, 1, 0, 0)
                ],
                "{name}"
            );
            assert!(near(r.seconds[&0].p99_us, 2500.0), "{:?}", r.seconds[&0]);
            assert!(near(r.seconds[&3].p99_us, 1e6));
            assert_eq!(r.missing(), ["in_flight"]);
            assert_eq!(
                (r.totals.requests, r.totals.ok_2xx, r.totals.errors),
                (Some(30), Some(28), Some(1))
            );
            assert!((r.start_unix_s.unwrap() - (W + 0.05)).abs() < 1e-3);
            // A window that started 2 s earlier sees the same requests 2 s later.
            let r = parse(&fixture(name), W - 2.0).unwrap();
            assert_eq!(r.seconds.keys().copied().collect::<Vec<_>>(), [2, 3, 4, 5]);
        }
    }

    #[test]
    fn vegeta_report_k6_summary_and_oha_are_summaries() {
        let r = parse(&fixture("vegeta-report.json"), W).unwrap();
        assert_eq!(r.format, Format::VegetaReport);
        assert_eq!(
            (
                r.totals.requests,
                r.totals.ok_2xx,
                r.totals.non_2xx,
                r.totals.errors
            ),
            (Some(30), Some(28), Some(1), Some(1))
        );
        assert_eq!(r.totals.duration_s, Some(3.9));
        assert!((r.totals.offered_per_s.unwrap() - 10.345).abs() < 1e-3);
        assert_eq!(r.totals.p99_us, Some(1e6));
        assert_eq!(r.start_unix_s, Some(W + 0.05));
        assert!(r.seconds.is_empty());
        let r = parse(&fixture("k6-summary.json"), W).unwrap();
        assert_eq!(r.format, Format::K6Summary);
        assert_eq!(
            (r.totals.requests, r.totals.ok_2xx),
            (Some(1200), Some(1188))
        );
        assert!((r.totals.duration_s.unwrap() - 12.06).abs() < 0.01);
        // k6 exports p(90) and p(95) unless told otherwise.
        assert_eq!(r.totals.p99_us, None);
    }

    #[test]
    fn k6_json_lines_pair_requests_with_their_durations() {
        let r = parse(&fixture("k6-out.jsonl"), W).unwrap();
        assert_eq!(r.format, Format::K6JsonLines);
        assert_eq!(counts(&r), [(1, 0, 4, 1, 0), (2, 0, 4, 0, 1)]);
        assert!(near(r.seconds[&1].p99_us, 8000.0), "{:?}", r.seconds[&1]);
        assert!(near(r.seconds[&2].p99_us, 13000.0), "{:?}", r.seconds[&2]);
        assert_eq!(r.missing(), ["offered", "in_flight"]);
    }

    #[test]
    fn trapdetect_load_json_recorded_here() {
        let r = parse(&fixture("trapdetect-load.json"), W).unwrap();
        assert_eq!(r.format, Format::TrapdetectLoad);
        assert_eq!(
            counts(&r),
            [(0, 20, 20, 0, 0), (1, 20, 20, 0, 0), (2, 20, 20, 0, 0)]
        );
        assert_eq!(r.seconds[&0].p99_us, Some(36700.159));
        assert!(r.missing().is_empty());
        assert_eq!(r.totals.offered_per_s, Some(20.0));
        assert_eq!(r.origin, Origin::Relative { length_s: 3.0 });
    }

    /// Its run is its window and the drain after it: 60 2xx over 3 s and a 2 s drain are
    /// 12 a second of its run, not 20 (the 2xx answered in the drain counted over the window
    /// alone).
    #[test]
    fn a_load_jsons_run_includes_its_drain() {
        let mut v: Value = serde_json::from_slice(&fixture("trapdetect-load.json")).unwrap();
        v["window"]["drain_s"] = 2.0.into();
        let r = parse(v.to_string().as_bytes(), W).unwrap();
        assert_eq!(r.totals.duration_s, Some(5.0));
        assert_eq!(r.totals.delivered_per_s(), Some(12.0));
        assert_eq!(r.origin, Origin::Relative { length_s: 5.0 });
    }

    #[test]
    fn garbage_is_refused_in_one_line() {
        for bad in [
            &b""[..],
            b"hello",
            b"{\"a\": 1}",
            b"[1,2]",
            b"{\"code\": 200, \"timestamp\": \"yesterday\", \"latency\": 1}",
            b"1715258085000000000,200",
            b"response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\nx,y,z,1,2,3,4,5\n",
            b"Running 1s test\n  many requests in 1.00s\nRequests/sec: 1\n",
        ] {
            let e = parse(bad, W).unwrap_err();
            assert!(!e.to_string().contains('\n'), "{e}");
        }
        // Timestamps a year apart are not one run.
        let far = "1715258085000000000,200,1,0,0,,,,0,GET,u,\n1746794085000000000,200,1,0,0,,,,1,GET,u,\n";
        let e = parse(far.as_bytes(), W).unwrap_err();
        assert!(e.to_string().contains("not one run"), "{e}");
    }
}
