//! The `network` section: the census of a namespace and, after a trace, its traced half, as
//! text (JSON is the observation itself). Gathered by `host::net`, judged by `traps::net`.

use std::fmt::Write as _;

use serde_json::Value;

use super::section::{Section, to_json};
use crate::{
    figures::fmt_count,
    host::net::{NetObservation, NetTraced, TcpEvents},
};

impl Section for NetObservation {
    fn name(&self) -> &'static str {
        "network"
    }

    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }

    fn text(&self) -> String {
        let mut text = census_text(self);
        if let Some(t) = &self.traced {
            text.push_str(&traced_text(t));
        }
        text
    }
}

/// Text rendering of the observation for the report's `network` section.
fn census_text(o: &NetObservation) -> String {
    let mut out = String::new();
    for part in [
        sockets_text,
        time_wait_text,
        ephemeral_text,
        listeners_text,
        tcp_ext_text,
        limits_text,
    ] {
        part(&mut out, o);
    }
    for n in &o.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

/// The namespace and its TCP sockets by state.
fn sockets_text(out: &mut String, o: &NetObservation) {
    let _ = writeln!(
        out,
        "  netns {}, read with {}, census {:.1} ms",
        o.netns, o.source, o.census_ms
    );
    let states: Vec<String> = o
        .sockets
        .iter()
        .map(|(k, v)| format!("{k} {}", fmt_count(*v)))
        .collect();
    let _ = writeln!(
        out,
        "  TCP sockets {}: {}",
        fmt_count(o.sockets_total),
        if states.is_empty() {
            "-".into()
        } else {
            states.join(", ")
        }
    );
}

/// TIME_WAIT: who closed first, by local port and by flow group.
fn time_wait_text(out: &mut String, o: &NetObservation) {
    let tw = &o.time_wait;
    if tw.count > 0 {
        let _ = writeln!(
            out,
            "  TIME_WAIT {}: closed first by server {}, client {}, unknown {}; all drained in {:.1} s (timers)",
            fmt_count(tw.count),
            fmt_count(tw.closed_first.server),
            fmt_count(tw.closed_first.client),
            fmt_count(tw.closed_first.unknown),
            tw.drain_all_ms.unwrap_or(0) as f64 / 1000.0
        );
        let ports: Vec<String> = tw
            .by_local_port
            .iter()
            .map(|p| format!("{} {}", p.port, fmt_count(p.count)))
            .collect();
        let _ = writeln!(
            out,
            "    by local port ({} port{}): {}",
            tw.local_ports_total,
            if tw.local_ports_total == 1 { "" } else { "s" },
            ports.join(", ")
        );
        for g in &tw.groups {
            let _ = writeln!(
                out,
                "    {} -> {}:{}  {}  (closed first: {})",
                g.client,
                g.server,
                g.server_port,
                fmt_count(g.count),
                g.closed_first.label()
            );
        }
        if tw.groups_total > tw.groups.len() {
            let _ = writeln!(out, "    ... {} flow groups in all", tw.groups_total);
        }
    } else {
        let _ = writeln!(out, "  TIME_WAIT 0");
    }
}

/// The ephemeral port range and its use per flow group.
fn ephemeral_text(out: &mut String, o: &NetObservation) {
    if let Some(e) = &o.ephemeral {
        let _ = writeln!(
            out,
            "  ephemeral ports {}-{}: {} usable ({} reserved); {} held by local sockets, {} client flow group{}{}",
            e.range[0],
            e.range[1],
            fmt_count(e.usable as u64),
            e.reserved_in_range,
            fmt_count(e.distinct_ports_in_range as u64),
            e.groups_total,
            if e.groups_total == 1 { "" } else { "s" },
            if e.groups_total == 0 && e.distinct_ports_in_range > 0 {
                " (no side known: neither port listens here and both are ephemeral)"
            } else {
                ""
            }
        );
        for g in &e.groups {
            let _ = writeln!(
                out,
                "    {} -> {}:{}  used {} (TIME_WAIT {}), headroom {}",
                g.client,
                g.server,
                g.server_port,
                fmt_count(g.ports_used),
                fmt_count(g.time_wait),
                fmt_count(g.headroom)
            );
        }
    } else {
        let _ = writeln!(out, "  ephemeral ports: range unknown");
    }
}

/// Listeners and their accept queues.
fn listeners_text(out: &mut String, o: &NetObservation) {
    if o.listeners.is_empty() && o.listeners_total > 0 {
        // Only the target's listeners and the ports asked about are listed.
        let _ = writeln!(
            out,
            "  listeners ({} in the namespace): none is the target's or on a port asked about",
            o.listeners_total
        );
        return;
    }
    let _ = writeln!(out, "  listeners ({} in the namespace):", o.listeners_total);
    for l in &o.listeners {
        let _ = writeln!(
            out,
            "    {}{}  accept queue {} / backlog {}",
            l.local,
            if l.target { " (target)" } else { "" },
            l.accept_queue,
            l.backlog.map_or("?".into(), |b| b.to_string())
        );
    }
}

/// TcpExt counters (over the window, or since the namespace started).
fn tcp_ext_text(out: &mut String, o: &NetObservation) {
    if let Some(d) = &o.tcp_ext_delta {
        let c: Vec<String> = d
            .counters
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} +{}", fmt_count(*v)))
            .collect();
        let _ = writeln!(
            out,
            "  TcpExt over {:.1} s: {}{}",
            d.window_s,
            if c.is_empty() {
                "no increments".into()
            } else {
                c.join(", ")
            },
            if d.reset {
                " (counters reset: namespace recreated?)"
            } else {
                ""
            }
        );
    } else if let Some(t) = &o.tcp_ext {
        let c: Vec<String> = [
            "ListenOverflows",
            "ListenDrops",
            "SyncookiesSent",
            "TCPTimeWaitOverflow",
        ]
        .iter()
        .map(|k| format!("{k} {}", t.counters.get(*k).copied().unwrap_or(0)))
        .collect();
        let _ = writeln!(
            out,
            "  TcpExt since the namespace started: {}",
            c.join(", ")
        );
    }
}

