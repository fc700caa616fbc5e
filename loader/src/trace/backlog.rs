//! The accept queue of the target's listening sockets, sampled once a second during
//! `trapdetect run`: connections the kernel completed that no worker has accepted yet. TCP
//! listeners from /proc/PID/net/tcp{,6} (`rx_queue` of a LISTEN row is the queue length, read
//! in the target's network namespace); unix-socket listeners (php-fpm's FastCGI socket behind
//! nginx) from sock_diag (`UNIX_DIAG_RQLEN`: queue length and backlog), which /proc/net/unix
//! does not show. A queue that grows while every worker is busy is requests waiting for a
//! worker.

use std::{
    collections::HashSet,
    io,
    os::fd::{AsRawFd, OwnedFd},
};

use nix::sys::socket::{AddressFamily, MsgFlags, recv, send};

/// The target's listeners at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Listening sockets found (TCP and unix).
    pub listeners: usize,
    /// Connections waiting to be accepted, summed over them.
    pub queued: u64,
    /// Sum of their backlogs (unix listeners only: /proc/net/tcp does not show it).
    pub backlog: Option<u64>,
    /// The TCP listeners' local ports (read from sock_diag only).
    pub ports: Vec<u16>,
}

use crate::traps::run::SendHolds;

/// Socket inodes the processes hold open (`socket:[N]` links in /proc/PID/fd).
pub fn socket_inodes(pids: &[u32]) -> HashSet<u64> {
    let mut out = HashSet::new();
    for p in pids {
        let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
            continue;
        };
        for e in rd.flatten() {
            if let Ok(l) = std::fs::read_link(e.path())
                && let Some(n) = l
                    .to_str()
                    .and_then(|s| s.strip_prefix("socket:["))
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse().ok())
            {
                out.insert(n);
            }
        }
    }
    out
}

/// (inode, accept-queue length) of the LISTEN rows of /proc/net/tcp or tcp6.
pub fn parse_tcp_listeners(text: &str) -> Vec<(u64, u16, u64)> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_ascii_whitespace().collect();
            if f.get(3) != Some(&"0A") {
                return None;
            }
            let port = u16::from_str_radix(f.get(1)?.rsplit_once(':')?.1, 16).ok()?;
            let rx = f.get(4)?.split_once(':')?.1;
            let queued = u64::from_str_radix(rx, 16).ok()?;
            let inode = f.get(9)?.parse().ok()?;
            Some((inode, port, queued))
        })
        .collect()
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UNIX_DIAG_RQLEN: u16 = 4;
const TCP_LISTEN: u32 = 10;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
/// `sdiag_family` of a unix socket request and record.
const AF_UNIX: u8 = AddressFamily::Unix as i32 as u8;

/// (inode, queued, backlog) of every listening unix socket in this network namespace.
pub fn unix_listeners() -> io::Result<Vec<(u64, u64, u64)>> {
    // Closed on return.
    unix_dump(&crate::host::net::diag::sock_diag_socket()?)
}

fn unix_dump(fd: &OwnedFd) -> io::Result<Vec<(u64, u64, u64)>> {
    let fd = fd.as_raw_fd();
    // nlmsghdr (16) + unix_diag_req (24).
    let mut req = [0u8; 40];
    req[0..4].copy_from_slice(&40u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = AF_UNIX;
    req[20..24].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req[28..32].copy_from_slice(&UDIAG_SHOW_RQLEN.to_ne_bytes());
    send(fd, &req, MsgFlags::empty())?;
    let mut out = vec![];
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = recv(fd, &mut buf, MsgFlags::empty())?;
        if n == 0 || parse_unix_batch(&buf[..n], &mut out)? {
            return Ok(out);
        }
    }
}

fn u16_at(b: &[u8], i: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(i..i + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(i..i + 4)?.try_into().ok()?))
}

/// Parses one datagram of a unix sock_diag dump into `out`; true at the end of the dump.
pub fn parse_unix_batch(b: &[u8], out: &mut Vec<(u64, u64, u64)>) -> io::Result<bool> {
    let mut off = 0;
    while off + 16 <= b.len() {
        let len = u32_at(b, off).unwrap_or(0) as usize;
        let ty = u16_at(b, off + 4).unwrap_or(0);
        if len < 16 || off + len > b.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "short netlink message",
            ));
        }
        match ty {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let e = u32_at(b, off + 16).unwrap_or(0) as i32;
                return Err(io::Error::from_raw_os_error(-e));
            }
            SOCK_DIAG_BY_FAMILY => {
                // unix_diag_msg: family, type, state, pad, ino (u32), cookie[2].
                let m = &b[off + 16..off + len];
                let ino = u32_at(m, 4).unwrap_or(0) as u64;
                let mut a = 16;
                while a + 4 <= m.len() {
                    let alen = u16_at(m, a).unwrap_or(0) as usize;
                    let aty = u16_at(m, a + 2).unwrap_or(0);
                    if alen < 4 || a + alen > m.len() {
                        break;
                    }
                    if aty == UNIX_DIAG_RQLEN
                        && let (Some(q), Some(w)) = (u32_at(m, a + 4), u32_at(m, a + 8))
                    {
                        out.push((ino, q as u64, w as u64));
                    }
                    a += (alen + 3) & !3;
                }
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
    Ok(false)
}

