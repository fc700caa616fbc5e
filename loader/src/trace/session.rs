//! The live half of a trace: attach to the target, hold the window (with an optional load),
//! then read everything the probes and /proc observed, once, into [`Observations`], and detach.
//! Nothing here judges: the rules and the report read only the observations.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use trapdetect_common::{
    counters::C_CONNECT_NOT_TCP,
    names::{PROG_FUSE_REQUEST_SEND, PROG_INET_SOCK_SET_STATE},
    paths::{PF_TRUNCATED, PathKey},
};

use super::{
    CwdSampler, LoadDriver, LoadOutcome, Options, backlog, interrupted,
    keepalive::{self, KeepAliveWatch},
    net, requests,
    seconds::TimeMark,
    spawn_ring_reader, thread_cpu_ns,
    threads::ThreadTime,
};
use crate::{
    error::Result,
    escape,
    host::{
        mounts::{MountTable, normalize},
        process::{self, Process, ReadOptions},
    },
    probe::{AttachOptions, Counts, ProbeRow, Probes},
    traps::{fs::CwdObs, run::SendHoldsObs},
};

/// Attached: the probes run, the target's forks are followed.
pub(super) struct Session {
    target: Process,
    mounts: MountTable,
    net_start: net::NetStart,
    probes: Probes,
    reader: JoinHandle<HashMap<PathKey, Vec<u8>>>,
    done: Arc<AtomicBool>,
    armed: net::Armed,
    /// The server's listening ports, and the probe load's port when it is another one.
    own_ports: Vec<u16>,
    front_ports: Vec<u16>,
    served_on: bool,
    /// Watches the target's ports while `tcp_probe` is held back (no load of trapdetect's:
    /// issue 28); `None` once it is attached, or when it never was held.
    keepalive: Option<KeepAliveWatch>,
    /// When the held-back `tcp_probe` was attached.
    served_late: Option<requests::LateCount>,
    /// The kernel's run time statistics, on until detach; when they and the process's CPU
    /// count started.
    stats: std::cell::RefCell<crate::probe::stats::StatsOn>,
    stats_since: Instant,
    cpu_since: Option<f64>,
}

/// What holding the window gave.
pub(super) struct Window {
    window_s: f64,
    exited_after: Option<f64>,
    cwds: CwdSampler,
    cpu_before: Option<HashMap<u32, u64>>,
    /// Where the threads' time went over the window (the off-CPU probes attached).
    threads: Option<ThreadTime>,
    /// What the target's connections held unsent, looked at once a second (not for `run`,
    /// whose sampler looks).
    send_holds: Option<SendHoldsObs>,
}

