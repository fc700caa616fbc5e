//! A trace session: snapshot the target, attach, let it run (with an optional probe load),
//! read the counts, resolve them, apply the rules, build the report.

pub mod aggregate;
pub mod backlog;
pub mod census;
pub mod net;
pub mod probe_load;
pub mod quota;
pub mod requests;
pub mod seconds;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use aya::maps::{MapData, RingBuf};
use trapdetect_common::{
    counters::*,
    names::{PROG_FUSE_REQUEST_SEND, PROG_INET_SOCK_SET_STATE},
    paths::{PATH_CAP, PF_TRUNCATED, PathEvent, PathKey},
};

use crate::{
    error::Result,
    escape,
    host::{
        mounts::{MountTable, normalize},
        tree,
    },
    probe::{AttachOptions, Probes},
    report::{Measurement, Report, Requests, Target},
    traps::{
        self,
        fs::{CwdObs, FsObservation, Work},
        round,
    },
};

/// What a trace session is asked to do.
pub struct Options {
    /// Target pid.
    pub pid: u32,
    /// Window.
    pub duration: Duration,
    /// Paths listed in the report.
    pub top: usize,
    /// Allowed share of calls with unknown path strings, percent.
    pub loss_budget_pct: f64,
    /// Progress on stderr (`util::Progress`: a terminal, or `--progress`).
    pub progress: crate::util::Progress,
    /// BTF file to use instead of the kernel's.
    pub btf: Option<std::path::PathBuf>,
    /// Watched clients (`--watch-client`): their connect() calls are timed.
    pub watch_clients: Vec<u32>,
    /// Programs not to attach (`--skip-probe`).
    pub skip_probes: Vec<String>,
    /// Attach the off-CPU probes (`trapdetect run`).
    pub offcpu: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: std::ffi::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM end the window early; the report is still printed.
fn install_signal_handlers() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    STOP.store(false, Ordering::SeqCst);
    // SAFETY: installing a handler is unsafe in nix; this one only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGINT, SigHandler::Handler(on_signal));
        let _ = signal(Signal::SIGTERM, SigHandler::Handler(on_signal));
    }
}

