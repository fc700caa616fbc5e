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
}

/// Renders the summary (findings are rendered by the caller, with the report's renderer).
pub fn render_text(s: &Summary) -> String {
    use crate::report::units::seconds;
    let mut o = String::new();
    let p = &s.plan;
    let pace = match (p.mode, p.rate_per_s, p.concurrency) {
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
    };
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
    let _ = writeln!(o);
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
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  {:<26} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "ms", "p50", "p90", "p99", "p99.9", "max", "mean"
    );
    pct_line(&mut o, "latency 2xx (from intent)", &s.latency_2xx);
    pct_line(&mut o, "latency non-2xx", &s.latency_non_2xx);
    pct_line(&mut o, "service time 2xx (sent)", &s.service_time_2xx);
    pct_line(&mut o, "connect", &s.connect_time);
    if s.tls_handshake_time.is_some() {
        pct_line(&mut o, "tls handshake", &s.tls_handshake_time);
    }
    if s.queue.wait.is_some() {
        pct_line(&mut o, "queued for a connection", &s.queue.wait);
    }
    pct_line(&mut o, "scheduling lag", &s.sched_lag);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  generator: in-flight max {}{} · fd limit {} (hard {}) · connections {} opened (at most \
         {} busy of {}), {} reused, {} stale retries · cpu {} · rss max {:.1} MiB",
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
        s.generator.rss_max_mib
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
    let _ = writeln!(o);
    series(&mut o, s);
    o
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