/// Everything one trace observed, gathered once after the window.
pub(super) struct Observations {
    /// The target's identity, read before attaching.
    pub target: Process,
    /// Seconds the window lasted.
    pub window_s: f64,
    /// Seconds into the window when the target exited.
    pub exited_after: Option<f64>,
    /// Processes in the target's tree at the end.
    pub processes: usize,
    /// The target's mounts (refreshed at the end while it lives).
    pub mounts: MountTable,
    /// Working directories seen in the window (most processes first).
    pub cwds: Vec<CwdObs>,
    /// The kernel's counts.
    pub counts: Counts,
    /// Path strings by key.
    pub strings: HashMap<PathKey, Vec<u8>>,
    /// Distinct paths truncated at the kernel's cap.
    pub truncated: u64,
    /// The FUSE request tracepoint was attached.
    pub fuse_measured: bool,
    /// Every program's state.
    pub probe_rows: Vec<ProbeRow>,
    /// Required programs that did not attach.
    pub missing_required: Vec<String>,
    /// The load's request count and its basis.
    pub request_basis: Option<(u64, &'static str)>,
    /// The most request bytes the load can have written.
    pub sent_bytes_max: Option<u64>,
    /// The load's mean request time, ms.
    pub request_ms: Option<f64>,
    /// What the server's ports received.
    pub served: Option<requests::Served>,
    /// The ports watched for a connection that stays open, when none did and `tcp_probe`
    /// stayed held back (the accepts are the requests).
    pub served_watched: Option<Vec<u16>>,
    /// On-CPU ns by thread at the start and the end of the window.
    pub cpu_before: Option<HashMap<u32, u64>>,
    /// See `cpu_before`.
    pub cpu_after: Option<HashMap<u32, u64>>,
    /// The network half: its census at the start, its sampler, what the probes gave.
    pub net_start: net::NetStart,
    /// See `net_start`.
    pub armed: net::Armed,
    /// See `net_start`.
    pub net: net::Measured,
    /// What the trace cost: its programs' run time, its own CPU.
    pub cost: super::cost::Measured,
    /// Where the threads' time went, when the off-CPU probes were attached.
    pub threads: Option<ThreadTime>,
    /// See [`Window`].
    pub send_holds: Option<SendHoldsObs>,
}

impl Session {
    /// Reads the target, attaches every program and follows the target's tree.
    pub(super) fn attach(opts: &Options, load: Option<&dyn LoadDriver>) -> Result<Session> {
        let target = process::read(opts.pid, ReadOptions::identity())?;
        for &c in &opts.watch_clients {
            process::read_basic(c)?;
        }
        crate::probe::check_privilege()?;
        let mounts = MountTable::of_pid(opts.pid)?;
        // The static census first: the target's listening ports come from it.
        let net_start = net::start(opts.pid, &opts.watch_clients);
        // Payload on the server's ports, whatever client sent it: its listening ports and the
        // probe's.
        let mut own_ports = net::listening_ports(&net_start);
        own_ports.sort_unstable();
        own_ports.dedup();
        let from_start = load.is_some_and(|l| l.served_from_start(&own_ports));
        let front_ports: Vec<u16> = load
            .filter(|_| from_start)
            .and_then(|l| l.server_port())
            .filter(|p| !own_ports.contains(p))
            .into_iter()
            .collect();
        // Unless the load needs it from the start, a target with ports of its own gets the
        // per-segment request counter only once a connection on them stays open
        // (keep-alive); a connection per request is counted by the accepts. Two looks before
        // the window: a benchmark's connections opened before the trace attach it from the
        // start.
        let mut keepalive = (!from_start)
            .then(|| KeepAliveWatch::open(opts.pid, &own_ports))
            .flatten();
        let stayed_before = keepalive.as_mut().map(|w| {
            std::thread::sleep(keepalive::LOOK_EVERY);
            w.look()
        });
        if matches!(stayed_before, Some(Ok(Some(_)) | Err(_))) {
            keepalive = None;
        }
        let mut probes = Probes::attach(
            opts.btf.as_deref(),
            &AttachOptions {
                skip: opts.skip_probes.clone(),
                watch_clients: !opts.watch_clients.is_empty(),
                offcpu: opts.offcpu != super::OffCpu::Off,
                no_served_ports: own_ports.is_empty() && front_ports.is_empty(),
                served_held: keepalive.is_some(),
            },
        )?;
        // Mark the target first: from here on its forks are followed in the kernel. Then walk
        // /proc twice to catch descendants forked before the fork probe saw them. Watched
        // clients the same way.
        probes.trace_pids(&[opts.pid])?;
        probes.watch_client_pids(&opts.watch_clients)?;
        for _ in 0..2 {
            let scan = process::scan();
            probes.trace_pids(&process::descendants(&scan, opts.pid))?;
            for &c in &opts.watch_clients {
                probes.watch_client_pids(&process::descendants(&scan, c))?;
            }
        }
        let ring = probes.take_path_events()?;
        let done = Arc::new(AtomicBool::new(false));
        let reader = spawn_ring_reader(ring, done.clone());

        // The sampler's baseline is read here, before the start line a caller may wait for.
        let armed = net::arm(&net_start, &mut probes)?;
        let served_on = probes.watch_served_ports(&own_ports, &front_ports)?;
        // The programs' run time from here to detach: the window and little else.
        let stats = crate::probe::stats::enable();
        Ok(Session {
            stats: std::cell::RefCell::new(stats),
            stats_since: Instant::now(),
            cpu_since: super::cost::process_cpu_s(),
            target,
            mounts,
            net_start,
            probes,
            reader,
            done,
            armed,
            own_ports,
            front_ports,
            served_on,
            keepalive,
            served_late: None,
        })
    }

