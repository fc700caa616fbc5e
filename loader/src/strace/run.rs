//! `trapdetect run --from-strace FILE`: `run`'s time split, rules and verdict from an `strace
//! -f -tt -T -y` log. Every thread's time is in the log: inside a call (its start and `-T`
//! duration) it is in the call's class, the same classes the off-CPU probes use (a read on a
//! socket or pipe is waiting for work; `fcntl` is a lock wait only for `F_SETLKW`); between two
//! of its calls it ran (or waited for a CPU: strace cannot tell); strace's own stops, measured
//! from the log's instant calls, are taken out of both ([`instant_stops`]). Path calls are charged to the mount their walk ends on, file I/O and locks to the
//! file their descriptor names (`-y`). Requests are the connections accepted; there is no
//! offered rate, so whether the load found a ceiling is judged from the threads, as for a
//! closed-loop generator.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use trapdetect_common::offcpu::{
    ARCH_X86_64, ARG_FCNTL, ARG_FD, CLASS_FILE_IO, CLASS_FILE_LOCK, CLASS_FUTEX, CLASS_NAMES,
    CLASS_OTHER, CLASS_PATH, CLASS_SLEEP, CLASS_WAIT_WORK, NUM_CLASSES, class_of_x86_64, is_read,
};

use super::{names, parse};
use crate::{
    escape,
    host::mounts::{MountTable, normalize},
    report::FsRow,
    traps::{
        self,
        run::{FsLoad, LockLoad, RunObs, RunSecond},
    },
};

/// One call of one thread.
struct Ev {
    tid: u32,
    start: f64,
    end: f64,
    class: u32,
    /// The mount the call's time is charged to (its walk's end, its descriptor's file).
    mount: Option<usize>,
    /// Its operations by mount (a path call's lookups, one for file I/O): a range of
    /// `Timeline::ops`, so no call allocates.
    ops: std::ops::Range<u32>,
    /// An accepted connection.
    accepted: bool,
    /// The file a lock call waited on (an index into `Timeline::lock_names`).
    lock: Option<usize>,
    /// A call the kernel answers at once, in next to no time ([`INSTANT`]).
    instant: bool,
}

/// Calls the kernel answers at once, without blocking, in well under a microsecond: their
/// `-T` durations are strace's own stops ([`instant_stops`]).
const INSTANT: &[&str] = &[
    "getpid",
    "getppid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "times",
    "umask",
    "rt_sigprocmask",
    "rt_sigaction",
    "setitimer",
    "getitimer",
    "getsockname",
    "getpeername",
];

/// Instant calls (or pairs of them) fewer than this give no mean of strace's stops
/// ([`instant_stops`]).
const INSTANT_MIN: usize = 10;

/// The calls of a log as a timeline of each thread.
#[derive(Default)]
pub struct Timeline {
    evs: Vec<Ev>,
    /// Every call's operations by mount, one after another (`Ev::ops`).
    ops: Vec<(usize, u32)>,
    /// The files lock calls named (escaped), and each one's index there.
    lock_names: Vec<String>,
    lock_index: HashMap<Vec<u8>, usize>,
    /// accept() calls refused for descriptors (EMFILE, ENFILE).
    accept_emfile: u64,
    /// Calls without a time or a duration (no -tt or -T): not on the timeline.
    pub untimed: u64,
}

/// The class of a call from its name and arguments, and the file its descriptor names.
fn class_of_call(name: &str, args: &[&str]) -> (u32, Option<Vec<u8>>) {
    let Some(nr) = names::number(name) else {
        return (CLASS_OTHER, None);
    };
    let (class, shape) = class_of_x86_64(nr);
    let file = if shape == ARG_FD || shape == ARG_FCNTL {
        args.first()
            .and_then(|a| parse::fd_arg(a))
            .and_then(|(_, p)| p)
    } else {
        None
    };
    // A descriptor strace names by something other than a path: a socket, a pipe.
    let peer = file.as_ref().is_some_and(|p| p.first() != Some(&b'/'));
    let class = match class {
        CLASS_FILE_IO if peer && is_read(ARCH_X86_64, nr) => CLASS_WAIT_WORK,
        CLASS_FILE_LOCK if shape == ARG_FCNTL => {
            let cmd = args.get(1).copied().unwrap_or("");
            if cmd == "F_SETLKW" || cmd == "F_OFD_SETLKW" {
                CLASS_FILE_LOCK
            } else {
                CLASS_OTHER
            }
        }
        c => c,
    };
    (class, file.filter(|p| p.first() == Some(&b'/')))
}

/// A path call's walk: the mount it ends on, and its lookups by mount.
pub type Walked<'a> = (Option<usize>, &'a [(usize, u32)]);

