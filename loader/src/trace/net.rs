//! The network half of a trace session. Before attach: the static census of the target's
//! namespace (its listening ports come from there). After attach: the TCP state probe is
//! pointed at those ports and at the namespaces of the target and the watched clients, and a
//! sampler thread reads the probe's counters and the namespace's TcpExt counters once a second,
//! on its own clock, away from the window loop. At the end: the per-second series joined to the
//! census, connect() of the watched clients, the net.* rules, and the `network` section.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::mpsc,
    thread::JoinHandle,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use trapdetect_common::{
    names::{PROG_INET_SOCK_SET_STATE, PROG_SYS_ENTER_CONNECT, PROG_SYS_EXIT_CONNECT},
    tcp::{
        CS_COMPLETED, CS_IN_PROGRESS, EADDRINUSE, EADDRNOTAVAIL, EINPROGRESS, MAX_NETNS,
        NUM_EVENTS, errno_name,
    },
};

use crate::{
    error::Result,
    escape,
    host::net::{
        self, NetObservation, NetTraced, Netns, TcpEvents, TcpExtSnapshot,
        netns::identity,
        procfs,
        traced::{ClientNetns, ConnectTraced, TracedPort, WatchedClient},
    },
    probe::{
        Probes,
        tcp::{ConnectCounts, TcpMaps, TcpSample},
    },
    report::{ProbeRow, Report, Skipped, latency},
    traps,
};

/// Seconds per series entry.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The census taken before attach, and who the watched clients are.
pub struct NetStart {
    /// The target's namespace (`None`: the census failed; see `skipped`).
    census: Option<NetObservation>,
    skipped: Vec<Skipped>,
    pid: u32,
    clients: Vec<WatchedClient>,
    /// Namespace inode numbers: the target's first, then the clients' (distinct).
    netns_ids: Vec<u64>,
    /// How the report names each of them (`pid N` of the first process seen in it).
    netns_labels: Vec<String>,
    /// All watched clients connect from one namespace that is not the target's.
    client_ns: Option<u32>,
}

fn netns_id(pid: u32) -> Option<u64> {
    identity(Path::new(&format!("/proc/{pid}/ns/net")))
        .ok()
        .map(|(_, ino)| ino)
}

fn comm(pid: u32) -> String {
    let c = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    escape::bytes(c.strip_suffix(b"\n").unwrap_or(&c))
}

/// The census of the target's namespace (its listening ports, its descriptors), and the
/// namespaces of the watched clients. A census that cannot run is a skipped check: the trace
/// goes on without per-port counts.
pub fn start(pid: u32, clients: &[u32]) -> NetStart {
    let mut skipped = vec![];
    let census = match super::census::check(None, Some(pid), None, &[], None) {
        Ok(c) => {
            skipped.extend(c.skipped);
            Some(c.obs)
        }
        Err(e) => {
            skipped.push(Skipped {
                check: "net.* (network census)".into(),
                reason: e.to_string(),
            });
            None
        }
    };
    let target_ns = netns_id(pid);
    let mut netns_ids: Vec<u64> = target_ns.into_iter().collect();
    let mut netns_labels: Vec<String> = netns_ids.iter().map(|_| format!("pid {pid}")).collect();
    let mut watched = vec![];
    let mut elsewhere: Vec<(u64, u32)> = vec![];
    for &c in clients {
        let ns = netns_id(c);
        let same = ns.is_some() && ns == target_ns;
        if let Some(n) = ns {
            if !netns_ids.contains(&n) {
                netns_ids.push(n);
                netns_labels.push(format!("pid {c}"));
            }
            if !same {
                elsewhere.push((n, c));
            }
        }
        watched.push(WatchedClient {
            pid: c,
            comm: comm(c),
            same_netns_as_target: same,
        });
    }
    let client_ns = (!elsewhere.is_empty()
        && elsewhere.len() == clients.len()
        && elsewhere.iter().all(|(n, _)| *n == elsewhere[0].0))
    .then(|| elsewhere[0].1);
    NetStart {
        census,
        skipped,
        pid,
        clients: watched,
        netns_ids,
        netns_labels,
        client_ns,
    }
}

