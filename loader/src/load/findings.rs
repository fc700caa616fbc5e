//! Rules about the run itself: did the generator measure the server, or itself? `gen.*` only
//! when the generator was the bottleneck (gen.lag, gen.closed-loop); `load.*` what the server
//! did (load.ceiling at overload, load.errors above --max-errors, load.refusal, load.status-mix);
//! `net.*` the generator's descriptors and ports. Pure functions of a [`Summary`], so they are
//! tested with hand-made summaries.

use serde_json::{Map, Value};

use super::{Plan, Summary, classify::ErrorKind};
use crate::traps::{Finding, Id, Severity, round};

/// Share of sent arrivals that may fail (non-2xx or no status) before load.status-mix warns.
pub const STATUS_MIX_WARN: f64 = 0.01;
/// Success ratio (of sent arrivals) below which load.status-mix is a failure: the run measured errors.
pub const STATUS_MIX_FAIL: f64 = 0.5;
/// In-flight below this share of rate × timeout, while the server timed out, is a throttled
/// generator.
pub const CLOSED_LOOP_SHARE: f64 = 0.5;
/// Share of arrivals that waited for a connection of the budget beyond which, even without a
/// drop, the server is at its ceiling.
pub const CEILING_WAITED: f64 = 0.01;

/// Why the measurement cannot be trusted (exit 3); empty when it can.
pub fn problems(s: &Summary, _plan: &Plan) -> Vec<String> {
    let mut out = vec![];
    let budget = s.plan.lag_budget_us;
    if let Some(l) = &s.sched_lag
        && l.p99_us > budget
    {
        out.push(format!(
            "the generator fell behind its schedule: scheduling lag p99 {:.0} µs > budget {budget:.0} µs",
            l.p99_us
        ));
    }
    if s.unsent > 0 {
        out.push(format!(
            "{} arrivals of the window were never sent (the generator fell behind)",
            s.unsent
        ));
    }
    if s.errors.generator_side() > 0 {
        out.push(format!(
            "{} requests failed on the generator's side (fd_limit {}, ports_exhausted {})",
            s.errors.generator_side(),
            s.errors.fd_limit,
            s.errors.ports_exhausted
        ));
    }
    out
}

/// Every finding about this run, fail first.
pub fn findings(s: &Summary, plan: &Plan) -> Vec<Finding> {
    let mut out = vec![];
    out.extend(lag(s));
    out.extend(closed_loop(s));
    out.extend(ceiling(s));
    out.extend(errors(s));
    out.extend(refusal(s));
    out.extend(status_mix(s));
    out.extend(fd_limit(s, plan));
    out.extend(ports(s));
    crate::traps::sort(&mut out);
    out
}

fn lag(s: &Summary) -> Option<Finding> {
    let l = s.sched_lag.as_ref()?;
    let budget = s.plan.lag_budget_us;
    let behind = l.p99_us > budget || s.unsent > 0;
    if !behind && l.max_us <= budget {
        return None;
    }
    let f = if behind {
        Finding::new(
            Id::GenLag,
            Severity::Warn,
            "the generator fell behind its schedule: these numbers measure the generator",
        )
        .predict(
            "arrivals went out late or not at all, so the offered load was lower and burstier \
             than planned; latency still counts from each intended instant, but the run is \
             untrusted (exit 3)",
        )
    } else {
        Finding::new(
            Id::GenLag,
            Severity::Info,
            "the generator stalled briefly (worst lag beyond the budget, p99 within it)",
        )
    };
    Some(
        f.with("sched_lag_p99_us", l.p99_us)
            .with("sched_lag_max_us", l.max_us)
            .with("lag_budget_us", budget)
            .with("unsent", s.unsent)
            .with(
                "generator_cpu_s",
                round(s.generator.cpu_user_s + s.generator.cpu_sys_s, 3),
            )
            .with("window_s", s.window.measured_s)
            .with("threads", s.plan.threads as u64)
            .with_opt("lanes_nice", s.generator.lanes_nice.map(i64::from))
            .remedy(
                "give the generator its own cores (taskset -c 1 trapdetect load ...; server on \
                 the others), lower --rate, or raise --threads",
            ),
    )
}

