//! Socket census of one network namespace: TIME_WAIT by port and by flow, which side closed
//! first and when the TIME_WAIT drains, ephemeral-port headroom per (client IP, server IP,
//! server port), listen queues, TcpExt counters, and the descriptor limits of the target. It
//! is the static half of the net.* traps: one snapshot, no tracing; the observation has room
//! for the traced per-second series (`traced`).
//!
//! Sockets come from sock_diag netlink (`diag`), falling back to /proc/net/tcp{,6} (`procfs`);
//! everything namespace-bound is read inside the target's namespace (`netns`).

pub mod diag;
pub mod netns;
pub mod procfs;
pub mod traced;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt::Write as _,
    io,
    net::{IpAddr, SocketAddr},
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde::{Deserialize, Serialize};

use self::{
    diag::{ALL_STATES, Diag, TCP_LISTEN, TCP_TIME_WAIT},
    netns::EnterError,
};
pub use self::{
    netns::Netns,
    traced::{NetTraced, TcpEvents},
};
use crate::{
    error::{Error, Result},
    escape,
};

/// TCP_TIMEWAIT_LEN: a socket stays in TIME_WAIT for a fixed 60 s on Linux (`tcp_fin_timeout`
/// governs FIN_WAIT2, not TIME_WAIT).
pub const TIME_WAIT_LEN_S: u64 = 60;

/// How many ports and flows the observation lists (the totals are always complete).
pub const TOP: usize = 10;

/// One TCP socket as the census sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SockRec {
    /// Kernel TCP state number (1 ESTABLISHED ... 6 TIME_WAIT ... 10 LISTEN).
    pub state: u8,
    /// Local address (IPv4-mapped IPv6 shown as IPv4).
    pub local: SocketAddr,
    /// Remote address.
    pub remote: SocketAddr,
    /// Which timer runs (3: TIME_WAIT).
    pub timer: u8,
    /// Time left on that timer, ms.
    pub expires_ms: u32,
    /// For a listener: connections waiting in its accept queue.
    pub rqueue: u32,
    /// For a listener: its effective backlog (already capped by somaxconn); unknown from
    /// /proc/net/tcp.
    pub backlog: Option<u32>,
    /// Socket inode (0 for TIME_WAIT).
    pub inode: u64,
}

/// Kernel name of a TCP state.
pub fn state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 | 12 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "UNKNOWN",
    }
}

/// Which end of a connection a socket is. TIME_WAIT lives on the side that closed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Local port is a listening port (or the remote port is ephemeral and ours is not).
    Server,
    /// Local port came from the ephemeral range, or the remote port is one we listen on.
    Client,
    /// Neither rule applies (grouped as if the lower port were the server's).
    Unknown,
}

impl Side {
    /// Lower-case name, as in JSON.
    pub fn label(self) -> &'static str {
        match self {
            Side::Server => "server",
            Side::Client => "client",
            Side::Unknown => "unknown",
        }
    }
}

/// Sockets on one port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortCount {
    /// Port.
    pub port: u16,
    /// Sockets.
    pub count: u64,
}

/// TIME_WAIT sockets of one flow group: (client IP, server IP, server port), oriented by who
/// connected to whom (for `unknown`, the lower port is taken as the server's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowGroup {
    /// The connecting side's address.
    pub client: String,
    /// The accepting side's address.
    pub server: String,
    /// The accepting side's port.
    pub server_port: u16,
    /// Sockets.
    pub count: u64,
    /// Which side these sockets are on, i.e. which side closed first.
    pub closed_first: Side,
}

/// TIME_WAIT sockets by the side that closed first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClosedFirst {
    /// The server closed first: TIME_WAIT sits on the server's port.
    pub server: u64,
    /// The client closed first: TIME_WAIT holds the client's ephemeral ports.
    pub client: u64,
    /// Could not tell.
    pub unknown: u64,
}