/// Adds the unix-socket listeners among `inodes` (this process's namespace) to `b`.
fn add_unix_listeners(b: &mut Backlog, inodes: &HashSet<u64>) {
    for (ino, q, w) in unix_listeners().unwrap_or_default() {
        if inodes.contains(&ino) {
            b.listeners += 1;
            b.queued += q;
            *b.backlog.get_or_insert(0) += w;
        }
    }
}

/// Reads the accept queues of the target's listeners once a second. TCP listeners come from
/// sock_diag with the kernel's state filter set to LISTEN, on a socket opened once inside the
/// target's network namespace: /proc/PID/net/tcp renders every socket of the namespace as text,
/// TIME_WAIT included, and a server that closes each connection at a few thousand requests a
/// second leaves 10^5 of them, so each reading cost the per-second sampler a large part of a
/// second of CPU and made it late under exactly the load it must watch. /proc stays the
/// fallback where sock_diag cannot be opened there (no CAP_SYS_ADMIN to enter a foreign
/// namespace, a kernel without it).
pub struct Reader {
    root: u32,
    diag: Option<crate::host::net::diag::Diag>,
}

impl Reader {
    /// A reader for the listeners of `root`'s network namespace.
    pub fn new(root: u32) -> Self {
        Reader {
            root,
            diag: crate::host::net::diag::Diag::open_in_netns_of(root),
        }
    }

    /// Whether TCP listeners are read from sock_diag (else from /proc/PID/net/tcp).
    pub fn uses_sock_diag(&self) -> bool {
        self.diag.is_some()
    }

    /// The accept queues of the listeners among `inodes`.
    pub fn sample(&mut self, inodes: &HashSet<u64>) -> Backlog {
        self.sample_except(inodes, None)
    }

    /// As [`Reader::sample`], leaving out the TCP listeners on `port` when one is given.
    pub fn sample_except(&mut self, inodes: &HashSet<u64>, port: Option<u16>) -> Backlog {
        let mut b = self.tcp(inodes, port);
        add_unix_listeners(&mut b, inodes);
        b
    }

    /// The server-side established connections on `ports` and what they hold unsent, from
    /// each one's `tcp_info`; `None` without sock_diag, or with no port.
    pub fn sends(&mut self, ports: &[u16]) -> Option<SendHolds> {
        use crate::host::net::diag::TCP_ESTABLISHED;
        let d = self.diag.as_mut().filter(|_| !ports.is_empty())?;
        let mut h = SendHolds::default();
        let mut info = false;
        d.dump_tcp_sends(1 << TCP_ESTABLISHED, &mut |r, send| {
            if r.state != TCP_ESTABLISHED || !ports.contains(&r.local.port()) {
                return;
            }
            h.connections += 1;
            if let Some(send) = send {
                info = true;
                h.held += u64::from(send.holds_a_small_tail());
            }
        })
        .ok()?;
        // Connections and no tcp_info for any (a kernel before 4.6): nothing was read.
        (info || h.connections == 0).then_some(h)
    }

