//! The user's own generator (`trapdetect run -- COMMAND`) as a child: its own process group
//! (a Ctrl-C reaches trapdetect, which then ends the generator the way the generators expect,
//! SIGINT, so they print their summary), killed with trapdetect if trapdetect dies
//! (`PR_SET_PDEATHSIG`), its stdout kept (capped) to read its results from, and its CPU and
//! run-queue delay read per second from the scheduler's own account of each of its threads.

use std::{
    collections::HashMap,
    io::Read,
    os::unix::process::CommandExt,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::{
        signal::{Signal, killpg},
        wait::{Id, WaitPidFlag, WaitStatus, waitid},
    },
    unistd::Pid,
};

use crate::{
    error::{Error, Result},
    host::{host, process},
};

/// Most of the command's stdout kept (beyond, it is drained and dropped).
pub const STDOUT_CAP: usize = 64 << 20;

/// How long a generator gets to exit after SIGINT before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// A running generator.
pub struct Generator {
    child: Child,
    pid: u32,
    out: Arc<Mutex<(Vec<u8>, bool)>>,
    reader: Option<JoinHandle<()>>,
    status: Option<i32>,
    /// Killed after the grace period.
    pub killed: bool,
    /// Ended by trapdetect (SIGINT at the end of the window), not by itself.
    pub interrupted: bool,
}