/// Every TIME_WAIT socket of the namespace, summarised.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeWait {
    /// TIME_WAIT sockets.
    pub count: u64,
    /// Busiest local ports, plus every port of interest.
    pub by_local_port: Vec<PortCount>,
    /// Busiest remote ports.
    pub by_remote_port: Vec<PortCount>,
    /// Distinct local ports with TIME_WAIT.
    pub local_ports_total: usize,
    /// Busiest flow groups.
    pub groups: Vec<FlowGroup>,
    /// Distinct flow groups.
    pub groups_total: usize,
    /// By the side that closed first.
    pub closed_first: ClosedFirst,
    /// Longest remaining TIME_WAIT timer, ms (when everything present now has drained).
    pub drain_all_ms: Option<u64>,
    /// Sockets by remaining time: entry `i` counts timers with `i` ≤ remaining < `i + 1` s.
    pub remaining_histogram_s: Vec<u64>,
    /// The census was about a target or given ports: only `own` is theirs, the rest of
    /// the count is other processes' context.
    pub scoped: bool,
    /// Sockets of the ports of interest (local or remote port is one): the target's flows.
    pub own: OwnTimeWait,
}

/// TIME_WAIT on the target's ports (its listeners and the ports asked about).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OwnTimeWait {
    /// Sockets whose local or remote port is a port of interest.
    pub count: u64,
    /// Of those, with the port of interest local (the server side closed first).
    pub local: u64,
    /// With it remote only (a client in this namespace closed first).
    pub remote: u64,
}

impl TimeWait {
    /// Upper bound, in whole seconds, on the time until fewer than `n` of today's sockets
    /// remain (from their own timers; new TIME_WAIT is not predicted). 0 when already below.
    pub fn seconds_until_below(&self, n: u64) -> u64 {
        if self.count < n {
            return 0;
        }
        let mut above = self.count;
        for (i, c) in self.remaining_histogram_s.iter().enumerate() {
            above -= c;
            if above < n {
                return i as u64 + 1;
            }
        }
        TIME_WAIT_LEN_S
    }
}

/// Client-side sockets of one flow group against the ephemeral range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortGroup {
    /// Local (client) address.
    pub client: String,
    /// Remote (server) address.
    pub server: String,
    /// Remote port.
    pub server_port: u16,
    /// Ephemeral ports this group holds (every state, TIME_WAIT included).
    pub ports_used: u64,
    /// Of which in TIME_WAIT.
    pub time_wait: u64,
    /// Ports left for new connections of this group.
    pub headroom: u64,
}

/// Ephemeral ports: the range, and its use per flow group (connect() picks a port unique per
/// (client IP, server IP, server port), so each group has the whole range to itself).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ephemeral {
    /// `ip_local_port_range`, inclusive.
    pub range: [u16; 2],
    /// Ports in the range.
    pub range_ports: u32,
    /// Of which reserved (`ip_local_reserved_ports`).
    pub reserved_in_range: u32,
    /// Ports connect() may pick.
    pub usable: u32,
    /// Busiest groups, plus every group whose server port is a port of interest.
    pub groups: Vec<PortGroup>,
    /// Distinct groups.
    pub groups_total: usize,
    /// Distinct local ports in the range held by any socket (bind()-to-0 clients share these).
    pub distinct_ports_in_range: u32,
}

/// A listening socket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    /// Address it listens on.
    pub local: String,
    /// Port.
    pub port: u16,
    /// Connections completed and waiting for accept().
    pub accept_queue: u32,
    /// Effective backlog: min(requested, somaxconn). The queue is full above it (it holds
    /// backlog + 1). Unknown when read from /proc/net/tcp.
    pub backlog: Option<u32>,
    /// Owned by the target process (or a descendant).
    pub target: bool,
}

