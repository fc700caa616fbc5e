//! Aggregation: the census as a stream of sockets folded into a `NetObservation`, without
//! keeping 50,000 TIME_WAIT sockets in memory.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    net::IpAddr,
};

use super::{
    diag::{TCP_LISTEN, TCP_TIME_WAIT},
    model::*,
    procfs,
};

/// The busiest entries of a per-port count table (indexed by port), plus `keep`. One pass
/// with a small sorted buffer: 50,000 TIME_WAIT sockets can mean 50,000 remote ports.
fn top(counts: &[u32], keep: &[u16]) -> Vec<PortCount> {
    let mut v: Vec<PortCount> = Vec::with_capacity(TOP + 1 + keep.len());
    for (port, &count) in counts.iter().enumerate() {
        // Ties keep the lower port: ports arrive in ascending order.
        if count == 0 || (v.len() == TOP && v[TOP - 1].count >= count as u64) {
            continue;
        }
        let at = v.partition_point(|c| c.count >= count as u64);
        v.insert(
            at,
            PortCount {
                port: port as u16,
                count: count as u64,
            },
        );
        v.truncate(TOP);
    }
    for &p in keep {
        if !v.iter().any(|c| c.port == p) {
            v.push(PortCount {
                port: p,
                count: counts[p as usize] as u64,
            });
        }
    }
    v
}

/// FxHash (rustc's): the census hashes one key per socket, and SipHash's DoS resistance buys
/// nothing for keys the kernel hands us.
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64)
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

/// The census as a stream: listeners first (which side a socket is on depends on the ports
/// listened on), then every other socket once, so 50,000 TIME_WAIT sockets are counted without
/// being kept in memory.
pub struct Tally<'a> {
    sysctls: &'a NetSysctls,
    ports: &'a [u16],
    target: Option<&'a HashSet<u64>>,
    listeners: Vec<SockRec>,
    listening: Vec<bool>,
    interest: Vec<u16>,
    total: u64,
    by_state: [u64; 16],
    tw: TimeWait,
    tw_local: Vec<u32>,
    tw_remote: Vec<u32>,
    tw_groups: FxMap<(Side, IpAddr, IpAddr, u16), u64>,
    eph: FxMap<(IpAddr, IpAddr, u16), (u64, u64)>,
    ports_seen: Vec<u64>,
    drain_all: u64,
    hist: Vec<u64>,
    /// Upstream port → (its address once a socket shows it, live connections to it).
    upstream: BTreeMap<u16, (Option<std::net::SocketAddr>, u64)>,
}

impl<'a> Tally<'a> {
    /// Starts a census from the namespace's listeners and sysctls. `ports` are ports of
    /// interest; `target` the socket inodes the target holds.
    pub fn new(
        listeners: Vec<SockRec>,
        sysctls: &'a NetSysctls,
        ports: &'a [u16],
        target: Option<&'a HashSet<u64>>,
    ) -> Self {
        let mut listening = vec![false; 1 << 16];
        let mut interest: Vec<u16> = ports.to_vec();
        let mut by_state = [0u64; 16];
        for l in &listeners {
            listening[l.local.port() as usize] = true;
            by_state[TCP_LISTEN as usize] += 1;
            if target.is_some_and(|t| t.contains(&l.inode)) {
                interest.push(l.local.port());
            }
        }
        interest.sort_unstable();
        interest.dedup();
        Tally {
            sysctls,
            ports,
            target,
            total: listeners.len() as u64,
            listeners,
            listening,
            interest,
            by_state,
            tw: TimeWait::default(),
            tw_local: vec![0u32; 1 << 16],
            tw_remote: vec![0u32; 1 << 16],
            tw_groups: FxMap::default(),
            eph: FxMap::default(),
            ports_seen: vec![0u64; 1024],
            drain_all: 0,
            hist: vec![0u64; TIME_WAIT_LEN_S as usize + 1],
            upstream: BTreeMap::new(),
        }
    }

    /// Ports the target is known to connect to (a trace's kernel count of its connects), besides
    /// those it holds live connections to at the census.
    /// (The upstream listens in this namespace as often as not: php-fpm on 127.0.0.1:9000. Only
    /// the target's own listening ports are left out, in `finish`.)
    pub fn upstreams(mut self, ports: &[u16]) -> Self {
        for &p in ports {
            self.upstream.entry(p).or_insert((None, 0));
        }
        self
    }