/// Descriptor limits, the planned run, the TCP sysctls.
fn limits_text(out: &mut String, o: &NetObservation) {
    for f in &o.fds {
        let lim = |v: Option<u64>| v.map_or("unlimited".into(), fmt_count);
        let _ = writeln!(
            out,
            "  descriptors of {} pid {} ({}): {} open, soft limit {}, hard {}",
            f.role,
            f.pid,
            f.comm,
            f.open_fds.map_or("?".into(), fmt_count),
            lim(f.soft_limit),
            lim(f.hard_limit)
        );
    }
    if let Some(p) = &o.plan {
        let _ = writeln!(
            out,
            "  planned run: {} /s x {} s = {} connections in flight",
            p.rate_per_s,
            p.timeout_s,
            fmt_count(p.in_flight)
        );
    }
    let s = &o.sysctls;
    let v = |x: Option<u64>| x.map_or("?".into(), |v| v.to_string());
    let _ = writeln!(
        out,
        "  sysctls ({}): tcp_tw_reuse {}, tcp_fin_timeout {} s, tcp_max_tw_buckets {}, somaxconn {}, tcp_syncookies {}",
        s.read_from,
        v(s.tcp_tw_reuse),
        v(s.tcp_fin_timeout_s),
        v(s.tcp_max_tw_buckets),
        v(s.somaxconn),
        v(s.tcp_syncookies)
    );
}

