//! A misbehaving server as a process, for `cargo xtask bench load` (the tests start them
//! in-process): `misbehave never` prints its port, then holds every connection it accepts
//! without answering until its stdin closes; `misbehave capacity W MS` answers 200 after MS
//! milliseconds on one of W workers (a planted knee at W × 1000 / MS per second).

use std::io::Read;

use trapdetect_e2e::misbehave::{Behaviour, Server};

fn main() {
    let b = match std::env::args().nth(1).as_deref() {
        Some("never") => Behaviour::Never,
        Some("200") => Behaviour::Status(200),
        Some("capacity") => {
            let arg = |i: usize| std::env::args().nth(i).and_then(|v| v.parse::<u64>().ok());
            match (arg(2), arg(3)) {
                (Some(w), Some(ms)) if w > 0 => Behaviour::Capacity {
                    workers: w as usize,
                    service: std::time::Duration::from_millis(ms),
                },
                _ => {
                    eprintln!("usage: misbehave capacity WORKERS SERVICE_MS");
                    std::process::exit(2);
                }
            }
        }
        _ => {
            eprintln!("usage: misbehave never|200|capacity W MS");
            std::process::exit(2);
        }
    };
    // A flood holds one socket per outstanding request: raise the soft limit to the hard one.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid, writable rlimit; raising soft up to hard needs no privilege.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let server = Server::start(b);
    println!("{}", server.port());
    let mut sink = vec![];
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(server);
}
