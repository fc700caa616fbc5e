//! sock_diag netlink (NETLINK_SOCK_DIAG, `inet_diag_req_v2`): what `ss` uses. The kernel
//! applies the state filter and hands over fixed-size records in 32 KiB batches, which is why a
//! census of 50,000 TIME_WAIT sockets costs milliseconds where /proc/net/tcp costs a text
//! rendering and parse per socket. nix's socket calls, no netlink crate: one request, one record
//! layout.
//!
//! A netlink socket belongs to the namespace it was created in; open it on a thread inside the
//! target's namespace (see `netns::run_in`) and use it from anywhere afterwards.

use std::{
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    os::fd::{AsRawFd, OwnedFd},
};

use nix::{
    errno::Errno,
    sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    },
};

use super::SockRec;

/// Address families and protocol as the one-byte fields of the request and records carry them.
const AF_INET: u8 = AddressFamily::Inet as i32 as u8;
const AF_INET6: u8 = AddressFamily::Inet6 as i32 as u8;
const IPPROTO_TCP: u8 = SockProtocol::Tcp as i32 as u8;
/// The original request (`struct inet_diag_req`): the kernel answers it for both address
/// families in one walk of the connection hash (`sdiag_family = AF_UNSPEC`), as `ss -t` does.
const TCPDIAG_GETSOCK: u16 = 18;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_HDRLEN: usize = 16;
/// `struct inet_diag_req_v2`: 4 bytes of family/protocol/ext/pad, `idiag_states`, a 48-byte
/// `inet_diag_sockid`.
const REQ_LEN: usize = 56;
/// `struct inet_diag_req`: family and lengths, the socket id, `idiag_states`, `idiag_dbs`.
const REQ_COMPAT_LEN: usize = 60;
/// `struct inet_diag_msg`.
const MSG_LEN: usize = 72;
/// The kernel fills at most ~32 KiB per dump batch; a bigger buffer never truncates.
const BUF_LEN: usize = 64 * 1024;

/// TCP state numbers (include/net/tcp_states.h).
pub const TCP_ESTABLISHED: u8 = 1;
/// Closed by the peer and this side, waiting out 2 MSL.
pub const TCP_TIME_WAIT: u8 = 6;
/// Listening.
pub const TCP_LISTEN: u8 = 10;
/// Every state (the kernel ignores bits for states that do not exist).
pub const ALL_STATES: u32 = u32::MAX;

/// An open sock_diag socket, bound to the namespace it was created in.
pub struct Diag {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
    /// The one-walk request failed once (a kernel without it): ask per family from then on.
    per_family: bool,
}

/// A netlink sock_diag socket in the calling thread's network namespace (closed on drop).
pub fn sock_diag_socket() -> io::Result<std::os::fd::OwnedFd> {
    Ok(socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?)
}

impl Diag {
    /// Opens a sock_diag socket in `pid`'s network namespace (entering it on a helper thread
    /// when it is not ours); `None` when that cannot be done.
    pub fn open_in_netns_of(pid: u32) -> Option<Self> {
        use super::netns;
        let ns = std::path::PathBuf::from(format!("/proc/{pid}/ns/net"));
        let same = matches!(
            (netns::identity(&ns), netns::own_identity()),
            (Ok(a), Ok(b)) if a == b
        );
        if same {
            Diag::open().ok()
        } else {
            netns::run_in(&ns, Diag::open).ok().and_then(|r| r.ok())
        }
    }