/// The target's listening TCP ports, from the census (empty when it failed).
pub fn listening_ports(start: &NetStart) -> Vec<u16> {
    start
        .census
        .as_ref()
        .map(|o| o.ports.clone())
        .unwrap_or_default()
}

/// What was set up in the kernel for the window.
pub struct Armed {
    ports: Vec<u16>,
    netns_filter: bool,
    sampler: Option<Sampler>,
    notes: Vec<String>,
}

/// Points the TCP probe at the target's listening ports and the watched namespaces, and starts
/// the sampler (its first reading is the baseline: call this right before the window opens).
pub fn arm(start: &NetStart, probes: &mut Probes) -> Result<Armed> {
    let mut notes = vec![];
    let listening = start
        .census
        .as_ref()
        .map(|o| o.ports.clone())
        .unwrap_or_default();
    let ports = probes.watch_ports(&listening)?;
    if ports.len() < listening.len() {
        notes.push(format!(
            "the target listens on {} TCP ports; state changes are counted per port for the first {} ({})",
            listening.len(),
            ports.len(),
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let ids: Vec<u32> = start.netns_ids.iter().map(|&n| n as u32).collect();
    if ids.len() > MAX_NETNS as usize {
        notes.push(format!(
            "the watched clients connect from {} network namespaces; per-port TCP counts cover the first {MAX_NETNS} ({})",
            ids.len(),
            start.netns_labels[..MAX_NETNS as usize].join(", ")
        ));
    }
    let netns_filter = probes.watch_netns(&ids)?;
    if !netns_filter && !ports.is_empty() {
        notes.push(
            "the kernel's BTF has no socket namespace offsets: per-port TCP counts include sockets of every namespace on those port numbers"
                .into(),
        );
    }
    let maps = probes.take_tcp_maps(ports.len())?;
    let sampler =
        maps.map(|m| Sampler::start(m, PathBuf::from(format!("/proc/{}/net/netstat", start.pid))));
    Ok(Armed {
        ports,
        netns_filter,
        sampler,
        notes,
    })
}

/// One reading: cumulative counters at `at_s` seconds after the baseline.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// Seconds since the baseline.
    pub at_s: f64,
    /// Wall clock, ms since the Unix epoch.
    pub unix_ms: u64,
    /// TCP probe counters (`None`: the read failed).
    pub tcp: Option<TcpSample>,
    /// TcpExt counters of the namespace (`None`: unreadable, e.g. the target exited).
    pub tcp_ext: Option<BTreeMap<String, u64>>,
}

/// Reads the probe's maps and the namespace's TcpExt counters once a second on its own thread.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<Vec<Reading>>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn read(maps: &TcpMaps, netstat: &Path, t0: Instant) -> Reading {
    Reading {
        at_s: t0.elapsed().as_secs_f64(),
        unix_ms: unix_ms(),
        tcp: maps.read().ok(),
        tcp_ext: std::fs::read_to_string(netstat)
            .ok()
            .map(|t| procfs::parse_netstat(&t)),
    }
}

impl Sampler {
    /// Takes the baseline now, then a reading at every whole second after it, and a last one
    /// when stopped.
    pub fn start(maps: TcpMaps, netstat: PathBuf) -> Sampler {
        let t0 = Instant::now();
        let first = read(&maps, &netstat, t0);
        let (stop, rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let mut out = vec![first];
            let mut k = 1u32;
            loop {
                let next = t0 + INTERVAL * k;
                match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        out.push(read(&maps, &netstat, t0));
                        k += 1;
                    }
                    _ => {
                        out.push(read(&maps, &netstat, t0));
                        return out;
                    }
                }
            }
        });
        Sampler { stop, handle }
    }

    /// Takes the last reading and returns them all, baseline first.
    pub fn stop(self) -> Vec<Reading> {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or_default()
    }
}

/// Per-entry increments of `f` between consecutive readings; a reading without the value adds
/// nothing, and its increment lands in the next entry that has one.
pub fn deltas(readings: &[Reading], f: impl Fn(&Reading) -> Option<u64>) -> Vec<u64> {
    let mut out = Vec::with_capacity(readings.len().saturating_sub(1));
    let mut last = readings.first().and_then(&f);
    for r in readings.iter().skip(1) {
        match (f(r), last) {
            (Some(v), Some(l)) => {
                out.push(v.saturating_sub(l));
                last = Some(v);
            }
            (Some(v), None) => {
                out.push(0);
                last = Some(v);
            }
            (None, _) => out.push(0),
        }
    }
    out
}

