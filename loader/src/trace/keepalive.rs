//! Whether the target's ports carry connections that stay open, watched from user space so
//! the per-segment request counter (`tcp_probe`, which runs for every TCP segment of the
//! host) is attached only where it is needed (issue 28).
//!
//! A server that accepts one connection per request (php-fpm or php-cgi behind nginx over
//! TCP, the classic deployment) needs no counter: its accepts are its requests, exactly. A
//! connection that carries several requests (keep-alive, a benchmark opened before the
//! trace) is one accept for many requests, and only the counter tells them. Such a
//! connection stays open: the watch lists the ESTABLISHED server-side sockets of the target's
//! ports with sock_diag every [`LOOK_EVERY`] (every [`LOOK_LATER`] after the window's first
//! second) and reports the first one seen in two looks in a
//! row that has answered (sent data: `tcpi_data_segs_out`) and is still open, so carries or
//! awaits another request. One request served slower than the interval (a slow request, or one
//! queued for a worker) is in two looks too, but before its answer: a php-fpm worker stalled
//! 100 ms once under wrk attached the counter that way, though every connection carried one
//! request. A connection stalled between its answer and its close still attaches it, which
//! costs what the counter always cost and counts the same requests. Where the kernel gives no
//! `tcp_info` (before Linux 4.6), being in two looks is enough.

use std::{collections::HashSet, time::Duration};

use crate::host::net::{
    SockRec,
    diag::{Diag, SendState, TCP_ESTABLISHED},
};

/// How often the watch looks while the counter is held back, in the window's first second.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// How often it looks after the first second. A look is a sock_diag dump, and the kernel walks
/// every socket of the namespace's TCP hash for it, whatever the filter: with 10,000 TIME_WAIT
/// sockets of other flows present (this VM, 2026-12-06) a 5 s trace of a server that takes a
/// connection per request, where the counter stays held back all window, took 0.231 s of CPU at
/// ten looks a second and 0.181 s at these (about 1.4 ms a look). A benchmark's clients
/// connect at its start; a connection opened later is found within two of these looks.
pub const LOOK_LATER: Duration = Duration::from_secs(1);

/// The interval between two looks, `since` the window opened.
pub fn look_every(since: Duration) -> Duration {
    if since < Duration::from_secs(1) {
        LOOK_EVERY
    } else {
        LOOK_LATER
    }
}

/// The first connection seen open in two looks in a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StayedOpen {
    /// The target's port it is on.
    pub port: u16,
    /// The client's address, as the report shows it.
    pub remote: String,
}

/// The watch: a sock_diag socket in the target's network namespace and the server-side
/// sockets the last look found.
pub struct KeepAliveWatch {
    diag: Diag,
    ports: Vec<u16>,
    last: HashSet<u64>,
}

impl KeepAliveWatch {
    /// A watch over `ports` of `root`'s network namespace; `None` when sock_diag cannot be
    /// opened there (the counter is then attached from the start, as without a watch).
    pub fn open(root: u32, ports: &[u16]) -> Option<KeepAliveWatch> {
        if ports.is_empty() {
            return None;
        }
        let diag = Diag::open_in_netns_of(root)?;
        let mut w = KeepAliveWatch {
            diag,
            ports: ports.to_vec(),
            last: HashSet::new(),
        };
        // The first look: a connection open before the trace (a benchmark's keep-alive
        // connections) is reported at the next one.
        w.look().ok()?;
        Some(w)
    }

    /// The ports watched.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Looks once; the first connection also open at the previous look, if any.
    pub fn look(&mut self) -> std::io::Result<Option<StayedOpen>> {
        let mut now = vec![];
        self.diag
            .dump_tcp_sends(1 << TCP_ESTABLISHED, &mut |r, s| now.push((r, s)))?;
        let (seen, stayed) = stayed_open(&self.last, &now, &self.ports);
        self.last = seen;
        Ok(stayed)
    }
}