    /// Opens a sock_diag socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Self> {
        let fd = sock_diag_socket()?;
        Ok(Diag {
            fd,
            seq: 0,
            buf: vec![0u8; BUF_LEN],
            per_family: false,
        })
    }

    /// Dumps the TCP sockets of both address families in `states` (a bit mask of
    /// `1 << state`), calling `f` for each.
    pub fn dump_tcp(&mut self, states: u32, f: &mut dyn FnMut(SockRec)) -> io::Result<()> {
        self.dump_tcp_ext(states, 0, &mut |r, _| f(r))
    }

    /// As [`Diag::dump_tcp`], with each socket's send state from its `tcp_info`
    /// (`INET_DIAG_INFO`; `None` where the kernel attached none, as for TIME_WAIT).
    pub fn dump_tcp_sends(
        &mut self,
        states: u32,
        f: &mut dyn FnMut(SockRec, Option<SendState>),
    ) -> io::Result<()> {
        self.dump_tcp_ext(states, 1 << (INET_DIAG_INFO - 1), &mut |r, attrs| {
            f(r, send_state(attrs))
        })
    }

    fn dump_tcp_ext(
        &mut self,
        states: u32,
        ext: u8,
        f: &mut dyn FnMut(SockRec, &[u8]),
    ) -> io::Result<()> {
        if !self.per_family {
            let mut seen = 0usize;
            match self.dump(None, states, ext, &mut |r, a| {
                seen += 1;
                f(r, a)
            }) {
                Ok(()) => return Ok(()),
                // Only an unknown request type is worth a retry, and only before any record.
                Err(e)
                    if seen == 0
                        && matches!(
                            e.raw_os_error().map(Errno::from_raw),
                            Some(Errno::EINVAL | Errno::EOPNOTSUPP | Errno::ENOENT)
                        ) =>
                {
                    self.per_family = true
                }
                Err(e) => return Err(e),
            }
        }
        self.dump(Some(AF_INET), states, ext, f)?;
        self.dump(Some(AF_INET6), states, ext, f)
    }

    /// One dump: both families in one walk (`None`), or one family (`inet_diag_req_v2`).
    fn dump(
        &mut self,
        family: Option<u8>,
        states: u32,
        ext: u8,
        f: &mut dyn FnMut(SockRec, &[u8]),
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut req = [0u8; NLMSG_HDRLEN + REQ_COMPAT_LEN];
        let (ty, len) = match family {
            None => {
                // The family byte is ignored (AF_UNSPEC); states follow the socket id.
                req[16] = AF_INET;
                req[16 + 3] = ext;
                req[16 + 52..16 + 56].copy_from_slice(&states.to_ne_bytes());
                (TCPDIAG_GETSOCK, NLMSG_HDRLEN + REQ_COMPAT_LEN)
            }
            Some(fam) => {
                req[16] = fam;
                req[17] = IPPROTO_TCP;
                req[18] = ext;
                req[20..24].copy_from_slice(&states.to_ne_bytes());
                (SOCK_DIAG_BY_FAMILY, NLMSG_HDRLEN + REQ_LEN)
            }
        };
        req[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        req[4..6].copy_from_slice(&ty.to_ne_bytes());
        req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req[8..12].copy_from_slice(&seq.to_ne_bytes());
        // The socket id stays zero: no single-socket lookup.
        // To the kernel (port 0, no multicast groups).
        let kernel = NetlinkAddr::new(0, 0);
        sendto(self.fd.as_raw_fd(), &req[..len], &kernel, MsgFlags::empty())?;
        loop {
            let n = match recv(self.fd.as_raw_fd(), &mut self.buf, MsgFlags::empty()) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if parse_batch_attrs(&self.buf[..n], seq, f)? {
                return Ok(());
            }
        }
    }
}

/// Parses one `recv` worth of netlink messages; true at the end of the dump.
pub fn parse_batch(b: &[u8], seq: u32, f: &mut dyn FnMut(SockRec)) -> io::Result<bool> {
    parse_batch_attrs(b, seq, &mut |r, _| f(r))
}

/// As [`parse_batch`], with each record's attributes (the bytes after `inet_diag_msg`).
pub fn parse_batch_attrs(
    b: &[u8],
    seq: u32,
    f: &mut dyn FnMut(SockRec, &[u8]),
) -> io::Result<bool> {
    let mut off = 0;
    while off + NLMSG_HDRLEN <= b.len() {
        let len = u32::from_ne_bytes(b[off..off + 4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(b[off + 4..off + 6].try_into().unwrap());
        let mseq = u32::from_ne_bytes(b[off + 8..off + 12].try_into().unwrap());
        if len < NLMSG_HDRLEN || off + len > b.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "sock_diag: truncated netlink message",
            ));
        }
        let payload = &b[off + NLMSG_HDRLEN..off + len];
        // Leftovers of an earlier, abandoned dump carry an older sequence number.
        if mseq == seq {
            match ty {
                NLMSG_DONE => return Ok(true),
                NLMSG_ERROR => {
                    let errno = payload
                        .get(0..4)
                        .map(|e| i32::from_ne_bytes(e.try_into().unwrap()))
                        .unwrap_or(-(Errno::EIO as i32));
                    // The kernel sends a negative errno; anything else is a malformed message
                    // (i32::MIN has no positive counterpart: found by the sock_diag fuzzer).
                    match errno.checked_neg() {
                        Some(0) => {}
                        Some(e) if e > 0 => return Err(io::Error::from_raw_os_error(e)),
                        _ => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("sock_diag: error message with errno {errno}"),
                            ));
                        }
                    }
                }
                SOCK_DIAG_BY_FAMILY | TCPDIAG_GETSOCK if payload.len() >= MSG_LEN => {
                    f(parse_msg(payload), &payload[MSG_LEN..])
                }
                _ => {}
            }
        }
        off += (len + 3) & !3;
    }
    Ok(false)
}

/// The `INET_DIAG_INFO` attribute (`struct tcp_info`) and its bit in the request's `ext`.
const INET_DIAG_INFO: u16 = 2;

