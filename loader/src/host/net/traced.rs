//! What the traced half of the network checks observed during a trace window: TCP state
//! changes counted in the kernel per watched port (`sock/inet_sock_set_state`), per-second
//! series of them and of the namespace's listen-overflow counter, and connect() of watched
//! clients. Filled by the tracer (`trace::net`); the static census leaves it `None`.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Ephemeral;
use crate::figures::Latency;

/// Counts of the TCP events the kernel side classifies (see `trapdetect_common::tcp`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct TcpEvents {
    /// FIN_WAIT2→CLOSE or CLOSING→CLOSE: the socket closed first and entered TIME_WAIT.
    pub time_wait_entered: u64,
    /// SYN_SENT→ESTABLISHED: connect() completed.
    pub active_opens: u64,
    /// SYN_RECV→ESTABLISHED: a handshake completed into a listener's accept queue.
    pub passive_opens: u64,
    /// SYN_SENT→CLOSE: a connect that never got established (refused, timed out, no port).
    pub connect_failures: u64,
    /// ESTABLISHED, SYN_RECV, FIN_WAIT1 or CLOSE_WAIT → CLOSE: torn down without the FIN
    /// exchange (RST sent or received, retransmission timeout).
    pub aborts: u64,
    /// LAST_ACK→CLOSE: the side that closed second finished normally.
    pub passive_closes: u64,
}

impl TcpEvents {
    /// From the kernel's per-kind array (`EV_*` order).
    pub fn from_kinds(k: &[u64]) -> Self {
        let g = |i: usize| k.get(i).copied().unwrap_or(0);
        TcpEvents {
            time_wait_entered: g(0),
            active_opens: g(1),
            passive_opens: g(2),
            connect_failures: g(3),
            aborts: g(4),
            passive_closes: g(5),
        }
    }

    /// New connections (active and passive opens).
    pub fn new_connections(&self) -> u64 {
        self.active_opens + self.passive_opens
    }
}

/// One watched port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TracedPort {
    /// Port.
    pub port: u16,
    /// Events of sockets whose local port this is (the server's side of its connections).
    pub local: TcpEvents,
    /// Events of sockets whose remote port this is (clients of it in the watched namespaces).
    pub remote: TcpEvents,
    /// TIME_WAIT entries each second, local and remote.
    pub time_wait_entered_per_s: Vec<u64>,
    /// New connections each second, local and remote.
    pub new_connections_per_s: Vec<u64>,
}

/// A process whose connect() calls were timed (`--watch-client`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct WatchedClient {
    /// Process id.
    pub pid: u32,
    /// Its comm (escaped).
    pub comm: String,
    /// Whether it connects from the target's network namespace.
    pub same_netns_as_target: bool,
}

/// connect() of the watched clients (and the processes they fork), TCP sockets only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ConnectTraced {
    /// The watched processes.
    pub clients: Vec<WatchedClient>,
    /// connect() calls on TCP sockets that returned during the trace.
    pub calls: u64,
    /// Returned 0 (connected, for a blocking socket).
    pub succeeded: u64,
    /// Returned EINPROGRESS: a non-blocking connect started. Not an error.
    pub in_progress: u64,
    /// Failed with any other errno.
    pub failed: u64,
    /// Failures by errno name (EINPROGRESS not included).
    pub errors: BTreeMap<String, u64>,
    /// Time in connect() of calls that finished inside the call (for a blocking socket, the
    /// handshake).
    pub latency: Option<Latency>,
    /// Time in connect() of EINPROGRESS calls: the local port search and the SYN, not the
    /// handshake.
    pub in_progress_latency: Option<Latency>,
    /// connect() calls on other sockets (unix, UDP), not counted above.
    pub not_tcp: u64,
}

/// The namespace the watched clients connect from, when it is not the target's: ephemeral
/// ports run out there, so its range is read too (at the end of the window, when the run has
/// taken its ports).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ClientNetns {
    /// Which namespace (`pid N` of the first client in it).
    pub netns: String,
    /// Its ephemeral ports at the end of the window (`None`: range unknown).
    pub ephemeral: Option<Ephemeral>,
}

/// Per-second series from the traced half (`sock/inet_sock_set_state`, connect() of watched
/// clients). Series entries cover `interval_s` each; the last one covers what is left of the
/// window, so every series sums to its total.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct NetTraced {
    /// Seconds covered.
    pub window_s: f64,
    /// Seconds per series entry.
    pub interval_s: f64,
    /// Seconds of the window before a load driven by the trace stopped sending (`run`: the
    /// drain after it excluded); what the load caused is a rate over these. Absent when the
    /// window ended with the load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_s: Option<f64>,
    /// Watched ports: the target's listening ports (at most 16).
    pub ports: Vec<u16>,
    /// Namespaces whose sockets count on those ports (empty: every namespace; the kernel's
    /// BTF lacked the offsets to tell them apart).
    pub netns: Vec<String>,
    /// Sockets entering TIME_WAIT each second on the watched ports (FIN_WAIT2→CLOSE or
    /// CLOSING→CLOSE; local or remote port, each socket once).
    pub time_wait_entered_per_s: Vec<u64>,
    /// New connections each second on the watched ports (active and passive opens).
    pub new_connections_per_s: Vec<u64>,
    /// ListenOverflows increments each second (TcpExt: namespace-wide, not per socket).
    pub listen_overflows_per_s: Vec<u64>,
    /// ListenDrops increments each second (namespace-wide).
    pub listen_drops_per_s: Vec<u64>,
    /// Totals on the watched ports (each event once).
    pub on_ports: TcpEvents,
    /// Totals for every TCP socket of the host, all namespaces and ports.
    pub system: TcpEvents,
    /// Per watched port.
    pub by_port: Vec<TracedPort>,
    /// TCP state changes the kernel did not run the probe for (another BPF program was running
    /// on that CPU); `None` when the kernel does not report it.
    pub missed_events: Option<u64>,
    /// connect() of watched clients (`None` without `--watch-client`).
    pub connect: Option<ConnectTraced>,
    /// The clients' namespace, when it is not the target's.
    pub client_netns: Option<ClientNetns>,
    /// connect() calls of watched clients that failed with EADDRNOTAVAIL.
    pub connect_eaddrnotavail: Option<u64>,
    /// ... with EADDRINUSE.
    pub connect_eaddrinuse: Option<u64>,
    /// Requests the trace counted in the window (its per-request denominator), for the
    /// rules' connections-per-request; in the report's `requests`, so not serialized here.
    #[serde(skip)]
    pub requests: Option<u64>,
}