    fn in_range(&self, p: u16) -> bool {
        self.sysctls
            .ip_local_port_range
            .is_some_and(|[lo, hi]| (lo..=hi).contains(&p))
    }

    fn side(&self, s: &SockRec) -> Side {
        let (l, r) = (s.local.port(), s.remote.port());
        if self.listening[l as usize] {
            Side::Server
        } else if self.listening[r as usize] || (self.in_range(l) && !self.in_range(r)) {
            Side::Client
        } else if self.in_range(r) && !self.in_range(l) {
            Side::Server
        } else {
            Side::Unknown
        }
    }

    /// Counts one socket that is not listening (listeners were given to `new`).
    pub fn add(&mut self, s: &SockRec) {
        if s.state == TCP_LISTEN {
            return;
        }
        self.total += 1;
        self.by_state[s.state as usize & 15] += 1;
        let sd = self.side(s);
        let (l, r) = (s.local.port(), s.remote.port());
        // A live socket of the target on a port it does not listen on: it connected out, and
        // the remote port is one of its upstreams (TIME_WAIT sockets carry no inode).
        if s.inode != 0
            && self.target.is_some_and(|t| t.contains(&s.inode))
            && !self.listening[l as usize]
        {
            let e = self.upstream.entry(r).or_insert((None, 0));
            e.0 = Some(s.remote);
            e.1 += 1;
        }
        let l_in = self.in_range(l);
        if l_in {
            self.ports_seen[l as usize / 64] |= 1 << (l % 64);
        }
        let tw_here = s.state == TCP_TIME_WAIT;
        if sd == Side::Client && l_in {
            let e = self
                .eph
                .entry((s.local.ip(), s.remote.ip(), r))
                .or_default();
            e.0 += 1;
            e.1 += tw_here as u64;
        }
        if !tw_here {
            return;
        }
        // An upstream known from the kernel only: its address from its TIME_WAIT sockets.
        for (p, addr) in [(r, s.remote), (l, s.local)] {
            if let Some(e) = self.upstream.get_mut(&p)
                && e.0.is_none()
            {
                e.0 = Some(addr);
            }
        }
        let tw = &mut self.tw;
        tw.count += 1;
        let (own_l, own_r) = (
            self.interest.binary_search(&l).is_ok(),
            self.interest.binary_search(&r).is_ok(),
        );
        if own_l || own_r {
            tw.own.count += 1;
            tw.own.local += own_l as u64;
            tw.own.remote += (own_r && !own_l) as u64;
        }
        self.tw_local[l as usize] += 1;
        self.tw_remote[r as usize] += 1;
        // Undecided sockets are grouped as if the lower port were the server's (the usual
        // case once the server that listened is gone), so one flow stays one group.
        let key = match sd {
            Side::Server => (sd, s.remote.ip(), s.local.ip(), l),
            Side::Unknown if l < r => (sd, s.remote.ip(), s.local.ip(), l),
            _ => (sd, s.local.ip(), s.remote.ip(), r),
        };
        *self.tw_groups.entry(key).or_default() += 1;
        match sd {
            Side::Server => tw.closed_first.server += 1,
            Side::Client => tw.closed_first.client += 1,
            Side::Unknown => tw.closed_first.unknown += 1,
        }
        self.drain_all = self.drain_all.max(s.expires_ms as u64);
        self.hist[(s.expires_ms as usize / 1000).min(TIME_WAIT_LEN_S as usize)] += 1;
    }