/// The server-side sockets of `ports` among `now` (by inode), and the first of them that was
/// in `before` too and has answered (or whose answers the kernel does not say).
pub fn stayed_open(
    before: &HashSet<u64>,
    now: &[(SockRec, Option<SendState>)],
    ports: &[u16],
) -> (HashSet<u64>, Option<StayedOpen>) {
    let mut seen = HashSet::new();
    let mut stayed: Option<&SockRec> = None;
    for (r, send) in now {
        if r.state != TCP_ESTABLISHED || r.inode == 0 || !ports.contains(&r.local.port()) {
            continue;
        }
        seen.insert(r.inode);
        let answered = send.is_none_or(|s| s.data_segs_out > 0);
        if stayed.is_none() && before.contains(&r.inode) && answered {
            stayed = Some(r);
        }
    }
    let stayed = stayed.map(|r| StayedOpen {
        port: r.local.port(),
        remote: r.remote.to_string(),
    });
    (seen, stayed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_every_100_ms_in_the_first_second_then_every_second() {
        assert_eq!(look_every(Duration::ZERO), Duration::from_millis(100));
        assert_eq!(
            look_every(Duration::from_millis(999)),
            Duration::from_millis(100)
        );
        assert_eq!(look_every(Duration::from_secs(1)), Duration::from_secs(1));
        assert_eq!(look_every(Duration::from_secs(600)), Duration::from_secs(1));
    }

    fn rec(state: u8, local: &str, remote: &str, inode: u64) -> (SockRec, Option<SendState>) {
        (sock(state, local, remote, inode), None)
    }

    fn sock(state: u8, local: &str, remote: &str, inode: u64) -> SockRec {
        SockRec {
            state,
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
            timer: 0,
            expires_ms: 0,
            rqueue: 0,
            backlog: None,
            inode,
        }
    }

    #[test]
    fn a_server_side_connection_in_two_looks_stayed_open() {
        let ports = [9000];
        // php-fpm's port behind nginx: a connection per request, none in two looks.
        let a = [
            rec(1, "127.0.0.1:9000", "127.0.0.1:40001", 11),
            // nginx's own end of the same connection (client side): not the target's.
            rec(1, "127.0.0.1:40001", "127.0.0.1:9000", 12),
            // Another server on the host.
            rec(1, "127.0.0.1:8080", "127.0.0.1:40002", 13),
        ];
        let (seen, stayed) = stayed_open(&HashSet::new(), &a, &ports);
        assert_eq!(seen, HashSet::from([11]));
        assert_eq!(stayed, None);
        let b = [
            rec(1, "127.0.0.1:9000", "127.0.0.1:40003", 14),
            rec(1, "127.0.0.1:40003", "127.0.0.1:9000", 12),
            rec(1, "127.0.0.1:8080", "127.0.0.1:40002", 13),
        ];
        let (seen, stayed) = stayed_open(&seen, &b, &ports);
        assert_eq!(seen, HashSet::from([14]));
        assert_eq!(stayed, None);
        // Inode 14 again (and one on IPv6): it stayed open; the first one is named.
        let c = [
            rec(1, "[::1]:9000", "[::1]:40010", 15),
            rec(1, "127.0.0.1:9000", "127.0.0.1:40003", 14),
        ];
        let (seen, stayed) = stayed_open(&seen, &c, &ports);
        assert_eq!(seen, HashSet::from([14, 15]));
        assert_eq!(
            stayed,
            Some(StayedOpen {
                port: 9000,
                remote: "127.0.0.1:40003".into()
            })
        );
        // A socket without an inode (orphaned) or in another state is not one.
        let d = [
            rec(1, "127.0.0.1:9000", "127.0.0.1:40020", 0),
            rec(8, "127.0.0.1:9000", "127.0.0.1:40003", 14),
        ];
        let (seen, stayed) = stayed_open(&HashSet::from([14]), &d, &ports);
        assert!(seen.is_empty());
        assert_eq!(stayed, None);
    }

    #[test]
    fn a_connection_in_two_looks_before_its_answer_is_a_slow_request() {
        let ports = [9000];
        let with = |inode, data_segs_out| {
            let send = SendState {
                snd_mss: 65483,
                snd_cwnd: 10,
                data_segs_out,
                ..Default::default()
            };
            (
                sock(1, "127.0.0.1:9000", "127.0.0.1:40001", inode),
                Some(send),
            )
        };
        // A FastCGI connection whose worker stalled: in both looks, nothing answered yet.
        let (seen, stayed) = stayed_open(&HashSet::from([11]), &[with(11, 0)], &ports);
        assert_eq!(seen, HashSet::from([11]));
        assert_eq!(stayed, None);
        // Answered and still open: it carries (or waits for) another request.
        let (_, stayed) = stayed_open(&seen, &[with(11, 3)], &ports);
        assert_eq!(
            stayed,
            Some(StayedOpen {
                port: 9000,
                remote: "127.0.0.1:40001".into()
            })
        );
        // Answered, but new at this look: not yet.
        let (_, stayed) = stayed_open(&HashSet::new(), &[with(12, 3)], &ports);
        assert_eq!(stayed, None);
    }
}