impl Generator {
    /// Starts `argv` (stdin closed, stdout kept, stderr shared).
    pub fn spawn(argv: &[String]) -> Result<Generator> {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| Error::usage("-- needs a command"))?;
        let mut cmd = Command::new(prog);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        // SAFETY: pre_exec is unsafe by contract; only async-signal-safe calls (sigaction,
        // sigprocmask, prctl, getppid, _exit) run between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // The SIGINT that ends the window must reach it whatever trapdetect inherited:
                // started from a script's background job (`trapdetect run ... &`) or nohup, the
                // shell set SIGINT to ignored, exec keeps an ignored disposition and a blocked
                // mask, and wrk would then run out the grace period and die of the SIGKILL
                // without printing its summary.
                for sig in [Signal::SIGINT, Signal::SIGTERM] {
                    nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl)?;
                }
                nix::sys::signal::sigprocmask(
                    nix::sys::signal::SigmaskHow::SIG_SETMASK,
                    Some(&nix::sys::signal::SigSet::empty()),
                    None,
                )?;
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The parent may have died before the prctl: then it would never fire.
                if nix::unistd::getppid() == Pid::from_raw(1) {
                    // libc: nix has no _exit, and exit() would run atexit handlers in the fork.
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            Error::input(format!("-- {}", crate::escape::bytes(prog.as_bytes())), e)
        })?;
        let pid = child.id();
        let out = Arc::new(Mutex::new((Vec::new(), false)));
        let mut stdout = child.stdout.take().expect("piped");
        let sink = out.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 64 << 10];
            loop {
                match stdout.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut g = sink.lock().unwrap_or_else(|p| p.into_inner());
                        let room = STDOUT_CAP.saturating_sub(g.0.len());
                        if n > room {
                            g.1 = true;
                        }
                        g.0.extend_from_slice(&buf[..n.min(room)]);
                    }
                }
            }
        });
        Ok(Generator {
            child,
            pid,
            out,
            reader: Some(reader),
            status: None,
            killed: false,
            interrupted: false,
        })
    }

    /// Its pid (also its process group).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it has exited (not reaped yet: its pid still names its group).
    pub fn exited(&self) -> bool {
        if self.status.is_some() {
            return true;
        }
        // WNOWAIT leaves our own child to be reaped by `stop`.
        match waitid(
            Id::Pid(Pid::from_raw(self.pid as i32)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ) {
            Ok(WaitStatus::StillAlive) => false,
            Ok(_) => true,
            // The call succeeded but nix has no name for the signal that ended it (a real-time
            // one): it has exited all the same.
            Err(Errno::EINVAL) => true,
            Err(_) => false,
        }
    }

    /// Ends it if it still runs (SIGINT to its group, SIGKILL after [`GRACE`]), kills what is
    /// left of its group, reaps it; returns its exit code (128 + signal when killed by one).
    pub fn stop(&mut self) -> i32 {
        if let Some(s) = self.status {
            return s;
        }
        let group = Pid::from_raw(self.pid as i32);
        if !self.exited() {
            self.interrupted = true;
            let _ = killpg(group, Signal::SIGINT);
            let deadline = Instant::now() + GRACE;
            while !self.exited() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if !self.exited() {
            self.killed = true;
        }
        // The leader is a zombie or alive: its pid still names the group, so this reaches
        // only what it started (a shell's children).
        let _ = killpg(group, Signal::SIGKILL);
        let status = match self.child.wait() {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                s.code()
                    .or_else(|| s.signal().map(|g| 128 + g))
                    .unwrap_or(-1)
            }
            Err(_) => -1,
        };
        self.status = Some(status);
        if let Some(r) = self.reader.take() {
            // Grandchildren that escaped the group may hold the pipe: do not wait on them.
            let deadline = Instant::now() + Duration::from_secs(1);
            while !r.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if r.is_finished() {
                let _ = r.join();
            }
        }
        status
    }

    /// What it printed so far, and whether the cap cut it.
    pub fn stdout(&self) -> (Vec<u8>, bool) {
        let g = self.out.lock().unwrap_or_else(|p| p.into_inner());
        (g.0.clone(), g.1)
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        // An error path must not leave a generator running.
        if self.status.is_none() {
            let _ = killpg(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// One second of the generator (or, to weigh it against, the server) as the scheduler saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClientSecond {
    /// Cores it ran on (CPU thread-seconds per second).
    pub cores: f64,
    /// Its threads runnable but not running (thread-seconds per second): starved of CPU, or
    /// only woken (a thread woken over loopback waits for the one on its CPU to yield, and the
    /// server's threads wait alike: hey at 200 req/s against Node on this idle VM, 31 µs per
    /// dispatch, Node's thread 35 µs).
    pub run_queue: f64,
    /// Times its threads were put on a CPU, per second (schedstat's timeslices): each one
    /// after a wait on a run queue, however short.
    pub dispatches: f64,
    /// CPUs of its affinity left idle, on average over the second (None: unreadable).
    pub idle_cpus: Option<f64>,
}

/// Samples a process tree's threads (new threads count from zero; exited ones drop out).
#[derive(Default)]
pub struct ClientSampler {
    prev: HashMap<u32, (u64, u64, u64)>,
    /// Per-CPU (busy, total) ticks at the last sample.
    prev_cpus: HashMap<u32, host::CpuTicks>,
    at: Option<Instant>,
    /// Every process of the generator's tree seen so far (its CPU is the load's, not noise).
    pub pids: std::collections::BTreeSet<u32>,
}

impl ClientSampler {
    /// Reads the tree of `root` now; the first call only takes the baseline.
    pub fn sample(&mut self, root: u32) -> Option<ClientSecond> {
        let now = Instant::now();
        let mut cur = HashMap::new();
        for p in process::tree_now(root) {
            self.pids.insert(p);
            let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            for t in rd.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(v) = std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| process::parse_schedstat(&s))
                {
                    cur.insert(tid, v);
                }
            }
        }
        let cpus = host::per_cpu_ticks();
        let allowed = std::fs::read_to_string(format!("/proc/{root}/status"))
            .ok()
            .and_then(|t| process::parse_cpu_list(&process::parse_status(&t).cpus_allowed_list));
        let out = self.at.map(|at| {
            let dt = now.duration_since(at).as_secs_f64().max(1e-3);
            let (mut cpu, mut wait, mut slices) = (0u64, 0u64, 0u64);
            for (tid, (c, w, n)) in &cur {
                let (c0, w0, n0) = self.prev.get(tid).copied().unwrap_or((0, 0, 0));
                cpu += c.saturating_sub(c0);
                wait += w.saturating_sub(w0);
                slices += n.saturating_sub(n0);
            }
            ClientSecond {
                cores: cpu as f64 / 1e9 / dt,
                run_queue: wait as f64 / 1e9 / dt,
                dispatches: slices as f64 / dt,
                idle_cpus: allowed.as_deref().and_then(|a| {
                    let (busy, read) = host::busy_between(&self.prev_cpus, &cpus, a);
                    (read > 0).then_some(read as f64 - busy)
                }),
            }
        });
        self.prev = cur;
        self.prev_cpus = cpus;
        self.at = Some(now);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Processes of process group `pgid` that are not zombies.
    fn live_in_group(pgid: u32) -> Vec<u32> {
        let mut out = vec![];
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.get(2) == Some(&pgid.to_string().as_str()) && f.first() != Some(&"Z") {
                out.push(pid);
            }
        }
        out
    }

    #[test]
    fn a_generator_gets_the_sigint_that_trapdetect_blocks() {
        // What a script's background job or nohup hands trapdetect (an ignored or blocked
        // SIGINT) is not handed on: exec keeps both. The mask is per thread, so blocking it
        // here, around the spawn, leaves the other tests alone. The generator is `sleep`
        // itself, its masks read from /proc once it has exec'd: a shell in between raced the
        // SIGINT (dash caught it between two commands and waited out the next one: killed
        // after the grace period in CI's full lib run, 137).
        use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
        let mut int = SigSet::empty();
        int.add(Signal::SIGINT);
        let mut old = SigSet::empty();
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&int), Some(&mut old)).unwrap();
        let spawned = Generator::spawn(&["sleep".into(), "30".into()]);
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None).unwrap();
        let mut g = spawned.unwrap();
        let status = format!("/proc/{}/status", g.pid);
        let deadline = Instant::now() + Duration::from_secs(5);
        let text = loop {
            let t = std::fs::read_to_string(&status).unwrap_or_default();
            if t.lines().next() == Some("Name:\tsleep") || Instant::now() > deadline {
                break t;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // Bit 1 (SIGINT, signal 2) of the masks: neither blocked nor ignored in the generator.
        let mask = |name: &str| {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"));
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert!(text.starts_with("Name:\tsleep"), "{text}");
        assert_eq!(mask("SigBlk:") & 0b10, 0, "{text}");
        assert_eq!(mask("SigIgn:") & 0b10, 0, "{text}");
        assert_eq!(
            g.stop(),
            128 + Signal::SIGINT as i32,
            "sleep dies of the SIGINT"
        );
        assert!(!g.killed);
    }

    #[test]
    fn a_generator_is_interrupted_reaped_and_its_group_killed() {
        // A shell that starts a grandchild and ignores nothing: SIGINT ends both.
        let mut g = Generator::spawn(&[
            "sh".into(),
            "-c".into(),
            "echo started; sleep 30 & sleep 30; echo never".into(),
        ])
        .unwrap();
        let pid = g.pid();
        let deadline = Instant::now() + Duration::from_secs(5);
        while g.stdout().0.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!g.exited());
        let code = g.stop();
        assert!(g.interrupted);
        assert_eq!(code, 128 + Signal::SIGINT as i32, "sh dies of the SIGINT");
        assert_eq!(g.stdout().0, b"started\n");
        // Nothing of its group is left running (the backgrounded sleep, which ignores SIGINT
        // as a non-interactive shell's background jobs do, got the SIGKILL; it may linger
        // as a zombie until its new parent reaps it).
        let deadline = Instant::now() + Duration::from_secs(2);
        while !live_in_group(pid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(live_in_group(pid), Vec::<u32>::new());
        // A generator that ended by itself is only reaped.
        let mut g = Generator::spawn(&["true".into()]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !g.exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(g.stop(), 0);
        assert!(!g.interrupted && !g.killed);
        let e = Generator::spawn(&["/nonexistent/generator".into()])
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn a_busy_child_shows_its_cpu() {
        let mut g = Generator::spawn(&[
            "sh".into(),
            "-c".into(),
            "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done".into(),
        ])
        .unwrap();
        let mut s = ClientSampler::default();
        assert_eq!(s.sample(g.pid()), None);
        std::thread::sleep(Duration::from_millis(300));
        let c = s.sample(g.pid()).unwrap();
        // A shell loop is on a CPU or waiting for one the whole time.
        assert!(c.cores + c.run_queue > 0.5, "{c:?}");
        g.stop();
    }
}