impl NetTraced {
    /// Mean TIME_WAIT entries per second over the seconds the load ran (the window, when the
    /// trace did not drive one): a run's drain after its load adds the closes of the load's
    /// connections, not seconds of it (Apache closing 150 kept-alive connections at 30/s over
    /// a 5 s load, then draining for 7.9 s: 12/s over the window). The last, partial entry
    /// weighs by its length, not as a whole second.
    pub fn time_wait_rate(&self) -> Option<f64> {
        if self.time_wait_entered_per_s.is_empty() {
            return None;
        }
        let sum: u64 = self.time_wait_entered_per_s.iter().sum();
        let over = self.loaded_s.filter(|&l| l > 0.0).unwrap_or(self.window_s);
        Some(if over > 0.0 {
            sum as f64 / over
        } else {
            sum as f64 / self.time_wait_entered_per_s.len() as f64
        })
    }

    /// The window's TIME_WAIT entries as a burst, `(seconds with entries, seconds)` of the
    /// window, or `None` where they recur — some in at least half of the seconds the load ran
    /// (the window's, when the trace did not drive one) — so that their mean rate can be
    /// projected forward.
    /// Entries in fewer seconds are a burst: a connection pool closed at once (a generator's
    /// connections opened in its first second and closed by the server's idle timeout, or by
    /// the generator at its end), bounded by the connections there were, not a rate the load
    /// keeps up. One entry (a window of a second or less) cannot tell: it recurs.
    pub fn time_wait_burst(&self) -> Option<(usize, usize)> {
        let s = &self.time_wait_entered_per_s;
        let loaded = self.loaded_s.filter(|&l| l > 0.0).map_or(s.len(), |l| {
            ((l / self.interval_s.max(1e-3)).ceil() as usize).clamp(1, s.len())
        });
        let seconds_with = |n: usize| s.iter().take(n).filter(|&&e| e > 0).count();
        (loaded >= 2 && 2 * seconds_with(loaded) < loaded).then(|| (seconds_with(s.len()), s.len()))
    }

    /// TIME_WAIT entries on the watched ports by which side closed first: (server, client):
    /// local-port entries are the listener's side, remote-port ones its clients'.
    pub fn time_wait_sides(&self) -> (u64, u64) {
        self.by_port.iter().fold((0, 0), |(s, c), p| {
            (
                s + p.local.time_wait_entered,
                c + p.remote.time_wait_entered,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_weighs_the_partial_last_second_by_its_length() {
        let t = NetTraced {
            window_s: 2.5,
            time_wait_entered_per_s: vec![100, 100, 50],
            ..Default::default()
        };
        assert_eq!(t.time_wait_rate(), Some(100.0));
        assert_eq!(NetTraced::default().time_wait_rate(), None);
    }

    #[test]
    fn entries_in_fewer_than_half_the_seconds_are_a_burst() {
        let t = |s: &[u64]| NetTraced {
            window_s: s.len() as f64,
            time_wait_entered_per_s: s.to_vec(),
            ..Default::default()
        };
        // A kept-alive pool of 512 opened in the first second, closed by Node's 5 s idle
        // timeout and by the generator at its end (recorded: `run` at half the capacity).
        assert_eq!(
            t(&[0, 0, 0, 0, 0, 0, 426, 0, 86]).time_wait_burst(),
            Some((2, 9))
        );
        // One connection per request: every second.
        assert_eq!(t(&[190, 200, 210]).time_wait_burst(), None);
        // Every other second: half.
        assert_eq!(t(&[5, 0, 5, 0]).time_wait_burst(), None);
        assert_eq!(t(&[5, 0, 0, 5, 0]).time_wait_burst(), Some((2, 5)));
        assert_eq!(t(&[7]).time_wait_burst(), None);
        assert_eq!(t(&[]).time_wait_burst(), None);
    }

    #[test]
    fn sides_come_from_local_and_remote_port_entries() {
        let t = NetTraced {
            by_port: vec![TracedPort {
                port: 8080,
                local: TcpEvents {
                    time_wait_entered: 7,
                    ..Default::default()
                },
                remote: TcpEvents {
                    time_wait_entered: 2,
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(t.time_wait_sides(), (7, 2));
        assert_eq!(
            TcpEvents::from_kinds(&[1, 2, 3, 4, 5, 6]).new_connections(),
            5
        );
    }
}
