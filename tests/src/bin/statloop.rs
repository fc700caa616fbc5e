//! statloop: a syscall-tight loop for overhead benchmarks. Prints "ready", waits for a line on
//! stdin (so a tracer can attach first), runs for SECONDS, prints "<iterations/s> <syscalls per
//! iteration>".
//!
//!     statloop stat|chdir|getppid SECONDS PATH
//!
//! `stat`: stat(PATH) per iteration (glibc → newfstatat). `chdir`: chdir(PATH), chdir back
//! (two path walks, what NTS PHP does per request). `getppid`: a syscall trapdetect does not
//! trace, to measure what enabling syscall tracepoints costs every other syscall.

use std::{
    ffi::CString,
    io::BufRead,
    time::{Duration, Instant},
};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: statloop stat|chdir|getppid SECONDS PATH");
        std::process::exit(2);
    }
    let secs: f64 = args[2].parse().expect("SECONDS");
    let path = CString::new(args[3].as_str()).expect("PATH");
    let here = CString::new(
        std::env::current_dir()
            .unwrap()
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    println!("ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let dur = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut n: u64 = 0;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let (mode, per) = match args[1].as_str() {
        "stat" => (0, 1),
        "chdir" => (1, 2),
        "getppid" => (2, 1),
        other => {
            eprintln!("statloop: unknown mode {other}");
            std::process::exit(2);
        }
    };
    while start.elapsed() < dur {
        for _ in 0..256 {
            unsafe {
                match mode {
                    0 => {
                        libc::stat(path.as_ptr(), &mut st);
                    }
                    1 => {
                        libc::chdir(path.as_ptr());
                        libc::chdir(here.as_ptr());
                    }
                    _ => {
                        libc::syscall(libc::SYS_getppid);
                    }
                }
            }
        }
        n += 256;
    }
    println!("{:.0} {per}", n as f64 / start.elapsed().as_secs_f64());
}