fn series(v: &[u64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let shown: Vec<String> = v.iter().take(60).map(|n| n.to_string()).collect();
    let more = if v.len() > 60 {
        format!(" ... ({} entries)", v.len())
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(" "))
}

fn events(e: &TcpEvents) -> String {
    format!(
        "TIME_WAIT entered {}, opened {} active / {} passive, connect failures {}, aborts {}, closed second {}",
        fmt_count(e.time_wait_entered),
        fmt_count(e.active_opens),
        fmt_count(e.passive_opens),
        fmt_count(e.connect_failures),
        fmt_count(e.aborts),
        fmt_count(e.passive_closes)
    )
}

/// Text rendering of the traced half (appended to the census's text in the `network` section).
fn traced_text(t: &NetTraced) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  traced over {:.1} s, per {} s (sock/inet_sock_set_state; ports {}; {}):",
        t.window_s,
        t.interval_s,
        if t.ports.is_empty() {
            "none (the target listens on no TCP port)".into()
        } else {
            t.ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        },
        if t.netns.is_empty() {
            "every namespace".into()
        } else {
            format!("namespace {}", t.netns.join(", "))
        }
    );
    let _ = writeln!(out, "    on the ports: {}", events(&t.on_ports));
    for p in &t.by_port {
        let _ = writeln!(
            out,
            "    port {} as local port: {}",
            p.port,
            events(&p.local)
        );
        let _ = writeln!(
            out,
            "    port {} as remote port: {}",
            p.port,
            events(&p.remote)
        );
    }
    let _ = writeln!(out, "    whole host:   {}", events(&t.system));
    let _ = writeln!(
        out,
        "    TIME_WAIT entered/s:   {}",
        series(&t.time_wait_entered_per_s)
    );
    let _ = writeln!(
        out,
        "    new connections/s:     {}",
        series(&t.new_connections_per_s)
    );
    let _ = writeln!(
        out,
        "    ListenOverflows/s:     {}   (namespace-wide)",
        series(&t.listen_overflows_per_s)
    );
    let _ = writeln!(
        out,
        "    ListenDrops/s:         {}",
        series(&t.listen_drops_per_s)
    );
    if let Some(m) = t.missed_events.filter(|m| *m > 0) {
        let _ = writeln!(
            out,
            "    {} state changes missed (another BPF program was running on the CPU)",
            fmt_count(m)
        );
    }
    if let Some(c) = &t.connect {
        let who: Vec<String> = c
            .clients
            .iter()
            .map(|w| format!("{} ({})", w.pid, w.comm))
            .collect();
        let _ = writeln!(
            out,
            "  connect() of watched clients {}: {} calls on TCP sockets, {} connected, {} in progress (EINPROGRESS, not an error), {} failed{}",
            who.join(", "),
            fmt_count(c.calls),
            fmt_count(c.succeeded),
            fmt_count(c.in_progress),
            fmt_count(c.failed),
            if c.not_tcp > 0 {
                format!("; {} on other sockets not counted", fmt_count(c.not_tcp))
            } else {
                String::new()
            }
        );
        if !c.errors.is_empty() {
            let e: Vec<String> = c
                .errors
                .iter()
                .map(|(k, v)| format!("{k} {}", fmt_count(*v)))
                .collect();
            let _ = writeln!(out, "    errors: {}", e.join(", "));
        }
        for (label, l) in [
            ("latency", &c.latency),
            ("EINPROGRESS calls", &c.in_progress_latency),
        ] {
            if let Some(l) = l {
                let _ = writeln!(
                    out,
                    "    {label}: mean {} µs, p50 {} µs, p99 {} µs, max {} µs",
                    l.mean_us, l.p50_us, l.p99_us, l.max_us
                );
            }
        }
    }
    if let Some(cn) = &t.client_netns {
        match &cn.ephemeral {
            Some(e) => {
                let _ = writeln!(
                    out,
                    "  clients' namespace ({}), at the end: ephemeral ports {}-{}, {} usable; {} in use across {} flow groups",
                    cn.netns,
                    e.range[0],
                    e.range[1],
                    fmt_count(e.usable as u64),
                    fmt_count(e.distinct_ports_in_range as u64),
                    e.groups_total
                );
                for g in &e.groups {
                    let _ = writeln!(
                        out,
                        "    {} -> {}:{}  used {} (TIME_WAIT {}), headroom {}",
                        g.client,
                        g.server,
                        g.server_port,
                        fmt_count(g.ports_used),
                        fmt_count(g.time_wait),
                        fmt_count(g.headroom)
                    );
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "  clients' namespace ({}): ephemeral range unknown",
                    cn.netns
                );
            }
        }
    }
    out
}