    /// The TCP listeners among `inodes` (listeners and queued connections), but those on
    /// `skip`.
    fn tcp(&mut self, inodes: &HashSet<u64>, skip: Option<u16>) -> Backlog {
        let mut b = Backlog::default();
        let mut tcp_done = false;
        if let Some(d) = self.diag.as_mut() {
            let mut found = Backlog::default();
            let read = d.dump_tcp(1 << crate::host::net::diag::TCP_LISTEN, &mut |r| {
                if r.state == crate::host::net::diag::TCP_LISTEN
                    && inodes.contains(&r.inode)
                    && skip != Some(r.local.port())
                {
                    found.listeners += 1;
                    found.queued += u64::from(r.rqueue);
                    found.ports.push(r.local.port());
                }
            });
            match read {
                Ok(()) => {
                    b = found;
                    tcp_done = true;
                }
                // Read /proc from now on.
                Err(_) => self.diag = None,
            }
        }
        if !tcp_done {
            for f in ["tcp", "tcp6"] {
                let text = std::fs::read_to_string(format!("/proc/{}/net/{f}", self.root))
                    .unwrap_or_default();
                for (ino, port, q) in parse_tcp_listeners(&text) {
                    if inodes.contains(&ino) && skip != Some(port) {
                        b.listeners += 1;
                        b.queued += q;
                    }
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_listen_rows_give_the_accept_queue() {
        // Recorded from this VM: nginx on 127.0.0.1:18088 with 3 connections not yet accepted,
        // and one established connection (ignored).
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:46A8 00000000:0000 0A 00000000:00000003 00:00000000 00000000     0        0 912345 1 0000000000000000 100 0 0 10 0
   1: 0100007F:46A8 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 912399 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
";
        assert_eq!(
            parse_tcp_listeners(text),
            vec![(912345, 18088, 3), (1111, 22, 0)]
        );
        assert!(parse_tcp_listeners("garbage\n1 2 3 0A x\n").is_empty());
    }

    fn msg(ino: u32, rq: Option<(u32, u32)>) -> Vec<u8> {
        let mut m = vec![AF_UNIX, 1, 10, 0];
        m.extend(ino.to_ne_bytes());
        m.extend([0u8; 8]);
        if let Some((q, w)) = rq {
            m.extend(12u16.to_ne_bytes());
            m.extend(UNIX_DIAG_RQLEN.to_ne_bytes());
            m.extend(q.to_ne_bytes());
            m.extend(w.to_ne_bytes());
        }
        let mut h = ((16 + m.len()) as u32).to_ne_bytes().to_vec();
        h.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        h.extend([0u8; 10]);
        h.extend(m);
        h
    }

    #[test]
    fn unix_diag_batches_give_queue_and_backlog() {
        let mut b = msg(4242, Some((7, 511)));
        b.extend(msg(77, None));
        let mut out = vec![];
        assert!(!parse_unix_batch(&b, &mut out).unwrap());
        assert_eq!(out, vec![(4242, 7, 511)]);
        let mut done = 20u32.to_ne_bytes().to_vec();
        done.extend(NLMSG_DONE.to_ne_bytes());
        done.extend([0u8; 14]);
        assert!(parse_unix_batch(&done, &mut out).unwrap());
        // A truncated message is an error, not a panic.
        assert!(parse_unix_batch(&b[..30], &mut vec![]).is_err());
    }

    #[test]
    fn a_tcp_listener_s_accept_queue_is_read_from_sock_diag_and_from_proc_alike() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // Three clients connected, none accepted; a TIME_WAIT beside them is not a listener.
        let _c: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        let me = std::process::id();
        // This listener's socket among this process's, and only it: the tests beside this one
        // in the process hold listeners of their own (a queue of 3 at one of them read 7).
        let mine = inode_of(&l);
        assert!(socket_inodes(&[me]).contains(&mine));
        let inodes: HashSet<u64> = [mine].into();
        let mut r = Reader::new(me);
        let by_diag = r.tcp(&inodes, None);
        // The /proc fallback gives the same.
        let mut by_proc = Reader {
            root: me,
            diag: None,
        };
        let from_proc = by_proc.tcp(&inodes, None);
        drop(l);
        // Our own namespace: no privilege is needed to open sock_diag.
        assert!(r.uses_sock_diag());
        assert_eq!(by_diag.listeners, 1, "{by_diag:?}");
        assert_eq!(by_diag.queued, 3, "{by_diag:?}");
        assert_eq!(from_proc.listeners, 1, "{from_proc:?}");
        assert_eq!(from_proc.queued, 3, "{from_proc:?}");
    }

    /// The socket inode of a descriptor of this process.
    fn inode_of(fd: &impl std::os::fd::AsRawFd) -> u64 {
        let l = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
        let l = l.to_str().unwrap();
        l.strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Two listeners, three connections waiting at one and one at the other: left out by its
    /// port, the first's three are not counted (a front end's listener, where the load
    /// enters), from sock_diag and from /proc alike.
    #[test]
    fn a_listener_on_the_port_left_out_is_not_counted() {
        let front = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let behind = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _c: Vec<_> = (0..3)
            .map(|_| std::net::TcpStream::connect(front.local_addr().unwrap()).unwrap())
            .chain([std::net::TcpStream::connect(behind.local_addr().unwrap()).unwrap()])
            .collect();
        let inodes: HashSet<u64> = [inode_of(&front), inode_of(&behind)].into();
        let port = front.local_addr().unwrap().port();
        let me = std::process::id();
        let mut by_diag = Reader::new(me);
        assert!(by_diag.uses_sock_diag());
        let mut by_proc = Reader {
            root: me,
            diag: None,
        };
        for r in [&mut by_diag, &mut by_proc] {
            let all = r.tcp(&inodes, None);
            assert_eq!((all.listeners, all.queued), (2, 4), "{all:?}");
            let behind_only = r.sample_except(&inodes, Some(port));
            assert_eq!(
                (behind_only.listeners, behind_only.queued),
                (1, 1),
                "{behind_only:?}"
            );
        }
    }

    #[test]
    fn this_process_listening_on_a_unix_socket_is_found_with_its_queue() {
        let dir = std::env::temp_dir().join(format!("td-backlog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let l = std::os::unix::net::UnixListener::bind(dir.join("s")).unwrap();
        // Two clients connected, none accepted.
        let _c1 = std::os::unix::net::UnixStream::connect(dir.join("s")).unwrap();
        let _c2 = std::os::unix::net::UnixStream::connect(dir.join("s")).unwrap();
        let me = std::process::id();
        // Unix listeners only: another test of this process may hold a TCP listener.
        let inodes = socket_inodes(&[me]);
        let mut b = Backlog::default();
        add_unix_listeners(&mut b, &inodes);
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(b.listeners, 1, "{b:?}");
        assert_eq!(b.queued, 2);
        // std listens with 128, or with -1 (then the kernel's somaxconn).
        let somaxconn: u64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            b.backlog == Some(128) || b.backlog == Some(somaxconn),
            "{b:?}"
        );
    }
}