/// Reads first sightings until told to stop; the thread returns key → path bytes.
fn spawn_ring_reader(
    mut ring: RingBuf<MapData>,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<HashMap<PathKey, Vec<u8>>> {
    std::thread::spawn(move || {
        let mut strings = HashMap::new();
        let mut drain = |ring: &mut RingBuf<MapData>| {
            while let Some(item) = ring.next() {
                if item.len() < std::mem::size_of::<PathEvent>() {
                    continue;
                }
                // SAFETY: eBPF boundary: the item holds at least size_of::<PathEvent>() bytes and
                // PathEvent is plain old data, valid for any bytes.
                let ev: PathEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
                let n = if ev.len > 0 {
                    (ev.len as usize - 1).min(PATH_CAP)
                } else {
                    0
                };
                strings.insert(ev.key, ev.path[..n].to_vec());
            }
        };
        loop {
            let stop = done.load(Ordering::SeqCst);
            {
                use nix::poll::{PollFd, PollFlags, poll};
                use std::os::fd::AsFd;
                let _ = poll(&mut [PollFd::new(ring.as_fd(), PollFlags::POLLIN)], 50u16);
            }
            drain(&mut ring);
            if stop {
                break;
            }
        }
        strings
    })
}

/// The live part of a session that the caller may drive load against.
pub trait LoadDriver {
    /// Called once attached, right before the window starts.
    fn start(&mut self) -> Result<()>;
    /// Requests completed so far (for the progress line).
    fn progress(&self) -> Option<u64>;
    /// Called when the window ends, before the counts are read; returns the request count for
    /// the window and its basis label (`None`: no usable count). It records its own section,
    /// findings and trust problems in `report`.
    fn finish(&mut self, report: &mut Report) -> Result<Option<(u64, &'static str)>>;
    /// The server port the load is sent to, so what that port receives from other clients
    /// is counted too.
    fn server_port(&self) -> Option<u16> {
        None
    }
    /// After `finish`: the most request bytes the load can have written in the window.
    fn sent_bytes_max(&self) -> Option<u64> {
        None
    }
    /// After `finish`: the mean time its answered requests took, ms.
    fn request_ms(&self) -> Option<f64> {
        None
    }
    /// Called every few tens of milliseconds during the window, with the probes to read
    /// (`trapdetect run` samples its per-second kernel series here).
    fn tick(&mut self, _probes: &Probes) {}
    /// Called once when the window ends, before `finish`, with the probes still attached.
    fn end(&mut self, _probes: &Probes) {}
    /// The load is over before the window (an external generator exited): end the window.
    fn done(&self) -> bool {
        false
    }
}

/// Working directories of the traced processes, sampled through the window: a PHP worker
/// flips its cwd around every request, so one snapshot can miss where it rests.
#[derive(Default)]
struct CwdSampler {
    tree: Vec<u32>,
    seen: HashMap<Vec<u8>, usize>,
}

impl CwdSampler {
    fn rescan(&mut self, pid: u32) {
        self.tree = tree::descendants(pid);
    }

    fn sample(&mut self) {
        let mut now: HashMap<Vec<u8>, usize> = HashMap::new();
        for p in &self.tree {
            if let Ok(c) = std::fs::read_link(format!("/proc/{p}/cwd")) {
                *now.entry(normalize(c.as_os_str().as_encoded_bytes()))
                    .or_default() += 1;
            }
        }
        for (c, n) in now {
            let e = self.seen.entry(c).or_default();
            *e = (*e).max(n);
        }
    }
}

/// On-CPU time of every thread of `pids`, ns by thread id (`/proc/PID/task/TID/schedstat`,
/// first field: the scheduler's own account, not the 10 ms ticks of `stat`). `None` when no
/// thread's could be read (a kernel without CONFIG_SCHED_INFO).
fn thread_cpu_ns(pids: &[u32]) -> Option<HashMap<u32, u64>> {
    let mut out = HashMap::new();
    for p in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(ns) = std::fs::read_to_string(t.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            {
                out.insert(tid, ns);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The traced threads' CPU time between two readings (threads born in between count whole;
/// threads that exited in between are lost, which only overstates a filesystem's share).
fn work_between(
    before: Option<&HashMap<u32, u64>>,
    after: Option<&HashMap<u32, u64>>,
    request_ms: Option<f64>,
) -> Work {
    let cpus = crate::util::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN).max(1) as usize;
    let cpu_ns = match (before, after) {
        (Some(b), Some(a)) => Some(
            a.iter()
                .map(|(t, ns)| ns.saturating_sub(b.get(t).copied().unwrap_or(0)))
                .sum(),
        ),
        _ => None,
    };
    Work {
        cpu_ns,
        threads: after.map(|a| a.len()).unwrap_or(1),
        cpus,
        request_ms,
    }
}

/// Runs a session and returns its report (exit code computed by the caller's `finish`).
pub fn run(opts: &Options, mut load: Option<&mut dyn LoadDriver>) -> Result<Report> {
    // First: a Ctrl-C during setup must end the window, not be lost.
    install_signal_handlers();
    let target = tree::info(opts.pid)?;
    for &c in &opts.watch_clients {
        tree::info(c)?;
    }
    crate::probe::check_privilege()?;
    let mut mounts = MountTable::of_pid(opts.pid)?;
    // The static census first: the target's listening ports come from it.
    let net_start = net::start(opts.pid, &opts.watch_clients);
    let mut probes = Probes::attach(
        opts.btf.as_deref(),
        &AttachOptions {
            skip: opts.skip_probes.clone(),
            watch_clients: !opts.watch_clients.is_empty(),
            offcpu: opts.offcpu,
        },
    )?;
    // Mark the target first: from here on its forks are followed in the kernel. Then walk
    // /proc twice to catch descendants forked before the fork probe saw them. Watched
    // clients the same way.
    probes.trace_pids(&[opts.pid])?;
    probes.watch_client_pids(&opts.watch_clients)?;
    for _ in 0..2 {
        let scan = crate::host::process::scan();
        probes.trace_pids(&crate::host::process::descendants(&scan, opts.pid))?;
        for &c in &opts.watch_clients {
            probes.watch_client_pids(&crate::host::process::descendants(&scan, c))?;
        }
    }
    let ring = probes.take_path_events()?;
    let done = Arc::new(AtomicBool::new(false));
    let reader = spawn_ring_reader(ring, done.clone());

    // The sampler's baseline is read here, before the start line a caller may wait for.
    let mut armed = net::arm(&net_start, &mut probes)?;
    // Payload on the server's ports, whatever client sent it: its listening ports and the
    // probe's.
    let mut own_ports = net::listening_ports(&net_start);
    own_ports.sort_unstable();
    own_ports.dedup();
    let front_ports: Vec<u16> = load
        .as_deref()
        .and_then(|l| l.server_port())
        .filter(|p| !own_ports.contains(p))
        .into_iter()
        .collect();
    let served_on = probes.watch_served_ports(&own_ports, &front_ports)?;
    eprintln!(
        "Tracing pid {} ({}) and its children for {:.1} s... Ctrl-C to end.",
        opts.pid,
        escape::bytes(&target.comm),
        opts.duration.as_secs_f64()
    );
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
    let mut last_sample = Instant::now();
    let mut last_rescan = Instant::now();
    while start.elapsed() < opts.duration && !STOP.load(Ordering::SeqCst) {
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
            l.tick(&probes);
            if l.done() {
                break;
            }
        }
        if !tree::alive(opts.pid, target.starttime) {
            exited_after = Some(start.elapsed().as_secs_f64());
            break;
        }
        if opts.progress != crate::util::Progress::Off
            && last_progress.elapsed()
                >= if opts.progress == crate::util::Progress::Line {
                    Duration::from_millis(250)
                } else {
                    Duration::from_secs(1)
                }
        {
            last_progress = Instant::now();
            let req = load
                .as_deref()
                .and_then(|l| l.progress())
                .map(|r| format!(", {r} requests"))
                .unwrap_or_default();
            opts.progress.show(&format!(
                "  {:5.1}/{:.1} s  {} path calls{req}",
                start.elapsed().as_secs_f64(),
                opts.duration.as_secs_f64(),
                probes.path_calls()
            ));
        }
    }
    let window_s = start.elapsed().as_secs_f64();
    if let Some(l) = load.as_deref_mut() {
        l.end(&probes);
    }
    opts.progress.clear();
    if STOP.load(Ordering::SeqCst) {
        eprintln!("interrupted after {window_s:.1} s: reporting what was gathered");
    }
    // Stop the probe load first (in-flight requests finish) so its last requests' syscalls
    // are in the counts read next.
    let mut report = Report::new("trace");
    let (request_basis, sent_bytes_max, request_ms) = match load {
        Some(l) => (l.finish(&mut report)?, l.sent_bytes_max(), l.request_ms()),
        None => (None, None, None),
    };
    let readings = net::stop(&mut armed);
    let counts = probes.read()?;
    let served = if served_on {
        probes
            .served()?
            .map(|[payload_bytes, data_segments, reqs]| requests::Served {
                ports: own_ports.iter().chain(&front_ports).copied().collect(),
                own_ports: own_ports.clone(),
                payload_bytes,
                data_segments,
                requests: (!own_ports.is_empty()).then_some(reqs),
                probe_bytes_max: sent_bytes_max,
            })
    } else {
        None
    };
    let cpu_after = thread_cpu_ns(&tree::descendants(opts.pid));
    let connect = probes.connect_counts()?;
    let missed = probes.recursion_misses(PROG_INET_SOCK_SET_STATE);
    done.store(true, Ordering::SeqCst);
    let strings = reader.join().unwrap_or_default();
    // Each truncated path arrived once, flagged in its key.
    let truncated = strings
        .keys()
        .filter(|k| k.flags & PF_TRUNCATED != 0)
        .count() as u64;
    let fuse_measured = probes.is_attached(PROG_FUSE_REQUEST_SEND);
    let probe_rows = std::mem::take(&mut probes.rows);
    let missing_required = std::mem::take(&mut probes.missing_required);
    // Detach now: everything below is user-space work.
    drop(probes);

    // Refresh what may have changed during the window (mounts, cwds), while the target lives.
    if exited_after.is_none()
        && let Ok(m) = MountTable::of_pid(opts.pid)
    {
        mounts = m;
    }
    cwds.rescan(opts.pid);
    cwds.sample();
    let tree_now = cwds.tree.clone();
    if let Some(c) = &target.cwd {
        cwds.seen.entry(normalize(c)).or_insert(1);
    }
    let mut cwds: Vec<CwdObs> = cwds
        .seen
        .into_iter()
        .map(|(path, processes)| CwdObs {
            path,
            processes,
            visited: false,
        })
        .collect();
    cwds.sort_by(|a, b| {
        b.processes
            .cmp(&a.processes)
            .then_with(|| a.path.cmp(&b.path))
    });
    let hints: Vec<Vec<u8>> = cwds.iter().map(|c| c.path.clone()).collect();

    // Requests: the probe load's responses, else accepted connections, else none; declined
    // when the server's ports show other clients' requests in the window.
    let accepts = counts
        .counters
        .get(C_ACCEPTS as usize)
        .copied()
        .unwrap_or(0);
    let probe = request_basis.map(|(answered, _)| requests::ProbeCount {
        answered,
        sent_bytes_max,
    });
    let denominator = requests::decide(probe, accepts, served.as_ref());
    let requests = denominator.count;
    let resolved = aggregate::resolve(&counts.paths, &strings, &mounts, &hints);
    let fuse = aggregate::fuse_obs(&counts.fuse, &mounts);
    // Where each walk starts: a directory the server chdirs into (PHP's docroot, per
    // request) that is not the one it was started in is visited, not its working directory.
    let start_cwd = target.cwd.as_deref().map(normalize);
    for c in &mut cwds {
        c.visited = start_cwd.as_deref() != Some(c.path.as_slice())
            && resolved.calls.iter().any(|k| {
                k.syscall == "chdir"
                    && k.base == traps::fs::Base::Absolute
                    && k.path.as_deref() == Some(c.path.as_slice())
            });
    }
    let obs = FsObservation {
        mounts: mounts.clone(),
        calls: resolved.calls,
        cwds,
        requests,
        window_s,
        fuse,
        fuse_measured,
        cmdline: target.cmdline.clone(),
        exe: target.exe.clone(),
        // The probe's request time means something only when its requests are the count.
        work: work_between(
            cpu_before.as_ref(),
            cpu_after.as_ref(),
            request_ms.filter(|_| denominator.basis == "probe-load"),
        ),
    };

    report.target = Some(Target {
        pid: opts.pid,
        comm: escape::bytes(&target.comm),
        exe: target.exe.as_deref().map(escape::bytes).unwrap_or_default(),
        cwd: target.cwd.as_deref().map(escape::bytes).unwrap_or_default(),
        processes: tree_now.len().max(1),
        exited_after_s: exited_after.map(|s| round(s, 2)),
    });
    report.window_s = Some(round(window_s, 3));
    report.requests = Some(Requests {
        count: requests,
        basis: denominator.basis,
        rate_per_s: requests.map(|r| round(r as f64 / window_s.max(1e-9), 2)),
        note: denominator.note,
        served,
    });
    report.findings.extend(traps::fs::rules(&obs));
    report.syscalls = aggregate::syscall_rows(&obs.calls, &mounts, requests, window_s);
    report.filesystems = aggregate::fs_rows(&obs.calls, &obs.fuse, &mounts, requests, window_s);
    report.paths = aggregate::path_rows(&obs.calls, &mounts, requests, opts.top);
    let not_tcp = counts
        .counters
        .get(C_CONNECT_NOT_TCP as usize)
        .copied()
        .unwrap_or(0);
    let measured = net::Measured {
        readings,
        connect,
        missed,
        not_tcp,
    };
    net::finish(net_start, armed, measured, &probe_rows, &mut report);
    report.probes = probe_rows;
    let mut m = measurement(
        &counts,
        resolved.unknown_calls,
        truncated,
        opts,
        exited_after,
    );
    if !missing_required.is_empty() {
        m.trusted = false;
        m.problems.push(format!(
            "required probes did not attach: {}",
            missing_required.join(", ")
        ));
    }
    // Keep what the load driver already recorded.
    m.problems.append(&mut report.measurement.problems);
    m.notes.append(&mut report.measurement.notes);
    m.trusted &= report.measurement.trusted;
    report.measurement = m;
    Ok(report)
}

/// Decides whether the figures can be trusted and says why.
fn measurement(
    counts: &crate::probe::Counts,
    unknown_calls: u64,
    truncated: u64,
    opts: &Options,
    exited_after: Option<f64>,
) -> Measurement {
    let c = |i: u32| counts.counters.get(i as usize).copied().unwrap_or(0);
    let total: u64 = counts.kinds.iter().sum();
    let in_paths: u64 = counts.paths.values().map(|p| p.count).sum();
    let unattributed = total.saturating_sub(in_paths);
    let mut m = Measurement {
        trusted: true,
        ..Default::default()
    };
    for (i, name) in COUNTER_NAMES.iter().enumerate() {
        m.counters.insert(name.to_string(), c(i as u32).into());
    }
    m.counters.insert("path_calls".into(), total.into());
    m.counters
        .insert("unknown_path_calls".into(), unknown_calls.into());
    m.counters
        .insert("unattributed_calls".into(), unattributed.into());
    let budget = opts.loss_budget_pct / 100.0;
    let share = |n: u64| {
        if total == 0 {
            0.0
        } else {
            n as f64 / total as f64
        }
    };
    if share(unknown_calls) > budget {
        m.trusted = false;
        m.problems.push(format!(
            "{unknown_calls} of {total} path calls ({:.2} %) have no path string ({} first sightings dropped by a full ring buffer, {} unreadable paths): their filesystem is unknown; budget {} %",
            share(unknown_calls) * 100.0,
            c(C_RINGBUF_DROPS),
            c(C_PATH_READ_FAILS),
            opts.loss_budget_pct
        ));
    } else if unknown_calls > 0 {
        m.notes.push(format!(
            "{unknown_calls} of {total} path calls have no path string (within the {} % budget)",
            opts.loss_budget_pct
        ));
    }
    if share(unattributed) > budget {
        m.trusted = false;
        m.problems.push(format!(
            "{unattributed} of {total} path calls were counted but not attributed to a path (more distinct paths than the 16,384-entry table holds; {} inserts failed)",
            c(C_PATH_STATS_INSERT_FAILS)
        ));
    }
    let collisions = c(C_INFLIGHT_COLLISIONS);
    if share(collisions) > budget {
        m.trusted = false;
        m.problems.push(format!("{collisions} syscall exits lost their entry record (thread-id slot collisions): latencies are incomplete"));
    }
    if truncated > 0 {
        m.notes.push(format!(
            "{truncated} distinct paths were longer than {PATH_CAP} bytes and were truncated"
        ));
    }
    if c(C_EXIT_WITHOUT_ENTER) > 0 {
        m.notes.push(format!(
            "{} calls were already in progress at attach and were not timed",
            c(C_EXIT_WITHOUT_ENTER)
        ));
    }
    if let Some(s) = exited_after {
        m.notes.push(format!(
            "the target exited {s:.1} s into the window; figures cover what was gathered until then"
        ));
    }
    m
}