    /// The observation (namespace, source, counters and target are the caller's to fill).
    pub fn finish(self) -> NetObservation {
        let Tally {
            sysctls,
            ports,
            target,
            listeners: all_listeners,
            interest,
            total,
            by_state,
            mut tw,
            tw_local,
            tw_remote,
            tw_groups,
            eph,
            ports_seen,
            drain_all,
            mut hist,
            upstream,
            ..
        } = self;
        tw.upstream = upstream_time_wait(upstream, &interest, &tw_local, &tw_remote);
        tw.scoped = target.is_some() || !ports.is_empty();
        if tw.count > 0 {
            tw.drain_all_ms = Some(drain_all);
            while hist.last() == Some(&0) {
                hist.pop();
            }
            tw.remaining_histogram_s = hist;
        }
        tw.local_ports_total = tw_local.iter().filter(|c| **c > 0).count();
        tw.by_local_port = top(&tw_local, &interest);
        tw.by_remote_port = top(&tw_remote, &[]);
        tw.groups_total = tw_groups.len();
        tw.groups = flow_groups(tw_groups);

        let ephemeral = ephemeral(sysctls, eph, &interest, &ports_seen);

        let listeners = listeners(&all_listeners, target, &interest, ports);

        let sockets = socket_states(&by_state);
        NetObservation {
            sockets_total: total,
            sockets,
            ports: interest,
            time_wait: tw,
            ephemeral,
            listeners,
            listeners_total: all_listeners.len(),
            sysctls: sysctls.clone(),
            ..Default::default()
        }
    }
}

/// The TIME_WAIT toward each upstream port that is not one of the target's own, busiest first.
fn upstream_time_wait(
    upstream: BTreeMap<u16, (Option<std::net::SocketAddr>, u64)>,
    interest: &[u16],
    tw_local: &[u32],
    tw_remote: &[u32],
) -> Vec<UpstreamTimeWait> {
    let mut v: Vec<UpstreamTimeWait> = upstream
        .into_iter()
        .filter(|(p, _)| interest.binary_search(p).is_err())
        .map(|(p, (addr, live))| UpstreamTimeWait {
            server: addr.map_or_else(|| format!("port {p}"), |a| a.to_string()),
            port: p,
            count: (tw_local[p as usize] + tw_remote[p as usize]) as u64,
            closed_by_upstream: tw_local[p as usize] as u64,
            closed_by_target: tw_remote[p as usize] as u64,
            live_connections: live,
            connects_during_window: None,
        })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then(a.port.cmp(&b.port)));
    v
}

/// The busiest TIME_WAIT flow groups (at most `TOP`).
fn flow_groups(tw_groups: FxMap<(Side, IpAddr, IpAddr, u16), u64>) -> Vec<FlowGroup> {
    let mut groups: Vec<FlowGroup> = tw_groups
        .into_iter()
        .map(|((sd, c, s, p), count)| FlowGroup {
            client: c.to_string(),
            server: s.to_string(),
            server_port: p,
            count,
            closed_first: sd,
        })
        .collect();
    groups.sort_by(|a, b| {
        b.count.cmp(&a.count).then_with(|| {
            (a.server_port, &a.client, &a.server).cmp(&(b.server_port, &b.client, &b.server))
        })
    });
    groups.truncate(TOP);
    groups
}

/// The ephemeral port range and its busiest client groups (plus those of the ports of
/// interest), when the range is known.
fn ephemeral(
    sysctls: &NetSysctls,
    eph: FxMap<(IpAddr, IpAddr, u16), (u64, u64)>,
    interest: &[u16],
    ports_seen: &[u64],
) -> Option<Ephemeral> {
    sysctls.ip_local_port_range.map(|[lo, hi]| {
        let range_ports = hi as u32 - lo as u32 + 1;
        let reserved_in_range = sysctls
            .ip_local_reserved_ports
            .as_deref()
            .and_then(procfs::parse_port_list)
            .map(|r| procfs::ports_in(&r, lo, hi))
            .unwrap_or(0);
        let usable = range_ports - reserved_in_range;
        let groups_total = eph.len();
        let mut groups: Vec<PortGroup> = eph
            .into_iter()
            .map(|((c, s, p), (used, tw))| PortGroup {
                client: c.to_string(),
                server: s.to_string(),
                server_port: p,
                ports_used: used,
                time_wait: tw,
                headroom: (usable as u64).saturating_sub(used),
            })
            .collect();
        groups.sort_by(|a, b| {
            b.ports_used.cmp(&a.ports_used).then_with(|| {
                (a.server_port, &a.client, &a.server).cmp(&(b.server_port, &b.client, &b.server))
            })
        });
        let mut kept: Vec<PortGroup> = vec![];
        for (i, g) in groups.into_iter().enumerate() {
            if i < TOP || interest.contains(&g.server_port) {
                kept.push(g);
            }
        }
        Ephemeral {
            range: [lo, hi],
            range_ports,
            reserved_in_range,
            usable,
            groups: kept,
            groups_total,
            distinct_ports_in_range: ports_seen.iter().map(|w| w.count_ones()).sum(),
        }
    })
}

