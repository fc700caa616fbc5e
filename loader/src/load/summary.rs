//! The result of one run, as one serializable model: the JSON report, the text rendering, the
//! findings and the tracer's `load` section are all made from it.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{
    classify::ErrorKind,
    plan::PlanEcho,
    stats::{Recorder, Second},
};

/// Version of the JSON wire format. Bump on incompatible change.
pub const SCHEMA: &str = "trapdetect.load/1";

/// Latency percentiles, µs (HDR histogram, 3 significant digits; mean and max exact to 1 ns).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// Largest.
    pub max_us: f64,
}

impl Percentiles {
    /// From a histogram in ns; `None` when empty.
    pub fn of(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| round3(ns as f64 / 1e3);
        Some(Percentiles {
            count: h.len(),
            mean_us: round3(h.mean() / 1e3),
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p99_9_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        })
    }
}

/// A latency distribution as HdrHistogram prints it (`outputPercentileDistribution`, 5 ticks
/// per half distance): enough to write a `.hgrm` file and draw a histogram from a saved JSON
/// report, without keeping the ~300 KiB histogram.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct Distribution {
    /// Values recorded.
    pub count: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Standard deviation, µs.
    pub stdev_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Steps: `[value_us, percentile (0..1), count at or below value]`, percentile ascending.
    pub steps: Vec<[f64; 3]>,
}

impl Distribution {
    /// From a histogram in ns; `None` when empty.
    pub fn of(h: &Histogram<u64>) -> Option<Distribution> {
        if h.is_empty() {
            return None;
        }
        let mut total = 0u64;
        let steps = h
            .iter_quantiles(5)
            .map(|v| {
                total += v.count_since_last_iteration();
                [
                    round3(h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3),
                    crate::traps::round(v.quantile_iterated_to(), 12),
                    total as f64,
                ]
            })
            .collect();
        Some(Distribution {
            count: h.len(),
            mean_us: round3(h.mean() / 1e3),
            stdev_us: round3(h.stdev() / 1e3),
            max_us: round3(h.max() as f64 / 1e3),
            steps,
        })
    }
}

/// Latency distributions per status class (from the intended send instant).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Distributions {
    /// 2xx answers.
    #[serde(rename = "2xx")]
    pub ok_2xx: Option<Distribution>,
    /// Any other status.
    pub non_2xx: Option<Distribution>,
}

fn round3(v: f64) -> f64 {
    crate::traps::round(v, 3)
}

/// Transport errors by kind (always all present).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Errors {
    /// See [`ErrorKind::Timeout`].
    pub timeout: u64,
    /// See [`ErrorKind::ConnRefused`].
    pub conn_refused: u64,
    /// See [`ErrorKind::ConnReset`].
    pub conn_reset: u64,
    /// See [`ErrorKind::Eof`].
    pub eof: u64,
    /// See [`ErrorKind::BadResponse`].
    pub bad_response: u64,
    /// See [`ErrorKind::Tls`].
    pub tls: u64,
    /// See [`ErrorKind::ConnError`].
    pub conn_error: u64,
    /// See [`ErrorKind::FdLimit`] (generator side).
    pub fd_limit: u64,
    /// See [`ErrorKind::PortsExhausted`] (generator side).
    pub ports_exhausted: u64,
}

impl Errors {
    /// From per-kind counters.
    pub fn from_counts(c: &[u64; ErrorKind::ALL.len()]) -> Self {
        let g = |k: ErrorKind| c[k.index()];
        Errors {
            timeout: g(ErrorKind::Timeout),
            conn_refused: g(ErrorKind::ConnRefused),
            conn_reset: g(ErrorKind::ConnReset),
            eof: g(ErrorKind::Eof),
            bad_response: g(ErrorKind::BadResponse),
            tls: g(ErrorKind::Tls),
            conn_error: g(ErrorKind::ConnError),
            fd_limit: g(ErrorKind::FdLimit),
            ports_exhausted: g(ErrorKind::PortsExhausted),
        }
    }

    /// Count of one kind.
    pub fn get(&self, k: ErrorKind) -> u64 {
        match k {
            ErrorKind::Timeout => self.timeout,
            ErrorKind::ConnRefused => self.conn_refused,
            ErrorKind::ConnReset => self.conn_reset,
            ErrorKind::Eof => self.eof,
            ErrorKind::BadResponse => self.bad_response,
            ErrorKind::Tls => self.tls,
            ErrorKind::ConnError => self.conn_error,
            ErrorKind::FdLimit => self.fd_limit,
            ErrorKind::PortsExhausted => self.ports_exhausted,
        }
    }