/// The traced observation from the readings (baseline first) and the connect() counts.
pub fn build(
    readings: &[Reading],
    ports: &[u16],
    connect: Option<&ConnectCounts>,
    clients: &[WatchedClient],
) -> NetTraced {
    let first = readings.first();
    let last = readings.iter().rev().find(|r| r.tcp.is_some());
    let total = match (
        first.and_then(|r| r.tcp.as_ref()),
        last.and_then(|r| r.tcp.as_ref()),
    ) {
        (Some(a), Some(b)) => b.minus(a),
        _ => TcpSample::default(),
    };
    let tcp = |r: &Reading, f: &dyn Fn(&TcpSample) -> u64| r.tcp.as_ref().map(f);
    let ext = |name: &'static str| {
        move |r: &Reading| r.tcp_ext.as_ref().and_then(|c| c.get(name).copied())
    };
    let ev = |e: u32| e as usize;
    let by_port = ports
        .iter()
        .enumerate()
        .map(|(i, &port)| {
            let get =
                |s: &TcpSample, d: usize, e: u32| s.ports.get(i).map(|p| p[d][ev(e)]).unwrap_or(0);
            TracedPort {
                port,
                local: TcpEvents::from_kinds(&total.ports.get(i).map(|p| p[0]).unwrap_or_default()),
                remote: TcpEvents::from_kinds(
                    &total.ports.get(i).map(|p| p[1]).unwrap_or_default(),
                ),
                time_wait_entered_per_s: deltas(readings, |r| {
                    tcp(r, &|s| get(s, 0, 0) + get(s, 1, 0))
                }),
                new_connections_per_s: deltas(readings, |r| tcp(r, &|s| get(s, 0, 2))),
            }
        })
        .collect();
    let mut t = NetTraced {
        window_s: crate::traps::round(readings.last().map_or(0.0, |r| r.at_s), 3),
        interval_s: INTERVAL.as_secs_f64(),
        ports: ports.to_vec(),
        time_wait_entered_per_s: deltas(readings, |r| tcp(r, &|s| s.watched[0])),
        new_connections_per_s: deltas(readings, |r| {
            tcp(r, &|s| s.ports.iter().map(|p| p[0][2]).sum())
        }),
        listen_overflows_per_s: deltas(readings, ext("ListenOverflows")),
        listen_drops_per_s: deltas(readings, ext("ListenDrops")),
        on_ports: TcpEvents::from_kinds(&total.watched),
        system: TcpEvents::from_kinds(&total.system),
        by_port,
        ..Default::default()
    };
    debug_assert_eq!(NUM_EVENTS, 6);
    if let Some(c) = connect {
        let class = |i: u32| c.classes.get(i as usize).cloned().unwrap_or_default();
        let done = class(CS_COMPLETED);
        let pending = class(CS_IN_PROGRESS);
        let errno = |e: u32| c.by_errno.get(e as usize).copied().unwrap_or(0);
        let mut errors = BTreeMap::new();
        for (e, &n) in c.by_errno.iter().enumerate().skip(1) {
            if n > 0 && e as u32 != EINPROGRESS {
                let name = match errno_name(e as u32) {
                    "OTHER" => format!("errno {e}"),
                    known => known.to_string(),
                };
                *errors.entry(name).or_default() += n;
            }
        }
        let lat = |k: &crate::probe::tcp::ConnectClass| {
            (k.count > 0).then(|| latency(&k.hist, k.count, k.sum_ns, k.max_ns))
        };
        t.connect_eaddrnotavail = Some(errno(EADDRNOTAVAIL));
        t.connect_eaddrinuse = Some(errno(EADDRINUSE));
        t.connect = Some(ConnectTraced {
            clients: clients.to_vec(),
            calls: done.count + pending.count,
            succeeded: errno(0),
            in_progress: errno(EINPROGRESS),
            failed: errors.values().sum(),
            errors,
            latency: lat(&done),
            in_progress_latency: lat(&pending),
            not_tcp: 0,
        });
    }
    t
}

