//! The `network` section: the census of a namespace and, after a trace, its traced half, as
//! text (JSON is the observation itself). Gathered by `host::net`, judged by `traps::net`.

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    chart::{Bars, Marks, Series, Timeline},
    html::{collapsed, figure},
    section::{Section, to_json},
    units::fmt_num,
};
use crate::{
    escape::html as h,
    figures::fmt_count,
    host::net::{
        Listener, NetObservation, NetTraced, PortGroup, TcpEvents,
        traced::{ClientNetns, ConnectTraced},
    },
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

    /// The traced half's per-second charts, the census's bars, then the whole observation,
    /// collapsed.
    fn html(&self, marks: &[Marks]) -> Option<String> {
        let mut o = String::new();
        if let Some(t) = &self.traced {
            traced_html(&mut o, t, marks);
        }
        census_html(&mut o, self);
        if let Ok(v) = to_json(self) {
            collapsed(&mut o, "network", &v);
        }
        Some(o)
    }
}

/// The traced half per second, on the target's ports: new connections and TIME_WAIT entered,
/// listen queue overflows and drops.
fn traced_html(o: &mut String, t: &NetTraced, marks: &[Marks]) {
    let _ = write!(o, "<h2>Network (per second, target's ports)</h2>");
    let lost = t.missed_events.unwrap_or(0);
    if lost > 0 {
        let _ = write!(
            o,
            "<p><b>{lost} TCP events were missed</b>: per-second counts are lower bounds.</p>"
        );
    }
    let col = |v: &[u64]| -> Vec<Option<f64>> { v.iter().map(|&x| Some(x as f64)).collect() };
    let chart = |title: &str, series: [(&str, &[u64]); 2]| Timeline {
        title: title.into(),
        unit: "per second".into(),
        series: series
            .iter()
            .map(|(name, v)| Series {
                name: name.to_string(),
                values: col(v),
            })
            .collect(),
        marks: marks.to_vec(),
        log_y: false,
    };
    let (conns, tw) = (&t.new_connections_per_s, &t.time_wait_entered_per_s);
    if conns.iter().chain(tw).any(|&v| v > 0) {
        figure(
            o,
            chart(
                "New connections and TIME_WAIT entered",
                [("new connections", conns), ("TIME_WAIT entered", tw)],
            )
            .svg(),
        );
    } else if !conns.is_empty() {
        let _ = write!(
            o,
            "<p>No new connection and no socket entering TIME_WAIT in any second (keep-alive).</p>"
        );
    }
    let (ov, dr) = (&t.listen_overflows_per_s, &t.listen_drops_per_s);
    if ov.iter().chain(dr).any(|&v| v > 0) {
        figure(
            o,
            chart(
                "Listen queue overflows and drops",
                [("overflows", ov), ("drops", dr)],
            )
            .svg(),
        );
    } else if !ov.is_empty() {
        let _ = write!(o, "<p>No listen queue overflow or drop in any second.</p>");
    }
}