/// Network sysctls of the namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NetSysctls {
    /// `net.ipv4.ip_local_port_range`.
    pub ip_local_port_range: Option<[u16; 2]>,
    /// `net.ipv4.ip_local_reserved_ports` (as the kernel prints it).
    pub ip_local_reserved_ports: Option<String>,
    /// `net.ipv4.tcp_tw_reuse` (0 off, 1 on, 2 loopback only).
    pub tcp_tw_reuse: Option<u64>,
    /// `net.ipv4.tcp_tw_reuse_delay`, ms.
    pub tcp_tw_reuse_delay_ms: Option<u64>,
    /// `net.ipv4.tcp_fin_timeout` (FIN_WAIT2, not TIME_WAIT), s.
    pub tcp_fin_timeout_s: Option<u64>,
    /// `net.ipv4.tcp_max_tw_buckets`.
    pub tcp_max_tw_buckets: Option<u64>,
    /// `net.core.somaxconn`: caps every listen() backlog.
    pub somaxconn: Option<u64>,
    /// `net.ipv4.tcp_max_syn_backlog`.
    pub tcp_max_syn_backlog: Option<u64>,
    /// `net.ipv4.tcp_syncookies`.
    pub tcp_syncookies: Option<u64>,
    /// Where they were read.
    pub read_from: String,
}

/// TcpExt counters at one instant (cumulative since the namespace was created).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpExtSnapshot {
    /// When, ms since the Unix epoch.
    pub taken_unix_ms: u64,
    /// Counter values by TcpExt name.
    pub counters: BTreeMap<String, u64>,
}

/// TcpExt counter increments between a baseline and this census.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TcpExtDelta {
    /// Seconds between the two snapshots.
    pub window_s: f64,
    /// Increments by name.
    pub counters: BTreeMap<String, u64>,
    /// A counter went backwards: the namespace was recreated; increments are unreliable.
    pub reset: bool,
}

/// Descriptors of one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FdUse {
    /// `target` or `generator`.
    pub role: String,
    /// Process id.
    pub pid: u32,
    /// Its comm (escaped).
    pub comm: String,
    /// Open descriptors (/proc/PID/fd).
    pub open_fds: Option<u64>,
    /// RLIMIT_NOFILE soft limit (`None`: unlimited).
    pub soft_limit: Option<u64>,
    /// Hard limit (`None`: unlimited).
    pub hard_limit: Option<u64>,
}

/// A planned open-loop run: it legitimately holds rate × timeout connections in flight.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// Arrivals per second.
    pub rate_per_s: f64,
    /// Client timeout, s.
    pub timeout_s: f64,
    /// ceil(rate × timeout): connections in flight when the server stops answering.
    pub in_flight: u64,
}

impl Plan {
    /// A plan from `--rate` and `--timeout`.
    pub fn new(rate_per_s: f64, timeout: Duration) -> Self {
        let timeout_s = timeout.as_secs_f64();
        Plan {
            rate_per_s,
            timeout_s,
            in_flight: (rate_per_s * timeout_s - 1e-9).ceil().max(0.0) as u64,
        }
    }
}

