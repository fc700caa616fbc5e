//! Processes at either end of the traced network tests (`tests/src/bin/netpeer.rs`), started
//! inside a test's network namespace: a server the tracer attaches to by pid, and clients it
//! watches with `--watch-client`. Each is killed and reaped in Drop (and gets SIGKILL through
//! PR_SET_PDEATHSIG if the test process dies).

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::process::CommandExt,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{netns::NetNs, target_file};

/// A running netpeer.
pub struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    fn start(ns: &NetNs, args: &[&str]) -> Peer {
        let mut cmd = Command::new(target_file("netpeer"));
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // SAFETY: prctl only, async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = ns
            .enter_on_exec(&mut cmd)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn netpeer {args:?}: {e}"));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut p = Peer {
            child,
            stdin,
            stdout,
        };
        assert_eq!(p.line(), "ready", "netpeer {args:?}");
        p
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).expect("read netpeer");
        l.trim().to_string()
    }

    /// A server on `addr` with exactly `backlog`: `close-first`, `hold` or `never-accept`.
    pub fn serve(ns: &NetNs, addr: &str, backlog: i32, mode: &str) -> Peer {
        Peer::start(ns, &["serve", addr, &backlog.to_string(), mode])
    }

    /// A client that makes `n` blocking connects to `addr` when told to (`go`).
    pub fn connect(ns: &NetNs, addr: &str, n: u32) -> Peer {
        Peer::start(ns, &["connect", addr, &n.to_string()])
    }

    /// A client that starts `n` non-blocking connects at once when told to (`go`).
    pub fn flood(ns: &NetNs, addr: &str, n: u32) -> Peer {
        Peer::start(ns, &["flood", addr, &n.to_string()])
    }

    /// A process that connects to its own listener on `addr`, one connection at a time, for
    /// `secs` seconds when told to (`go`): the overhead bench's worst case.
    pub fn conn_loop(ns: &NetNs, addr: &str, secs: f64) -> Peer {
        Peer::start(ns, &["loop", addr, &secs.to_string()])
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Runs a client's work and returns the numbers of its `done` line.
    pub fn go(&mut self) -> Vec<u64> {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "go").expect("write netpeer");
        stdin.flush().expect("flush");
        let l = self.line();
        let rest = l
            .strip_prefix("done ")
            .unwrap_or_else(|| panic!("netpeer said {l:?}"));
        rest.split_whitespace()
            .map(|v| v.parse().expect("number"))
            .collect()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // EOF on stdin ends it; kill it if it does not end within a second.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