/// The census (preflight, and a trace's start): listen queues, TIME_WAIT by server, the
/// ephemeral port range.
fn census_html(o: &mut String, n: &NetObservation) {
    // Six bars keep their labels readable: the fullest queues, the largest TIME_WAIT groups.
    let mut listeners: Vec<&Listener> = n.listeners.iter().collect();
    let fill = |l: &Listener| f64::from(l.accept_queue) / f64::from(l.backlog.unwrap_or(1).max(1));
    listeners.sort_by(|a, b| fill(b).total_cmp(&fill(a)));
    listeners.truncate(6);
    let groups: Vec<_> = n.time_wait.groups.iter().take(6).collect();
    let _ = write!(o, "<h2>Network census ({})</h2>", h(&n.netns));
    if !listeners.is_empty() {
        figure(
            o,
            Bars {
                title: "Listen queues: waiting connections vs backlog (fullest 6)".into(),
                unit: "connections".into(),
                categories: listeners.iter().map(|l| l.local.clone()).collect(),
                measures: vec![
                    (
                        "accept queue".into(),
                        listeners
                            .iter()
                            .map(|l| f64::from(l.accept_queue))
                            .collect(),
                    ),
                    (
                        "backlog".into(),
                        listeners
                            .iter()
                            .map(|l| f64::from(l.backlog.unwrap_or(0)))
                            .collect(),
                    ),
                ],
            }
            .svg(),
        );
    }
    if !groups.is_empty() {
        figure(
            o,
            Bars {
                title: "TIME_WAIT sockets by server (largest 6)".into(),
                unit: "sockets".into(),
                categories: groups
                    .iter()
                    .map(|g| format!("{}:{}", g.server, g.server_port))
                    .collect(),
                measures: vec![(
                    "TIME_WAIT".into(),
                    groups.iter().map(|g| g.count as f64).collect(),
                )],
            }
            .svg(),
        );
    }
    if let Some(e) = &n.ephemeral {
        let (used, usable) = (f64::from(e.distinct_ports_in_range), f64::from(e.usable));
        let _ = write!(
            o,
            "<p>Ephemeral ports: {} of {} usable in use ({:.1} %).</p>",
            fmt_num(used),
            fmt_num(usable),
            if usable > 0.0 {
                used / usable * 100.0
            } else {
                0.0
            }
        );
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
            port_group_text(out, g);
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
    traced_scope_text(&mut out, t);
    traced_events_text(&mut out, t);
    if let Some(c) = &t.connect {
        connect_text(&mut out, c);
    }
    if let Some(cn) = &t.client_netns {
        client_netns_text(&mut out, cn);
    }
    out
}

/// What was traced: the window, the watched ports, the namespaces.
fn traced_scope_text(out: &mut String, t: &NetTraced) {
    let _ = writeln!(
        out,
        "  traced over {:.1} s{}, per {} s (sock/inet_sock_set_state; ports {}; {}):",
        t.window_s,
        t.loaded_s
            .map(|l| format!(" (the load ran {l:.1} s of it)"))
            .unwrap_or_default(),
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
}

/// TCP state changes: totals on the ports, per port, for the host; the per-second series;
/// the events the probe missed.
fn traced_events_text(out: &mut String, t: &NetTraced) {
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
}

/// connect() of the watched clients: outcomes, errors, latency.
fn connect_text(out: &mut String, c: &ConnectTraced) {
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

/// The clients' namespace (when not the target's): its ephemeral ports at the end.
fn client_netns_text(out: &mut String, cn: &ClientNetns) {
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
                port_group_text(out, g);
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

/// One flow group's ephemeral ports (census and clients' namespace alike).
fn port_group_text(out: &mut String, g: &PortGroup) {
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn traced(v: Value) -> NetTraced {
        serde_json::from_value(v).unwrap()
    }

    /// A recorded census (loader/fixtures/net): `/proc/net/tcp` and the sysctls.
    fn census(name: &str) -> NetObservation {
        use crate::host::net::procfs;
        let read = |ext: &str| {
            std::fs::read_to_string(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("fixtures/net")
                    .join(format!("{name}.{ext}")),
            )
            .unwrap()
        };
        let (socks, _) = procfs::parse_tcp(&read("tcp"));
        let sys = procfs::sysctls_from(&procfs::parse_sysctl_lines(&read("sysctl")));
        NetObservation::build(&socks, &sys, &[], None)
    }

    /// The network's part of the page, from a recorded census with TIME_WAIT piled up and a
    /// traced half: its charts and bars from the typed observation, shaded at the marks; pins
    /// the HTML.
    #[test]
    fn the_networks_part_of_the_page_is_drawn_from_the_observation() {
        let mut o = census("tw-server-closes");
        assert!(!o.time_wait.groups.is_empty() && !o.listeners.is_empty());
        o.netns = "net:[<1>]".into();
        (o.listeners[0].accept_queue, o.listeners[0].backlog) = (120, Some(128));
        o.traced = Some(traced(json!({
            "window_s": 3.0, "interval_s": 1.0, "ports": [8080], "netns": [],
            "time_wait_entered_per_s": [0, 4, 1], "new_connections_per_s": [1, 5, 0],
            "listen_overflows_per_s": [0, 0, 0], "listen_drops_per_s": [0, 0, 0],
            "on_ports": ev(1), "system": ev(2), "by_port": [], "missed_events": 3
        })));
        let marks = [Marks {
            label: "events lost".into(),
            seconds: vec![1],
        }];
        let part = o.html(&marks).unwrap();
        // The traced connections chart (the queues never overflowed: said, not drawn), the
        // listen queues and the TIME_WAIT groups.
        assert_eq!(part.matches("<svg").count(), 3, "{part}");
        assert!(part.contains("<b>3 TCP events were missed</b>"), "{part}");
        assert!(part.contains("No listen queue overflow or drop in any second."));
        assert!(part.contains("events lost (1 s)"), "{part}");
        assert!(
            part.contains("<h2>Network census (net:[&lt;1&gt;])</h2>"),
            "{part}"
        );
        assert!(
            part.contains("<details><summary>network</summary>"),
            "{part}"
        );
        let e = o.ephemeral.as_ref().unwrap();
        assert!(
            part.contains(&format!(
                "<p>Ephemeral ports: {} of {} usable in use",
                fmt_num(f64::from(e.distinct_ports_in_range)),
                fmt_num(f64::from(e.usable))
            )),
            "{part}"
        );
        super::super::html::tests::golden("network.html", &part);
        // Keep-alive: no connection opened, said in a sentence.
        let mut t = o.traced.take().unwrap();
        t.new_connections_per_s = vec![0, 0, 0];
        t.time_wait_entered_per_s = vec![0, 0, 0];
        t.missed_events = None;
        o.traced = Some(t);
        let part = o.html(&[]).unwrap();
        assert!(part.contains("No new connection and no socket entering TIME_WAIT"));
        assert_eq!(part.matches("<svg").count(), 2, "{part}");
    }

    fn ev(base: u64) -> Value {
        json!({"time_wait_entered": base, "active_opens": base + 1, "passive_opens": base + 2,
            "connect_failures": base + 3, "aborts": base + 4, "passive_closes": base + 5})
    }

    /// The traced half's text, every part present: pins the output byte for byte.
    #[test]
    fn traced_text_golden() {
        let lat = |m: f64| json!({"mean_us": m, "p50_us": m, "p90_us": m * 2.0, "p99_us": m * 3.0, "max_us": m * 4.0});
        let t = traced(json!({
            "window_s": 3.04, "interval_s": 1.0, "loaded_s": 2.51, "ports": [8080, 9000], "netns": ["net:[1]", "net:[2]"],
            "time_wait_entered_per_s": [1, 2, 3], "new_connections_per_s": (0..65).collect::<Vec<u64>>(),
            "listen_overflows_per_s": [], "listen_drops_per_s": [0, 0, 12345],
            "on_ports": ev(1000), "system": ev(20000),
            "by_port": [{"port": 8080, "local": ev(1), "remote": ev(2),
                "time_wait_entered_per_s": [], "new_connections_per_s": []}],
            "missed_events": 4321,
            "connect": {"clients": [{"pid": 7, "comm": "ab", "same_netns_as_target": false},
                    {"pid": 8, "comm": "wrk", "same_netns_as_target": true}],
                "calls": 12000, "succeeded": 11000, "in_progress": 900, "failed": 100,
                "errors": {"EADDRNOTAVAIL": 60, "ECONNREFUSED": 40},
                "latency": lat(10.0), "in_progress_latency": lat(2.5), "not_tcp": 3},
            "client_netns": {"netns": "pid 7", "ephemeral": {"range": [32768, 60999],
                "range_ports": 28232, "reserved_in_range": 0, "usable": 28232,
                "groups": [{"client": "10.0.0.2", "server": "10.0.0.1", "server_port": 8080,
                    "ports_used": 28000, "time_wait": 27000, "headroom": 232}],
                "groups_total": 1, "distinct_ports_in_range": 28001}},
            "connect_eaddrnotavail": 60, "connect_eaddrinuse": null
        }));
        assert_eq!(
            traced_text(&t),
            r#"  traced over 3.0 s (the load ran 2.5 s of it), per 1 s (sock/inet_sock_set_state; ports 8080, 9000; namespace net:[1], net:[2]):
    on the ports: TIME_WAIT entered 1,000, opened 1,001 active / 1,002 passive, connect failures 1,003, aborts 1,004, closed second 1,005
    port 8080 as local port: TIME_WAIT entered 1, opened 2 active / 3 passive, connect failures 4, aborts 5, closed second 6
    port 8080 as remote port: TIME_WAIT entered 2, opened 3 active / 4 passive, connect failures 5, aborts 6, closed second 7
    whole host:   TIME_WAIT entered 20,000, opened 20,001 active / 20,002 passive, connect failures 20,003, aborts 20,004, closed second 20,005
    TIME_WAIT entered/s:   1 2 3
    new connections/s:     0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 ... (65 entries)
    ListenOverflows/s:     -   (namespace-wide)
    ListenDrops/s:         0 0 12345
    4,321 state changes missed (another BPF program was running on the CPU)
  connect() of watched clients 7 (ab), 8 (wrk): 12,000 calls on TCP sockets, 11,000 connected, 900 in progress (EINPROGRESS, not an error), 100 failed; 3 on other sockets not counted
    errors: EADDRNOTAVAIL 60, ECONNREFUSED 40
    latency: mean 10 µs, p50 10 µs, p99 30 µs, max 40 µs
    EINPROGRESS calls: mean 2.5 µs, p50 2.5 µs, p99 7.5 µs, max 10 µs
  clients' namespace (pid 7), at the end: ephemeral ports 32768-60999, 28,232 usable; 28,001 in use across 1 flow groups
    10.0.0.2 -> 10.0.0.1:8080  used 28,000 (TIME_WAIT 27,000), headroom 232
"#
        );
        let t = traced(json!({
            "window_s": 1.0, "interval_s": 1.0, "ports": [], "netns": [],
            "time_wait_entered_per_s": [], "new_connections_per_s": [],
            "listen_overflows_per_s": [], "listen_drops_per_s": [],
            "on_ports": ev(0), "system": ev(0), "by_port": [], "missed_events": 0,
            "connect": {"clients": [], "calls": 0, "succeeded": 0, "in_progress": 0, "failed": 0,
                "errors": {}, "latency": null, "in_progress_latency": null, "not_tcp": 0},
            "client_netns": {"netns": "pid 9", "ephemeral": null},
            "connect_eaddrnotavail": null, "connect_eaddrinuse": null
        }));
        assert_eq!(
            traced_text(&t),
            r#"  traced over 1.0 s, per 1 s (sock/inet_sock_set_state; ports none (the target listens on no TCP port); every namespace):
    on the ports: TIME_WAIT entered 0, opened 1 active / 2 passive, connect failures 3, aborts 4, closed second 5
    whole host:   TIME_WAIT entered 0, opened 1 active / 2 passive, connect failures 3, aborts 4, closed second 5
    TIME_WAIT entered/s:   -
    new connections/s:     -
    ListenOverflows/s:     -   (namespace-wide)
    ListenDrops/s:         -
  connect() of watched clients : 0 calls on TCP sockets, 0 connected, 0 in progress (EINPROGRESS, not an error), 0 failed
  clients' namespace (pid 9): ephemeral range unknown
"#
        );
    }
}
