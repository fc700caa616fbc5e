//! A trace session: snapshot the target, attach, let it run (with an optional probe load),
//! read the counts, resolve them, apply the rules, build the report.

pub mod aggregate;
pub mod backlog;
pub mod census;
pub mod cost;
pub mod keepalive;
pub mod net;
pub mod probe_load;
pub mod quota;
pub mod requests;
pub mod run;
pub mod runtime_threads;
pub mod seconds;
mod session;
pub mod stack;
pub mod threads;

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use aya::maps::{MapData, RingBuf};
use trapdetect_common::{
    counters::*,
    paths::{PATH_CAP, PathEvent, PathKey},
};

use self::session::{Observations, Session};
use crate::{
    error::Result,
    escape,
    host::{mounts::normalize, process},
    report::{Measurement, Report, Requests, Target},
    traps::{
        self,
        fs::{FsObservation, Work},
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
    /// Whether the off-CPU probes attach, and who reads them.
    pub offcpu: OffCpu,
}

/// Whether the off-CPU probes attach ([`Options::offcpu`]), and who reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffCpu {
    /// Not attached.
    Off,
    /// Attached; the report splits the threads' time over the window (its `threads` section:
    /// `trace --offcpu`, the agent).
    Window,
    /// Attached for `run`'s sampler, which splits every second in its own section.
    PerSecond,
}