fn closed_loop(s: &Summary) -> Option<Finding> {
    let timeouts = s.errors.timeout;
    if let Some(n) = s.plan.concurrency {
        let saturated = timeouts > 0 || s.in_flight.max >= n as u64;
        let sev = if saturated {
            Severity::Warn
        } else {
            Severity::Info
        };
        let mut f = Finding::new(
            Id::GenClosedLoop,
            sev,
            format!(
                "closed loop: never more than {n} requests in flight, so overload can only show \
                 as latency"
            ),
        )
        .with("concurrency", n as u64)
        .with("in_flight_max", s.in_flight.max)
        .with("timeouts", timeouts);
        if let (Some(lat), Some(svc)) = (&s.latency_2xx, &s.service_time_2xx) {
            f = f
                .with("latency_2xx_p99_us", lat.p99_us)
                .with("service_time_2xx_p99_us", svc.p99_us);
        }
        return Some(
            f.predict(
                "the workers slowed down with the server: what the server does when handed more \
                 work than it can finish (shed, queue, wedge, die) is not in this run",
            )
            .remedy(format!(
                "rerun open loop: trapdetect load --url {} --rate R --timeout 10s (R above the \
                 delivered {:.0}/s)",
                crate::escape::shell(&s.plan.url),
                s.delivered_rate_per_s
            )),
        );
    }
    // With the budget full, arrivals queue and are dropped after max_wait: in flight then
    // stays near budget + rate × max_wait, by design.
    let queued_cap = s.connections.budget as f64 + s.plan.rate_per_s? * s.queue.max_wait_s;
    let expected = s
        .in_flight
        .rate_x_timeout?
        .min(s.scheduled as f64)
        .min(queued_cap);
    if s.scheduled == 0 || (timeouts as f64) < 0.01 * s.scheduled as f64 {
        return None;
    }
    if (s.in_flight.max as f64) >= CLOSED_LOOP_SHARE * expected {
        return None;
    }
    Some(
        Finding::new(
            Id::GenClosedLoop,
            Severity::Warn,
            "in-flight stayed far below rate × timeout while the server stopped answering: the \
             generator throttled itself",
        )
        .with("in_flight_max", s.in_flight.max)
        .with("rate_x_timeout", s.in_flight.rate_x_timeout.unwrap_or(0.0))
        .with("timeouts", timeouts)
        .with("fd_limit", s.fd_limit.soft)
        .predict(
            "an open-loop flood into a server that stops answering holds rate × timeout \
             requests; far fewer means arrivals waited for the generator",
        )
        .remedy("check gen.lag and net.fd-limit; give the generator more CPU or descriptors"),
    )
}

/// Arrivals that were sent (not dropped for want of a connection).
fn sent(s: &Summary) -> u64 {
    s.scheduled.saturating_sub(s.dropped)
}

/// Above the server's capacity: every connection of the budget busy, arrivals queued or
/// dropped. The delivered rate is then the server's ceiling, and that is the result.
fn ceiling(s: &Summary) -> Option<Finding> {
    if s.scheduled == 0 || s.plan.concurrency.is_some() {
        return None;
    }
    let waited_share = s.queue.waited as f64 / s.scheduled as f64;
    if s.dropped == 0 && waited_share < CEILING_WAITED {
        return None;
    }
    let mut f = Finding::new(
        Id::LoadCeiling,
        Severity::Warn,
        format!(
            "the server's ceiling: {:.0}/s delivered (2xx inside the window) of {:.0}/s offered",
            s.delivered_rate_per_s, s.offered_rate_per_s
        ),
    )
    .with("offered_per_s", s.offered_rate_per_s)
    .with("delivered_2xx_per_s", s.delivered_rate_per_s)
    .with(
        "delivered_pct",
        round(
            100.0 * s.delivered_rate_per_s / s.offered_rate_per_s.max(1e-9),
            1,
        ),
    )
    .with("max_connections", s.connections.budget)
    .with("busy_max", s.connections.busy_max)
    .with("waited", s.queue.waited)
    .with("dropped", s.dropped)
    .with("max_wait_s", s.queue.max_wait_s);
    if let Some(w) = &s.queue.wait {
        f = f
            .with("queue_wait_p50_us", w.p50_us)
            .with("queue_wait_p99_us", w.p99_us);
    }
    if let Some(l) = &s.latency_2xx {
        f = f.with("latency_2xx_p99_us", l.p99_us);
    }
    Some(
        f.with("drain_ok_2xx", s.drain.ok_2xx)
            .predict(format!(
                "all {} connections were busy: arrivals beyond what the server answers waited \
                 for one (the wait is inside their latency, from the intended instant) and {} \
                 were dropped after {}s; more offered load only lengthens the queue",
                s.connections.budget, s.dropped, s.queue.max_wait_s
            ))
            .remedy(
                "read delivered_2xx_per_s as the server's capacity with this many connections; \
                 if the server accepts more (worker_connections, pool sizes), raise \
                 --max-connections to see whether it was concurrency-bound; for latency under \
                 load, offer less than the ceiling",
            ),
    )
}

