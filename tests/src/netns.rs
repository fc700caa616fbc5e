//! Network namespaces made by tests (`ip netns add`), so port ranges, TIME_WAIT storms and
//! listen floods never touch the host: loopback up, namespace-local sysctls, optional veth
//! pairs between two test namespaces, threads and processes running inside. Drop kills every
//! process started inside and deletes the namespace (which takes its veth ends and sockets
//! with it), also when the test panics. Also the socket helpers the namespace tests and the
//! network bench share: a listener with an exact backlog, an accept loop, a client bound to a
//! chosen source port.

use std::{
    fs::File,
    net::{SocketAddr, TcpListener, TcpStream},
    os::{
        fd::{AsRawFd, FromRawFd},
        unix::process::CommandExt,
    },
    path::PathBuf,
    process::{Child, Command, Output},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::{run_bounded, unique};

/// A network namespace owned by a test.
pub struct NetNs {
    name: String,
    children: Mutex<Vec<Child>>,
}

fn ip(args: &[&str]) {
    let out = run_bounded(Command::new("ip").args(args), Duration::from_secs(10));
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl NetNs {
    /// Creates `td<tag><pid>x<n>` with loopback up.
    pub fn new(tag: &str) -> Self {
        let name = unique(&format!("td{tag}"));
        ip(&["netns", "add", &name]);
        // From here on Drop deletes it.
        let ns = NetNs {
            name,
            children: Mutex::new(vec![]),
        };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Its name, as `ip netns list` shows it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its namespace file.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    fn file(&self) -> File {
        File::open(self.path()).unwrap_or_else(|e| panic!("open {}: {e}", self.path().display()))
    }

    /// Runs `f` on a thread inside the namespace and returns its result. Sockets created in
    /// `f` stay in the namespace wherever they are used later.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let file = self.file();
        std::thread::scope(|s| {
            s.spawn(move || {
                enter(&file);
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// Starts a thread inside the namespace (the caller joins it; bound its work).
    pub fn spawn_thread<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let file = self.file();
        std::thread::spawn(move || {
            enter(&file);
            f()
        })
    }

    /// Sets a sysctl of this namespace (`net/ipv4/tcp_tw_reuse`, or with dots) and checks it
    /// took.
    pub fn sysctl(&self, key: &str, value: &str) {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let got = self.run(|| {
            std::fs::write(&path, value).unwrap_or_else(|e| panic!("write {path}: {e}"));
            std::fs::read_to_string(&path).unwrap()
        });
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(norm(&got), norm(value), "{key} did not take");
    }

    /// Reads a sysctl of this namespace.
    pub fn read_sysctl(&self, key: &str) -> String {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        self.run(|| std::fs::read_to_string(&path).unwrap())
            .trim()
            .to_string()
    }

    /// Makes `cmd` start inside the namespace (no `ip netns exec` in between, so its pid is
    /// the command's and nothing else is timed). The caller waits for it.
    pub fn enter_on_exec<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        let file = self.file();
        // SAFETY: only setns(2), async-signal-safe, runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        }
    }

    /// Starts a process inside the namespace; it is killed in Drop. Returns its pid.
    pub fn spawn(&self, cmd: &mut Command) -> u32 {
        let child = self
            .enter_on_exec(cmd)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let pid = child.id();
        self.children.lock().unwrap().push(child);
        pid
    }

    /// Runs a command inside the namespace (`ip netns exec`) to completion, bounded.
    pub fn exec(&self, args: &[&str], limit: Duration) -> Output {
        run_bounded(
            Command::new("ip")
                .args(["netns", "exec", &self.name])
                .args(args),
            limit,
        )
    }

    /// Waits until nothing is left in the namespace but listeners, TIME_WAIT, and sockets of
    /// server `port` the kernel stranded in FIN_WAIT2; returns when it settled, and those
    /// strands (local, peer). Rarely (seen once in a CI run, on a loaded 2-core machine) the
    /// kernel loses a client's FIN: the client's socket is gone and the server's waits in
    /// FIN_WAIT2 for `tcp_fin_timeout` (60 s), never to become TIME_WAIT. A FIN_WAIT2 whose
    /// client socket is still there is in flight; one whose client is gone and stays so for a
    /// second is stranded. Panics, naming what lingers, when it has not settled in `limit`.
    pub fn settle(&self, port: u16, limit: Duration) -> (Instant, Vec<(String, String)>) {
        let t0 = Instant::now();
        let server = format!(":{port}");
        let mut strands_since: Option<(Vec<(String, String)>, Instant)> = None;
        loop {
            let o = self.exec(
                &[
                    "ss",
                    "-Htan",
                    "exclude",
                    "time-wait",
                    "exclude",
                    "listening",
                ],
                limit,
            );
            let now = Instant::now();
            let left = String::from_utf8_lossy(&o.stdout).into_owned();
            let socks: Vec<Vec<&str>> = left
                .lines()
                .map(|l| l.split_whitespace().collect())
                .collect();
            let has_socket = |addr: &str| socks.iter().any(|s| s.get(3) == Some(&addr));
            let strands: Vec<(String, String)> = socks
                .iter()
                .filter(|s| {
                    s.len() >= 5
                        && s[0] == "FIN-WAIT-2"
                        && s[3].ends_with(&server)
                        && !has_socket(s[4])
                })
                .map(|s| (s[3].to_string(), s[4].to_string()))
                .collect();
            if strands.len() == socks.len() {
                match &strands_since {
                    _ if strands.is_empty() => return (now, strands),
                    Some((seen, since)) if *seen == strands => {
                        if now - *since >= Duration::from_secs(1) {
                            return (now, strands);
                        }
                    }
                    _ => strands_since = Some((strands, now)),
                }
            } else {
                strands_since = None;
            }
            // Name what lingers when it does not settle (the sockets, with their states).
            assert!(
                t0.elapsed() < limit,
                "the namespace did not settle within {limit:?}; left besides TIME_WAIT and \
                 LISTEN ({} sockets, first 20):\n{}",
                left.lines().count(),
                left.lines().take(20).collect::<Vec<_>>().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Links this namespace to `other` with a veth pair (`td0` on both sides), gives each end
    /// an address (CIDR, e.g. `10.77.0.1/24`) and brings both up.
    pub fn veth(&self, other: &NetNs, addr_here: &str, addr_there: &str) {
        self.veth_named(other, "td0", addr_here, addr_there);
    }

    /// [`NetNs::veth`] with the pair's ends named `dev` (a namespace linked to several others
    /// needs one name per link).
    pub fn veth_named(&self, other: &NetNs, dev: &str, addr_here: &str, addr_there: &str) {
        ip(&[
            "link",
            "add",
            dev,
            "netns",
            &self.name,
            "type",
            "veth",
            "peer",
            "name",
            dev,
            "netns",
            &other.name,
        ]);
        for (ns, addr) in [(self, addr_here), (other, addr_there)] {
            ip(&["-n", &ns.name, "addr", "add", addr, "dev", dev]);
            ip(&["-n", &ns.name, "link", "set", dev, "up"]);
        }
    }
}

fn enter(file: &File) {
    // SAFETY: plain syscall on a valid descriptor; affects the calling thread only.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        panic!("setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let children = self.children.get_mut().unwrap_or_else(|p| p.into_inner());
        for mut c in std::mem::take(children) {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A listener with an exact backlog (std picks its own).
pub fn listen(addr: &str, backlog: i32) -> TcpListener {
    let SocketAddr::V4(a) = addr.parse().unwrap() else {
        panic!("IPv4 only")
    };
    // SAFETY: plain socket calls on a descriptor owned right away by TcpListener.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let l = TcpListener::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            4,
        );
        let sa = sockaddr(&a);
        assert_eq!(
            libc::bind(
                fd,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as u32
            ),
            0,
            "bind {addr}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::listen(fd, backlog), 0);
        l
    }
}

pub fn sockaddr(a: &std::net::SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// What the accept loop does with a connection.
#[derive(Clone, Copy)]
pub enum Mode {
    /// Accept and close at once: the server closes first, TIME_WAIT lands on its port.
    CloseFirst,
    /// Accept and keep the connection open.
    Hold,
}

/// An accept loop on its own thread, stopped and joined in Drop.
pub struct Server {
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(l: TcpListener, mode: Mode) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (s, a) = (stop.clone(), accepted.clone());
        let thread = std::thread::spawn(move || {
            let mut held = vec![];
            let mut pfd = libc::pollfd {
                fd: l.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            while !s.load(Ordering::Relaxed) {
                // SAFETY: one valid pollfd.
                if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
                    continue;
                }
                if let Ok((c, _)) = l.accept() {
                    a.fetch_add(1, Ordering::Relaxed);
                    match mode {
                        Mode::CloseFirst => drop(c),
                        Mode::Hold => held.push(c),
                    }
                }
            }
        });
        Server {
            stop,
            accepted,
            thread: Some(thread),
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A client socket bound to `src` before connecting to `dst`.
pub fn connect_from(src: &str, dst: &str) -> TcpStream {
    let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src.parse().unwrap(), dst.parse().unwrap())
    else {
        panic!("IPv4 only")
    };
    // SAFETY: plain socket calls on a descriptor owned right away by TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let stream = TcpStream::from_raw_fd(fd);
        let (sa, da) = (sockaddr(&s), sockaddr(&d));
        let len = size_of::<libc::sockaddr_in>() as u32;
        assert_eq!(
            libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len),
            0,
            "bind {src}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::connect(fd, (&da as *const libc::sockaddr_in).cast(), len),
            0,
            "connect {dst}: {}",
            std::io::Error::last_os_error()
        );
        stream
    }
}

/// Closes non-blocking sockets after their connects had time to finish; returns how many had
/// connected (a peer address means the handshake completed).
pub fn close_counting_connected(fds: Vec<std::os::fd::RawFd>) -> usize {
    let connected = fds
        .iter()
        .filter(|&&fd| {
            // SAFETY: valid descriptor and storage.
            unsafe {
                let mut ss: libc::sockaddr_storage = std::mem::zeroed();
                let mut len = size_of::<libc::sockaddr_storage>() as u32;
                libc::getpeername(
                    fd,
                    (&mut ss as *mut libc::sockaddr_storage).cast(),
                    &mut len,
                ) == 0
            }
        })
        .count();
    for fd in fds {
        // SAFETY: we own it.
        unsafe { libc::close(fd) };
    }
    connected
}