    /// All kinds summed.
    pub fn total(&self) -> u64 {
        ErrorKind::ALL.iter().map(|&k| self.get(k)).sum()
    }

    /// Generator-side kinds summed.
    pub fn generator_side(&self) -> u64 {
        self.fd_limit + self.ports_exhausted
    }
}

/// One second of the series. `t_s` counts from the start of the measured window; seconds at
/// or after `window.measured_s` are the drain (arrivals of the window still completing).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Point {
    /// Second, from the start of the measured window.
    pub t_s: u64,
    /// Measured arrivals intended in this second.
    pub scheduled: u64,
    /// 2xx completions in this second.
    pub ok_2xx: u64,
    /// Non-2xx completions.
    pub non_2xx: u64,
    /// Errors that ended in this second, by kind.
    pub errors: Errors,
    /// Mean 2xx latency of this second's completions, µs.
    pub lat_2xx_mean_us: Option<f64>,
    /// 99th percentile 2xx latency (2 significant digits), µs.
    pub lat_2xx_p99_us: Option<f64>,
    /// Highest in-flight count.
    pub in_flight_max: u64,
    /// Worst scheduling lag of arrivals intended in this second, µs.
    pub sched_lag_max_us: f64,
    /// Arrivals dropped in this second (no connection within `--max-wait`).
    pub dropped: u64,
    /// 2xx answers to warm-up arrivals that ended in this second (in the delivered rate).
    pub warmup_ok_2xx: u64,
    /// With `--shard`: this second's 2xx latencies as histogram buckets, `[highest value in
    /// the bucket (ns), count]` lowest first (2 significant digits), so that merging N
    /// copies' seconds reads a true p99 from them, not an average of N percentiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_2xx_hist_ns: Option<Vec<[u64; 2]>>,
}

impl Point {
    fn of(t: usize, s: &Second) -> Point {
        Point {
            t_s: t as u64,
            scheduled: s.scheduled,
            ok_2xx: s.ok_2xx,
            non_2xx: s.non_2xx,
            errors: Errors::from_counts(&s.errors),
            lat_2xx_mean_us: (s.ok_2xx > 0)
                .then(|| round3(s.lat_2xx_sum_ns as f64 / s.ok_2xx as f64 / 1e3)),
            lat_2xx_p99_us: (s.ok_2xx > 0).then(|| round3(s.lat_2xx_p99_ns as f64 / 1e3)),
            in_flight_max: s.in_flight_max,
            sched_lag_max_us: round3(s.lag_max_ns as f64 / 1e3),
            dropped: s.dropped,
            warmup_ok_2xx: s.warmup_ok_2xx,
            lat_2xx_hist_ns: (!s.lat_2xx_buckets.is_empty())
                .then(|| s.lat_2xx_buckets.iter().map(|&(v, n)| [v, n]).collect()),
        }
    }
}

/// The measured window.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Window {
    /// Length of the measured window, s (shorter than planned when stopped early).
    pub measured_s: f64,
    /// From the end of the window until the last of its arrivals ended, s.
    pub drain_s: f64,
    /// Stopped before the plan's end (Ctrl-C or `Running::stop`).
    pub stopped_early: bool,
    /// Wall-clock time of the window's start (second 0 of `series`), s since the Unix epoch,
    /// ms precision: what runs of several hosts are joined on. Absent in older files.
    #[serde(default)]
    pub start_unix_s: Option<f64>,
    /// What that wall clock is worth. Absent in older files.
    #[serde(default)]
    pub clock: Option<ClockInfo>,
}

/// The generator host's wall clock: its source and the kernel's NTP state (`adjtimex(2)`).
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ClockInfo {
    /// The clock source (`tsc`, `kvm-clock`...; `null`: unreadable).
    pub source: Option<String>,
    /// Synchronized: adjtimex's state is not TIME_ERROR and STA_UNSYNC is clear.
    pub synchronized: bool,
    /// The kernel's estimated error, µs (`null`: adjtimex failed).
    pub esterror_us: Option<i64>,
    /// The kernel's maximum error, µs (`null`: adjtimex failed).
    pub maxerror_us: Option<i64>,
}