/// Everything the network rules look at.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NetObservation {
    /// Which namespace (`pid 123`, `` `bench` ``, `trapdetect's own`).
    pub netns: String,
    /// `sock_diag` or `/proc/net/tcp`.
    pub source: String,
    /// Time the census took (socket dump, sysctls, counters, target), ms.
    pub census_ms: f64,
    /// When, ms since the Unix epoch.
    pub taken_unix_ms: u64,
    /// TCP sockets, every state.
    pub sockets_total: u64,
    /// By state.
    pub sockets: BTreeMap<String, u64>,
    /// Ports of interest: the target's listening ports and those asked for.
    pub ports: Vec<u16>,
    /// TIME_WAIT.
    pub time_wait: TimeWait,
    /// Ephemeral ports (`None` when the range is unknown).
    pub ephemeral: Option<Ephemeral>,
    /// Listeners: the target's, else those on the ports of interest, else all.
    pub listeners: Vec<Listener>,
    /// Listening sockets in the namespace.
    pub listeners_total: usize,
    /// Sysctls.
    pub sysctls: NetSysctls,
    /// TcpExt counters now.
    pub tcp_ext: Option<TcpExtSnapshot>,
    /// Increments since a baseline, when one was given.
    pub tcp_ext_delta: Option<TcpExtDelta>,
    /// Descriptor use of the target (and of the load generator, when added).
    pub fds: Vec<FdUse>,
    /// The planned run, when given.
    pub plan: Option<Plan>,
    /// Traced series, when the tracer ran.
    pub traced: Option<NetTraced>,
    /// What limited the census.
    pub notes: Vec<String>,
}

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
        }
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
            ..
        } = self;
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
        tw.groups = groups;

        let ephemeral = sysctls.ip_local_port_range.map(|[lo, hi]| {
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
                    (a.server_port, &a.client, &a.server).cmp(&(
                        b.server_port,
                        &b.client,
                        &b.server,
                    ))
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
        });

        let mine = |s: &SockRec| target.is_some_and(|t| t.contains(&s.inode));
        let mut listeners: Vec<Listener> = all_listeners
            .iter()
            .filter(|s| {
                mine(s)
                    || interest.contains(&s.local.port())
                    || (target.is_none() && ports.is_empty())
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

        let mut sockets: BTreeMap<String, u64> = BTreeMap::new();
        for (state, &n) in by_state.iter().enumerate().filter(|(_, n)| **n > 0) {
            *sockets
                .entry(state_name(state as u8).to_string())
                .or_default() += n;
        }
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
        let listeners = socks
            .iter()
            .filter(|s| s.state == TCP_LISTEN)
            .cloned()
            .collect();
        let mut t = Tally::new(listeners, sysctls, ports, target_inodes);
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

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What a census is asked for besides the sockets.
#[derive(Clone, Copy)]
struct Ask<'a> {
    ports: &'a [u16],
    target: Option<&'a HashSet<u64>>,
}

fn read_proc_tcp(dir: &Path, socks: &mut Vec<SockRec>, notes: &mut Vec<String>) -> io::Result<()> {
    for f in ["tcp", "tcp6"] {
        let p = dir.join(f);
        match std::fs::read_to_string(&p) {
            Ok(text) => {
                let (mut v, bad) = procfs::parse_tcp(&text);
                if bad > 0 {
                    notes.push(format!("{}: {bad} unparsable lines skipped", p.display()));
                }
                socks.append(&mut v);
            }
            // No IPv6 in this kernel: nothing to count there.
            Err(e) if f == "tcp6" && e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_netstat(dir: &Path) -> Option<TcpExtSnapshot> {
    let text = std::fs::read_to_string(dir.join("netstat")).ok()?;
    Some(TcpExtSnapshot {
        taken_unix_ms: unix_ms(),
        counters: procfs::parse_netstat(&text),
    })
}

/// Reads sockets, sysctls and counters of the calling thread's namespace. With sock_diag the
/// listeners come first (a dump that skips the connection hash), then everything else is
/// tallied as it arrives.
fn read_here(read_from: String, ask: Ask) -> Result<NetObservation> {
    let here = Path::new("/proc/thread-self/net");
    let mut sysctls = procfs::sysctls_from(&procfs::read_sysctls());
    sysctls.read_from = read_from;
    let mut notes = vec![];
    let streamed = Diag::open().and_then(|mut d| {
        let mut listeners = vec![];
        d.dump_tcp(1 << TCP_LISTEN, &mut |r| listeners.push(r))?;
        let mut t = Tally::new(listeners, &sysctls, ask.ports, ask.target);
        d.dump_tcp(ALL_STATES & !(1 << TCP_LISTEN), &mut |r| t.add(&r))?;
        Ok(t.finish())
    });
    let mut obs = match streamed {
        Ok(mut o) => {
            o.source = "sock_diag".into();
            o
        }
        Err(e) => {
            notes.push(format!(
                "sock_diag unavailable ({e}): read /proc/net/tcp{{,6}} instead, which does not show listen backlogs"
            ));
            let mut socks = vec![];
            read_proc_tcp(here, &mut socks, &mut notes)
                .map_err(|e| Error::input("/proc/net/tcp", e))?;
            let mut o = NetObservation::build(&socks, &sysctls, ask.ports, ask.target);
            o.source = "/proc/net/tcp".into();
            o
        }
    };
    obs.tcp_ext = read_netstat(here);
    obs.notes = notes;
    Ok(obs)
}

/// Without the right to enter a process's namespace, its /proc/PID/net files still answer
/// for it; its sysctls cannot be read, and are reported unknown rather than ours.
fn read_via_proc_pid(pid: u32, why: &io::Error, ask: Ask) -> Result<NetObservation> {
    let dir = std::path::PathBuf::from(format!("/proc/{pid}/net"));
    let mut socks = vec![];
    let mut notes = vec![format!(
        "cannot enter the network namespace of pid {pid} ({why}; needs CAP_SYS_ADMIN): sockets \
         and counters read from /proc/{pid}/net, its sysctls are unknown"
    )];
    read_proc_tcp(&dir, &mut socks, &mut notes)
        .map_err(|e| Error::input(format!("{}/tcp", dir.display()), e))?;
    let sysctls = NetSysctls {
        read_from: format!("not read: cannot enter the namespace of pid {pid}"),
        ..Default::default()
    };
    let mut obs = NetObservation::build(&socks, &sysctls, ask.ports, ask.target);
    obs.source = "/proc/net/tcp".into();
    obs.tcp_ext = read_netstat(&dir);
    obs.notes = notes;
    Ok(obs)
}

/// Where a namespace is, relative to ours.
enum Route {
    Here,
    Enter(std::path::PathBuf),
}

fn route(ns: &Netns) -> Result<Route> {
    let Some(path) = ns.path() else {
        return Ok(Route::Here);
    };
    match (netns::identity(&path), netns::own_identity()) {
        (Ok(a), Ok(b)) if a == b => Ok(Route::Here),
        (Ok(_), _) => Ok(Route::Enter(path)),
        (Err(e), _) if e.kind() == io::ErrorKind::NotFound => Err(match ns {
            Netns::Named(n) => Error::usage(format!(
                "no network namespace `{}` (see `ip netns list`)",
                escape::text(n)
            )),
            _ => Error::usage(format!("{}: no such process", ns.label())),
        }),
        // No access to the namespace file: try to enter anyway, the open reports why.
        (Err(_), _) => Ok(Route::Enter(path)),
    }
}

fn enter_error(ns: &Netns, e: EnterError) -> Error {
    let (what, e) = match e {
        EnterError::Open(e) => ("open", e),
        EnterError::Setns(e) => ("setns", e),
    };
    if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
        Error::Privilege(format!(
            "entering the network namespace of {} needs CAP_SYS_ADMIN ({what}: {e}); run as root",
            ns.label()
        ))
    } else {
        Error::Syscall {
            call: format!("{what} network namespace of {}", ns.label()),
            source: e,
        }
    }
}

fn read_namespace(ns: &Netns, ask: Ask) -> Result<NetObservation> {
    match route(ns)? {
        Route::Here => read_here(
            match ns {
                Netns::Own => "trapdetect's own namespace".into(),
                other => format!(
                    "trapdetect's own namespace, which is that of {}",
                    other.label()
                ),
            },
            ask,
        ),
        Route::Enter(path) => {
            let label = format!("the namespace of {} (entered with setns)", ns.label());
            match netns::run_in(&path, || read_here(label, ask)) {
                Ok(r) => r,
                Err(EnterError::Setns(e) | EnterError::Open(e))
                    if matches!(ns, Netns::Pid(_))
                        && matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) =>
                {
                    let Netns::Pid(p) = ns else { unreachable!() };
                    read_via_proc_pid(*p, &e, ask)
                }
                Err(e) => Err(enter_error(ns, e)),
            }
        }
    }
}

/// Socket inodes held by `pid` and its descendants (listeners are often held by a master
/// while workers accept), with notes on what could not be read.
fn target_inodes(pid: u32, notes: &mut Vec<String>) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    let mut queue = vec![pid];
    let mut seen = HashSet::new();
    while let Some(p) = queue.pop() {
        if !seen.insert(p) || seen.len() > 4096 {
            continue;
        }
        match std::fs::read_dir(format!("/proc/{p}/fd")) {
            Ok(rd) => {
                for e in rd.flatten() {
                    if let Ok(l) = std::fs::read_link(e.path())
                        && let Some(n) = l
                            .to_str()
                            .and_then(|s| s.strip_prefix("socket:["))
                            .and_then(|s| s.strip_suffix(']'))
                            .and_then(|s| s.parse().ok())
                    {
                        inodes.insert(n);
                    }
                }
            }
            Err(e) if p == pid => notes.push(format!(
                "cannot list /proc/{pid}/fd ({e}): the target's listeners are not identified"
            )),
            Err(_) => {}
        }
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                if let Ok(c) = std::fs::read_to_string(t.path().join("children")) {
                    queue.extend(c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
                }
            }
        }
    }
    inodes
}

