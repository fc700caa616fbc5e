//! pathload: a process that makes an exact number of path syscalls when told to, so a trace of
//! it can be checked count for count (tests/src/pathload.rs drives it). Raw syscalls, not the
//! C library's wrappers, so the calls are the same on every architecture and libc (musl's
//! `fstat` is the `fstat` syscall, glibc's a path call with an empty path).
//!
//!     pathload MODE N [PATH]
//!
//! Prints "ready", waits for a line on stdin, then:
//!   stat     N × newfstatat(AT_FDCWD, PATH)               (one path key)
//!   unique   N × newfstatat of distinct nonexistent paths  (N path keys)
//!   hostile  N × newfstatat of a path full of terminal escapes, HTML and invalid UTF-8
//!   lengths  for each length L from 1 to N: newfstatat of a relative path of L bytes and of
//!            an absolute one of 24 + L (none exist): every tail a word-wise hash can end on,
//!            and paths past the tracer's capture
//!   walk     N × (chdir(PATH), newfstatat("."), newfstatat(fd of PATH, "", AT_EMPTY_PATH),
//!            chdir("..")), PATH one directory below the cwd: the empty path older kernels
//!            read as length 0
//!   fork     N children, one at a time, each stats PATH once and exits (forks followed, exits
//!            seen)
//! then prints "done" and waits for stdin to close.

use std::{
    ffi::{CStr, CString},
    io::{BufRead, Write},
};

fn stat_at(dirfd: i32, path: &CStr, flags: i32) {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // The result does not matter (the unique and hostile paths do not exist): the call does.
    unsafe {
        libc::syscall(
            libc::SYS_newfstatat,
            dirfd,
            path.as_ptr(),
            st.as_mut_ptr(),
            flags,
        )
    };
}

fn chdir(path: &CStr) {
    let r = unsafe { libc::syscall(libc::SYS_chdir, path.as_ptr()) };
    assert_eq!(r, 0, "chdir {path:?}");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: pathload stat|unique|hostile|lengths|walk|fork N [PATH]");
        std::process::exit(2);
    }
    let n: u64 = args[2].parse().expect("N");
    let path = CString::new(args.get(3).cloned().unwrap_or_default()).expect("PATH");
    let fd = if args[1] == "walk" {
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY,
            )
        };
        assert!(fd >= 0, "open {path:?}");
        fd as i32
    } else {
        -1
    };
    let mut out = std::io::stdout();
    writeln!(out, "ready").unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    let mut stdin = std::io::stdin().lock();
    stdin.read_line(&mut line).unwrap();
    match args[1].as_str() {
        "stat" => (0..n).for_each(|_| stat_at(libc::AT_FDCWD, &path, 0)),
        "unique" => {
            for i in 0..n {
                let p = CString::new(format!("/nonexistent-trapdetect/{i:08}")).unwrap();
                stat_at(libc::AT_FDCWD, &p, 0);
            }
        }
        "lengths" => {
            for l in 1..=n as usize {
                let rel = CString::new("x".repeat(l)).unwrap();
                stat_at(libc::AT_FDCWD, &rel, 0);
                let abs =
                    CString::new(format!("/nonexistent-trapdetect/{}", "y".repeat(l))).unwrap();
                stat_at(libc::AT_FDCWD, &abs, 0);
            }
        }
        "hostile" => {
            let p = CString::new(
                &b"/tmp/trapdetect-\n\x1b[31mred</td><script>alert(1)</script>\xff\xfe"[..],
            )
            .unwrap();
            (0..n).for_each(|_| stat_at(libc::AT_FDCWD, &p, 0));
        }
        "walk" => {
            for _ in 0..n {
                chdir(&path);
                stat_at(libc::AT_FDCWD, c".", 0);
                stat_at(fd, c"", libc::AT_EMPTY_PATH);
                chdir(c"..");
            }
        }
        "fork" => {
            for _ in 0..n {
                let pid = unsafe { libc::fork() };
                assert!(pid >= 0, "fork");
                if pid == 0 {
                    stat_at(libc::AT_FDCWD, &path, 0);
                    unsafe { libc::_exit(0) };
                }
                let mut status = 0;
                unsafe { libc::waitpid(pid, &mut status, 0) };
            }
        }
        other => {
            eprintln!("pathload: no mode {other}");
            std::process::exit(2);
        }
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
    line.clear();
    let _ = stdin.read_line(&mut line);
}