impl Timeline {
    /// Puts one call on its thread's timeline; `walk` is a path call's (mount it ends on,
    /// lookups by mount).
    pub fn record(
        &mut self,
        c: &parse::Call,
        args: &[&str],
        walk: Option<Walked>,
        mounts: &MountTable,
    ) {
        let (Some(start), Some(dur)) = (c.time_s, c.dur_s) else {
            self.untimed += 1;
            return;
        };
        let (mut class, file) = class_of_call(&c.name, args);
        // A futex wait that ran out its timeout: nobody woke the thread, it slept (as the
        // eBPF backend reads the call's result).
        if class == CLASS_FUTEX && c.errno.as_deref() == Some("ETIMEDOUT") {
            class = CLASS_SLEEP;
        }
        let file_mount = file.as_ref().and_then(|p| mounts.mount_of(&normalize(p)));
        let first = self.ops.len() as u32;
        let mount = match (class, walk) {
            (CLASS_PATH, Some((m, w))) => {
                self.ops.extend_from_slice(w);
                m
            }
            (CLASS_FILE_IO, _) => {
                self.ops.extend(file_mount.map(|m| (m, 1)));
                file_mount
            }
            _ => None,
        };
        let ops = first..self.ops.len() as u32;
        let lock = (class == CLASS_FILE_LOCK).then(|| {
            let key = file.clone().unwrap_or_default();
            let names = &mut self.lock_names;
            *self.lock_index.entry(key).or_insert_with(|| {
                names.push(match &file {
                    Some(p) => escape::bytes(p),
                    None => "a file strace did not name (capture with -y)".to_string(),
                });
                names.len() - 1
            })
        });
        let accepted = matches!(c.name.as_str(), "accept" | "accept4");
        if accepted && matches!(c.errno.as_deref(), Some("EMFILE" | "ENFILE")) {
            self.accept_emfile += 1;
        }
        self.evs.push(Ev {
            tid: c.pid.unwrap_or(0),
            start,
            end: start + dur,
            class,
            mount,
            ops,
            accepted: accepted && c.ret.is_some_and(|r| r >= 0),
            lock,
            instant: INSTANT.contains(&c.name.as_str()),
        });
    }
}

/// A second of the replay.
#[derive(Default)]
struct Sec {
    off: [f64; NUM_CLASSES as usize],
    on: f64,
    /// Thread-seconds not waiting for work nor parked on a futex.
    busy: f64,
    tids: BTreeSet<u32>,
    served: u64,
    path_calls: u64,
    ops: BTreeMap<usize, u64>,
    /// Gaps between two calls of a thread ending in this second, and calls by class: the
    /// stops strace took there ([`Replay::take_out_stops`]).
    gaps: u64,
    calls: [u64; NUM_CLASSES as usize],
}

/// Adds `[a, b)` (s from the window's start) to the seconds it covers.
fn spread(secs: &mut [Sec], a: f64, b: f64, mut f: impl FnMut(&mut Sec, f64)) {
    let mut t = a.max(0.0);
    while t < b {
        let i = t.floor() as usize;
        let end = (i as f64 + 1.0).min(b);
        if let Some(s) = secs.get_mut(i) {
            f(s, end - t);
        }
        t = end;
    }
}

/// Idle: waiting for work or parked on a futex (as the sampler's worker count has it).
fn idle(class: u32) -> bool {
    class == CLASS_WAIT_WORK || class == CLASS_FUTEX
}

/// What the trace part of the report knew about each mount.
pub struct Context<'a> {
    pub mounts: &'a MountTable,
    /// The trace's filesystem rows (type, slow kind).
    pub rows: &'a [FsRow],
    /// The directory the server sits in (the log's most common working directory).
    pub start_cwd: Option<&'a [u8]>,
    /// The target's executable (escaped).
    pub exe: String,
}

/// The replay's sums over the window.
struct Replay {
    t0: f64,
    t1: f64,
    /// The requests served are the connections accepted after `t0` (the load's span).
    by_accepts: bool,
    /// strace's own stops between two calls of a thread, s: [`instant_stops`], else the
    /// shortest gap ([`stop_cost`]).
    stop_s: f64,
    /// strace's own stops inside one call, s ([`instant_stops`], else none).
    call_stop_s: f64,
    secs: Vec<Sec>,
    off_s: Vec<f64>,
    on_s: f64,
    /// Time in and between calls that was strace's stops, thread-seconds.
    stopped_s: f64,
    /// Per mount: (time, operations, operations per second, calls whose time it holds).
    fs: BTreeMap<usize, (f64, u64, Vec<u64>, u64)>,
    locks: BTreeMap<usize, (f64, u64)>,
    futex: (f64, u64),
    /// Per thread: (busy, observed) seconds.
    share: Vec<(f64, f64)>,
}

