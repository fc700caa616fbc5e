//! The census's data model: one TCP socket as read (`SockRec`), and the observation the net.*
//! rules judge (`NetObservation`: TIME_WAIT, ephemeral ports, listeners, sysctls, counters,
//! descriptors, the planned run). Plain data, serialised as the report's `network` section.

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

use serde::{Deserialize, Serialize};

use super::NetTraced;

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
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PortCount {
    /// Port.
    pub port: u16,
    /// Sockets.
    pub count: u64,
}

/// TIME_WAIT sockets of one flow group: (client IP, server IP, server port), oriented by who
/// connected to whom (for `unknown`, the lower port is taken as the server's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ClosedFirst {
    /// The server closed first: TIME_WAIT sits on the server's port.
    pub server: u64,
    /// The client closed first: TIME_WAIT holds the client's ephemeral ports.
    pub client: u64,
    /// Could not tell.
    pub unknown: u64,
}

/// Every TIME_WAIT socket of the namespace, summarised.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
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
    /// TIME_WAIT on the ports the target connects to (its upstreams: nginx's FastCGI or proxy
    /// connections), busiest first; those flows are the target's own, not the load
    /// generator's. Empty when the target holds no outgoing connection at the census.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream: Vec<UpstreamTimeWait>,
}

/// TIME_WAIT of one upstream port: a port the target connects to (seen from its live outgoing
/// connections at the census, or from its connects during a trace's window), not one it
/// listens on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct UpstreamTimeWait {
    /// The upstream's address as the target connects to it (`127.0.0.1:9000`).
    pub server: String,
    /// Its port.
    pub port: u16,
    /// TIME_WAIT sockets with that port local or remote.
    pub count: u64,
    /// Of those, with the port local: the upstream server (in this namespace) closed first.
    pub closed_by_upstream: u64,
    /// With the port remote: the target, as the upstream's client, closed first.
    pub closed_by_target: u64,
    /// Connections the target held to it at the census.
    pub live_connections: u64,
    /// Connections the target opened to it during the trace's window (counted in the kernel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connects_during_window: Option<u64>,
}

impl TimeWait {
    /// TIME_WAIT sockets on the target's upstream ports.
    pub fn upstream_total(&self) -> u64 {
        self.upstream.iter().map(|u| u.count).sum()
    }
}

/// TIME_WAIT on the target's ports (its listeners and the ports asked about).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TcpExtDelta {
    /// Seconds between the two snapshots.
    pub window_s: f64,
    /// Increments by name.
    pub counters: BTreeMap<String, u64>,
    /// A counter went backwards: the namespace was recreated; increments are unreliable.
    pub reset: bool,
}

/// Descriptors of one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_arithmetic() {
        assert_eq!(Plan::new(400.0, Duration::from_secs(10)).in_flight, 4000);
        assert_eq!(Plan::new(800.0, Duration::from_secs(10)).in_flight, 8000);
        assert_eq!(Plan::new(2.5, Duration::from_secs(1)).in_flight, 3);
    }
}
