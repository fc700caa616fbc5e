//! TCP state changes counted at `sock/inet_sock_set_state`, and connect() of watched clients:
//! map layouts and the one classification of state transitions both sides use.
//!
//! The tracepoint fires in whatever context changes the state, mostly softirq (a segment
//! arriving), so events are attributed by port and network namespace, never by current pid.
//! TIME_WAIT never appears as a new state there: a socket handed to the kernel's timewait
//! machinery shows as FIN_WAIT2→CLOSE (or CLOSING→CLOSE after a simultaneous close).

use crate::hist::HIST_BUCKETS;

/// `TCP_ESTABLISHED` (include/net/tcp_states.h).
pub const TCP_ESTABLISHED: u32 = 1;
/// `TCP_SYN_SENT`.
pub const TCP_SYN_SENT: u32 = 2;
/// `TCP_SYN_RECV`.
pub const TCP_SYN_RECV: u32 = 3;
/// `TCP_FIN_WAIT1`.
pub const TCP_FIN_WAIT1: u32 = 4;
/// `TCP_FIN_WAIT2`.
pub const TCP_FIN_WAIT2: u32 = 5;
/// `TCP_CLOSE`.
pub const TCP_CLOSE: u32 = 7;
/// `TCP_CLOSE_WAIT`.
pub const TCP_CLOSE_WAIT: u32 = 8;
/// `TCP_LAST_ACK`.
pub const TCP_LAST_ACK: u32 = 9;
/// `TCP_CLOSING`.
pub const TCP_CLOSING: u32 = 11;
/// `IPPROTO_TCP`: the tracepoint also fires for SCTP and MPTCP sockets.
pub const IPPROTO_TCP: u32 = 6;

/// FIN_WAIT2→CLOSE or CLOSING→CLOSE: the socket closed first and was handed to a timewait
/// socket (TIME_WAIT for 60 s; or, for an orphan whose peer has not sent its FIN yet, the
/// FIN_WAIT2 substate for `tcp_fin_timeout`). Also counts the rare FIN_WAIT2 aborts (linger2
/// < 0, data after close) and entries dropped at `tcp_max_tw_buckets` (TCPTimeWaitOverflow).
pub const EV_TIME_WAIT: u32 = 0;
/// SYN_SENT→ESTABLISHED: an active open (this side's connect() completed).
pub const EV_ACTIVE_OPEN: u32 = 1;
/// SYN_RECV→ESTABLISHED: a passive open (the handshake completed; the connection is now in
/// the listener's accept queue).
pub const EV_PASSIVE_OPEN: u32 = 2;
/// SYN_SENT→CLOSE: a connect that never got established (refused by RST, timed out, unreachable,
/// or no free local port: EADDRNOTAVAIL passes through SYN_SENT with local port 0).
pub const EV_CONNECT_FAILED: u32 = 3;
/// ESTABLISHED, SYN_RECV, FIN_WAIT1 or CLOSE_WAIT → CLOSE: torn down without completing the FIN
/// exchange (a RST sent or received, close() with unread data or SO_LINGER 0, a
/// retransmission timeout).
pub const EV_ABORT: u32 = 4;
/// LAST_ACK→CLOSE: the side that closed second finished normally (no TIME_WAIT here).
pub const EV_PASSIVE_CLOSE: u32 = 5;
/// Number of event kinds.
pub const NUM_EVENTS: u32 = 6;
/// Entries of the `UPSTREAM` map (remote port → connects of traced processes).
pub const UPSTREAM_ENTRIES: u32 = 256;

/// Event names for reports, indexed by kind.
pub const EVENT_NAMES: [&str; NUM_EVENTS as usize] = [
    "time_wait_entered",
    "active_opens",
    "passive_opens",
    "connect_failures",
    "aborts",
    "passive_closes",
];

/// The event kind of a state transition, if it is one we count.
#[inline(always)]
pub fn classify(old: u32, new: u32) -> Option<u32> {
    if new == TCP_CLOSE {
        match old {
            TCP_FIN_WAIT2 | TCP_CLOSING => Some(EV_TIME_WAIT),
            TCP_SYN_SENT => Some(EV_CONNECT_FAILED),
            TCP_ESTABLISHED | TCP_SYN_RECV | TCP_FIN_WAIT1 | TCP_CLOSE_WAIT => Some(EV_ABORT),
            TCP_LAST_ACK => Some(EV_PASSIVE_CLOSE),
            _ => None,
        }
    } else if new == TCP_ESTABLISHED {
        match old {
            TCP_SYN_SENT => Some(EV_ACTIVE_OPEN),
            TCP_SYN_RECV => Some(EV_PASSIVE_OPEN),
            _ => None,
        }
    } else {
        None
    }
}

/// Ports whose events are counted one by one (the target's listening ports).
pub const MAX_PORT_SLOTS: u32 = 16;
/// The event's local port is the watched one.
pub const DIR_LOCAL: u32 = 0;
/// The event's remote port is the watched one.
pub const DIR_REMOTE: u32 = 1;

/// Slot of `TCP_PORTS` for (port slot, direction, event kind).
#[inline(always)]
pub const fn port_index(slot: u32, dir: u32, ev: u32) -> u32 {
    (slot * 2 + dir) * NUM_EVENTS + ev
}