/// In-flight requests.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct InFlight {
    /// High-water mark over the whole run.
    pub max: u64,
    /// rate × timeout: the ceiling an open-loop flood reaches when the server stops answering.
    pub rate_x_timeout: Option<f64>,
}

/// The generator's file-descriptor limit.
#[derive(Clone, Copy, Debug, Default, Serialize, serde::Deserialize)]
pub struct FdLimit {
    /// RLIMIT_NOFILE soft limit before trapdetect raised it.
    pub soft_before: u64,
    /// Soft limit in effect (raised to the hard limit).
    pub soft: u64,
    /// Hard limit.
    pub hard: u64,
}

/// Connections.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Connections {
    /// Opened (warm-up included).
    pub opened: u64,
    /// Measured requests sent on a reused connection.
    pub reused_requests: u64,
    /// Requests retried once because the server had closed an idle pooled connection.
    pub stale_retries: u64,
    /// TLS handshakes of measured requests' new connections (0 without TLS).
    pub tls_handshakes: u64,
    /// Of which resumed an earlier session (no certificate exchange).
    pub tls_resumed: u64,
    /// The budget: never more connections open at once (`--max-connections`).
    pub budget: u64,
    /// Most connections of the budget in use at once.
    pub busy_max: u64,
    /// Arrivals whose new connection waited for the connect pacing (`--max-connect-rate`).
    pub paced: u64,
    /// Measured requests that failed with EOF or reset on a fresh connection before any
    /// response byte: the server closed connections it would not serve (a refusal).
    pub refused_fresh: u64,
}

/// Arrivals that found every connection of the budget busy.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Queue {
    /// Waited for a connection (dropped ones included).
    pub waited: u64,
    /// Dropped: no connection within `max_wait_s` (never sent; in no other bucket).
    pub dropped: u64,
    /// The wait bound, s.
    pub max_wait_s: f64,
    /// How long those that got a connection waited (inside their latency, which counts from
    /// the intended instant).
    pub wait: Option<Percentiles>,
}

/// Answers to window arrivals that came after the window closed (in the totals, not in the
/// delivered rate).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Drain {
    /// 2xx.
    pub ok_2xx: u64,
    /// Other statuses.
    pub non_2xx: u64,
    /// Errors.
    pub errors: u64,
}

/// The listener's overflow counters over the run (TcpExt, namespace-wide: the generator's
/// namespace, so the target's only when it listens on loopback here).
#[derive(Clone, Copy, Debug, Serialize, serde::Deserialize)]
pub struct Listen {
    /// ListenOverflows increments: SYNs or handshakes dropped on a full accept queue.
    pub overflows: u64,
    /// ListenDrops increments.
    pub drops: u64,
}

/// Warm-up arrivals (not in any other figure).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Warmup {
    /// Arrivals.
    pub scheduled: u64,
    /// That ended.
    pub completed: u64,
    /// 2xx.
    pub ok_2xx: u64,
    /// Of which ended inside the measured window (counted in the delivered rate: the server
    /// served them then).
    pub ok_2xx_in_window: u64,
}