/// strace's own cost between two calls of one thread: the shortest gap between one call's
/// return and the thread's next call in the log. Between two calls a traced thread stops
/// twice (the exit, then the next entry) while strace writes the line; user code between
/// back-to-back calls takes next to nothing, so the shortest gap is those stops (16-21 µs in
/// the logs of tests/tests/strace.rs, whose median gaps were 31-42 µs).
fn stop_cost(by_tid: &HashMap<u32, Vec<&Ev>>) -> f64 {
    by_tid
        .values()
        .flat_map(|evs| evs.windows(2).map(|w| w[1].start - w[0].end))
        .filter(|g| *g > 0.0)
        .reduce(f64::min)
        .unwrap_or(0.0)
}

/// strace's own stops, as the log measured them: (inside one call, between two calls of a
/// thread), each `None` with fewer than [`INSTANT_MIN`] samples. A call's `-T` duration runs
/// from strace handling its entry stop to handling its exit stop: the rest of the entry's
/// handling, the resume, the call, the exit stop and the wait for strace to take it, which
/// grows with how busy strace is with the other threads' stops. A call the kernel answers at
/// once ([`INSTANT`]) is those stops alone: inside a call, the mean duration of the instant
/// calls. Between two calls the thread waits for the rest of the exit's handling (the line
/// written, a returned descriptor named), the resume, then its next entry's stop and wait:
/// the mean gap between two instant calls of one thread, which no more than a few
/// instructions of its own code separate (php-fpm's `rt_sigaction` after `rt_sigaction`
/// resetting its signals). On php-fpm 7 levels deep in a serialized FUSE mount (4 workers, 2
/// CPUs, tests/tests/strace.rs) the instant calls took 6 µs at the shortest and 47 µs on
/// average, the gaps between two of them 16 and 64 µs, where the shortest gap of all was 14
/// µs and eBPF saw ~15 µs of CPU (and run-queue) time between two calls.
fn instant_stops(by_tid: &HashMap<u32, Vec<&Ev>>) -> (Option<f64>, Option<f64>) {
    let mean =
        |d: Vec<f64>| (d.len() >= INSTANT_MIN).then(|| d.iter().sum::<f64>() / d.len() as f64);
    let inside = by_tid
        .values()
        .flatten()
        .filter(|e| e.instant)
        .map(|e| e.end - e.start)
        .collect();
    let between = by_tid
        .values()
        .flat_map(|evs| evs.windows(2))
        .filter(|w| w[0].instant && w[1].instant)
        .map(|w| (w[1].start - w[0].end).max(0.0))
        .collect();
    (mean(inside), mean(between))
}

impl Replay {
    /// One thread's calls, in order (`ops`: the timeline's operations).
    fn thread(&mut self, tid: u32, evs: &[&Ev], ops: &[(usize, u32)]) {
        let (t0, t1) = (self.t0, self.t1);
        let (mut busy, mut prev_end) = (0.0, None::<f64>);
        // strace's stops in this thread's time: in its busy time, and in all of it.
        let (mut busy_stops, mut stops) = (0.0, 0.0);
        for e in evs {
            if e.end < t0 || e.start > t1 {
                continue;
            }
            let (a, b) = (e.start.max(t0) - t0, e.end.min(t1) - t0);
            // Between its calls the thread ran (or waited for a CPU), and strace stopped it.
            if let Some(p) = prev_end.filter(|p| *p < a) {
                spread(&mut self.secs, p, a, |s, d| {
                    s.on += d;
                    s.busy += d;
                    s.tids.insert(tid);
                });
                let i = (a.floor() as usize).min(self.secs.len() - 1);
                self.secs[i].gaps += 1;
                busy += a - p;
                busy_stops += self.stop_s;
                stops += self.stop_s;
            }
            self.call(tid, e, a, b, &ops[e.ops.start as usize..e.ops.end as usize]);
            if !idle(e.class) {
                busy += b - a;
                busy_stops += self.call_stop_s;
            }
            stops += self.call_stop_s;
            prev_end = Some(prev_end.map_or(b, |p| p.max(b)));
        }
        let observed = evs.last().map_or(0.0, |l| l.end.min(t1))
            - evs.first().map_or(0.0, |f| f.start.max(t0));
        self.share
            .push(((busy - busy_stops).max(0.0), (observed - stops).max(0.0)));
    }