/// What the probes gave at the end of the window.
pub struct Measured {
    /// The sampler's readings, baseline first.
    pub readings: Vec<Reading>,
    /// connect() of watched clients.
    pub connect: Option<ConnectCounts>,
    /// Runs of the TCP state program the kernel skipped.
    pub missed: Option<u64>,
    /// connect() calls of watched clients on sockets that are not TCP.
    pub not_tcp: u64,
    /// Remote ports the target connected to during the window, with the connects (its
    /// upstreams, seen in the kernel: a census instant may catch none of them alive).
    pub upstream: Vec<(u16, u64)>,
    /// The drain at the window's end, after a load driven by the trace stopped sending.
    pub load_drain_s: Option<f64>,
}

/// Ends the network half: the traced observation joined to the census, the rules, the
/// `network` section, and what limits the measurement.
pub fn finish(
    start: NetStart,
    armed: Armed,
    measured: Measured,
    probes: &[ProbeRow],
    report: &mut Report,
) {
    let Measured {
        readings,
        connect,
        missed,
        not_tcp,
        upstream,
        load_drain_s,
    } = measured;
    unattached_notes(probes, !start.clients.is_empty(), report);
    let NetStart {
        census,
        mut skipped,
        pid,
        clients,
        client_ns,
        netns_labels,
        ..
    } = start;
    report.measurement.notes.extend(armed.notes);
    let Some(mut obs) = census else {
        report.skipped.append(&mut skipped);
        return;
    };
    upstream_time_wait(&mut obs, pid, &upstream, &mut skipped);
    for c in &clients {
        if let Ok(f) = net::fd_use(c.pid, "generator") {
            obs.fds.push(f);
        }
    }
    let mut traced = (!readings.is_empty()).then(|| {
        let mut t = build(&readings, &armed.ports, connect.as_ref(), &clients);
        t.missed_events = missed;
        // The readings start as the trace does, a moment before its load; the drain ends it.
        t.loaded_s =
            load_drain_s.map(|d| crate::traps::round((t.window_s - d).clamp(0.0, t.window_s), 3));
        if let Some(c) = &mut t.connect {
            c.not_tcp = not_tcp;
        }
        if armed.netns_filter {
            t.netns = netns_labels
                .iter()
                .take(MAX_NETNS as usize)
                .cloned()
                .collect();
        }
        t
    });
    window_tcp_ext(&mut obs, &readings);
    if missed.is_some_and(|m| m > 0) {
        report.measurement.notes.push(format!(
            "{} TCP state changes were not counted: the kernel skips a probe while another BPF program runs on the same CPU",
            missed.unwrap_or(0)
        ));
    }
    let mut findings = vec![];
    let elsewhere = clients.iter().filter(|c| !c.same_netns_as_target).count();
    if client_ns.is_none() && elsewhere > 0 {
        report.measurement.notes.push(format!(
            "{elsewhere} of {} watched clients connect from another network namespace than the target, and not all from one: their connect() errors are judged against the target's ephemeral range",
            clients.len()
        ));
    }
    // Ports run out where connect() runs: with every watched client in another namespace, its
    // connect() errors are judged against that namespace's range, not the target's.
    let mut judged_elsewhere = false;
    if let (Some(cpid), Some(t)) = (client_ns, traced.as_mut()) {
        judged_elsewhere = judge_client_netns(cpid, t, &armed.ports, &mut findings, &mut skipped);
    }
    if let Some(t) = traced.as_mut() {
        t.requests = report.requests.as_ref().and_then(|r| r.count);
    }
    obs.traced = traced;
    let mut judged = obs.clone();
    if judged_elsewhere && let Some(t) = judged.traced.as_mut() {
        t.connect_eaddrnotavail = None;
        t.connect_eaddrinuse = None;
    }
    findings.extend(traps::net::rules(&judged));
    report.findings.extend(findings);
    merge_skipped(&obs, &mut skipped);
    report.skipped.append(&mut skipped);
    report.add(&obs);
}