/// What a socket holds back, from its `struct tcp_info` (include/uapi/linux/tcp.h).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendState {
    /// `tcpi_snd_mss`: the largest segment it sends, bytes.
    pub snd_mss: u32,
    /// `tcpi_unacked`: segments sent and not acknowledged.
    pub unacked: u32,
    /// `tcpi_snd_cwnd`: the congestion window, segments.
    pub snd_cwnd: u32,
    /// `tcpi_notsent_bytes` (Linux 4.6+): bytes written and not yet sent.
    pub notsent: u32,
    /// `tcpi_data_segs_out` (Linux 4.6+): segments with data it sent (a server: its answers).
    pub data_segs_out: u32,
}

impl SendState {
    /// Bytes written, fewer than a full segment, held unsent while earlier ones wait for an
    /// acknowledgment and the congestion window has room: what Nagle's algorithm (a socket
    /// without TCP_NODELAY) or a cork does. A socket the window or the peer's receive window
    /// holds back has a full segment or more waiting, or no room in the window.
    pub fn holds_a_small_tail(&self) -> bool {
        self.notsent > 0
            && self.notsent < self.snd_mss
            && self.unacked > 0
            && self.unacked < self.snd_cwnd
    }
}

/// The send state from a record's attributes (netlink `rtattr`s, 4-byte aligned): `None`
/// without an `INET_DIAG_INFO` long enough to hold `tcpi_data_segs_out`.
pub fn send_state(mut attrs: &[u8]) -> Option<SendState> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let ty = u16::from_ne_bytes([attrs[2], attrs[3]]);
        if len < 4 || len > attrs.len() {
            return None;
        }
        let data = &attrs[4..len];
        if ty == INET_DIAG_INFO {
            let u32_at = |o: usize| {
                data.get(o..o + 4)
                    .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
            };
            return Some(SendState {
                snd_mss: u32_at(16)?,
                unacked: u32_at(24)?,
                snd_cwnd: u32_at(80)?,
                notsent: u32_at(144)?,
                data_segs_out: u32_at(156)?,
            });
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or_default();
    }
    None
}

fn addr(family: u8, raw: &[u8], port: u16) -> SocketAddr {
    let ip = if family == AF_INET {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    } else {
        let a: [u8; 16] = raw[..16].try_into().unwrap();
        // Dual-stack sockets talking IPv4 show as ::ffff:a.b.c.d; group them with IPv4.
        Ipv6Addr::from(a).to_canonical()
    };
    SocketAddr::new(ip, port)
}