/// Arrivals that were sent but got no status, above `--max-errors`.
fn errors(s: &Summary) -> Option<Finding> {
    let sent = sent(s);
    if sent == 0 || s.errors_total == 0 {
        return None;
    }
    let pct = 100.0 * s.errors_total as f64 / sent as f64;
    if pct <= s.plan.max_errors_pct {
        return None;
    }
    let mut f = Finding::new(
        Id::LoadErrors,
        Severity::Fail,
        format!(
            "{:.2}% of the sent arrivals got no answer (above --max-errors {}%)",
            pct, s.plan.max_errors_pct
        ),
    )
    .with("sent", sent)
    .with("errors_total", s.errors_total)
    .with("errors_pct", round(pct, 2))
    .with("max_errors_pct", s.plan.max_errors_pct)
    .with(
        "overload_errors",
        ErrorKind::ALL
            .iter()
            .filter(|k| k.of_an_overload())
            .map(|k| s.errors.get(*k))
            .sum::<u64>(),
    );
    for k in ErrorKind::ALL {
        let n = s.errors.get(k);
        if n > 0 {
            f = f.with(k.name(), n);
        }
    }
    Some(
        f.predict(
            "errors are not throughput and not latency: these arrivals are in neither figure, \
             so the run describes the server's failure, not its performance",
        )
        .remedy(
            "see load.refusal and load.status-mix for who closed what; raise --max-errors only \
             if failures are the point of the run",
        ),
    )
}

/// EOFs and resets on fresh connections before any response byte: the server refused.
fn refusal(s: &Summary) -> Option<Finding> {
    let n = s.connections.refused_fresh;
    let sent = sent(s);
    if n == 0 || (n as f64) < STATUS_MIX_WARN * sent as f64 {
        return None;
    }
    let mut f = Finding::new(
        Id::LoadRefusal,
        Severity::Warn,
        format!(
            "the server refused connections: {n} fresh connections were closed or reset before \
             any answer"
        ),
    )
    .with("refused", n)
    .with("eof", s.errors.eof)
    .with("conn_reset", s.errors.conn_reset)
    .with("connections_opened", s.connections.opened)
    .with("max_connections", s.connections.budget);
    let mut why = "the server closes connections it will not serve (nginx beyond \
                   worker_connections, a process at its connection limit)"
        .to_string();
    if let Some(l) = &s.listen {
        f = f
            .with("listen_overflows", l.overflows)
            .with("listen_drops", l.drops);
        if l.overflows > 0 {
            why.push_str(&format!(
                "; the accept queue overflowed {} times (ListenOverflows, this namespace)",
                l.overflows
            ));
        }
    }
    Some(
        f.predict(format!(
            "{why}: the server's refusal, not a generator failure and not a timeout"
        ))
        .remedy(format!(
            "keep --max-connections (now {}) below the server's connection limit, or raise that \
             limit (worker_connections, listen backlog, somaxconn)",
            s.connections.budget
        )),
    )
}

fn status_mix(s: &Summary) -> Option<Finding> {
    let sent = sent(s);
    if sent == 0 {
        return None;
    }
    let failed = sent.saturating_sub(s.ok_2xx);
    let share = failed as f64 / sent as f64;
    if share < STATUS_MIX_WARN {
        return None;
    }
    let success = s.ok_2xx as f64 / sent as f64;
    let sev = if s.ok_2xx == 0 || success < STATUS_MIX_FAIL {
        Severity::Fail
    } else {
        Severity::Warn
    };
    let ev = status_mix_evidence(s, sent, success);
    let says = status_mix_says(s);
    let mut f = Finding::new(
        Id::LoadStatusMix,
        sev,
        format!(
            "only {:.2}% of the sent arrivals succeeded (2xx): trust the status mix, not the \
             request rate",
            success * 100.0
        ),
    );
    f.evidence = ev;
    Some(
        f.predict(if says.is_empty() {
            "non-2xx answers are not throughput".to_string()
        } else {
            says.join("; ")
        })
        .remedy(
            "count only 2xx as throughput (delivered_rate_per_s) and read the per-second \
             series for the shape (stable shedding vs a death spiral)",
        ),
    )
}