    /// Takes strace's stops out of every second's times: `stop_s` for each gap between two
    /// calls of a thread that ended there, `call_stop_s` for each call, by class; then the
    /// window's sums from the seconds. As a whole, not gap by gap: a stop is its mean, longer
    /// than some gaps and shorter than others, and what a gap holds beyond it is strace's as
    /// much as the thread's (the mount's log in tests/tests/strace.rs: taken out gap by gap
    /// and call by call, 13 % of the busy time read on a CPU, 3 % under eBPF; as a whole,
    /// 6 %).
    fn take_out_stops(&mut self) {
        let (gap, call) = (self.stop_s, self.call_stop_s);
        for s in &mut self.secs {
            let on = (s.on - s.gaps as f64 * gap).max(0.0);
            self.stopped_s += s.on - on;
            s.on = on;
            s.busy = on;
            for c in 0..NUM_CLASSES as usize {
                let off = (s.off[c] - s.calls[c] as f64 * call).max(0.0);
                self.stopped_s += s.off[c] - off;
                s.off[c] = off;
                if !idle(c as u32) {
                    s.busy += off;
                }
            }
        }
        self.on_s = self.secs.iter().map(|s| s.on).sum();
        for c in 0..NUM_CLASSES as usize {
            self.off_s[c] = self.secs.iter().map(|s| s.off[c]).sum();
        }
        let take = |t: f64, n: u64| (t - n as f64 * call).max(0.0);
        for f in self.fs.values_mut() {
            f.0 = take(f.0, f.3);
        }
        for l in self.locks.values_mut() {
            l.0 = take(l.0, l.1);
        }
        self.futex.0 = take(self.futex.0, self.futex.1);
    }

    /// One call, `[a, b)` of the window, with its operations by mount.
    fn call(&mut self, tid: u32, e: &Ev, a: f64, b: f64, ops: &[(usize, u32)]) {
        let c = e.class as usize;
        spread(&mut self.secs, a, b, |s, d| {
            s.off[c] += d;
            if !idle(e.class) {
                s.busy += d;
            }
            s.tids.insert(tid);
        });
        let n = self.secs.len();
        let i = (b.floor() as usize).min(n.saturating_sub(1));
        self.secs[i].calls[c] += 1;
        if e.accepted && (e.end > self.t0 || !self.by_accepts) {
            self.secs[i].served += 1;
        }
        if e.class == CLASS_PATH {
            self.secs[i].path_calls += 1;
        }
        if let Some(l) = e.lock {
            let w = self.locks.entry(l).or_default();
            w.0 += b - a;
            w.1 += 1;
        }
        if e.class == CLASS_FUTEX {
            self.futex.0 += b - a;
            self.futex.1 += 1;
        }
        if let Some(m) = e.mount {
            let f = self.fs.entry(m).or_insert_with(|| (0.0, 0, vec![0; n], 0));
            f.0 += b - a;
            f.3 += 1;
        }
        for (m, k) in ops {
            let f = self.fs.entry(*m).or_insert_with(|| (0.0, 0, vec![0; n], 0));
            f.1 += *k as u64;
            f.2[i] += *k as u64;
            *self.secs[i].ops.entry(*m).or_default() += *k as u64;
        }
    }
}

/// What strace's stops took out of the time between calls.
pub struct Stops {
    /// The stop between two calls, µs.
    pub per_gap_us: f64,
    /// The stops inside one call, µs.
    pub per_call_us: f64,
    /// Whether each was measured from the log's instant calls ([`instant_stops`]): (between
    /// calls, inside one); else the shortest gap, and nothing inside.
    pub measured: (bool, bool),
    /// Thread-seconds of the window.
    pub total_s: f64,
}

/// The run's observation from the timeline (None without a timed call), and what strace's
/// stops took.
pub fn observe(tl: &Timeline, cx: &Context) -> Option<(RunObs, Stops)> {
    let (t0, t1, by_accepts) = window(tl)?;
    let window_s = (t1 - t0).max(1e-3);
    let mut by_tid: HashMap<u32, Vec<&Ev>> = HashMap::new();
    for e in &tl.evs {
        by_tid.entry(e.tid).or_default().push(e);
    }
    for evs in by_tid.values_mut() {
        evs.sort_by(|a, b| a.start.total_cmp(&b.start));
    }
    let (inside, between) = instant_stops(&by_tid);
    let mut r = Replay {
        t0,
        t1,
        by_accepts,
        stop_s: between.unwrap_or_else(|| stop_cost(&by_tid)),
        call_stop_s: inside.unwrap_or(0.0),
        secs: (0..window_s.ceil() as usize)
            .map(|_| Sec::default())
            .collect(),
        off_s: vec![0.0; NUM_CLASSES as usize],
        on_s: 0.0,
        stopped_s: 0.0,
        fs: BTreeMap::new(),
        locks: BTreeMap::new(),
        futex: (0.0, 0),
        share: vec![],
    };
    let mut tids: Vec<u32> = by_tid.keys().copied().collect();
    tids.sort();
    for tid in tids {
        r.thread(tid, &by_tid[&tid], &tl.ops);
    }
    r.take_out_stops();
    let counted: Vec<f64> = r
        .share
        .iter()
        .filter(|(busy, seen)| *seen > 0.0 && busy * 2.0 >= *seen)
        .map(|(busy, seen)| busy / seen)
        .collect();
    let workers = counted.len();
    let answered: u64 = r.secs.iter().map(|s| s.served).sum();
    let obs = RunObs {
        seconds: r
            .secs
            .iter()
            .enumerate()
            .map(|(i, s)| second(i, s, window_s, cx.mounts))
            .collect(),
        window_s,
        cores: crate::util::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN).max(1) as f64,
        offered_rate: 0.0,
        delivered_rate: answered as f64 / window_s,
        answered,
        off_s: r.off_s.clone(),
        on_cpu_s: r.on_s,
        charged_cpu_s: 0.0,
        runq_s: 0.0,
        runq_idle_s: None,
        runq_self_s: None,
        workers,
        workers_busy: Some(counted.iter().sum()),
        runtime_threads: Default::default(),
        // strace -f names threads, not which process each is of.
        most_in_one_process: 0,
        filesystems: filesystems(&r.fs, window_s, cx),
        locks: lock_loads(tl, &r.locks, r.futex),
        classified: true,
        quota: None,
        exe: cx.exe.clone(),
        go_maxprocs: None,
        go: false,
        busiest_share: None,
        allowed_cpus: vec![],
        noise: vec![],
        peers: vec![],
        fd_peak: None,
        accept_emfile: tl.accept_emfile,
        generator: None,
        send_holds: None,
        cpu_unknown: true,
    };
    let stops = Stops {
        per_gap_us: r.stop_s * 1e6,
        per_call_us: r.call_stop_s * 1e6,
        measured: (between.is_some(), inside.is_some()),
        total_s: r.stopped_s,
    };
    Some((obs, stops))
}

