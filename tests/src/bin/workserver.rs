//! workserver: a prefork HTTP server whose every request does one kind of work, as a static
//! executable of this crate, so `trapdetect run`'s verdicts can be checked where no Debian
//! server runs (the arm64 guests' busybox userland) and on every other kernel alike.
//!
//!     workserver PORT WORKERS walk
//!     workserver PORT WORKERS flock FILE MS
//!
//! Listens on 127.0.0.1:PORT, forks WORKERS processes that each accept one connection at a
//! time (as php-fpm's and gunicorn's sync workers do), read the request head, do the work,
//! answer `200` with `Connection: close` and close. The work, by raw syscalls (the same calls
//! on every architecture and libc):
//!
//!   walk    chdir(CWD), CWD the absolute working directory it was started in: the kernel
//!           walks every component of it, as PHP's per-request chdir does (on a mount that
//!           caches nothing, each component below the mount point is a request to it)
//!   flock   open(FILE), flock(LOCK_EX), sleep MS, flock(LOCK_UN), close: the workers take
//!           turns on one file, as a PHP session file serializes requests
//!
//! The master waits for a signal; its workers die with it (PR_SET_PDEATHSIG).

use std::{
    ffi::CString,
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    time::Duration,
};

enum Work {
    Walk(CString),
    Flock(CString, Duration),
}

fn usage() -> ! {
    eprintln!("usage: workserver PORT WORKERS walk | workserver PORT WORKERS flock FILE MS");
    std::process::exit(2);
}

fn syscall_ok(what: &str, r: libc::c_long) {
    if r < 0 {
        eprintln!("workserver: {what}: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
}

fn work(w: &Work) {
    match w {
        Work::Walk(cwd) => syscall_ok("chdir", unsafe {
            libc::syscall(libc::SYS_chdir, cwd.as_ptr())
        }),
        Work::Flock(file, hold) => {
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    file.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
                    0o644,
                )
            };
            syscall_ok("open", fd);
            syscall_ok("flock", unsafe {
                libc::syscall(libc::SYS_flock, fd, libc::LOCK_EX)
            });
            std::thread::sleep(*hold);
            syscall_ok("unlock", unsafe {
                libc::syscall(libc::SYS_flock, fd, libc::LOCK_UN)
            });
            syscall_ok("close", unsafe { libc::syscall(libc::SYS_close, fd) });
        }
    }
}

/// Reads the request head (up to its blank line), does the work, answers.
fn serve(mut conn: TcpStream, w: &Work) {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|x| x == b"\r\n\r\n") {
            break;
        }
        if head.len() > 16 * 1024 {
            return;
        }
    }
    work(w);
    let _ = conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(port), Some(workers)) = (
        args.get(1).and_then(|a| a.parse::<u16>().ok()),
        args.get(2).and_then(|a| a.parse::<u32>().ok()),
    ) else {
        usage()
    };
    let w = match (args.get(3).map(String::as_str), args.get(4), args.get(5)) {
        (Some("walk"), None, None) => {
            let cwd = std::env::current_dir().expect("the working directory");
            Work::Walk(CString::new(cwd.into_os_string().into_encoded_bytes()).unwrap())
        }
        (Some("flock"), Some(file), Some(ms)) => Work::Flock(
            CString::new(file.as_str()).unwrap_or_else(|_| usage()),
            Duration::from_millis(ms.parse().unwrap_or_else(|_| usage())),
        ),
        _ => usage(),
    };
    if workers == 0 {
        usage();
    }
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| {
        eprintln!("workserver: 127.0.0.1:{port}: {e}");
        std::process::exit(1);
    });
    let master = unsafe { libc::getpid() };
    for _ in 0..workers {
        let pid = unsafe { libc::fork() };
        syscall_ok("fork", pid as libc::c_long);
        if pid == 0 {
            // A worker dies with its master, whatever kills the master.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
            if unsafe { libc::getppid() } != master {
                std::process::exit(0);
            }
            for conn in listener.incoming().flatten() {
                serve(conn, &w);
            }
            std::process::exit(0);
        }
    }
    loop {
        unsafe { libc::pause() };
    }
}