/// Notes the optional probes that did not attach: the trace stands without them, but the
/// report says what is missing (connect() only when there are watched clients).
fn unattached_notes(probes: &[ProbeRow], watching_clients: bool, report: &mut Report) {
    for r in probes.iter().filter(|r| !r.attached) {
        let what = match r.program.as_str() {
            PROG_INET_SOCK_SET_STATE => "the network section has the census but no traced series",
            PROG_SYS_ENTER_CONNECT | PROG_SYS_EXIT_CONNECT if watching_clients => {
                "connect() of the watched clients is not measured"
            }
            _ => continue,
        };
        report
            .measurement
            .notes
            .push(format!("{} did not attach ({}): {what}", r.program, r.note));
    }
}

/// The target's upstreams over the window: their TIME_WAIT is read after it (the census
/// before attach holds none of the sockets this window closed).
fn upstream_time_wait(
    obs: &mut NetObservation,
    pid: u32,
    upstream: &[(u16, u64)],
    skipped: &mut Vec<Skipped>,
) {
    if !upstream.is_empty() {
        let ports: Vec<u16> = upstream.iter().map(|(p, _)| *p).collect();
        match net::census_with_upstreams(&Netns::Pid(pid), Some(pid), None, &[], &ports) {
            Ok(end) => {
                obs.time_wait.upstream = end.time_wait.upstream;
                for u in &mut obs.time_wait.upstream {
                    u.connects_during_window =
                        upstream.iter().find(|(p, _)| *p == u.port).map(|(_, n)| *n);
                }
            }
            Err(e) => skipped.push(Skipped {
                check: "net.upstream-time-wait at the end of the window".into(),
                reason: e.to_string(),
            }),
        }
    }
}

/// The window's TcpExt increments, from the same two readings as the series.
fn window_tcp_ext(obs: &mut NetObservation, readings: &[Reading]) {
    let snap = |r: &Reading| {
        r.tcp_ext.as_ref().map(|c| TcpExtSnapshot {
            taken_unix_ms: r.unix_ms,
            counters: c.clone(),
        })
    };
    if let (Some(a), Some(b)) = (
        readings.first().and_then(snap),
        readings.iter().rev().find_map(snap),
    ) {
        obs.tcp_ext = Some(b);
        obs.set_baseline(&a);
    }
}

/// Judges the watched clients' connect() errors against the ephemeral range of their
/// namespace (`pid cpid`'s); whether it could be read.
fn judge_client_netns(
    cpid: u32,
    t: &mut NetTraced,
    ports: &[u16],
    findings: &mut Vec<traps::Finding>,
    skipped: &mut Vec<Skipped>,
) -> bool {
    match net::census_in(&Netns::Pid(cpid), None, None, ports) {
        Ok(mut cobs) => {
            cobs.traced = Some(NetTraced {
                connect_eaddrnotavail: t.connect_eaddrnotavail,
                connect_eaddrinuse: t.connect_eaddrinuse,
                ..Default::default()
            });
            findings.extend(traps::net::ephemeral_ports(&cobs));
            t.client_netns = Some(ClientNetns {
                netns: format!("pid {cpid}"),
                ephemeral: cobs.ephemeral,
            });
            true
        }
        Err(e) => {
            skipped.push(Skipped {
                check: "net.ephemeral-ports of the watched clients' namespace".into(),
                reason: e.to_string(),
            });
            false
        }
    }
}

/// Adds what the net rules could not judge to `skipped`, one entry per check and reason.
fn merge_skipped(obs: &NetObservation, skipped: &mut Vec<Skipped>) {
    skipped.extend(
        traps::net::skipped(obs)
            .into_iter()
            .map(|(check, reason)| Skipped {
                check: check.to_string(),
                reason,
            }),
    );
    // One entry per check: the census's own list already holds what it could not read.
    skipped.sort_by(|a, b| (&a.check, &a.reason).cmp(&(&b.check, &b.reason)));
    skipped.dedup_by(|a, b| a.check == b.check && a.reason == b.reason);
}