/// The listeners reported: the target's and those on ports of interest (all of them when
/// the census has no target and no ports), the target's first, at most 32.
fn listeners(
    all_listeners: &[SockRec],
    target: Option<&HashSet<u64>>,
    interest: &[u16],
    ports: &[u16],
) -> Vec<Listener> {
    let mine = |s: &SockRec| target.is_some_and(|t| t.contains(&s.inode));
    let mut listeners: Vec<Listener> = all_listeners
        .iter()
        .filter(|s| {
            mine(s) || interest.contains(&s.local.port()) || (target.is_none() && ports.is_empty())
        })
        .map(|s| Listener {
            local: s.local.to_string(),
            port: s.local.port(),
            accept_queue: s.rqueue,
            backlog: s.backlog,
            target: mine(s),
        })
        .collect();
    listeners.sort_by(|a, b| {
        b.target
            .cmp(&a.target)
            .then(a.port.cmp(&b.port))
            .then(a.local.cmp(&b.local))
    });
    listeners.truncate(32);
    listeners
}

/// Socket counts by state name.
fn socket_states(by_state: &[u64; 16]) -> BTreeMap<String, u64> {
    let mut sockets: BTreeMap<String, u64> = BTreeMap::new();
    for (state, &n) in by_state.iter().enumerate().filter(|(_, n)| **n > 0) {
        *sockets
            .entry(state_name(state as u8).to_string())
            .or_default() += n;
    }
    sockets
}

impl NetObservation {
    /// Builds the observation from a socket list and the namespace's sysctls (pure: the unit
    /// tests feed it recorded /proc/net/tcp files). `ports` are ports of interest;
    /// `target_inodes` the socket inodes the target holds.
    pub fn build(
        socks: &[SockRec],
        sysctls: &NetSysctls,
        ports: &[u16],
        target_inodes: Option<&HashSet<u64>>,
    ) -> Self {
        Self::build_with(socks, sysctls, ports, target_inodes, &[])
    }

    /// [`NetObservation::build`] with the target's upstream ports known besides its live
    /// connections (a trace's count of its connects).
    pub fn build_with(
        socks: &[SockRec],
        sysctls: &NetSysctls,
        ports: &[u16],
        target_inodes: Option<&HashSet<u64>>,
        upstream: &[u16],
    ) -> Self {
        let listeners = socks
            .iter()
            .filter(|s| s.state == TCP_LISTEN)
            .cloned()
            .collect();
        let mut t = Tally::new(listeners, sysctls, ports, target_inodes).upstreams(upstream);
        for s in socks {
            t.add(s);
        }
        t.finish()
    }