/// What the generator itself cost (from getrusage over the run).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct GeneratorCost {
    /// User CPU, s.
    pub cpu_user_s: f64,
    /// System CPU, s.
    pub cpu_sys_s: f64,
    /// Peak resident memory of the process, MiB.
    pub rss_max_mib: f64,
    /// The nice value the lanes ran at (`--nice`, when permitted); absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes_nice: Option<i32>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Summary {
    /// Wire format version.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub schema: crate::util::de::Name,
    /// trapdetect version.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub version: crate::util::de::Name,
    /// The plan.
    pub plan: PlanEcho,
    /// The window.
    pub window: Window,
    /// Measured arrivals the generator sent (intended inside the window).
    pub scheduled: u64,
    /// Measured arrivals whose instant came but that were never sent because the run ended
    /// first (the generator fell behind; 0 in a healthy run).
    pub unsent: u64,
    /// Measured arrivals that ended (response, error or timeout); equals `scheduled`.
    pub completed: u64,
    /// 2xx responses: the only success.
    pub ok_2xx: u64,
    /// Responses with any other status.
    pub non_2xx: u64,
    /// Arrivals that got no status.
    pub errors_total: u64,
    /// Arrivals never sent: no connection within the wait bound (`queue.dropped`).
    pub dropped: u64,
    /// ok_2xx ÷ scheduled.
    pub success_ratio: f64,
    /// Arrivals per second of the window.
    pub offered_rate_per_s: f64,
    /// 2xx that ended inside the window, per second of the window (goodput; the server's
    /// ceiling at overload), warm-up arrivals answered inside it included (a queue built in
    /// the warm-up is served in the window). Answers in the drain are in `drain`, not here.
    pub delivered_rate_per_s: f64,
    /// Responses of any status that ended inside the window, per second of the window.
    pub answered_rate_per_s: f64,
    /// Answers after the window.
    pub drain: Drain,
    /// Arrivals that waited for a connection of the budget.
    pub queue: Queue,
    /// The listener's overflow counters over the run (`null`: unreadable).
    pub listen: Option<Listen>,
    /// Responses per status code.
    pub status: BTreeMap<String, u64>,
    /// Transport errors per kind.
    pub errors: Errors,
    /// 2xx latency from the intended send instant (what a user would have waited).
    pub latency_2xx: Option<Percentiles>,
    /// Latency of non-2xx answers from the intended instant (a fast 503 is the server in
    /// control).
    pub latency_non_2xx: Option<Percentiles>,
    /// 2xx service time, from the first byte written to the last byte read (excludes
    /// scheduling lag and connection setup; what closed-loop tools call latency).
    pub service_time_2xx: Option<Percentiles>,
    /// TCP connection setup time of new connections.
    pub connect_time: Option<Percentiles>,
    /// TLS handshake time of new connections, after the connect (`null` without TLS).
    pub tls_handshake_time: Option<Percentiles>,
    /// Scheduling lag: when a worker took each arrival minus its intended instant.
    pub sched_lag: Option<Percentiles>,
    /// In-flight requests.
    pub in_flight: InFlight,
    /// File-descriptor limit.
    pub fd_limit: FdLimit,
    /// Connections.
    pub connections: Connections,
    /// Response body bytes of measured arrivals.
    pub body_bytes: u64,
    /// Warm-up.
    pub warmup: Warmup,
    /// What the generator cost.
    pub generator: GeneratorCost,
    /// Per second, measured window then drain.
    pub series: Vec<Point>,
    /// Latency distributions per status class (HdrHistogram percentile steps).
    pub latency_histograms: Distributions,
}

/// Inputs besides the recorder.
pub struct Totals {
    /// Plan echo.
    pub plan: PlanEcho,
    /// Measured arrivals dispatched.
    pub scheduled: u64,
    /// Measured arrivals never sent.
    pub unsent: u64,
    /// Warm-up arrivals dispatched.
    pub warmup_scheduled: u64,
    /// Window length actually run, ns.
    pub window_ns: u64,
    /// Window end instant, ns.
    pub window_end_ns: u64,
    /// Stopped early.
    pub stopped_early: bool,
    /// Wall-clock time of the window's start, s since the epoch.
    pub start_unix_s: Option<f64>,
    /// The wall clock's source and error estimate.
    pub clock: Option<ClockInfo>,
    /// High-water mark.
    pub in_flight_max: u64,
    /// rate × timeout.
    pub rate_x_timeout: Option<f64>,
    /// Fd limit.
    pub fd_limit: FdLimit,
    /// Connections opened.
    pub opened: u64,
    /// Stale retries.
    pub stale_retries: u64,
    /// Most slots of the budget in use at once.
    pub busy_max: u64,
    /// Arrivals whose new connection waited for the connect pacing.
    pub paced: u64,
    /// Listener counters over the run.
    pub listen: Option<Listen>,
    /// Cost.
    pub generator: GeneratorCost,
}

/// The per-second series: a row for every second of the window, those in which nothing ended
/// too.
fn series_of(r: &Recorder, t: &Totals) -> Vec<Point> {
    let window_secs = t.window_ns.div_ceil(1_000_000_000) as usize;
    let mut series: Vec<Point> = r
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| Point::of(i, s))
        .collect();
    while series.len() < window_secs {
        series.push(Point::of(series.len(), &Second::default()));
    }
    series
}