/// Descriptor use and RLIMIT_NOFILE of a process (`role`: `target` or `generator`).
pub fn fd_use(pid: u32, role: &str) -> Result<FdUse> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .map_err(|e| Error::input(format!("/proc/{pid}/limits"), e))?;
    let (soft, hard) = procfs::parse_nofile(&limits).ok_or_else(|| {
        Error::Untrusted(format!(
            "/proc/{pid}/limits has no readable `Max open files` line"
        ))
    })?;
    let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = escape::bytes(comm.strip_suffix(b"\n").unwrap_or(&comm));
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|rd| rd.count() as u64);
    Ok(FdUse {
        role: role.to_string(),
        pid,
        comm,
        open_fds,
        soft_limit: soft,
        hard_limit: hard,
    })
}

/// Census of the namespace of `pid` (or trapdetect's own), with the target's listeners and
/// descriptors, against a planned run of `plan = (rate per second, client timeout)`. `ports`
/// are ports of interest besides the target's listening ports.
pub fn census(
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
) -> Result<NetObservation> {
    census_in(&pid.map_or(Netns::Own, Netns::Pid), pid, plan, ports)
}

/// Census of namespace `ns` (which need not be `pid`'s).
pub fn census_in(
    ns: &Netns,
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
) -> Result<NetObservation> {
    let t0 = Instant::now();
    if let Some(p) = pid
        && let Err(e) = std::fs::metadata(format!("/proc/{p}"))
    {
        return Err(if e.kind() == io::ErrorKind::NotFound {
            Error::usage(format!("pid {p}: no such process"))
        } else {
            Error::input(format!("/proc/{p}"), e)
        });
    }
    let mut notes = vec![];
    let inodes = pid.map(|p| target_inodes(p, &mut notes));
    let ask = Ask {
        ports,
        target: inodes.as_ref(),
    };
    let mut obs = read_namespace(ns, ask)?;
    if let Some(p) = pid {
        obs.fds.push(fd_use(p, "target")?);
    }
    obs.netns = ns.label();
    obs.taken_unix_ms = unix_ms();
    obs.plan = plan.map(|(r, t)| Plan::new(r, t));
    notes.append(&mut obs.notes);
    obs.notes = notes;
    obs.census_ms = crate::traps::round(t0.elapsed().as_secs_f64() * 1000.0, 2);
    Ok(obs)
}