/// The window judged: from the first connection accepted to the last (the load's span, as a
/// live run's window is the load's), else the whole log.
/// Whether it was the load's span: then the first connection only marks its start, and the
/// requests served in it are the ones accepted after it.
fn window(tl: &Timeline) -> Option<(f64, f64, bool)> {
    let accepted = tl.evs.iter().filter(|e| e.accepted).map(|e| e.end);
    let first = accepted.clone().reduce(f64::min);
    let last = accepted.reduce(f64::max);
    match (first, last) {
        (Some(a), Some(b)) if b - a >= 1.0 => Some((a, b, true)),
        _ => Some((
            tl.evs.iter().map(|e| e.start).reduce(f64::min)?,
            tl.evs.iter().map(|e| e.end).reduce(f64::max)?,
            false,
        )),
    }
}

/// One row of the timeline: rates over the part of the second the window covers.
fn second(i: usize, s: &Sec, window_s: f64, mounts: &MountTable) -> RunSecond {
    let dt = (window_s - i as f64).clamp(1e-3, 1.0);
    let r = |v: f64| traps::round(v / dt, 2);
    RunSecond {
        t_s: i as u64,
        served: Some(s.served),
        cores_busy: r(s.on),
        target_cpus_busy: r(s.on),
        target_cores: r(s.on),
        off_cpu: CLASS_NAMES
            .iter()
            .zip(s.off.iter())
            .filter(|(_, v)| **v > 0.0)
            .map(|(c, v)| (*c, r(*v)))
            .collect(),
        threads: s.tids.len(),
        busy_threads: (s.busy / dt).round() as usize,
        path_calls: (s.path_calls as f64 / dt).round() as u64,
        fs_ops: s
            .ops
            .iter()
            .map(|(m, n)| {
                (
                    mounts.mounts[*m].mount_point_display(),
                    (*n as f64 / dt).round() as u64,
                )
            })
            .collect(),
        ..Default::default()
    }
}

/// The mounts the threads spent time on or walked.
fn filesystems(
    fs: &BTreeMap<usize, (f64, u64, Vec<u64>, u64)>,
    window_s: f64,
    cx: &Context,
) -> Vec<FsLoad> {
    let start_mount = cx.start_cwd.and_then(|c| cx.mounts.mount_of(c));
    fs.iter()
        .map(|(m, (time_s, ops, per_s, _))| {
            let mount = &cx.mounts.mounts[*m];
            let name = mount.mount_point_display();
            let row = cx.rows.iter().find(|r| r.mount_point == name);
            let n = per_s.len();
            FsLoad {
                fs_type: mount.fs_type.clone(),
                slow: row
                    .and_then(|r| r.slow)
                    .or_else(|| mount.slow_kind())
                    .map(|k| k.describe().to_string()),
                syscall_s: *time_s,
                ops: *ops,
                ops_kind: "lookups and file I/O calls",
                // Who answered the waits is not known from /proc or a log.
                serving: vec![],
                ops_per_s: per_s
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let dt = if i + 1 == n {
                            (window_s - i as f64).clamp(1e-3, 1.0)
                        } else {
                            1.0
                        };
                        (*v as f64 / dt).round() as u64
                    })
                    .collect(),
                holds_start_cwd: start_mount == Some(*m),
                latency_by_ahead: vec![],
                mount: name,
            }
        })
        .collect()
}