    /// Sets the TcpExt increments since `before` (an earlier census of the same namespace).
    pub fn set_baseline(&mut self, before: &TcpExtSnapshot) {
        let Some(now) = &self.tcp_ext else { return };
        let mut d = TcpExtDelta {
            window_s: now.taken_unix_ms.saturating_sub(before.taken_unix_ms) as f64 / 1000.0,
            ..Default::default()
        };
        for (k, &v) in &now.counters {
            let b = before.counters.get(k).copied().unwrap_or(0);
            d.reset |= v < b;
            d.counters.insert(k.clone(), v.saturating_sub(b));
        }
        self.tcp_ext_delta = Some(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/net")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn time_wait_census_from_recorded_proc_net_tcp() {
        let (socks, bad) = procfs::parse_tcp(&fixture("tw-server-closes.tcp"));
        assert_eq!(bad, 0);
        let sys = procfs::sysctls_from(&procfs::parse_sysctl_lines(&fixture(
            "tw-server-closes.sysctl",
        )));
        let obs = NetObservation::build(&socks, &sys, &[], None);
        let tw = &obs.time_wait;
        assert_eq!(tw.count, 31);
        assert_eq!(obs.sockets["TIME_WAIT"], 31);
        assert_eq!(obs.sockets["LISTEN"], 1);
        assert_eq!(
            tw.by_local_port,
            vec![PortCount {
                port: 8080,
                count: 31
            }]
        );
        assert_eq!(
            tw.closed_first,
            ClosedFirst {
                server: 31,
                client: 0,
                unknown: 0
            }
        );
        assert_eq!(tw.groups.len(), 2);
        assert_eq!(
            (tw.groups[0].client.as_str(), tw.groups[0].server.as_str()),
            ("127.0.0.1", "127.0.0.1")
        );
        assert_eq!(tw.groups[0].count + tw.groups[1].count, 31);
        assert_eq!(tw.groups[0].closed_first, Side::Server);
        // Server-side TIME_WAIT holds no client ports.
        let e = obs.ephemeral.as_ref().unwrap();
        assert_eq!(e.groups_total, 0);
        assert_eq!(tw.remaining_histogram_s.iter().sum::<u64>(), 31);
        assert!(tw.drain_all_ms.unwrap() <= 60_000);
        assert_eq!(tw.seconds_until_below(32), 0);
        assert!(tw.seconds_until_below(1) <= 60);
    }

    #[test]
    fn without_a_listener_the_lower_port_groups_the_flow() {
        // The server that listened is gone and the clients' ports lie outside the range.
        let (socks, _) = procfs::parse_tcp(&fixture("tw-server-closes.tcp"));
        let socks: Vec<SockRec> = socks
            .into_iter()
            .filter(|s| s.state != TCP_LISTEN)
            .collect();
        let mut sys = procfs::sysctls_from(&procfs::parse_sysctl_lines(&fixture(
            "tw-server-closes.sysctl",
        )));
        sys.ip_local_port_range = Some([61000, 61999]);
        let obs = NetObservation::build(&socks, &sys, &[], None);
        let tw = &obs.time_wait;
        assert_eq!(
            tw.closed_first,
            ClosedFirst {
                server: 0,
                client: 0,
                unknown: 31
            }
        );
        assert_eq!(tw.groups_total, 2);
        assert!(
            tw.groups
                .iter()
                .all(|g| g.server_port == 8080 && g.closed_first == Side::Unknown)
        );
        assert_eq!(obs.listeners_total, 0);
    }

    #[test]
    fn top_keeps_the_busiest_and_the_ports_asked_for() {
        let mut counts = vec![0u32; 1 << 16];
        for p in 1000..1100u16 {
            counts[p as usize] = p as u32 % 7;
        }
        counts[8080] = 50;
        let t = top(&counts, &[9999]);
        assert_eq!(t.len(), TOP + 1);
        assert_eq!(
            t[0],
            PortCount {
                port: 8080,
                count: 50
            }
        );
        // Then the lowest ports with count 6, in order.
        assert_eq!(
            t[1],
            PortCount {
                port: 1000,
                count: 6
            }
        );
        assert_eq!(
            t[2],
            PortCount {
                port: 1007,
                count: 6
            }
        );
        assert_eq!(
            t[TOP],
            PortCount {
                port: 9999,
                count: 0
            }
        );
    }

    #[test]
    fn ephemeral_groups_from_recorded_proc_net_tcp() {
        let (socks, _) = procfs::parse_tcp(&fixture("ports-full.tcp"));
        let sys = procfs::sysctls_from(&procfs::parse_sysctl_lines(&fixture("ports-full.sysctl")));
        let obs = NetObservation::build(&socks, &sys, &[9000], None);
        let e = obs.ephemeral.as_ref().unwrap();
        assert_eq!(e.range, [40000, 40019]);
        assert_eq!((e.range_ports, e.reserved_in_range, e.usable), (20, 2, 18));
        assert_eq!(e.groups.len(), 1);
        let g = &e.groups[0];
        assert_eq!((g.server.as_str(), g.server_port), ("127.0.0.1", 9000));
        assert_eq!((g.ports_used, g.headroom), (18, 0));
        assert_eq!(e.distinct_ports_in_range, 18);
        assert_eq!(obs.listeners.len(), 1);
        assert_eq!(obs.listeners[0].port, 9000);
    }
}