/// TIME_WAIT sockets on one port at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSample {
    /// Sockets whose local or remote port is the port.
    pub count: u64,
    /// Their remaining timers, ms.
    pub remaining_ms: Vec<u32>,
}

impl PortSample {
    /// Exact time until fewer than `n` of these sockets remain, from their timers.
    pub fn until_below(&self, n: u64) -> Duration {
        if self.count < n || n == 0 {
            return Duration::ZERO;
        }
        let mut r = self.remaining_ms.clone();
        r.sort_unstable_by(|a, b| b.cmp(a));
        Duration::from_millis(r.get(n as usize - 1).copied().unwrap_or(0) as u64)
    }
}

enum WatchHow {
    Diag(Diag),
    ProcDir(std::path::PathBuf),
    ProcEnter(std::path::PathBuf),
}

/// Repeated TIME_WAIT counts on one namespace (for `wait-drain`): the sock_diag socket is
/// opened inside the namespace once and polled with the kernel's state filter.
pub struct TimeWaitWatch {
    how: WatchHow,
    /// `sock_diag` or `/proc/net/tcp`.
    pub source: &'static str,
}

impl TimeWaitWatch {
    /// Opens a watch on namespace `ns`.
    pub fn open(ns: &Netns) -> Result<Self> {
        let diag = match route(ns)? {
            Route::Here => Ok(Diag::open()),
            Route::Enter(path) => netns::run_in(&path, Diag::open).map_err(|e| (path, e)),
        };
        Ok(match diag {
            Ok(Ok(d)) => TimeWaitWatch {
                how: WatchHow::Diag(d),
                source: "sock_diag",
            },
            Ok(Err(_)) => TimeWaitWatch {
                how: match ns.path() {
                    None => WatchHow::ProcDir("/proc/thread-self/net".into()),
                    Some(p) => WatchHow::ProcEnter(p),
                },
                source: "/proc/net/tcp",
            },
            Err((_, EnterError::Setns(e) | EnterError::Open(e)))
                if matches!(ns, Netns::Pid(_))
                    && matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) =>
            {
                let Netns::Pid(p) = ns else { unreachable!() };
                TimeWaitWatch {
                    how: WatchHow::ProcDir(format!("/proc/{p}/net").into()),
                    source: "/proc/net/tcp",
                }
            }
            Err((_, e)) => return Err(enter_error(ns, e)),
        })
    }

    /// Counts TIME_WAIT sockets whose local or remote port is `port`.
    pub fn sample(&mut self, port: u16) -> Result<PortSample> {
        let mut s = PortSample {
            count: 0,
            remaining_ms: vec![],
        };
        let mut take = |r: SockRec| {
            if r.state == TCP_TIME_WAIT && (r.local.port() == port || r.remote.port() == port) {
                s.count += 1;
                s.remaining_ms.push(r.expires_ms);
            }
        };
        let read_dir = |dir: &Path| -> io::Result<Vec<SockRec>> {
            let mut v = vec![];
            read_proc_tcp(dir, &mut v, &mut vec![])?;
            Ok(v)
        };
        match &mut self.how {
            WatchHow::Diag(d) => {
                d.dump_tcp(1 << TCP_TIME_WAIT, &mut take)
                    .map_err(|e| Error::Syscall {
                        call: "sock_diag dump".into(),
                        source: e,
                    })?
            }
            WatchHow::ProcDir(dir) => read_dir(dir)
                .map_err(|e| Error::input(dir.display().to_string(), e))?
                .into_iter()
                .for_each(take),
            WatchHow::ProcEnter(path) => {
                let here = Path::new("/proc/thread-self/net");
                netns::run_in(path, || read_dir(here))
                    .map_err(|e| Error::Untrusted(format!("re-entering the namespace: {e:?}")))?
                    .map_err(|e| Error::input("/proc/net/tcp", e))?
                    .into_iter()
                    .for_each(take)
            }
        }
        Ok(s)
    }
}