/// File locks by file, futexes together: the waits inside the window.
fn lock_loads(
    tl: &Timeline,
    files: &BTreeMap<usize, (f64, u64)>,
    futex: (f64, u64),
) -> Vec<LockLoad> {
    let mut out: Vec<LockLoad> = files
        .iter()
        .map(|(i, (wait_s, waits))| LockLoad {
            object: tl.lock_names[*i].clone(),
            futex: false,
            wait_s: *wait_s,
            waits: *waits,
            waits_lower_bound: false,
        })
        .collect();
    if futex.1 > 0 {
        out.push(LockLoad {
            object: crate::traps::run::FUTEX_OBJECT.into(),
            futex: true,
            wait_s: futex.0,
            waits: futex.1,
            waits_lower_bound: false,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strace::Model;

    const MOUNTS: &str = "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n36 25 0:44 / /mnt/slow rw - fuse.slowfs slowfs rw,user_id=0\n";

    /// A log of one php-fpm master (tid 100, in epoll_wait) and its one worker (101): each
    /// request is accepted, read (4 ms waiting on the socket), slept on (450 ms), with 46 ms
    /// between calls, every 500 ms; the first accept waited 500 ms for the load.
    fn one_sleeping_worker() -> String {
        let mut log = String::from(
            "100 12:00:00.000000 epoll_wait(5<anon_inode:[eventpoll]>, [], 1, 10000) = 0 <3.000000>\n101 12:00:00.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[2]> <0.500000>\n",
        );
        for i in 0..5 {
            let t = 0.5 + 0.5 * i as f64;
            let at = |dt: f64| format!("12:00:{:09.6}", t + dt);
            if i > 0 {
                log += &format!(
                    "101 {} accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[{}]> <0.000000>\n",
                    at(0.0),
                    i + 2
                );
            }
            log += &format!(
                "101 {} read(8<socket:[{}]>, \"GET / HTTP/1.0\\r\\n\", 4096) = 16 <0.004000>\n101 {} clock_nanosleep(CLOCK_REALTIME, 0, {{tv_sec=0, tv_nsec=450000000}}, NULL) = 0 <0.450000>\n",
                at(0.0),
                i + 2,
                at(0.01),
            );
        }
        log
    }

    fn observe_log(log: &str) -> RunObs {
        observe_stops(log).0
    }

    fn observe_stops(log: &str) -> (RunObs, Stops) {
        let mounts = MountTable::parse(MOUNTS).unwrap();
        let mut m = Model {
            timeline: Some(Timeline::default()),
            ..Default::default()
        };
        m.feed(log, None, &mounts);
        let tl = m.timeline.take().unwrap();
        let cx = Context {
            mounts: &mounts,
            rows: &[],
            start_cwd: None,
            exe: String::new(),
        };
        observe(&tl, &cx).unwrap()
    }

    /// The same worker waiting out its 450 ms on a futex with a timeout (Ruby's `sleep`,
    /// Python's `Event.wait(t)`): a wait that ran out its timeout is a sleep, as the eBPF
    /// backend reads the call's result; one that another thread ended (`= 0`) is a futex wait
    /// and the futexes' lock object.
    #[test]
    fn a_futex_wait_that_times_out_is_a_sleep() {
        let sleep = "clock_nanosleep(CLOCK_REALTIME, 0, {tv_sec=0, tv_nsec=450000000}, NULL) = 0";
        let timed = "futex(0x7f6a1c0019e0, FUTEX_WAIT_BITSET_PRIVATE|FUTEX_CLOCK_REALTIME, 0, {tv_sec=1764936000, tv_nsec=450000000}, FUTEX_BITSET_MATCH_ANY)";
        let log = one_sleeping_worker();
        for (ret, sleep_s, futex_s) in [
            ("-1 ETIMEDOUT (Connection timed out)", 1.8, 0.0),
            ("0", 0.0, 1.8),
        ] {
            let o = observe_log(&log.replace(sleep, &format!("{timed} = {ret}")));
            let class = |c: &str| o.off_s[CLASS_NAMES.iter().position(|n| *n == c).unwrap()];
            assert!(
                (class("sleep") - sleep_s).abs() < 1e-9,
                "{ret}: {:?}",
                o.off_s
            );
            assert!(
                (class("futex") - futex_s).abs() < 1e-9,
                "{ret}: {:?}",
                o.off_s
            );
            let futex_lock = o.locks.iter().find(|l| l.futex).map(|l| l.waits);
            assert_eq!(
                futex_lock,
                (futex_s > 0.0).then_some(4),
                "{ret}: {:?}",
                o.locks
            );
        }
    }

    /// The window is the load's (first accepted connection to last: 0.5-2.5 s); each thread's
    /// time in it is split exactly: the master waited for work throughout, the worker slept
    /// 4 × 450 ms, read 4 × 4 ms, and had 6 ms and 40 ms between its calls, of which the
    /// shortest gap (6 ms: strace's stops, as far as the log can tell) is taken out of each:
    /// 4 × 34 ms on-CPU; four requests were served after the first, at 2 a second, by one
    /// worker busy 97 % of the window.
    #[test]
    fn a_log_splits_each_thread_s_time_over_the_load_s_window() {
        let o = observe_log(&one_sleeping_worker());
        assert!((o.window_s - 2.0).abs() < 1e-9, "{}", o.window_s);
        let class = |c: &str| o.off_s[CLASS_NAMES.iter().position(|n| *n == c).unwrap()];
        assert!((class("sleep") - 1.8).abs() < 1e-9, "{:?}", o.off_s);
        // The master's 2 s in epoll_wait and the worker's 4 reads of its socket.
        assert!((class("wait_work") - 2.016).abs() < 1e-9, "{:?}", o.off_s);
        assert!((o.on_cpu_s - 0.136).abs() < 1e-9, "{}", o.on_cpu_s);
        assert_eq!(o.runq_s, 0.0);
        assert_eq!(o.answered, 4);
        assert!((o.delivered_rate - 2.0).abs() < 1e-9);
        assert_eq!(o.workers, 1);
        assert_eq!(o.seconds.len(), 2);
        assert_eq!(
            o.seconds.iter().map(|s| s.served).collect::<Vec<_>>(),
            [Some(1), Some(3)]
        );
        assert_eq!(o.seconds[0].threads, 2);
        assert_eq!(o.seconds[0].off_cpu["wait_work"], 1.01);
        assert!(o.cpu_unknown);
        // No accept queue was read: all workers busy is what says the load found a ceiling.
        assert_eq!(o.capped_by(), ["workers-busy"]);
    }

    /// strace's stops measured from the log's instant calls and taken out as a whole: eleven
    /// `getpid`s of 40 µs each, 60 µs apart, put the stops at 40 µs inside a call and 60 µs
    /// between two; the window (0-1 s, accept to accept) has 13 gaps, 0.98956 s in all, so
    /// 0.98878 s on a CPU; the getpids are all stops (other: 0), the 10 ms `chdir` 9.96 ms
    /// of path time, and a zero-length accept gives nothing back. Without the instant calls,
    /// the shortest gap is the stop, as before.
    #[test]
    fn strace_s_stops_are_the_log_s_instant_calls_taken_out_as_a_whole() {
        let mut log = String::from(
            "101 12:00:00.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[2]> <0.000000>\n",
        );
        for k in 0..11 {
            log += &format!(
                "101 12:00:00.{:06} getpid() = 101 <0.000040>\n",
                100_000 + 100 * k
            );
        }
        log += "101 12:00:00.200000 chdir(\"/srv\") = 0 <0.010000>\n";
        log += "101 12:00:01.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[3]> <0.000000>\n";
        let (o, stops) = observe_stops(&log);
        assert!((o.window_s - 1.0).abs() < 1e-9, "{}", o.window_s);
        assert!(
            (stops.per_call_us - 40.0).abs() < 1e-3,
            "{}",
            stops.per_call_us
        );
        assert!(
            (stops.per_gap_us - 60.0).abs() < 1e-3,
            "{}",
            stops.per_gap_us
        );
        let class = |c: &str| o.off_s[CLASS_NAMES.iter().position(|n| *n == c).unwrap()];
        assert!((o.on_cpu_s - 0.98878).abs() < 1e-9, "{}", o.on_cpu_s);
        assert!(class("other").abs() < 1e-9, "{:?}", o.off_s);
        assert!((class("path") - 0.00996).abs() < 1e-9, "{:?}", o.off_s);
        assert_eq!(class("wait_work"), 0.0);
        assert!((stops.total_s - 0.00126).abs() < 1e-9, "{}", stops.total_s);
        // The same log less its getpids: no instant call, the shortest gap (0.1 s, accept to
        // chdir) the stop between calls, none inside: two gaps, 0.99 s less 0.2 s.
        let bare: String = log
            .lines()
            .filter(|l| !l.contains("getpid"))
            .map(|l| format!("{l}\n"))
            .collect();
        let (o, stops) = observe_stops(&bare);
        assert_eq!(stops.per_call_us, 0.0);
        assert!(
            (stops.per_gap_us - 200_000.0).abs() < 1e-3,
            "{}",
            stops.per_gap_us
        );
        assert!((o.on_cpu_s - 0.59).abs() < 1e-9, "{}", o.on_cpu_s);
        assert!((class_of(&o, "path") - 0.01).abs() < 1e-9, "{:?}", o.off_s);
    }

    fn class_of(o: &RunObs, c: &str) -> f64 {
        o.off_s[CLASS_NAMES.iter().position(|n| *n == c).unwrap()]
    }

    /// The same log judged: one worker busy 484 ms per request (all but the socket read and
    /// strace's stops) is the pool's ceiling, 1 ÷ 484 ms ≈ 2.1/s.
    #[test]
    fn one_sleeping_worker_is_the_pool_s_ceiling() {
        let o = observe_log(&one_sleeping_worker());
        let f = traps::run::rules(&o);
        assert_eq!(
            f.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(),
            ["pool.too-small"]
        );
        let e = &f[0].evidence;
        assert_eq!(e["workers"], 1);
        assert_eq!(e["busy_ms_per_request"], 484.0);
        assert_eq!(e["predicted_ceiling_per_s"], 2.1);
    }

    /// How a call is classed from its name and arguments: reads of a socket wait for work, of
    /// a file are file I/O; fcntl waits for a lock only with F_SETLKW; flock names its file; a
    /// name the table lacks is `other`.
    #[test]
    fn calls_are_classed_as_the_probes_class_them() {
        let c = |name: &str, args: &[&str]| class_of_call(name, args);
        assert_eq!(
            c("read", &["8<socket:[12]>", "\"x\"", "10"]).0,
            CLASS_WAIT_WORK
        );
        assert_eq!(
            c("read", &["8<pipe:[12]>", "\"x\"", "10"]).0,
            CLASS_WAIT_WORK
        );
        let (class, file) = c("read", &["9</srv/a.php>", "\"x\"", "10"]);
        assert_eq!(
            (class, file.as_deref()),
            (CLASS_FILE_IO, Some(&b"/srv/a.php"[..]))
        );
        assert_eq!(
            c("write", &["8<socket:[12]>", "\"x\"", "10"]).0,
            CLASS_FILE_IO
        );
        assert_eq!(
            c("fcntl", &["9</var/lock/a>", "F_SETLKW", "{l_type=F_WRLCK}"]).0,
            CLASS_FILE_LOCK
        );
        assert_eq!(c("fcntl", &["9</var/lock/a>", "F_GETFL"]).0, CLASS_OTHER);
        let (class, file) = c("flock", &["9</var/lock/a b>", "LOCK_EX"]);
        assert_eq!(
            (class, file.as_deref()),
            (CLASS_FILE_LOCK, Some(&b"/var/lock/a b"[..]))
        );
        assert_eq!(
            c("futex", &["0x7f", "FUTEX_WAIT_PRIVATE", "2", "NULL"]).0,
            CLASS_FUTEX
        );
        assert_eq!(c("newfstatat", &["AT_FDCWD</srv>", "\"a\""]).0, CLASS_PATH);
        assert_eq!(
            c(
                "epoll_wait",
                &["5<anon_inode:[eventpoll]>", "[]", "1", "10"]
            )
            .0,
            CLASS_WAIT_WORK
        );
        assert_eq!(
            c("clock_nanosleep", &["CLOCK_REALTIME", "0"]).0,
            trapdetect_common::offcpu::CLASS_SLEEP
        );
        assert_eq!(c("getrandom", &["\"\"", "16", "0"]).0, CLASS_OTHER);
    }

    /// Two workers on one flock: the waits inside the window, by file; the log's untimed call
    /// (no -T) is counted apart.
    #[test]
    fn lock_waits_are_by_file_and_inside_the_window() {
        let log = "\
101 12:00:00.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[2]> <0.000100>
102 12:00:00.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 9<socket:[3]> <0.000100>
101 12:00:00.000200 flock(10</srv/app.lock>, LOCK_EX) = 0 <0.000010>
102 12:00:00.000200 flock(11</srv/app.lock>, LOCK_EX) = 0 <0.600000>
101 12:00:00.600000 flock(10</srv/app.lock>, LOCK_UN) = 0 <0.000010>
101 12:00:00.700000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[4]> <0.400000>
101 12:00:01.200000 getpid() = 101
102 12:00:01.200000 flock(11</srv/app.lock>, LOCK_EX) = 0 <0.500000>
";
        let o = observe_log(log);
        // Window: the first accept's return (0.0001) to the last (1.1).
        assert!((o.window_s - 1.0999).abs() < 1e-9, "{}", o.window_s);
        assert_eq!(o.locks.len(), 1);
        let l = &o.locks[0];
        assert_eq!(l.object, "/srv/app.lock");
        // 0.6 s by 102 and 2 × 10 µs by 101 (LOCK_UN is a flock call too); 102's second wait
        // starts after the window.
        assert_eq!(l.waits, 3);
        assert!((l.wait_s - 0.60002).abs() < 1e-9, "{}", l.wait_s);
        assert!(!l.futex);
    }
}