/// SIGINT/SIGTERM received since the process started, never reset; and how many there had
/// been when the current window's handlers were installed. A window is interrupted when the
/// count has moved since; a long-running caller (the agent) keeps its own starting count, so a
/// signal between two windows is not lost when the next window starts.
static SIGNALS: AtomicU64 = AtomicU64::new(0);
static SIGNALS_AT_INSTALL: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_: std::ffi::c_int) {
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// SIGINT/SIGTERM received so far (see [`install_signal_handlers`]).
pub(crate) fn signals() -> u64 {
    SIGNALS.load(Ordering::SeqCst)
}

/// Whether SIGINT/SIGTERM asked to end the window.
pub(crate) fn interrupted() -> bool {
    signals() != SIGNALS_AT_INSTALL.load(Ordering::SeqCst)
}

/// SIGINT/SIGTERM end the window early; the report is still printed.
pub(crate) fn install_signal_handlers() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    SIGNALS_AT_INSTALL.store(signals(), Ordering::SeqCst);
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
            // Once stopped, one last drain without waiting: the detach waits for this thread.
            if !stop {
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

/// What a load driver hands back when the window ends: the request count, and what it adds
/// to the report (its section, its findings, what makes the figures untrusted, notes), which
/// the caller records once gathering is done: gathering writes nothing into a report.
#[derive(Default)]
pub struct LoadOutcome {
    /// Requests answered in the window and the basis label (`None`: no usable count).
    pub count: Option<(u64, &'static str)>,
    /// Its sections of the report (the load summary, an external generator's).
    pub sections: Vec<Box<dyn crate::report::Section>>,
    /// Its findings (`load.*`, `gen.*`).
    pub findings: Vec<crate::traps::Finding>,
    /// What makes the run's figures untrusted (exit 3).
    pub problems: Vec<String>,
    /// Lesser measurement notes.
    pub notes: Vec<String>,
    /// Seconds at the window's end after the load stopped sending: its drain (`None`: the
    /// window ended with the load). Rates of what the load caused are over the seconds
    /// before it.
    pub drain_s: Option<f64>,
}

impl LoadOutcome {
    /// Writes it into `report` (in this order: sections, findings, problems, notes).
    pub fn record(self, report: &mut Report) {
        for s in &self.sections {
            report.add(s.as_ref());
        }
        report.findings.extend(self.findings);
        if !self.problems.is_empty() {
            report.measurement.trusted = false;
            report.measurement.problems.extend(self.problems);
        }
        report.measurement.notes.extend(self.notes);
    }
}

/// The live part of a session that the caller may drive load against.
pub trait LoadDriver {
    /// Called once attached, right before the window starts.
    fn start(&mut self) -> Result<()>;
    /// Requests completed so far (for the progress line).
    fn progress(&self) -> Option<u64>;
    /// Called when the window ends, before the counts are read: the request count for the
    /// window with its basis label, and what the load adds to the report.
    fn finish(&mut self) -> Result<LoadOutcome>;
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
    fn tick(&mut self, _probes: &dyn seconds::KernelSource) {}
    /// Called once when the window ends, before `finish`, with the probes still attached.
    fn end(&mut self, _probes: &dyn seconds::KernelSource) {}
    /// The load is over before the window (an external generator exited): end the window.
    fn done(&self) -> bool {
        false
    }
    /// Whether the report needs what the server's ports receive from the window's start
    /// (`tcp_probe` attached at once), given the target's own listening ports: the probe load
    /// compares it with what it sent, and an external generator's delivered rate may be the
    /// kernel's count. A load that counts its own answers lets it wait for a connection that
    /// stays open (`trace::keepalive`).
    fn served_from_start(&self, _own_ports: &[u16]) -> bool {
        true
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
        self.tree = process::tree_now(pid);
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

/// Runs a session and returns its report (exit code computed by the caller's `finish`):
/// attach, hold the window, gather what was observed once, then judge it.
pub fn run(opts: &Options, mut load: Option<&mut dyn LoadDriver>) -> Result<Report> {
    // First: a Ctrl-C during setup must end the window, not be lost.
    install_signal_handlers();
    let mut session = Session::attach(opts, load.as_deref())?;
    let window = session.hold(opts, &mut load)?;
    let (obs, outcome) = session.gather(opts, window, load)?;
    let mut report = Report::new("trace");
    outcome.record(&mut report);
    judge(opts, obs, &mut report);
    // JSON only: the fingerprint is for `compare` and the archive, not the trace's text.
    if let Ok(v) = serde_json::to_value(crate::host::fingerprint::gather(Some(opts.pid))) {
        report.sections.insert("fingerprint".into(), v);
    }
    Ok(report)
}

/// The rules and the report's sections, from the observations alone.
fn judge(opts: &Options, obs: Observations, report: &mut Report) {
    let Observations {
        target,
        window_s,
        exited_after,
        processes,
        mounts,
        mut cwds,
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
        cpu_before,
        cpu_after,
        net_start,
        armed,
        net: net_measured,
        cost: tracer_cost,
        threads,
        send_holds,
    } = obs;
    let hints: Vec<Vec<u8>> = cwds.iter().map(|c| c.path.clone()).collect();

    // Requests: the probe load's responses, else accepted connections, else none; declined
    // when the server's ports show other clients' requests in the window.
    let probe = request_basis.map(|(answered, basis)| requests::ProbeCount {
        answered,
        sent_bytes_max,
        basis,
    });
    let accepts = counts.counters.get(C_ACCEPTS as usize).copied();
    let denominator = requests::decide(
        probe,
        accepts.unwrap_or(0),
        served.as_ref(),
        served_watched.as_deref(),
    );
    let requests = denominator.count;
    let resolved = aggregate::resolve(&counts.paths, &strings, &mounts, &hints);
    let fuse = aggregate::fuse_obs(&counts.fuse, &mounts);
    mark_visited(&mut cwds, &target, &resolved.calls);
    let fs = FsObservation {
        mounts: mounts.clone(),
        calls: resolved.calls,
        cwds,
        requests,
        window_s,
        fuse,
        fuse_measured,
        cmdline: target.cmdline.clone(),
        exe: target.exe.as_ref().map(process::Exe::link),
        // The probe's request time means something only when its requests are the count.
        work: work_between(
            cpu_before.as_ref(),
            cpu_after.as_ref(),
            request_ms.filter(|_| denominator.basis == "probe-load"),
        ),
    };

    report.target = Some(target_section(opts.pid, &target, processes, exited_after));
    report.window_s = Some(round(window_s, 3));
    report.requests = Some(Requests {
        count: requests,
        basis: denominator.basis,
        rate_per_s: requests.map(|r| round(r as f64 / window_s.max(1e-9), 2)),
        note: denominator.note,
        served,
    });
    report.findings.extend(traps::fs::rules(&fs));
    fs_tables(&fs, &counts, opts.top, report);
    net::finish(net_start, armed, net_measured, &probe_rows, report);
    report
        .findings
        .extend(traps::net::nagle(send_holds.as_ref()));
    report.add(&cost::section(&tracer_cost, requests));
    if let Some(t) = &threads {
        report.add(t);
    }
    report.probes = probe_rows;
    let m = measurement(
        &counts,
        resolved.unknown_calls,
        truncated,
        opts,
        exited_after,
    );
    set_measurement(m, &missing_required, report);
}

/// The syscall, filesystem and path tables of a report, from the resolved calls.
fn fs_tables(fs: &FsObservation, counts: &crate::probe::Counts, top: usize, report: &mut Report) {
    let (mounts, requests, window_s) = (&fs.mounts, fs.requests, fs.window_s);
    report.syscalls = aggregate::syscall_rows(&fs.calls, mounts, requests, window_s);
    let fuse_queue = aggregate::fuse_queue_rows(&counts.fuse_queue, mounts);
    report.filesystems =
        aggregate::fs_rows(&fs.calls, &fs.fuse, &fuse_queue, mounts, requests, window_s);
    report.paths = aggregate::path_rows(&fs.calls, mounts, requests, top);
}

/// Where each walk starts: a directory the server chdirs into (PHP's docroot, per request)
/// that is not the one it was started in is visited, not its working directory.
fn mark_visited(
    cwds: &mut [traps::fs::CwdObs],
    target: &process::Process,
    calls: &[traps::fs::CallObs],
) {
    let start_cwd = target.cwd.as_deref().map(normalize);
    for c in cwds {
        c.visited = start_cwd.as_deref() != Some(c.path.as_slice())
            && calls.iter().any(|k| {
                k.syscall == "chdir"
                    && k.base == traps::fs::Base::Absolute
                    && k.path.as_deref() == Some(c.path.as_slice())
            });
    }
}

/// The report's `target`.
fn target_section(
    pid: u32,
    target: &process::Process,
    processes: usize,
    exited_after: Option<f64>,
) -> Target {
    Target {
        pid,
        comm: escape::bytes(&target.stat.comm),
        exe: target
            .exe
            .as_ref()
            .map(|e| escape::bytes(&e.link()))
            .unwrap_or_default(),
        cwd: target.cwd.as_deref().map(escape::bytes).unwrap_or_default(),
        processes,
        exited_after_s: exited_after.map(|s| round(s, 2)),
        selected_by: None,
    }
}

/// Sets the report's measurement to `m`, untrusted when a required probe is missing, keeping
/// what the load driver already recorded.
fn set_measurement(mut m: Measurement, missing_required: &[String], report: &mut Report) {
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