/// load.status-mix's evidence: what was sent, the 2xx, each other status and error kind, the rates.
fn status_mix_evidence(s: &Summary, sent: u64, success: f64) -> Map<String, Value> {
    let mut ev = Map::new();
    ev.insert("sent".into(), sent.into());
    ev.insert("ok_2xx".into(), s.ok_2xx.into());
    ev.insert("success_pct".into(), Value::from(round(success * 100.0, 2)));
    for (code, n) in &s.status {
        if !code.starts_with('2') {
            ev.insert(format!("status_{code}"), (*n).into());
        }
    }
    for k in ErrorKind::ALL {
        let n = s.errors.get(k);
        if n > 0 {
            ev.insert(k.name().into(), n.into());
        }
    }
    ev.insert(
        "delivered_2xx_per_s".into(),
        Value::from(s.delivered_rate_per_s),
    );
    ev.insert("answered_per_s".into(), Value::from(s.answered_rate_per_s));
    if let Some(l) = &s.latency_non_2xx {
        ev.insert("non_2xx_p50_us".into(), Value::from(l.p50_us));
    }
    ev
}

/// What each kind of failure says about the server, in load.status-mix's prediction.
fn status_mix_says(s: &Summary) -> Vec<String> {
    let mut says = vec![];
    let count = |prefix: char| {
        s.status
            .iter()
            .filter(|(c, _)| c.starts_with(prefix))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let n503 = s.status.get("503").copied().unwrap_or(0);
    let n429 = s.status.get("429").copied().unwrap_or(0);
    if n503 > 0 {
        let fast = s
            .latency_non_2xx
            .as_ref()
            .map(|l| format!(" (non-2xx p50 {:.1} ms)", l.p50_us / 1e3))
            .unwrap_or_default();
        says.push(format!(
            "{n503} × 503: the server said no{fast}, it stayed in control"
        ));
    }
    if n429 > 0 {
        says.push(format!(
            "{n429} × 429: a rate limit; per-client-IP limits turn a single-IP generator's excess \
             into 429s"
        ));
    }
    let other5 = count('5') - n503;
    if other5 > 0 {
        says.push(format!("{other5} other 5xx: server errors, not shedding"));
    }
    if count('3') > 0 {
        says.push(format!(
            "{} × 3xx: redirects are not followed and are not successes",
            count('3')
        ));
    }
    if s.errors.timeout > 0 {
        says.push(format!(
            "{} timeouts: the server said nothing",
            s.errors.timeout
        ));
    }
    if s.errors.conn_refused > 0 {
        let mid_run = refused_after_success(s);
        says.push(match mid_run {
            Some(t) => format!(
                "{} refused from t={t}s after serving: the process is probably gone",
                s.errors.conn_refused
            ),
            None => format!("{} refused: nothing listening", s.errors.conn_refused),
        });
    }
    if s.errors.tls > 0 {
        says.push(format!(
            "{} TLS handshakes failed: the certificate is not trusted (--cacert FILE, or \
             --insecure for a self-signed server) or the server refused the protocol asked for",
            s.errors.tls
        ));
    }
    let reset_eof = s.errors.conn_reset + s.errors.eof;
    let refused = s.connections.refused_fresh.min(reset_eof);
    if refused > 0 {
        says.push(format!(
            "{refused} reset/eof on fresh connections before any answer: the server refused them"
        ));
    }
    if reset_eof > refused {
        says.push(format!(
            "{} reset/eof: connections died mid-request",
            reset_eof - refused
        ));
    }
    says
}

/// First second with a refused connection after a second with a 2xx: the server was up, then
/// stopped accepting.
fn refused_after_success(s: &Summary) -> Option<u64> {
    let first_ok = s.series.iter().find(|p| p.ok_2xx > 0)?.t_s;
    s.series
        .iter()
        .find(|p| p.t_s >= first_ok && p.errors.conn_refused > 0)
        .map(|p| p.t_s)
}

fn fd_limit(s: &Summary, plan: &Plan) -> Option<Finding> {
    let usable = s.fd_limit.soft.saturating_sub(super::FD_RESERVE);
    // Sockets the run can hold: one per outstanding request, but never more than the connection
    // budget (arrivals beyond it queue without a socket, and `start` refuses a budget above the
    // usable descriptors). rate × timeout alone warned on every run at 2,000/s with the default
    // 10 s timeout, where 512 sockets were the most it could ever open.
    let need = s
        .in_flight
        .rate_x_timeout
        .map(|n| n.min(s.connections.budget as f64));
    let errors = s.errors.fd_limit;
    let short = need.is_some_and(|n| n > usable as f64);
    if errors == 0 && !short {
        return None;
    }
    let sev = Severity::Warn;
    let title = if errors > 0 {
        "the generator ran out of file descriptors: those requests were never sent".to_string()
    } else {
        format!(
            "rate × timeout, up to the connection budget ({}), exceeds the generator's usable \
             file descriptors ({} of its limit {}, {} kept for itself)",
            need.map_or(0, |n| n.round() as u64),
            usable,
            s.fd_limit.soft,
            super::FD_RESERVE
        )
    };
    Some(
        Finding::new(Id::NetFdLimit, sev, title)
            .with("fd_limit_soft", s.fd_limit.soft)
            .with("fd_limit_hard", s.fd_limit.hard)
            .with_opt(
                "rate_x_timeout",
                s.in_flight.rate_x_timeout.map(|n| round(n, 1)),
            )
            .with("connection_budget", s.connections.budget)
            .with("in_flight_max", s.in_flight.max)
            .with("fd_limit_errors", errors)
            .with("fd_reserved", super::FD_RESERVE)
            .predict(
                "if the server stops answering, the flood needs one socket per outstanding \
                 request up to the connection budget; beyond the limit the generator fails \
                 requests itself",
            )
            .remedy(format!(
                "raise the hard limit (prlimit --nofile={0}:{0} -- trapdetect load ..., or \
                 LimitNOFILE= in the unit) or lower --timeout (now {1}s)",
                need.map_or(65_536, |n| (n as u64 + super::FD_RESERVE)
                    .next_power_of_two()),
                plan.timeout.as_secs_f64()
            )),
    )
}

fn ports(s: &Summary) -> Option<Finding> {
    let n = s.errors.ports_exhausted;
    (n > 0).then(|| {
        Finding::new(
            Id::NetEphemeralPorts,
            Severity::Warn,
            "the generator ran out of ephemeral ports (EADDRNOTAVAIL)",
        )
        .with("ports_exhausted", n)
        .with("connections_opened", s.connections.opened)
        .with("keepalive", s.plan.keepalive)
        .predict("connect() fails once every local port to this address is in use or TIME_WAIT")
        .remedy(
            "use keep-alive (drop --no-keepalive), wait for TIME_WAIT to drain between runs \
             (trapdetect wait-drain), or widen net.ipv4.ip_local_port_range in a namespace",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::summary::*;
    use std::time::Duration;

    fn summary(scheduled: u64) -> (Summary, Plan) {
        let plan = Plan::new("http://127.0.0.1:8080/", 100.0, Duration::from_secs(10)).unwrap();
        let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let rec = crate::load::stats::Recorder::new(0);
        let mut s = build(
            &rec,
            Totals {
                plan: plan.echo(addr),
                scheduled,
                unsent: 0,
                warmup_scheduled: 0,
                window_ns: 10_000_000_000,
                window_end_ns: 10_000_000_000,
                stopped_early: false,
                start_unix_s: None,
                clock: None,
                in_flight_max: 3,
                rate_x_timeout: Some(1000.0),
                fd_limit: FdLimit {
                    soft_before: 1024,
                    soft: 20_000,
                    hard: 20_000,
                },
                opened: 3,
                stale_retries: 0,
                busy_max: 3,
                paced: 0,
                listen: None,
                generator: Default::default(),
            },
        );
        s.ok_2xx = scheduled;
        s.success_ratio = 1.0;
        s.sched_lag = Some(Percentiles {
            count: scheduled,
            mean_us: 20.0,
            p50_us: 15.0,
            p90_us: 30.0,
            p99_us: 60.0,
            p99_9_us: 200.0,
            max_us: 900.0,
        });
        (s, plan)
    }

    fn ids(s: &Summary, p: &Plan) -> Vec<(String, Severity)> {
        findings(s, p)
            .into_iter()
            .map(|f| (f.id.to_string(), f.severity))
            .collect()
    }

    #[test]
    fn a_healthy_run_has_no_findings() {
        let (s, p) = summary(1000);
        assert!(ids(&s, &p).is_empty());
        assert!(problems(&s, &p).is_empty());
    }

    #[test]
    fn lag_beyond_budget_is_untrusted() {
        let (mut s, p) = summary(1000);
        s.sched_lag.as_mut().unwrap().p99_us = 25_000.0;
        assert_eq!(ids(&s, &p), [("gen.lag".to_string(), Severity::Warn)]);
        assert_eq!(problems(&s, &p).len(), 1);
        let (mut s, p) = summary(1000);
        s.sched_lag.as_mut().unwrap().max_us = 50_000.0;
        assert_eq!(ids(&s, &p), [("gen.lag".to_string(), Severity::Info)]);
        assert!(problems(&s, &p).is_empty());
        let (mut s, p) = summary(1000);
        s.unsent = 5;
        assert_eq!(problems(&s, &p).len(), 1);
    }

    #[test]
    fn shedding_is_a_warning_and_silence_a_failure() {
        let (mut s, p) = summary(1000);
        s.ok_2xx = 700;
        s.success_ratio = 0.7;
        s.status = [("200".to_string(), 700), ("503".to_string(), 300)].into();
        let f = findings(&s, &p);
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].id.as_str(), f[0].severity),
            ("load.status-mix", Severity::Warn)
        );
        assert_eq!(f[0].evidence["status_503"], 300);
        assert!(f[0].predicted.as_ref().unwrap().contains("said no"));

        let (mut s, p) = summary(1000);
        s.ok_2xx = 0;
        s.success_ratio = 0.0;
        s.errors.timeout = 1000;
        s.in_flight.max = 1000;
        s.errors_total = 1000;
        let f = findings(&s, &p);
        assert_eq!(
            ids(&s, &p),
            [
                ("load.errors".to_string(), Severity::Fail),
                ("load.status-mix".to_string(), Severity::Fail)
            ]
        );
        assert!(f[1].predicted.as_ref().unwrap().contains("said nothing"));
    }

    #[test]
    fn errors_above_the_threshold_fail_below_it_do_not() {
        let (mut s, p) = summary(1000);
        s.ok_2xx = 985;
        s.success_ratio = 0.985;
        s.errors.conn_reset = 15;
        s.errors_total = 15;
        // 1.5 % > 1 %: load.errors fails, the mix warns.
        let got = ids(&s, &p);
        assert!(
            got.contains(&("load.errors".to_string(), Severity::Fail)),
            "{got:?}"
        );
        // Resets, timeouts and closes are an overload's; a refusal is not.
        s.errors.timeout = 4;
        s.errors.conn_refused = 2;
        s.errors_total = 21;
        let f = findings(&s, &p);
        let e = &f.iter().find(|f| f.id == "load.errors").unwrap().evidence;
        assert_eq!(e["errors_total"], 21);
        assert_eq!(e["overload_errors"], 19);
        assert_eq!(e["conn_refused"], 2);
        s.errors.timeout = 0;
        s.errors.conn_refused = 0;
        s.errors_total = 15;
        s.plan.max_errors_pct = 2.0;
        let got = ids(&s, &p);
        assert!(!got.iter().any(|(id, _)| id == "load.errors"), "{got:?}");
        // Errors count against the arrivals sent, not the dropped ones.
        s.plan.max_errors_pct = 1.0;
        s.scheduled = 3000;
        s.dropped = 2000;
        assert!(ids(&s, &p).contains(&("load.errors".to_string(), Severity::Fail)));
    }

    #[test]
    fn queueing_and_drops_state_the_ceiling_not_a_generator_problem() {
        let (mut s, p) = summary(2000);
        s.offered_rate_per_s = 200.0;
        s.delivered_rate_per_s = 100.0;
        s.ok_2xx = 1000;
        s.dropped = 1000;
        s.queue.waited = 1200;
        s.queue.dropped = 1000;
        s.success_ratio = 0.5;
        let f = findings(&s, &p);
        assert_eq!(
            f.iter()
                .map(|f| (f.id.as_str(), f.severity))
                .collect::<Vec<_>>(),
            [("load.ceiling", Severity::Warn)]
        );
        assert!(f[0].title.contains("100/s delivered"), "{}", f[0].title);
        assert_eq!(f[0].evidence["dropped"], 1000);
        // Waiting alone (1 % of arrivals or more) is the ceiling too; less is not.
        s.dropped = 0;
        s.queue.dropped = 0;
        s.ok_2xx = 2000;
        s.queue.waited = 20;
        assert_eq!(ids(&s, &p), [("load.ceiling".to_string(), Severity::Warn)]);
        s.queue.waited = 19;
        assert!(ids(&s, &p).is_empty());
    }

    #[test]
    fn fresh_connections_closed_unanswered_are_the_servers_refusal() {
        let (mut s, p) = summary(1000);
        s.ok_2xx = 900;
        s.errors.eof = 100;
        s.errors_total = 100;
        s.connections.refused_fresh = 100;
        s.listen = Some(crate::load::Listen {
            overflows: 7,
            drops: 7,
        });
        let f = findings(&s, &p);
        let r = f
            .iter()
            .find(|f| f.id == "load.refusal")
            .expect("load.refusal");
        assert_eq!(r.evidence["listen_overflows"], 7);
        assert!(
            r.predicted
                .as_ref()
                .unwrap()
                .contains("accept queue overflowed 7")
        );
        let m = f.iter().find(|f| f.id == "load.status-mix").unwrap();
        assert!(
            m.predicted
                .as_ref()
                .unwrap()
                .contains("the server refused them")
        );
    }

    #[test]
    fn throttled_generator_is_closed_loop() {
        let (mut s, p) = summary(1000);
        s.ok_2xx = 500;
        s.success_ratio = 0.5;
        s.errors.timeout = 500;
        s.in_flight.max = 100; // rate × timeout = 1000
        let got = ids(&s, &p);
        assert!(
            got.contains(&("gen.closed-loop".to_string(), Severity::Warn)),
            "{got:?}"
        );
        s.in_flight.max = 990;
        let got = ids(&s, &p);
        assert!(
            !got.iter().any(|(id, _)| id == "gen.closed-loop"),
            "{got:?}"
        );
        // A closed-loop run always says so.
        let (mut s, p) = summary(1000);
        s.plan.concurrency = Some(4);
        s.in_flight.rate_x_timeout = None;
        assert_eq!(
            ids(&s, &p),
            [("gen.closed-loop".to_string(), Severity::Info)]
        );
        s.in_flight.max = 4;
        assert_eq!(
            ids(&s, &p),
            [("gen.closed-loop".to_string(), Severity::Warn)]
        );
    }

    #[test]
    fn descriptors_and_ports() {
        let (mut s, p) = summary(1000);
        s.in_flight.rate_x_timeout = Some(50_000.0);
        // 512 connections at most: however many arrivals are outstanding, the sockets fit.
        s.connections.budget = 512;
        assert_eq!(ids(&s, &p), []);
        // A budget above the usable descriptors (a limit lowered under a running generator).
        s.connections.budget = 30_000;
        assert_eq!(ids(&s, &p), [("net.fd-limit".to_string(), Severity::Warn)]);
        assert!(problems(&s, &p).is_empty(), "a risk, not yet a failure");
        s.errors.fd_limit = 7;
        assert_eq!(problems(&s, &p).len(), 1);
        let (mut s, p) = summary(1000);
        s.errors.ports_exhausted = 2;
        s.errors_total = 2;
        s.ok_2xx = 998;
        s.success_ratio = 0.998;
        assert_eq!(
            ids(&s, &p),
            [("net.ephemeral-ports".to_string(), Severity::Warn)]
        );
        assert_eq!(problems(&s, &p).len(), 1);
    }

    #[test]
    fn a_stop_before_the_planned_end_is_stated_with_both_lengths() {
        let (mut s, _) = summary(100);
        s.window.stopped_early = true;
        s.window.measured_s = 9.996;
        let text = crate::load::render_text(&s);
        assert!(
            text.contains("stopped before the planned end: 9.996 s measured of 10 s planned"),
            "{text}"
        );
        s.window.stopped_early = false;
        assert!(!crate::load::render_text(&s).contains("planned end"));
    }

    /// load.status-mix with every kind of failure it names, and with none it can name, pinned
    /// whole.
    #[test]
    fn status_mix_findings_are_pinned() {
        let (mut s, _) = summary(1000);
        s.ok_2xx = 600;
        s.delivered_rate_per_s = 60.0;
        s.answered_rate_per_s = 78.5;
        s.status = [
            ("200".to_string(), 600),
            ("204".to_string(), 0),
            ("301".to_string(), 5),
            ("429".to_string(), 50),
            ("500".to_string(), 20),
            ("502".to_string(), 10),
            ("503".to_string(), 100),
        ]
        .into();
        s.errors.timeout = 60;
        s.errors.conn_refused = 40;
        s.errors.tls = 5;
        s.errors.conn_reset = 30;
        s.errors.eof = 10;
        s.connections.refused_fresh = 25;
        s.latency_non_2xx = Some(Percentiles {
            count: 185,
            mean_us: 900.0,
            p50_us: 850.0,
            p90_us: 1200.0,
            p99_us: 3000.0,
            p99_9_us: 4000.0,
            max_us: 5000.0,
        });
        let mut all = vec![];
        all.extend(status_mix(&s));
        // Refused after serving: the process is probably gone.
        s.series = (0..3)
            .map(|t| Point {
                t_s: t,
                scheduled: 333,
                ok_2xx: if t == 0 { 600 } else { 0 },
                non_2xx: 0,
                errors: Errors {
                    conn_refused: if t == 2 { 40 } else { 0 },
                    ..Default::default()
                },
                lat_2xx_mean_us: None,
                lat_2xx_p99_us: None,
                in_flight_max: 0,
                sched_lag_max_us: 0.0,
                dropped: 0,
                warmup_ok_2xx: 0,
                lat_2xx_hist_ns: None,
            })
            .collect();
        s.latency_non_2xx = None;
        s.ok_2xx = 400;
        all.extend(status_mix(&s));
        // Nothing it can name, and no success at all.
        let (mut s, _) = summary(1000);
        s.ok_2xx = 0;
        s.dropped = 200;
        all.extend(status_mix(&s));
        crate::traps::assert_pinned(
            &all,
            &[
                r##"{"id":"load.status-mix","severity":"warn","title":"only 60.00% of the sent arrivals succeeded (2xx): trust the status mix, not the request rate","evidence":{"sent":1000,"ok_2xx":600,"success_pct":60.0,"status_301":5,"status_429":50,"status_500":20,"status_502":10,"status_503":100,"timeout":60,"conn_refused":40,"conn_reset":30,"eof":10,"tls":5,"delivered_2xx_per_s":60.0,"answered_per_s":78.5,"non_2xx_p50_us":850.0},"predicted":"100 × 503: the server said no (non-2xx p50 0.8 ms), it stayed in control; 50 × 429: a rate limit; per-client-IP limits turn a single-IP generator's excess into 429s; 30 other 5xx: server errors, not shedding; 5 × 3xx: redirects are not followed and are not successes; 60 timeouts: the server said nothing; 40 refused: nothing listening; 5 TLS handshakes failed: the certificate is not trusted (--cacert FILE, or --insecure for a self-signed server) or the server refused the protocol asked for; 25 reset/eof on fresh connections before any answer: the server refused them; 15 reset/eof: connections died mid-request","remedy":"count only 2xx as throughput (delivered_rate_per_s) and read the per-second series for the shape (stable shedding vs a death spiral)"}"##,
                r##"{"id":"load.status-mix","severity":"fail","title":"only 40.00% of the sent arrivals succeeded (2xx): trust the status mix, not the request rate","evidence":{"sent":1000,"ok_2xx":400,"success_pct":40.0,"status_301":5,"status_429":50,"status_500":20,"status_502":10,"status_503":100,"timeout":60,"conn_refused":40,"conn_reset":30,"eof":10,"tls":5,"delivered_2xx_per_s":60.0,"answered_per_s":78.5},"predicted":"100 × 503: the server said no, it stayed in control; 50 × 429: a rate limit; per-client-IP limits turn a single-IP generator's excess into 429s; 30 other 5xx: server errors, not shedding; 5 × 3xx: redirects are not followed and are not successes; 60 timeouts: the server said nothing; 40 refused from t=2s after serving: the process is probably gone; 5 TLS handshakes failed: the certificate is not trusted (--cacert FILE, or --insecure for a self-signed server) or the server refused the protocol asked for; 25 reset/eof on fresh connections before any answer: the server refused them; 15 reset/eof: connections died mid-request","remedy":"count only 2xx as throughput (delivered_rate_per_s) and read the per-second series for the shape (stable shedding vs a death spiral)"}"##,
                r##"{"id":"load.status-mix","severity":"fail","title":"only 0.00% of the sent arrivals succeeded (2xx): trust the status mix, not the request rate","evidence":{"sent":800,"ok_2xx":0,"success_pct":0.0,"delivered_2xx_per_s":0.0,"answered_per_s":0.0},"predicted":"non-2xx answers are not throughput","remedy":"count only 2xx as throughput (delivered_rate_per_s) and read the per-second series for the shape (stable shedding vs a death spiral)"}"##,
            ],
        );
    }
}