fn thousands(n: u64) -> String {
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

/// Formats a count with thousands separators (shared with the rules' text).
pub fn fmt_count(n: u64) -> String {
    thousands(n)
}

/// Text rendering of the observation for the report's `network` section.
pub fn render_text(o: &NetObservation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  netns {}, read with {}, census {:.1} ms",
        o.netns, o.source, o.census_ms
    );
    let states: Vec<String> = o
        .sockets
        .iter()
        .map(|(k, v)| format!("{k} {}", thousands(*v)))
        .collect();
    let _ = writeln!(
        out,
        "  TCP sockets {}: {}",
        thousands(o.sockets_total),
        if states.is_empty() {
            "-".into()
        } else {
            states.join(", ")
        }
    );
    let tw = &o.time_wait;
    if tw.count > 0 {
        let _ = writeln!(
            out,
            "  TIME_WAIT {}: closed first by server {}, client {}, unknown {}; all drained in {:.1} s (timers)",
            thousands(tw.count),
            thousands(tw.closed_first.server),
            thousands(tw.closed_first.client),
            thousands(tw.closed_first.unknown),
            tw.drain_all_ms.unwrap_or(0) as f64 / 1000.0
        );
        let ports: Vec<String> = tw
            .by_local_port
            .iter()
            .map(|p| format!("{} {}", p.port, thousands(p.count)))
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
                thousands(g.count),
                g.closed_first.label()
            );
        }
        if tw.groups_total > tw.groups.len() {
            let _ = writeln!(out, "    ... {} flow groups in all", tw.groups_total);
        }
    } else {
        let _ = writeln!(out, "  TIME_WAIT 0");
    }
    if let Some(e) = &o.ephemeral {
        let _ = writeln!(
            out,
            "  ephemeral ports {}-{}: {} usable ({} reserved); {} in use across {} flow groups",
            e.range[0],
            e.range[1],
            thousands(e.usable as u64),
            e.reserved_in_range,
            thousands(e.distinct_ports_in_range as u64),
            e.groups_total
        );
        for g in &e.groups {
            let _ = writeln!(
                out,
                "    {} -> {}:{}  used {} (TIME_WAIT {}), headroom {}",
                g.client,
                g.server,
                g.server_port,
                thousands(g.ports_used),
                thousands(g.time_wait),
                thousands(g.headroom)
            );
        }
    } else {
        let _ = writeln!(out, "  ephemeral ports: range unknown");
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
    if let Some(d) = &o.tcp_ext_delta {
        let c: Vec<String> = d
            .counters
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k} +{}", thousands(*v)))
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
    for f in &o.fds {
        let lim = |v: Option<u64>| v.map_or("unlimited".into(), thousands);
        let _ = writeln!(
            out,
            "  descriptors of {} pid {} ({}): {} open, soft limit {}, hard {}",
            f.role,
            f.pid,
            f.comm,
            f.open_fds.map_or("?".into(), thousands),
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
            thousands(p.in_flight)
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
    for n in &o.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/net")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn plan_arithmetic() {
        assert_eq!(Plan::new(400.0, Duration::from_secs(10)).in_flight, 4000);
        assert_eq!(Plan::new(800.0, Duration::from_secs(10)).in_flight, 8000);
        assert_eq!(Plan::new(2.5, Duration::from_secs(1)).in_flight, 3);
    }

    #[test]
    fn until_below_uses_the_nth_longest_timer() {
        let s = PortSample {
            count: 4,
            remaining_ms: vec![1000, 59_000, 30_000, 2000],
        };
        assert_eq!(s.until_below(5), Duration::ZERO);
        // Fewer than 2 remain once all but the longest have expired.
        assert_eq!(s.until_below(2), Duration::from_millis(30_000));
        assert_eq!(s.until_below(1), Duration::from_millis(59_000));
        assert_eq!(thousands(20000), "20,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234567), "1,234,567");
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
