//! netpeer: the two ends of the traced network tests, as processes of their own (a tracer
//! attaches to a pid, and a watched client must not share its pid with the test harness).
//!
//!     netpeer serve ADDR BACKLOG close-first|hold|never-accept
//!     netpeer connect ADDR N
//!     netpeer flood ADDR N
//!     netpeer loop ADDR SECONDS
//!
//! `serve` listens on ADDR with exactly BACKLOG, prints "ready", then accepts and closes each
//! connection at once (the server closes first), accepts and holds them, or never accepts;
//! it exits when stdin closes. `connect` prints "ready", waits for a line on stdin, makes N
//! blocking connects to ADDR and keeps every socket it got, prints "done OK EADDRNOTAVAIL
//! OTHER" (what connect(2) returned), and exits when stdin closes. `flood` prints "ready",
//! waits for a line, starts N non-blocking connects at once, waits 100 ms, closes them all, and
//! prints "done ZERO EINPROGRESS OTHER CONNECTED ELAPSED_MS": how many connect() calls returned
//! 0 and EINPROGRESS, how many sockets were connected before the close, and how long it took
//! (under 1 s, the first SYN retransmission, each dropped SYN is counted once). `loop` (for the
//! overhead bench) listens on ADDR, prints "ready", waits for a line, then for SECONDS opens a
//! connection to itself, accepts it, closes the server side first and then the client side,
//! one connection at a time, and prints "done CONNECTIONS_PER_S CPU_NS_PER_CONNECTION" (its own
//! user + system time, which includes the loopback softirq work done in its context).

use std::{
    io::{BufRead, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    os::fd::{AsRawFd, FromRawFd},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

fn usage() -> ! {
    eprintln!(
        "usage: netpeer serve ADDR BACKLOG close-first|hold|never-accept | netpeer connect|flood ADDR N | netpeer loop ADDR SECONDS"
    );
    std::process::exit(2);
}

fn sockaddr(a: &SocketAddr) -> libc::sockaddr_in {
    let SocketAddr::V4(a) = a else { usage() };
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// A listener with exactly `backlog` (std picks its own).
fn listen(addr: &SocketAddr, backlog: i32) -> TcpListener {
    let sa = sockaddr(addr);
    // SAFETY: plain socket calls on a descriptor owned right away by TcpListener.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let l = TcpListener::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            4,
        );
        let len = size_of::<libc::sockaddr_in>() as u32;
        assert_eq!(
            libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len),
            0,
            "bind {addr}: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::listen(fd, backlog), 0);
        l
    }
}

/// Returns when stdin reaches EOF (the test dropped its end).
fn wait_for_eof() {
    let mut sink = String::new();
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    while lock.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
        sink.clear();
    }
}

fn serve(addr: &SocketAddr, backlog: i32, mode: &str) {
    let l = listen(addr, backlog);
    if !matches!(mode, "close-first" | "hold" | "never-accept") {
        usage();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let mode = mode.to_string();
    let acceptor = std::thread::spawn(move || {
        let mut held = vec![];
        let mut pfd = libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        while !s.load(Ordering::Relaxed) {
            if mode == "never-accept" {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
                continue;
            }
            if let Ok((c, _)) = l.accept() {
                match mode.as_str() {
                    "close-first" => drop(c),
                    _ => held.push(c),
                }
            }
        }
    });
    println!("ready");
    std::io::stdout().flush().unwrap();
    wait_for_eof();
    stop.store(true, Ordering::Relaxed);
    let _ = acceptor.join();
}

fn connect(addr: &SocketAddr, n: u32) {
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let (mut ok, mut na, mut other) = (0u32, 0u32, 0u32);
    let mut held = vec![];
    for _ in 0..n {
        match TcpStream::connect(addr) {
            Ok(s) => {
                ok += 1;
                held.push(s);
            }
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => na += 1,
            Err(_) => other += 1,
        }
    }
    println!("done {ok} {na} {other}");
    std::io::stdout().flush().unwrap();
    wait_for_eof();
    drop(held);
}

fn flood(addr: &SocketAddr, n: u32) {
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let sa = sockaddr(addr);
    let t0 = std::time::Instant::now();
    let (mut zero, mut in_progress, mut other) = (0u32, 0u32, 0u32);
    let mut fds = vec![];
    for _ in 0..n {
        // SAFETY: plain socket calls; every descriptor is closed below.
        unsafe {
            let fd = libc::socket(
                libc::AF_INET,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            );
            assert!(fd >= 0);
            let rc = libc::connect(
                fd,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as u32,
            );
            match (rc, std::io::Error::last_os_error().raw_os_error()) {
                (0, _) => zero += 1,
                (_, Some(libc::EINPROGRESS)) => in_progress += 1,
                _ => other += 1,
            }
            fds.push(fd);
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    let connected = trapdetect_e2e::netns::close_counting_connected(fds);
    let ms = t0.elapsed().as_millis();
    println!("done {zero} {in_progress} {other} {connected} {ms}");
    std::io::stdout().flush().unwrap();
    wait_for_eof();
}

fn conn_loop(addr: &SocketAddr, secs: f64) {
    let l = listen(addr, 128);
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let cpu_ns = || {
        // SAFETY: plain getrusage into a zeroed struct.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let t = |v: libc::timeval| v.tv_sec as u64 * 1_000_000_000 + v.tv_usec as u64 * 1000;
        t(u.ru_utime) + t(u.ru_stime)
    };
    let c0 = cpu_ns();
    let t0 = std::time::Instant::now();
    let mut n = 0u64;
    let mut b = [0u8; 1];
    while t0.elapsed().as_secs_f64() < secs {
        let mut c = TcpStream::connect(addr).expect("connect");
        let (s, _) = l.accept().expect("accept");
        drop(s);
        assert_eq!(std::io::Read::read(&mut c, &mut b).unwrap_or(0), 0);
        drop(c);
        n += 1;
    }
    let rate = n as f64 / t0.elapsed().as_secs_f64();
    println!("done {rate:.0} {}", (cpu_ns() - c0) / n.max(1));
    std::io::stdout().flush().unwrap();
    wait_for_eof();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = |s: &str| s.parse::<SocketAddr>().unwrap_or_else(|_| usage());
    match args.get(1).map(String::as_str) {
        Some("serve") if args.len() == 5 => serve(
            &addr(&args[2]),
            args[3].parse().unwrap_or_else(|_| usage()),
            &args[4],
        ),
        Some("connect") if args.len() == 4 => {
            connect(&addr(&args[2]), args[3].parse().unwrap_or_else(|_| usage()))
        }
        Some("loop") if args.len() == 4 => {
            conn_loop(&addr(&args[2]), args[3].parse().unwrap_or_else(|_| usage()))
        }
        Some("flood") if args.len() == 4 => {
            flood(&addr(&args[2]), args[3].parse().unwrap_or_else(|_| usage()))
        }
        _ => usage(),
    }
}