/// Stops the sampler, if there is one, and returns its readings (baseline first).
pub fn stop(armed: &mut Armed) -> Vec<Reading> {
    armed.sampler.take().map(Sampler::stop).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at_s: f64, tw: u64, port_local_tw: u64, overflows: Option<u64>) -> Reading {
        let mut s = TcpSample {
            ports: vec![[[0; 6], [0; 6]]],
            ..Default::default()
        };
        s.watched[0] = tw;
        s.system[0] = tw + 5;
        s.ports[0][0][0] = port_local_tw;
        s.ports[0][0][2] = port_local_tw;
        Reading {
            at_s,
            unix_ms: (at_s * 1000.0) as u64,
            tcp: Some(s),
            tcp_ext: overflows.map(|o| BTreeMap::from([("ListenOverflows".to_string(), o)])),
        }
    }

    #[test]
    fn series_sum_to_the_window_totals() {
        let r = vec![
            reading(0.0, 100, 100, Some(7)),
            reading(1.0, 350, 350, Some(7)),
            reading(2.0, 700, 700, None),
            reading(2.4, 801, 801, Some(50)),
        ];
        let t = build(&r, &[8080], None, &[]);
        assert_eq!(t.time_wait_entered_per_s, vec![250, 350, 101]);
        assert_eq!(t.on_ports.time_wait_entered, 701);
        assert_eq!(t.system.time_wait_entered, 701);
        assert_eq!(t.by_port[0].port, 8080);
        assert_eq!(t.by_port[0].local.time_wait_entered, 701);
        assert_eq!(t.by_port[0].time_wait_entered_per_s, vec![250, 350, 101]);
        assert_eq!(t.new_connections_per_s, vec![250, 350, 101]);
        // The unreadable second's increment lands in the next readable one.
        assert_eq!(t.listen_overflows_per_s, vec![0, 0, 43]);
        assert_eq!(t.window_s, 2.4);
        assert_eq!(
            t.time_wait_rate().map(|r| traps::round(r, 3)),
            Some(292.083)
        );
        assert!(t.connect.is_none());
    }

    #[test]
    fn connect_counts_split_in_progress_from_errors() {
        let mut c = ConnectCounts {
            classes: vec![
                crate::probe::tcp::ConnectClass {
                    count: 12,
                    sum_ns: 12_000,
                    max_ns: 2_000,
                    hist: {
                        let mut h = vec![0; trapdetect_common::hist::HIST_BUCKETS as usize];
                        h[trapdetect_common::hist::bucket_of(1_000) as usize] = 12;
                        h
                    },
                },
                crate::probe::tcp::ConnectClass {
                    count: 3,
                    ..Default::default()
                },
            ],
            by_errno: vec![0; 256],
        };
        c.by_errno[0] = 9;
        c.by_errno[EADDRNOTAVAIL as usize] = 2;
        c.by_errno[111] = 1;
        c.by_errno[EINPROGRESS as usize] = 3;
        c.by_errno[200] = 0;
        let t = build(&[reading(0.0, 0, 0, None)], &[], Some(&c), &[]);
        let k = t.connect.as_ref().unwrap();
        assert_eq!(
            (k.calls, k.succeeded, k.in_progress, k.failed),
            (15, 9, 3, 3)
        );
        assert_eq!(
            k.errors,
            BTreeMap::from([("EADDRNOTAVAIL".into(), 2), ("ECONNREFUSED".into(), 1)])
        );
        assert_eq!(t.connect_eaddrnotavail, Some(2));
        assert_eq!(t.connect_eaddrinuse, Some(0));
        assert_eq!(k.latency.as_ref().unwrap().mean_us, 1.0);
        assert!(k.in_progress_latency.is_some());
    }

    #[test]
    fn deltas_without_a_baseline_start_at_the_first_value() {
        let f = |r: &Reading| {
            r.tcp_ext
                .as_ref()
                .and_then(|c| c.get("ListenOverflows").copied())
        };
        let r = vec![
            reading(0.0, 0, 0, None),
            reading(1.0, 0, 0, Some(4)),
            reading(2.0, 0, 0, Some(9)),
        ];
        assert_eq!(deltas(&r, f), vec![0, 5]);
        assert_eq!(deltas(&r[..1], f), Vec::<u64>::new());
    }
}