    /// One look at the target's ports while `tcp_probe` is held back; attaches it at the first
    /// connection that stayed open (or when the watch fails: it can no longer tell).
    fn watch_keepalive(&mut self, since: Instant) -> Result<()> {
        let Some(w) = self.keepalive.as_mut() else {
            return Ok(());
        };
        let look = w.look();
        let after_s = since.elapsed().as_secs_f64();
        let why = match look {
            Ok(None) => return Ok(()),
            Ok(Some(s)) => format!(
                "attached {after_s:.1} s into the window, when a connection on port {} (from {}) stayed open",
                s.port,
                escape::text(&s.remote)
            ),
            Err(e) => format!(
                "attached {after_s:.1} s into the window, when the watch of the target's ports failed ({e})"
            ),
        };
        self.keepalive = None;
        if self
            .probes
            .attach_held_served(&self.own_ports, &self.front_ports, &why)?
        {
            self.served_on = true;
            self.served_late = Some(requests::LateCount {
                after_s: crate::traps::round(after_s, 2),
                accepted_before: self.probes.served_base().unwrap_or(0),
                why,
            });
        }
        Ok(())
    }

    /// Holds the window: until its end, Ctrl-C, the load's end or the target's exit.
    pub(super) fn hold(
        &mut self,
        opts: &Options,
        load: &mut Option<&mut dyn LoadDriver>,
    ) -> Result<Window> {
        if opts.progress.says_start() {
            eprintln!("{}", self.start_line(opts));
        }
        if let Some(l) = load.as_deref_mut() {
            l.start()?;
        }
        let start = Instant::now();
        let mut exited_after = None;
        let mut last_progress = Instant::now();
        let mut cwds = CwdSampler::default();
        cwds.rescan(opts.pid);
        cwds.sample();
        let cpu_before = thread_cpu_ns(&cwds.tree);
        let mut runtime = super::runtime_threads::RuntimeThreads::default();
        let time_start = (opts.offcpu == super::OffCpu::Window)
            .then(|| TimeMark::now(&self.probes, opts.pid, &mut runtime))
            .flatten();
        let mut last_sample = Instant::now();
        let mut last_rescan = Instant::now();
        let mut last_look = Instant::now();
        // `run`'s sampler looks at the connections every second itself.
        let mut sends = (opts.offcpu != super::OffCpu::PerSecond && !self.own_ports.is_empty())
            .then(|| (backlog::Reader::new(opts.pid), SendHoldsObs::default()));
        let mut last_sends = Instant::now();
        while start.elapsed() < opts.duration && !interrupted() {
            if self.keepalive.is_some()
                && last_look.elapsed() >= keepalive::look_every(start.elapsed())
            {
                last_look = Instant::now();
                self.watch_keepalive(start)?;
            }
            if let Some((reader, seen)) = sends.as_mut()
                && last_sends.elapsed() >= Duration::from_secs(1)
            {
                last_sends = Instant::now();
                if let Some(h) = reader.sends(&self.own_ports) {
                    seen.add(h);
                }
            }
            self.stats.borrow_mut().tick();
            if last_rescan.elapsed() >= Duration::from_secs(1) {
                last_rescan = Instant::now();
                cwds.rescan(opts.pid);
            }
            if last_sample.elapsed() >= Duration::from_millis(200) {
                last_sample = Instant::now();
                cwds.sample();
            }
            std::thread::sleep(
                Duration::from_millis(50).min(opts.duration.saturating_sub(start.elapsed())),
            );
            if let Some(l) = load.as_deref_mut() {
                l.tick(&self.probes);
                if l.done() {
                    break;
                }
            }
            if !process::alive(opts.pid, self.target.stat.start_ticks) {
                exited_after = Some(start.elapsed().as_secs_f64());
                break;
            }
            let every = match opts.progress {
                crate::util::Progress::Line => Duration::from_millis(250),
                _ => Duration::from_secs(1),
            };
            if opts.progress.shows() && last_progress.elapsed() >= every {
                last_progress = Instant::now();
                self.show_progress(opts, start, load.as_deref());
            }
        }
        let window_s = start.elapsed().as_secs_f64();
        let threads = time_start.and_then(|a| {
            TimeMark::now(&self.probes, opts.pid, &mut runtime).map(|b| ThreadTime {
                runtime_threads: runtime.by_name(),
                ..ThreadTime::of(&a.until(&b))
            })
        });
        if let Some(l) = load.as_deref_mut() {
            l.end(&self.probes);
        }
        opts.progress.clear();
        if interrupted() {
            eprintln!("interrupted after {window_s:.1} s: reporting what was gathered");
        }
        Ok(Window {
            window_s,
            exited_after,
            cwds,
            cpu_before,
            threads,
            send_holds: sends.map(|(_, seen)| seen).filter(|s| s.seconds_read > 0),
        })
    }