/// Builds the summary.
pub fn build(r: &Recorder, t: Totals) -> Summary {
    let window_s = t.window_ns as f64 / 1e9;
    let per_s = |n: u64| {
        if window_s > 0.0 {
            crate::traps::round(n as f64 / window_s, 3)
        } else {
            0.0
        }
    };
    let errors = Errors::from_counts(&r.errors);
    let series = series_of(r, &t);
    let (max_wait_s, budget) = (t.plan.max_wait_s, t.plan.max_connections as u64);
    Summary {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        window: Window {
            measured_s: crate::traps::round(window_s, 6),
            drain_s: crate::traps::round(
                r.last_end_ns.saturating_sub(t.window_end_ns) as f64 / 1e9,
                6,
            ),
            stopped_early: t.stopped_early,
            start_unix_s: t.start_unix_s.map(|v| crate::traps::round(v, 3)),
            clock: t.clock,
        },
        plan: t.plan,
        scheduled: t.scheduled,
        unsent: t.unsent,
        completed: r.completed,
        ok_2xx: r.ok_2xx,
        non_2xx: r.non_2xx,
        errors_total: errors.total(),
        dropped: r.dropped,
        success_ratio: if t.scheduled > 0 {
            crate::traps::round(r.ok_2xx as f64 / t.scheduled as f64, 6)
        } else {
            0.0
        },
        offered_rate_per_s: per_s(t.scheduled),
        delivered_rate_per_s: per_s(r.ok_2xx - r.drain_ok_2xx + r.warmup_ok_2xx_in_window),
        answered_rate_per_s: per_s(r.ok_2xx + r.non_2xx - r.drain_ok_2xx - r.drain_non_2xx),
        drain: Drain {
            ok_2xx: r.drain_ok_2xx,
            non_2xx: r.drain_non_2xx,
            errors: r.drain_errors,
        },
        queue: Queue {
            waited: r.queued,
            dropped: r.dropped,
            max_wait_s,
            wait: Percentiles::of(&r.queue_wait),
        },
        listen: t.listen,
        status: r.status.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        errors,
        latency_2xx: Percentiles::of(&r.lat_2xx),
        latency_non_2xx: Percentiles::of(&r.lat_non_2xx),
        service_time_2xx: Percentiles::of(&r.service_2xx),
        connect_time: Percentiles::of(&r.connect),
        tls_handshake_time: Percentiles::of(&r.tls),
        sched_lag: Percentiles::of(&r.lag),
        in_flight: InFlight {
            max: t.in_flight_max,
            rate_x_timeout: t.rate_x_timeout.map(|v| crate::traps::round(v, 3)),
        },
        fd_limit: t.fd_limit,
        connections: Connections {
            opened: t.opened,
            reused_requests: r.reused,
            stale_retries: t.stale_retries,
            tls_handshakes: r.tls.len(),
            tls_resumed: r.tls_resumed,
            budget,
            busy_max: t.busy_max,
            paced: t.paced,
            refused_fresh: r.refused_fresh,
        },
        body_bytes: r.body_bytes,
        warmup: Warmup {
            scheduled: t.warmup_scheduled,
            completed: r.warmup_completed,
            ok_2xx: r.warmup_ok_2xx,
            ok_2xx_in_window: r.warmup_ok_2xx_in_window,
        },
        generator: t.generator,
        series,
        latency_histograms: Distributions {
            ok_2xx: Distribution::of(&r.lat_2xx),
            non_2xx: Distribution::of(&r.lat_non_2xx),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Load JSONs written before `start_unix_s` and `clock` still read (`trapdetect report`).
    #[test]
    fn a_window_without_wall_clock_fields_still_reads() {
        let w: Window = serde_json::from_str(
            r#"{"measured_s": 10.0, "drain_s": 0.002, "stopped_early": false}"#,
        )
        .unwrap();
        assert_eq!(w.measured_s, 10.0);
        assert_eq!((w.start_unix_s, w.clock), (None, None));
        let w: Window = serde_json::from_str(
            r#"{"measured_s": 2.0, "drain_s": 0.0, "stopped_early": false,
                "start_unix_s": 1733400000.5,
                "clock": {"source": "tsc", "synchronized": true, "esterror_us": 12,
                          "maxerror_us": 4500}}"#,
        )
        .unwrap();
        assert_eq!(w.start_unix_s, Some(1_733_400_000.5));
        assert_eq!(
            w.clock,
            Some(ClockInfo {
                source: Some("tsc".into()),
                synchronized: true,
                esterror_us: Some(12),
                maxerror_us: Some(4500),
            })
        );
    }
}
