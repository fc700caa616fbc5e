//! A misbehaving server as a process, for `cargo xtask bench load` (the tests start them
//! in-process): `misbehave never` prints its port, then holds every connection it accepts
//! without answering until its stdin closes; `misbehave capacity WORKERS MS` answers 200 with
//! WORKERS workers busy MS ms per request (a known capacity) and prints, when stdin closes,
//! the connections it saw open at most, accepted, and the requests it read.

use std::io::Read;

use trapdetect_e2e::misbehave::{Behaviour, Server};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    let b = match (args.get(1).map(String::as_str), num(2), num(3)) {
        (Some("never"), ..) => Behaviour::Never,
        (Some("200"), ..) => Behaviour::Status(200),
        (Some("capacity"), Some(w), Some(ms)) if w > 0 => Behaviour::Capacity {
            workers: w as usize,
            service: std::time::Duration::from_millis(ms),
        },
        _ => {
            eprintln!("usage: misbehave never|200|capacity WORKERS MS");
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
    if matches!(b, Behaviour::Capacity { .. }) {
        eprintln!(
            "open_max {} accepted {} requests {}",
            server.open_max(),
            server.accepted(),
            server.requests()
        );
    }
    drop(server);
}
