//! Plain-text rendering of a [`Summary`]: what was offered, what came back (success first,
//! then each kind of non-success), latency, the generator's own health, and the per-second
//! series that shows the shape over time.

use std::fmt::Write as _;

use super::{ErrorKind, Percentiles, Summary};
use crate::report::text::table;

/// Longest per-second table; longer runs are folded into buckets of several seconds.
const MAX_ROWS: usize = 120;

fn ms(us: f64) -> String {
    if us >= 100_000.0 {
        format!("{:.0}", us / 1e3)
    } else if us >= 10_000.0 {
        format!("{:.1}", us / 1e3)
    } else if us >= 1_000.0 {
        format!("{:.2}", us / 1e3)
    } else {
        format!("{:.3}", us / 1e3)
    }
}

fn pct_line(out: &mut String, label: &str, p: &Option<Percentiles>) {
    match p {
        Some(p) => {
            let _ = writeln!(
                out,
                "  {label:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}   (n={})",
                ms(p.p50_us),
                ms(p.p90_us),
                ms(p.p99_us),
                ms(p.p99_9_us),
                ms(p.max_us),
                ms(p.mean_us),
                p.count
            );
        }
        None => {
            let _ = writeln!(out, "  {label:<26} {:>9}", "-");
        }
    }
}

/// The `load` section of a report (`trace`'s probe load, `run`'s load).
impl crate::report::Section for Summary {
    fn name(&self) -> &'static str {
        "load"
    }
    fn json(&self) -> Result<serde_json::Value, String> {
        crate::report::section::to_json(self)
    }
    fn text(&self) -> String {
        render_text(self)
    }
    fn html(&self, marks: &[crate::report::chart::Marks]) -> Option<String> {
        Some(self.html_part(marks))
    }
}

/// Renders the summary (findings are rendered by the caller, with the report's renderer).
pub fn render_text(s: &Summary) -> String {
    let mut o = String::new();
    plan_text(&mut o, s);
    let _ = writeln!(o);
    outcomes_text(&mut o, s);
    let _ = writeln!(o);
    latency_text(&mut o, s);
    let _ = writeln!(o);
    generator_text(&mut o, s);
    let _ = writeln!(o);
    series(&mut o, s);
    o
}

/// How the load was paced: open or closed loop, the rate, the workers.
fn pace(p: &super::PlanEcho) -> String {
    match (p.mode, p.rate_per_s, p.concurrency) {
        ("closed", Some(r), Some(c)) => format!("closed loop, {c} workers capped at {r}/s"),
        ("closed", None, Some(c)) => format!("closed loop, {c} workers"),
        (_, Some(r), _) => format!(
            "open loop, {} {r}/s",
            match p.arrival {
                Some(super::Arrival::Poisson) => "poisson",
                _ => "const",
            }
        ),
        _ => "?".into(),
    }
}

/// The first line: the URL, the pacing, the window, the timeout, keep-alive; and a stop
/// before the planned end.
fn plan_text(o: &mut String, s: &Summary) {
    use crate::report::units::seconds;
    let p = &s.plan;
    let pace = pace(p);
    let _ = writeln!(
        o,
        "load: {} ({}) · {pace} · {} measured{} · timeout {} · {}",
        p.url,
        p.address,
        seconds(s.window.measured_s),
        if p.warmup_s > 0.0 {
            format!(" after {} warm-up", seconds(p.warmup_s))
        } else {
            String::new()
        },
        seconds(p.timeout_s),
        if p.keepalive {
            "keep-alive"
        } else {
            "no keep-alive"
        },
    );
    if s.window.stopped_early {
        // Milliseconds: a caller that stops the load at the end of its own window (trace's
        // probe load) stops it a few ms before the load's planned end, and "stopped early at
        // 3.0 s" of 3 s planned read as a contradiction.
        let _ = writeln!(
            o,
            "  stopped before the planned end: {:.3} s measured of {} planned",
            s.window.measured_s,
            seconds(p.duration_s)
        );
    }
}