/// Size of `TCP_PORTS`.
pub const PORT_COUNT_SLOTS: u32 = MAX_PORT_SLOTS * 2 * NUM_EVENTS;
/// `TCP_TOTALS`: `[0, NUM_EVENTS)` every TCP socket of the host, `[NUM_EVENTS, 2 NUM_EVENTS)`
/// events on a watched port (local or remote, each event once) in a watched namespace.
pub const TOTAL_SLOTS: u32 = 2 * NUM_EVENTS;
/// Network namespaces (by inode number) whose sockets count; slot 0 empty = no filter.
pub const MAX_NETNS: u32 = 4;

/// Slots of the connect() in-flight array (`tid % CONNECT_INFLIGHT_SLOTS`).
pub const CONNECT_INFLIGHT_SLOTS: u32 = 1024;

/// A connect() between its enter and exit tracepoints.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectInflight {
    /// Owning thread (0 = empty).
    pub tid: u32,
    /// 1 when the descriptor is a TCP socket (only those are counted); `CONNECT_AT_ATTACH`
    /// for a call already in progress at attach (marked from user space, not timed).
    pub tcp: u32,
    /// Entry timestamp, ns.
    pub ts: u64,
}

/// `ConnectInflight::tcp` of a connect() already in progress when its process was marked.
pub const CONNECT_AT_ATTACH: u32 = 2;

/// `CONNECT_STATS` slot: calls that finished inside the call (success, or any error except
/// EINPROGRESS); for a blocking socket the time includes the handshake.
pub const CS_COMPLETED: u32 = 0;
/// `CONNECT_STATS` slot: non-blocking calls that returned EINPROGRESS; the time is the call
/// alone (local port search and SYN sent), not the handshake.
pub const CS_IN_PROGRESS: u32 = 1;
/// Slots of `CONNECT_STATS`.
pub const CONNECT_CLASSES: u32 = 2;

/// Count and latency of one class of connect() calls (one per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConnectStat {
    /// Calls.
    pub count: u64,
    /// Summed latency, ns.
    pub sum_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Latency histogram, see [`crate::hist`].
    pub hist: [u32; HIST_BUCKETS as usize],
}

/// `CONNECT_ERRNO` size: slot 0 counts successes, slot `e` calls that failed with errno `e`
/// (the last slot also takes anything larger).
pub const ERRNO_SLOTS: u32 = 256;
/// `EADDRINUSE`: the 4-tuple is taken (bind() to a port then connect, or tw reuse refused).
pub const EADDRINUSE: u32 = 98;
/// `EADDRNOTAVAIL`: no free ephemeral port for this (source, destination) pair.
pub const EADDRNOTAVAIL: u32 = 99;
/// `EINPROGRESS`: a non-blocking connect started; not an error.
pub const EINPROGRESS: u32 = 115;

/// Name of a connect() errno (the ones connect(2) documents, and the common network ones).
pub fn errno_name(e: u32) -> &'static str {
    match e {
        0 => "OK",
        1 => "EPERM",
        4 => "EINTR",
        9 => "EBADF",
        11 => "EAGAIN",
        13 => "EACCES",
        14 => "EFAULT",
        22 => "EINVAL",
        88 => "ENOTSOCK",
        91 => "EPROTOTYPE",
        97 => "EAFNOSUPPORT",
        98 => "EADDRINUSE",
        99 => "EADDRNOTAVAIL",
        100 => "ENETDOWN",
        101 => "ENETUNREACH",
        103 => "ECONNABORTED",
        104 => "ECONNRESET",
        105 => "ENOBUFS",
        106 => "EISCONN",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        113 => "EHOSTUNREACH",
        114 => "EALREADY",
        115 => "EINPROGRESS",
        _ => "OTHER",
    }
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for ConnectStat {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for ConnectInflight {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_classified_once() {
        assert_eq!(classify(TCP_FIN_WAIT2, TCP_CLOSE), Some(EV_TIME_WAIT));
        assert_eq!(classify(TCP_CLOSING, TCP_CLOSE), Some(EV_TIME_WAIT));
        assert_eq!(
            classify(TCP_SYN_SENT, TCP_ESTABLISHED),
            Some(EV_ACTIVE_OPEN)
        );
        assert_eq!(
            classify(TCP_SYN_RECV, TCP_ESTABLISHED),
            Some(EV_PASSIVE_OPEN)
        );
        assert_eq!(classify(TCP_SYN_SENT, TCP_CLOSE), Some(EV_CONNECT_FAILED));
        assert_eq!(classify(TCP_CLOSE_WAIT, TCP_CLOSE), Some(EV_ABORT));
        assert_eq!(classify(TCP_LAST_ACK, TCP_CLOSE), Some(EV_PASSIVE_CLOSE));
        // The steps in between are not counted: one event per connection and side.
        assert_eq!(classify(TCP_ESTABLISHED, TCP_FIN_WAIT1), None);
        assert_eq!(classify(TCP_FIN_WAIT1, TCP_FIN_WAIT2), None);
        assert_eq!(classify(TCP_ESTABLISHED, TCP_CLOSE_WAIT), None);
        assert_eq!(classify(TCP_CLOSE, TCP_SYN_SENT), None);
        // A listener closing is not a connection event.
        assert_eq!(classify(10, TCP_CLOSE), None);
        let mut seen = [0u32; NUM_EVENTS as usize];
        for old in 0..13 {
            for new in 0..13 {
                if let Some(e) = classify(old, new) {
                    seen[e as usize] += 1;
                }
            }
        }
        assert_eq!(seen, [2, 1, 1, 1, 4, 1]);
        assert_eq!(
            port_index(MAX_PORT_SLOTS - 1, DIR_REMOTE, NUM_EVENTS - 1) + 1,
            PORT_COUNT_SLOTS
        );
    }
}