/// Decodes one `struct inet_diag_msg`.
fn parse_msg(p: &[u8]) -> SockRec {
    let u32_at = |o: usize| u32::from_ne_bytes(p[o..o + 4].try_into().unwrap());
    let family = p[0];
    let state = p[1];
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let rqueue = u32_at(56);
    let wqueue = u32_at(60);
    SockRec {
        state,
        local: addr(family, &p[8..24], sport),
        remote: addr(family, &p[24..40], dport),
        timer: p[2],
        expires_ms: u32_at(52),
        rqueue,
        // For a listener the kernel reports the accept-queue length in rqueue and the
        // effective (somaxconn-capped) backlog in wqueue.
        backlog: (state == TCP_LISTEN).then_some(wqueue),
        inode: u32_at(68) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(state: u8, sport: u16, dport: u16, expires: u32) -> Vec<u8> {
        let mut m = vec![0u8; MSG_LEN];
        m[0] = AF_INET;
        m[1] = state;
        m[2] = 3;
        m[4..6].copy_from_slice(&sport.to_be_bytes());
        m[6..8].copy_from_slice(&dport.to_be_bytes());
        m[8..12].copy_from_slice(&[127, 0, 0, 1]);
        m[24..28].copy_from_slice(&[10, 0, 0, 2]);
        m[52..56].copy_from_slice(&expires.to_ne_bytes());
        m[56..60].copy_from_slice(&9u32.to_ne_bytes());
        m[60..64].copy_from_slice(&8u32.to_ne_bytes());
        m[68..72].copy_from_slice(&4242u32.to_ne_bytes());
        m
    }

    fn nl(ty: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut v = vec![0u8; (len + 3) & !3];
        v[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        v[4..6].copy_from_slice(&ty.to_ne_bytes());
        v[8..12].copy_from_slice(&seq.to_ne_bytes());
        v[NLMSG_HDRLEN..len].copy_from_slice(payload);
        v
    }

    #[test]
    fn records_decode_and_stale_sequences_are_skipped() {
        let mut b = nl(
            SOCK_DIAG_BY_FAMILY,
            7,
            &msg(TCP_TIME_WAIT, 8080, 40001, 59_000),
        );
        b.extend(nl(SOCK_DIAG_BY_FAMILY, 6, &msg(TCP_TIME_WAIT, 1, 2, 3)));
        b.extend(nl(SOCK_DIAG_BY_FAMILY, 7, &msg(TCP_LISTEN, 8080, 0, 0)));
        let mut got = vec![];
        assert!(!parse_batch(&b, 7, &mut |r| got.push(r)).unwrap());
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(got[0].remote, "10.0.0.2:40001".parse().unwrap());
        assert_eq!(got[0].expires_ms, 59_000);
        assert_eq!(got[0].backlog, None);
        assert_eq!(got[1].state, TCP_LISTEN);
        assert_eq!((got[1].rqueue, got[1].backlog), (9, Some(8)));
        assert_eq!(got[1].inode, 4242);
        assert!(parse_batch(&nl(NLMSG_DONE, 7, &[0; 4]), 7, &mut |_| {}).unwrap());
        let e = parse_batch(
            &nl(NLMSG_ERROR, 7, &(-(Errno::EPERM as i32)).to_ne_bytes()),
            7,
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(Errno::EPERM as i32));
        // Malformed errnos: positive, and i32::MIN (negating it overflowed: the fuzzer's find).
        for bad in [i32::MIN, 5] {
            let e =
                parse_batch(&nl(NLMSG_ERROR, 7, &bad.to_ne_bytes()), 7, &mut |_| {}).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert_eq!(
                e.to_string(),
                format!("sock_diag: error message with errno {bad}")
            );
        }
    }

    /// An `INET_DIAG_INFO` attribute holding a `tcp_info` of `len` bytes with the fields read.
    fn info_attr(len: usize, mss: u32, unacked: u32, cwnd: u32, notsent: u32) -> Vec<u8> {
        let mut info = vec![0u8; len];
        for (o, v) in [
            (16, mss),
            (24, unacked),
            (80, cwnd),
            (144, notsent),
            (156, 87),
        ] {
            if o + 4 <= len {
                info[o..o + 4].copy_from_slice(&v.to_ne_bytes());
            }
        }
        let mut a = vec![];
        a.extend(((4 + len) as u16).to_ne_bytes());
        a.extend(INET_DIAG_INFO.to_ne_bytes());
        a.extend(info);
        a.resize((a.len() + 3) & !3, 0);
        a
    }

    #[test]
    fn the_send_state_is_read_from_tcp_info_after_other_attributes() {
        // What `ss -ti` showed on a Java HttpServer connection (2026-12-06): mss:65483
        // cwnd:18 unacked:1 notsent:2704 data_segs_out:87, the body held behind the headers.
        let mut attrs = vec![];
        // An INET_DIAG_MEMINFO (1) first, 16 bytes of payload: skipped.
        attrs.extend(20u16.to_ne_bytes());
        attrs.extend(1u16.to_ne_bytes());
        attrs.extend([0u8; 16]);
        attrs.extend(info_attr(232, 65483, 1, 18, 2704));
        let s = send_state(&attrs).unwrap();
        assert_eq!(
            s,
            SendState {
                snd_mss: 65483,
                unacked: 1,
                snd_cwnd: 18,
                notsent: 2704,
                data_segs_out: 87,
            }
        );
        assert!(s.holds_a_small_tail());
        // A tcp_info from before tcpi_notsent_bytes (Linux < 4.6), or cut before
        // tcpi_data_segs_out: nothing read.
        assert_eq!(send_state(&info_attr(104, 65483, 1, 18, 0)), None);
        assert_eq!(send_state(&info_attr(156, 65483, 1, 18, 0)), None);
        // No attribute, a truncated one.
        assert_eq!(send_state(&[]), None);
        assert_eq!(send_state(&info_attr(232, 1, 1, 1, 1)[..100]), None);
    }

    #[test]
    fn only_a_small_tail_behind_unacked_bytes_with_room_in_the_window_is_held() {
        let s = |mss, unacked, cwnd, notsent| SendState {
            snd_mss: mss,
            unacked,
            snd_cwnd: cwnd,
            notsent,
            data_segs_out: 1,
        };
        assert!(s(1448, 1, 10, 700).holds_a_small_tail());
        // Nothing unsent; nothing in flight (Nagle sends at once); a full segment waiting
        // (the window, not Nagle); the window full (congestion, not Nagle).
        assert!(!s(1448, 1, 10, 0).holds_a_small_tail());
        assert!(!s(1448, 0, 10, 700).holds_a_small_tail());
        assert!(!s(1448, 1, 10, 1448).holds_a_small_tail());
        assert!(!s(1448, 10, 10, 700).holds_a_small_tail());
    }

    #[test]
    fn v4_mapped_addresses_are_canonical() {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(addr(AF_INET6, &raw, 80), "127.0.0.1:80".parse().unwrap());
    }
}