/// What was offered and what came back: 2xx, other statuses, errors by kind, dropped, unsent.
fn outcomes_text(o: &mut String, s: &Summary) {
    let pct = |n: u64| {
        if s.scheduled > 0 {
            format!("{:.2}%", n as f64 * 100.0 / s.scheduled as f64)
        } else {
            "-".into()
        }
    };
    let _ = writeln!(
        o,
        "  scheduled  {:>10}   offered   {:>10.1}/s",
        s.scheduled, s.offered_rate_per_s
    );
    let _ = writeln!(
        o,
        "  2xx        {:>10}   delivered {:>10.1}/s   {} success   (2xx inside the window; {} more in the drain)",
        s.ok_2xx,
        s.delivered_rate_per_s,
        pct(s.ok_2xx),
        s.drain.ok_2xx
    );
    let codes: Vec<String> = s
        .status
        .iter()
        .filter(|(c, _)| !c.starts_with('2'))
        .map(|(c, n)| format!("{c}: {n}"))
        .collect();
    let _ = writeln!(
        o,
        "  non-2xx    {:>10}   {}",
        s.non_2xx,
        if codes.is_empty() {
            String::new()
        } else {
            codes.join("  ")
        }
    );
    let kinds: Vec<String> = ErrorKind::ALL
        .iter()
        .filter(|k| s.errors.get(**k) > 0)
        .map(|k| format!("{}: {}", k.name(), s.errors.get(*k)))
        .collect();
    let _ = writeln!(
        o,
        "  no status  {:>10}   {}",
        s.errors_total,
        kinds.join("  ")
    );
    if s.queue.waited > 0 {
        let _ = writeln!(
            o,
            "  dropped    {:>10}   {} waited for one of {} connections; dropped after {}s",
            s.dropped, s.queue.waited, s.connections.budget, s.queue.max_wait_s
        );
    }
    if s.unsent > 0 {
        let _ = writeln!(
            o,
            "  unsent     {:>10}   (the generator fell behind)",
            s.unsent
        );
    }
}

/// The latency table: from the intended send time, service time, connect, TLS, queueing, lag.
fn latency_text(o: &mut String, s: &Summary) {
    let _ = writeln!(
        o,
        "  {:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "ms", "p50", "p90", "p99", "p99.9", "max", "mean"
    );
    pct_line(o, "latency 2xx (from intent)", &s.latency_2xx);
    pct_line(o, "latency non-2xx", &s.latency_non_2xx);
    pct_line(o, "service time 2xx (sent)", &s.service_time_2xx);
    pct_line(o, "connect", &s.connect_time);
    if s.tls_handshake_time.is_some() {
        pct_line(o, "tls handshake", &s.tls_handshake_time);
    }
    if s.queue.wait.is_some() {
        pct_line(o, "queued for a connection", &s.queue.wait);
    }
    pct_line(o, "scheduling lag", &s.sched_lag);
}

/// The generator's own health: in flight, descriptors, connections, CPU, memory, TLS, warm-up.
fn generator_text(o: &mut String, s: &Summary) {
    let _ = writeln!(
        o,
        "  generator: in-flight max {}{} · fd limit {} (hard {}) · connections {} opened (at most \
         {} busy of {}), {} reused, {} stale retries · cpu {} · rss max {:.1} MiB{}",
        s.in_flight.max,
        s.in_flight
            .rate_x_timeout
            .map(|v| format!(" (rate × timeout {v:.0})"))
            .unwrap_or_default(),
        s.fd_limit.soft,
        s.fd_limit.hard,
        s.connections.opened,
        s.connections.busy_max,
        s.connections.budget,
        s.connections.reused_requests,
        s.connections.stale_retries,
        crate::report::units::seconds(s.generator.cpu_user_s + s.generator.cpu_sys_s),
        s.generator.rss_max_mib,
        s.generator
            .lanes_nice
            .map(|n| format!(" · lanes at nice {n}"))
            .unwrap_or_default()
    );
    if s.connections.tls_handshakes > 0 {
        let _ = writeln!(
            o,
            "  tls: {} handshakes, {} resumed a session",
            s.connections.tls_handshakes, s.connections.tls_resumed
        );
    }
    if s.warmup.scheduled > 0 {
        let _ = writeln!(
            o,
            "  warm-up: {} scheduled, {} ended, {} 2xx (not counted above, except the {} answered \
             inside the window, in the delivered rate)",
            s.warmup.scheduled, s.warmup.completed, s.warmup.ok_2xx, s.warmup.ok_2xx_in_window
        );
    }
}