    /// The line a trace starts with.
    fn start_line(&self, opts: &Options) -> String {
        format!(
            "Tracing pid {} ({}) and its children for {:.1} s... Ctrl-C to end.",
            opts.pid,
            escape::bytes(&self.target.stat.comm),
            opts.duration.as_secs_f64()
        )
    }

    /// The progress line: the window so far, the path calls and the load's requests.
    fn show_progress(&self, opts: &Options, start: Instant, load: Option<&dyn LoadDriver>) {
        let req = load
            .and_then(|l| l.progress())
            .map(|r| format!(", {r} requests"))
            .unwrap_or_default();
        opts.progress.show(&format!(
            "  {:5.1}/{:.1} s  {} path calls{req}",
            start.elapsed().as_secs_f64(),
            opts.duration.as_secs_f64(),
            self.probes.path_calls()
        ));
    }

    /// Reads everything once and detaches; with what the load hands back for the report.
    pub(super) fn gather(
        self,
        opts: &Options,
        window: Window,
        load: Option<&mut dyn LoadDriver>,
    ) -> Result<(Observations, LoadOutcome)> {
        let Session {
            target,
            mounts,
            net_start,
            mut probes,
            reader,
            done,
            mut armed,
            own_ports,
            front_ports,
            served_on,
            keepalive,
            served_late,
            stats,
            stats_since,
            cpu_since,
        } = self;
        // Stop the probe load first (in-flight requests finish) so its last requests'
        // syscalls are in the counts read next.
        let (outcome, sent_bytes_max, request_ms) = finish_load(load)?;
        let request_basis = outcome.count;
        let readings = net::stop(&mut armed);
        let counts = probes.read()?;
        let served = served_on
            .then(|| served_of(&probes, &own_ports, &front_ports, sent_bytes_max))
            .transpose()?
            .flatten()
            .map(|s| s.counted_late(served_late));
        // Held back to the end: no connection stayed open, each accept was one request.
        let served_watched = keepalive.as_ref().map(|w| w.ports().to_vec());
        let cpu_after = thread_cpu_ns(&process::tree_now(opts.pid));
        let net = net::Measured {
            not_tcp: counts
                .counters
                .get(C_CONNECT_NOT_TCP as usize)
                .copied()
                .unwrap_or(0),
            readings,
            load_drain_s: outcome.drain_s,
            connect: probes.connect_counts()?,
            missed: probes.recursion_misses(PROG_INET_SOCK_SET_STATE),
            upstream: probes.upstream_ports(),
        };
        let (strings, truncated) = path_strings(&done, reader);
        let fuse_measured = probes.is_attached(PROG_FUSE_REQUEST_SEND);
        let cost = cost_of(&probes, &stats.borrow(), stats_since, cpu_since);
        let probe_rows = std::mem::take(&mut probes.rows);
        let missing_required = std::mem::take(&mut probes.missing_required);
        // Detach now: everything below is user-space work. Statistics off with them (the
        // host's setting is back as it was).
        drop(probes);
        stats.into_inner().finish();
        // Refresh what may have changed during the window (mounts, cwds), while the target
        // lives.
        let mounts = match window.exited_after {
            None => MountTable::of_pid(opts.pid).unwrap_or(mounts),
            Some(_) => mounts,
        };
        let (cwds, processes) = final_cwds(window.cwds, opts.pid, &target);
        Ok((
            Observations {
                target,
                window_s: window.window_s,
                exited_after: window.exited_after,
                processes,
                mounts,
                cwds,
                counts,
                strings,
                truncated,
                fuse_measured,
                probe_rows,
                missing_required,
                request_basis,
                sent_bytes_max,
                request_ms,
                served,
                served_watched,
                cpu_before: window.cpu_before,
                cpu_after,
                net_start,
                armed,
                net,
                cost,
                threads: window.threads,
                send_holds: window.send_holds,
            },
            outcome,
        ))
    }
}

/// The load's outcome, the largest request it sent and its request time (nothing without a
/// load).
fn finish_load(
    load: Option<&mut dyn LoadDriver>,
) -> Result<(LoadOutcome, Option<u64>, Option<f64>)> {
    Ok(match load {
        Some(l) => (l.finish()?, l.sent_bytes_max(), l.request_ms()),
        None => (LoadOutcome::default(), None, None),
    })
}

/// Ends the ring reader and takes the path strings it gathered, with how many distinct paths
/// were truncated (each arrived once, flagged in its key).
fn path_strings(
    done: &AtomicBool,
    reader: JoinHandle<HashMap<PathKey, Vec<u8>>>,
) -> (HashMap<PathKey, Vec<u8>>, u64) {
    done.store(true, Ordering::SeqCst);
    let strings = reader.join().unwrap_or_default();
    let truncated = strings
        .keys()
        .filter(|k| k.flags & PF_TRUNCATED != 0)
        .count() as u64;
    (strings, truncated)
}

/// The requests the target's ports received, counted in the kernel (`tcp_probe`).
fn served_of(
    probes: &Probes,
    own_ports: &[u16],
    front_ports: &[u16],
    sent_bytes_max: Option<u64>,
) -> Result<Option<requests::Served>> {
    Ok(probes
        .served()?
        .map(|[payload_bytes, data_segments, reqs]| requests::Served {
            ports: own_ports.iter().chain(front_ports).copied().collect(),
            own_ports: own_ports.to_vec(),
            payload_bytes,
            data_segments,
            requests: (!own_ports.is_empty()).then_some(reqs),
            probe_bytes_max: sent_bytes_max,
            counted_late: None,
        }))
}

/// The tracer's own cost: its programs' run time and its process's CPU since the attach.
fn cost_of(
    probes: &Probes,
    stats: &crate::probe::stats::StatsOn,
    since: Instant,
    cpu_since: Option<f64>,
) -> super::cost::Measured {
    super::cost::Measured {
        programs: probes.run_stats(),
        window_s: since.elapsed().as_secs_f64(),
        on_s: stats.on_s(),
        sampled: stats.sampled(),
        refused: stats.refused.clone(),
        process_cpu_s: cpu_since
            .zip(super::cost::process_cpu_s())
            .map(|(a, b)| (b - a).max(0.0)),
    }
}

/// The working directories of the tree at the end (the target's own first seen counted
/// once), most processes first; and how many processes the tree had.
fn final_cwds(mut cwds: CwdSampler, pid: u32, target: &Process) -> (Vec<CwdObs>, usize) {
    cwds.rescan(pid);
    cwds.sample();
    let processes = cwds.tree.len().max(1);
    if let Some(c) = &target.cwd {
        cwds.seen.entry(normalize(c)).or_insert(1);
    }
    let mut out: Vec<CwdObs> = cwds
        .seen
        .into_iter()
        .map(|(path, processes)| CwdObs {
            path,
            processes,
            visited: false,
        })
        .collect();
    out.sort_by(|a, b| {
        b.processes
            .cmp(&a.processes)
            .then_with(|| a.path.cmp(&b.path))
    });
    (out, processes)
}