fn series(o: &mut String, s: &Summary) {
    if s.series.is_empty() {
        return;
    }
    let step = s.series.len().div_ceil(MAX_ROWS).max(1);
    let _ = writeln!(
        o,
        "  per {} (t from the window start; rows at or after {} are the drain):",
        if step == 1 {
            "second".to_string()
        } else {
            format!("{step} seconds, summed (max for in-flight and lag)")
        },
        crate::report::units::seconds(s.window.measured_s)
    );
    let kinds: Vec<ErrorKind> = ErrorKind::ALL
        .into_iter()
        .filter(|k| s.errors.get(*k) > 0)
        .collect();
    let mut header = vec!["t_s", "sched", "2xx", "non2xx"];
    header.extend(kinds.iter().map(|k| k.name()));
    let dropped = s.dropped > 0;
    if dropped {
        header.push("dropped");
    }
    let warm = s.warmup.ok_2xx_in_window > 0;
    if warm {
        header.push("warmup2xx");
    }
    header.extend(["mean_ms", "p99_ms", "inflight", "lag_max_ms"]);
    let mut rows = vec![];
    for chunk in s.series.chunks(step) {
        let sum = |f: &dyn Fn(&super::Point) -> u64| chunk.iter().map(f).sum::<u64>();
        let ok = sum(&|p| p.ok_2xx);
        let mut r = vec![
            chunk[0].t_s.to_string(),
            sum(&|p| p.scheduled).to_string(),
            ok.to_string(),
            sum(&|p| p.non_2xx).to_string(),
        ];
        for k in &kinds {
            r.push(sum(&|p| p.errors.get(*k)).to_string());
        }
        if dropped {
            r.push(sum(&|p| p.dropped).to_string());
        }
        if warm {
            r.push(sum(&|p| p.warmup_ok_2xx).to_string());
        }
        let mean = if ok > 0 {
            let w: f64 = chunk
                .iter()
                .map(|p| p.lat_2xx_mean_us.unwrap_or(0.0) * p.ok_2xx as f64)
                .sum();
            ms(w / ok as f64)
        } else {
            "-".into()
        };
        let p99 = chunk
            .iter()
            .filter_map(|p| p.lat_2xx_p99_us)
            .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
        r.push(mean);
        r.push(p99.map_or("-".into(), ms));
        r.push(
            chunk
                .iter()
                .map(|p| p.in_flight_max)
                .max()
                .unwrap_or(0)
                .to_string(),
        );
        r.push(ms(chunk
            .iter()
            .map(|p| p.sched_lag_max_us)
            .fold(0.0, f64::max)));
        rows.push(r);
    }
    table(o, &header, &rows);
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::load::{
        Plan,
        summary::{Errors, FdLimit, Point, Totals, build},
    };

    fn pct(us: f64, count: u64) -> Option<Percentiles> {
        Some(Percentiles {
            count,
            mean_us: us,
            p50_us: us * 0.8,
            p90_us: us * 2.0,
            p99_us: us * 30.0,
            p99_9_us: us * 300.0,
            max_us: us * 3000.0,
        })
    }

    fn point(t: u64) -> Point {
        Point {
            t_s: t,
            scheduled: 100,
            ok_2xx: if t % 7 == 3 { 0 } else { 90 + t % 5 },
            non_2xx: t % 3,
            errors: Errors {
                timeout: t % 2,
                ..Errors::default()
            },
            lat_2xx_mean_us: (t % 7 != 3).then_some(500.0 + t as f64 * 13.0),
            lat_2xx_p99_us: (t % 11 != 4).then_some(9000.0 + t as f64 * 170.0),
            in_flight_max: 3 + t % 4,
            sched_lag_max_us: 20.0 + (t % 9) as f64 * 1500.0,
            dropped: t % 4 / 3,
            warmup_ok_2xx: u64::from(t == 0),
            lat_2xx_hist_ns: None,
        }
    }

    /// A summary with every optional part present.
    pub(in crate::load) fn summary(seconds: u64) -> Summary {
        let plan = Plan::new(
            "http://127.0.0.1:8080/",
            100.0,
            Duration::from_secs(seconds),
        )
        .unwrap();
        let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let rec = crate::load::stats::Recorder::new(0);
        let mut s = build(
            &rec,
            Totals {
                plan: plan.echo(addr),
                scheduled: seconds * 100,
                unsent: 7,
                warmup_scheduled: 0,
                window_ns: seconds * 1_000_000_000,
                window_end_ns: seconds * 1_000_000_000,
                stopped_early: true,
                start_unix_s: None,
                clock: None,
                in_flight_max: 9,
                rate_x_timeout: Some(1000.0),
                fd_limit: FdLimit {
                    soft_before: 1024,
                    soft: 20_000,
                    hard: 40_000,
                },
                opened: 12,
                stale_retries: 2,
                busy_max: 8,
                paced: 0,
                listen: None,
                generator: Default::default(),
            },
        );
        s.plan.warmup_s = 2.0;
        s.plan.keepalive = false;
        s.window.measured_s = seconds as f64 - 0.004;
        s.ok_2xx = seconds * 90;
        s.non_2xx = 12;
        s.status = [
            ("200".to_string(), s.ok_2xx),
            ("404".to_string(), 2),
            ("503".to_string(), 10),
        ]
        .into();
        s.errors.timeout = 5;
        s.errors.conn_reset = 1;
        s.errors_total = 6;
        s.dropped = 3;
        s.queue.waited = 40;
        s.queue.max_wait_s = 1.0;
        s.queue.wait = pct(300.0, 40);
        s.latency_2xx = pct(450.0, s.ok_2xx);
        s.latency_non_2xx = pct(2000.0, 12);
        s.service_time_2xx = pct(35.0, s.ok_2xx);
        s.connect_time = pct(120_000.0, 12);
        s.tls_handshake_time = pct(1500.0, 12);
        s.sched_lag = pct(20.0, s.scheduled);
        s.connections.tls_handshakes = 12;
        s.connections.tls_resumed = 4;
        s.warmup.scheduled = 200;
        s.warmup.completed = 199;
        s.warmup.ok_2xx = 198;
        s.warmup.ok_2xx_in_window = 1;
        s.generator.cpu_user_s = 0.25;
        s.generator.cpu_sys_s = 0.5;
        s.generator.rss_max_mib = 12.25;
        s.series = (0..seconds + 2).map(point).collect();
        s
    }

    /// Pins the text byte for byte: a short run (one row a second) and a long one (folded).
    #[test]
    fn render_text_golden() {
        assert_eq!(
            render_text(&summary(5)),
            r#"load: http://127.0.0.1:8080/ (127.0.0.1:8080) · open loop, const 100/s · 5.0 s measured after 2.0 s warm-up · timeout 10 s · no keep-alive
  stopped before the planned end: 4.996 s measured of 5.0 s planned

  scheduled         500   offered        100.0/s
  2xx               450   delivered        0.0/s   90.00% success   (2xx inside the window; 0 more in the drain)
  non-2xx            12   404: 2  503: 10
  no status           6   timeout: 5  conn_reset: 1
  dropped             3   40 waited for one of 512 connections; dropped after 1s
  unsent              7   (the generator fell behind)

  ms                               p50       p90       p99     p99.9       max      mean
  latency 2xx (from intent)      0.360     0.900      13.5       135      1350     0.450   (n=450)
  latency non-2xx                 1.60      4.00      60.0       600      6000      2.00   (n=12)
  service time 2xx (sent)        0.028     0.070      1.05      10.5       105     0.035   (n=450)
  connect                         96.0       240      3600     36000    360000       120   (n=12)
  tls handshake                   1.20      3.00      45.0       450      4500      1.50   (n=12)
  queued for a connection        0.240     0.600      9.00      90.0       900     0.300   (n=40)
  scheduling lag                 0.016     0.040     0.600      6.00      60.0     0.020   (n=500)

  generator: in-flight max 9 (rate × timeout 1000) · fd limit 20000 (hard 40000) · connections 12 opened (at most 8 busy of 512), 0 reused, 2 stale retries · cpu 750 ms · rss max 12.2 MiB
  tls: 12 handshakes, 4 resumed a session
  warm-up: 200 scheduled, 199 ended, 198 2xx (not counted above, except the 1 answered inside the window, in the delivered rate)

  per second (t from the window start; rows at or after 5.0 s are the drain):
  t_s sched 2xx non2xx timeout conn_reset dropped warmup2xx mean_ms p99_ms inflight lag_max_ms
  0   100   90       0       0          0       0         1   0.500   9.00        3      0.020
  1   100   91       1       1          0       0         0   0.513   9.17        4       1.52
  2   100   92       2       0          0       0         0   0.526   9.34        5       3.02
  3   100   0        0       1          0       1         0       -   9.51        6       4.52
  4   100   94       1       0          0       0         0   0.552      -        3       6.02
  5   100   90       2       1          0       0         0   0.565   9.85        4       7.52
  6   100   91       0       0          0       0         0   0.578   10.0        5       9.02
"#
        );
        let mut s = summary(119);
        s.plan.mode = "closed";
        s.plan.concurrency = Some(16);
        s.plan.warmup_s = 0.0;
        s.plan.keepalive = true;
        s.window.stopped_early = false;
        s.queue.waited = 0;
        s.queue.wait = None;
        s.tls_handshake_time = None;
        s.unsent = 0;
        s.connections.tls_handshakes = 0;
        s.warmup.scheduled = 0;
        assert_eq!(
            render_text(&s),
            r#"load: http://127.0.0.1:8080/ (127.0.0.1:8080) · closed loop, 16 workers capped at 100/s · 119 s measured · timeout 10 s · keep-alive

  scheduled       11900   offered        100.0/s
  2xx             10710   delivered        0.0/s   90.00% success   (2xx inside the window; 0 more in the drain)
  non-2xx            12   404: 2  503: 10
  no status           6   timeout: 5  conn_reset: 1

  ms                               p50       p90       p99     p99.9       max      mean
  latency 2xx (from intent)      0.360     0.900      13.5       135      1350     0.450   (n=10710)
  latency non-2xx                 1.60      4.00      60.0       600      6000      2.00   (n=12)
  service time 2xx (sent)        0.028     0.070      1.05      10.5       105     0.035   (n=10710)
  connect                         96.0       240      3600     36000    360000       120   (n=12)
  scheduling lag                 0.016     0.040     0.600      6.00      60.0     0.020   (n=11900)

  generator: in-flight max 9 (rate × timeout 1000) · fd limit 20000 (hard 40000) · connections 12 opened (at most 8 busy of 512), 0 reused, 2 stale retries · cpu 750 ms · rss max 12.2 MiB

  per 2 seconds, summed (max for in-flight and lag) (t from the window start; rows at or after 119 s are the drain):
  t_s sched 2xx non2xx timeout conn_reset dropped warmup2xx mean_ms p99_ms inflight lag_max_ms
  0   200   181      1       1          0       0         1   0.507   9.17        4       1.52
  2   200   92       2       1          0       1         0   0.526   9.51        6       4.52
  4   200   184      3       1          0       0         0   0.558   9.85        4       7.52
  6   200   183      1       1          0       1         0   0.585   10.2        6       10.5
  8   200   187      2       1          0       0         0   0.611   10.5        4       12.0
  10  200   91       3       1          0       1         0   0.643   10.9        6       3.02
  12  200   185      1       1          0       0         0   0.663   11.2        4       6.02
  14  200   184      2       1          0       1         0   0.688   11.4        6       9.02
  16  200   91       3       1          0       0         0   0.708   11.9        4       12.0
  18  200   187      1       1          0       1         0   0.741   12.2        6       1.52
  20  200   181      2       1          0       0         0   0.767   12.6        4       4.52
  22  200   185      3       1          0       1         0   0.793   12.9        6       7.52
  24  200   90       1       1          0       0         0   0.825   13.2        4       10.5
  26  200   183      2       1          0       1         0   0.845   13.6        6       12.0
  28  200   187      3       1          0       0         0   0.871   13.9        4       3.02
  30  200   90       1       1          0       1         0   0.890   14.3        6       6.02
  32  200   185      2       1          0       0         0   0.923   14.6        4       9.02
  34  200   184      3       1          0       1         0   0.948   14.9        6       12.0
  36  200   183      1       1          0       0         0   0.975   15.1        4       1.52
  38  200   94       2       1          0       1         0    1.01   15.6        6       4.52
  40  200   181      3       1          0       0         0    1.03   16.0        4       7.52
  42  200   185      1       1          0       1         0    1.05   16.3        6       10.5
  44  200   94       2       1          0       0         0    1.07   16.6        4       12.0
  46  200   183      3       1          0       1         0    1.10   17.0        6       3.02
  48  200   187      1       1          0       0         0    1.13   17.3        4       6.02
  50  200   181      2       1          0       1         0    1.16   17.7        6       9.02
  52  200   93       3       1          0       0         0    1.19   18.0        4       12.0
  54  200   184      1       1          0       1         0    1.21   18.4        6       1.52
  56  200   183      2       1          0       0         0    1.23   18.7        4       4.52
  58  200   93       3       1          0       1         0    1.25   18.9        6       7.52
  60  200   181      1       1          0       0         0    1.29   19.4        4       10.5
  62  200   185      2       1          0       1         0    1.31   19.7        6       12.0
  64  200   184      3       1          0       0         0    1.34   20.1        4       3.02
  66  200   92       1       1          0       1         0    1.37   20.4        6       6.02
  68  200   187      2       1          0       0         0    1.39   20.7        4       9.02
  70  200   181      3       1          0       1         0    1.42   21.1        6       12.0
  72  200   92       1       1          0       0         0    1.44   21.4        4       1.52
  74  200   184      2       1          0       1         0    1.47   21.8        6       4.52
  76  200   183      3       1          0       0         0    1.49   22.1        4       7.52
  78  200   187      1       1          0       1         0    1.52   22.4        6       10.5
  80  200   91       2       1          0       0         0    1.55   22.6        4       12.0
  82  200   185      3       1          0       1         0    1.57   23.1        6       3.02
  84  200   184      1       1          0       0         0    1.60   23.4        4       6.02
  86  200   91       2       1          0       1         0    1.62   23.8        6       9.02
  88  200   187      3       1          0       0         0    1.65   24.1        4       12.0
  90  200   181      1       1          0       1         0    1.68   24.5        6       1.52
  92  200   185      2       1          0       0         0    1.70   24.8        4       4.52
  94  200   90       3       1          0       1         0    1.74   25.1        6       7.52
  96  200   183      1       1          0       0         0    1.75   25.5        4       10.5
  98  200   187      2       1          0       1         0    1.78   25.8        6       12.0
  100 200   90       3       1          0       0         0    1.80   26.2        4       3.02
  102 200   185      1       1          0       1         0    1.83   26.3        6       6.02
  104 200   184      2       1          0       0         0    1.86   26.9        4       9.02
  106 200   183      3       1          0       1         0    1.88   27.2        6       12.0
  108 200   94       1       1          0       0         0    1.92   27.5        4       1.52
  110 200   181      2       1          0       1         0    1.94   27.9        6       4.52
  112 200   185      3       1          0       0         0    1.96   28.2        4       7.52
  114 200   94       1       1          0       1         0    1.98   28.6        6       10.5
  116 200   183      2       1          0       0         0    2.01   28.9        4       12.0
  118 200   187      3       1          0       1         0    2.04   29.2        6       3.02
  120 100   90       0       0          0       0         0    2.06   29.4        3       4.52
"#
        );
        s.plan.rate_per_s = None;
        s.series.clear();
        s.dropped = 0;
        s.status.clear();
        s.latency_non_2xx = None;
        assert_eq!(
            render_text(&s),
            r#"load: http://127.0.0.1:8080/ (127.0.0.1:8080) · closed loop, 16 workers · 119 s measured · timeout 10 s · keep-alive

  scheduled       11900   offered        100.0/s
  2xx             10710   delivered        0.0/s   90.00% success   (2xx inside the window; 0 more in the drain)
  non-2xx            12   
  no status           6   timeout: 5  conn_reset: 1

  ms                               p50       p90       p99     p99.9       max      mean
  latency 2xx (from intent)      0.360     0.900      13.5       135      1350     0.450   (n=10710)
  latency non-2xx                    -
  service time 2xx (sent)        0.028     0.070      1.05      10.5       105     0.035   (n=10710)
  connect                         96.0       240      3600     36000    360000       120   (n=12)
  scheduling lag                 0.016     0.040     0.600      6.00      60.0     0.020   (n=11900)

  generator: in-flight max 9 (rate × timeout 1000) · fd limit 20000 (hard 40000) · connections 12 opened (at most 8 busy of 512), 0 reused, 2 stale retries · cpu 750 ms · rss max 12.2 MiB

"#
        );
        s.plan.mode = "open";
        s.plan.rate_per_s = Some(50.0);
        s.plan.arrival = Some(super::super::Arrival::Poisson);
        s.scheduled = 0;
        assert_eq!(
            render_text(&s),
            r#"load: http://127.0.0.1:8080/ (127.0.0.1:8080) · open loop, poisson 50/s · 119 s measured · timeout 10 s · keep-alive

  scheduled           0   offered        100.0/s
  2xx             10710   delivered        0.0/s   - success   (2xx inside the window; 0 more in the drain)
  non-2xx            12   
  no status           6   timeout: 5  conn_reset: 1

  ms                               p50       p90       p99     p99.9       max      mean
  latency 2xx (from intent)      0.360     0.900      13.5       135      1350     0.450   (n=10710)
  latency non-2xx                    -
  service time 2xx (sent)        0.028     0.070      1.05      10.5       105     0.035   (n=10710)
  connect                         96.0       240      3600     36000    360000       120   (n=12)
  scheduling lag                 0.016     0.040     0.600      6.00      60.0     0.020   (n=11900)

  generator: in-flight max 9 (rate × timeout 1000) · fd limit 20000 (hard 40000) · connections 12 opened (at most 8 busy of 512), 0 reused, 2 stale retries · cpu 750 ms · rss max 12.2 MiB

"#
        );
    }
}
