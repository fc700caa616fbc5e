//! The kernel half of `trapdetect run`'s timeline: once a second, on the load generator's
//! clock (CLOCK_MONOTONIC, the clock of `bpf_ktime_get_ns`), read the off-CPU sums and the
//! host's CPU counters and keep one small record per second. Intervals still in progress at a
//! boundary are split there (from each thread's slot), so a worker blocked for ten seconds
//! shows in ten seconds, not in the one it wakes in. Memory is one record per second, whatever
//! the request rate.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::ffi::OsStringExt;

use trapdetect_common::offcpu::{
    CLASS_FILE_LOCK, CLASS_FUTEX, CLASS_SLEEP, FUTEX_TIMED, NUM_CLASSES, OffKey,
    S_KEY_INSERT_FAILS, S_ONCPU_NS, S_RUNQ_IDLE_NS, S_RUNQ_NS, S_RUNQ_SELF_NS, S_SLOT_COLLISIONS,
    ST_OFF_CPU, ST_ON_CPU, ST_RUNNABLE, ThreadSlot, waits_for_work,
};

use crate::{
    host::process,
    probe::{Probes, offcpu::OffcpuReading},
    trace::{
        backlog,
        quota::{QuotaWatch, ThrottleCounters},
    },
};

/// What the per-second sampler reads: the eBPF probes, or the /proc sampling backend
/// (`crate::sample`), which keeps the same cumulative sums from what it sampled.
pub trait KernelSource {
    /// Whether off-CPU time is measured at all.
    fn offcpu_attached(&self) -> bool;
    /// The off-CPU sums so far (cumulative, by key) and the `S_*` totals.
    fn offcpu_read(&self) -> crate::error::Result<OffcpuReading>;
    /// Where each of `tids` is now (threads not known are left out).
    fn thread_slots(&self, tids: &[u32]) -> crate::error::Result<Vec<ThreadSlot>>;
    /// FUSE requests so far by connection device (empty: not counted).
    fn fuse_by_dev(&self) -> HashMap<u32, u64>;
    /// Path syscalls completed so far (0: not counted).
    fn path_calls(&self) -> u64;
    /// (requests received on the target's own TCP ports, connections it accepted) so far.
    fn served_now(&self) -> (u64, u64);
    /// accept() calls that failed with EMFILE or ENFILE so far.
    fn accept_emfile(&self) -> u64;
    /// Who woke the traced threads and the stack's processes so far (empty: not counted).
    fn wakeups(&self) -> super::stack::Wakeups {
        Default::default()
    }
    /// Makes `pids` part of the benchmark's stack: their wakers are counted from now on.
    fn mark_stack(&self, _pids: &[u32]) -> crate::error::Result<()> {
        Ok(())
    }
    /// Stops counting the blocked time of threads `tids`, the runtime's own (false: this
    /// source cannot, and their waits stay counted).
    fn mark_runtime(&self, _tids: &[u32]) -> bool {
        false
    }
}

impl KernelSource for Probes {
    fn offcpu_attached(&self) -> bool {
        Probes::offcpu_attached(self)
    }
    fn offcpu_read(&self) -> crate::error::Result<OffcpuReading> {
        Probes::offcpu_read(self)
    }
    fn thread_slots(&self, tids: &[u32]) -> crate::error::Result<Vec<ThreadSlot>> {
        Probes::thread_slots(self, tids)
    }
    fn fuse_by_dev(&self) -> HashMap<u32, u64> {
        Probes::fuse_by_dev(self)
    }
    fn path_calls(&self) -> u64 {
        Probes::path_calls(self)
    }
    fn served_now(&self) -> (u64, u64) {
        served_now(self)
    }
    fn accept_emfile(&self) -> u64 {
        counter(self, trapdetect_common::counters::C_ACCEPT_EMFILE)
    }
    fn wakeups(&self) -> super::stack::Wakeups {
        Probes::wakeups(self)
    }
    fn mark_stack(&self, pids: &[u32]) -> crate::error::Result<()> {
        Probes::mark_stack(self, pids)
    }
    fn mark_runtime(&self, tids: &[u32]) -> bool {
        Probes::mark_runtime(self, tids).is_ok()
    }
}

/// A set of small integers (a thread's index in the run), one bit each: a second's threads
/// cost two bits each, not a (tid, busy) pair, over a long run of a large pool (5,000 threads
/// for an hour: 4.5 MB instead of 144 MB).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bits(Vec<u64>);

impl Bits {
    pub fn set(&mut self, i: usize) {
        let w = i / 64;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }

    pub fn ones(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The members that are also in `other`.
    pub fn ones_in(&self, other: &Bits) -> usize {
        let both = self.0.iter().zip(&other.0);
        both.map(|(a, b)| (a & b).count_ones() as usize).sum()
    }
}

/// The traced threads at one sample: which were seen, and which of those were busy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadBits {
    pub seen: Bits,
    pub busy: Bits,
}

impl ThreadBits {
    /// Of the threads in `pool`: how many were seen at this sample, and how many were busy.
    pub fn in_pool(&self, pool: &Bits) -> (usize, usize) {
        (self.seen.ones_in(pool), self.busy.ones_in(pool))
    }
}

/// One second as the kernel saw it.
#[derive(Clone, Debug, Default)]
pub struct KernelSecond {
    /// Second index from the load's measured start.
    pub t_s: u64,
    /// Length actually covered, s (sampling jitter).
    pub dt_s: f64,
    /// Host cores busy (all processes, from /proc/stat).
    pub cores_busy: f64,
    /// Cores trapdetect itself used (the built-in generator).
    pub self_cores: f64,
    /// On-CPU time of the traced threads, thread-seconds (wall time between the scheduler's
    /// switches: on a virtual machine it includes what the hypervisor stole).
    pub on_cpu_s: f64,
    /// CPU time the kernel charged the traced processes in this second (utime + stime of
    /// /proc/PID/stat, clock ticks): the task clock, which CPU quotas are charged in and which
    /// leaves out what a hypervisor stole and interrupt time.
    pub charged_cpu_s: f64,
    /// Run-queue delay of the traced threads, thread-seconds.
    pub runq_s: f64,
    /// Of the waits for a CPU that ended in this second, those that ended on a CPU leaving
    /// its idle task (`S_RUNQ_IDLE_NS`), thread-seconds.
    pub runq_idle_s: f64,
    /// Of them, those that ended with another of the traced threads switching out: queued
    /// behind the target's own threads (`S_RUNQ_SELF_NS`), thread-seconds.
    pub runq_self_s: f64,
    /// Off-CPU time by class, thread-seconds.
    pub off_s: [f64; NUM_CLASSES as usize],
    /// Traced threads at the sample.
    pub threads: usize,
    /// The most of them one process had (a runtime's global lock is one process's).
    pub most_in_one_process: usize,
    /// Each thread at the sample and whether it was busy, by the thread's index in the run:
    /// which of them were workers is known only once the run has ended
    /// ([`Sampler::worker_mask`]).
    pub sampled: ThreadBits,
    /// Path syscalls completed in this second.
    pub path_calls: u64,
    /// FUSE requests in this second by connection device.
    pub fuse_ops: BTreeMap<u32, u64>,
    /// Intervals lost in this second (slot collisions, full map).
    pub lost: u64,
    /// Connections waiting in the target's listeners' accept queues at the sample (`None`:
    /// no listener found).
    pub accept_queue: Option<u64>,
    /// The same for the listeners of the stack's processes (`trace::stack`) that are not the
    /// target's, nor on the port the load enters at (a front end's: [`Sampler::entering_at`]).
    pub stack_accept_queue: Option<u64>,
    /// The target's established connections at the sample and those holding a small
    /// response tail unsent (`None`: not read, no TCP listener).
    pub send_holds: Option<crate::traps::run::SendHolds>,
    /// Throttling of the target's binding CPU quota in this second (`None`: no quota).
    pub throttle: Option<ThrottleCounters>,
    /// Requests the target's own TCP ports received in this second (`tcp_probe`).
    pub served_requests: u64,
    /// Connections the traced processes accepted in this second.
    pub accepts: u64,
    /// accept() calls of the traced processes that failed with EMFILE or ENFILE (the process
    /// or the system out of descriptors) in this second.
    pub accept_emfile: u64,
    /// CPUs the traced processes may run on at the sample (the union of their affinity masks).
    pub allowed_cpus: Vec<u32>,
    /// Cores busy on those CPUs in this second, whoever ran there (/proc/stat's per-CPU lines).
    pub allowed_busy: f64,
    /// Of those, cores the hypervisor took in this second (steal time: the virtual CPUs
    /// waited for the host's; included in `allowed_busy`).
    pub allowed_steal: f64,
    /// Other processes' CPU in this second (not the traced tree, not trapdetect): (pid, cores
    /// whose affinity lets them run on the target's CPUs, scaled by the overlap), busiest first.
    pub others: Vec<(u32, f64)>,
    /// The traced process closest to its descriptor limit at the sample.
    pub fd_peak: Option<FdPeak>,
}

/// Descriptors of one traced process against its soft RLIMIT_NOFILE.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FdPeak {
    /// Pid.
    pub pid: u32,
    /// `comm` (raw bytes).
    pub comm: Vec<u8>,
    /// Descriptors open at the sample.
    pub open: u64,
    /// Soft limit.
    pub soft: u64,
}

/// Another process as the sampler last saw it: its CPU ticks and how much of its affinity
/// overlaps the target's CPUs.
#[derive(Clone, Debug)]
struct Other {
    start_ticks: u64,
    cpu_ticks: u64,
    /// Its allowed CPUs (read once).
    allowed: Option<Vec<u32>>,
}

/// One thread as the samples found it ([`Sampler::worker_mask`]).
#[derive(Clone, Copy, Debug, Default)]
struct ThreadSeen {
    /// Samples that found it waiting for work, of `samples`.
    idle_samples: u32,
    samples: u32,
    /// Its index in [`KernelSecond::sampled`].
    index: usize,
    /// Its time waiting for work, from the kernel's count ([`ThreadSlot::idle_ns`]).
    time: Option<IdleTime>,
}

/// A thread's time waiting for work at its first sample and its last (ns).
#[derive(Clone, Copy, Debug, Default)]
struct IdleTime {
    first_at: u64,
    first_idle_ns: u64,
    at: u64,
    idle_ns: u64,
    /// At the last sample, the time of the timed futex wait it was in: whether that is a
    /// sleep (work) or a wait for another thread's event is known only when it ends.
    open_timed_ns: u64,
}

impl ThreadSeen {
    /// A worker: at work (not waiting for it) at least half the time. From its time between
    /// its first sample and its last where there is some, a timed wait still in progress not
    /// counted as work (a `java.util.Timer` thread waits out its 30 s period in one: nothing in
    /// it is known to be work; one found 1.8 s into a 7 s span entering it was a second
    /// HttpServer "worker" for the sampling backend); from the samples where it was found once
    /// (or only at one instant): then at work at least half the samples.
    fn works(&self) -> bool {
        match self.time.filter(|t| t.at > t.first_at) {
            Some(t) => {
                let span = t.at - t.first_at;
                let known = span - t.open_timed_ns.min(span);
                let idle = (t.idle_ns - t.first_idle_ns).min(known);
                (known - idle) * 2 >= span
            }
            None => self.samples > 0 && (self.samples - self.idle_samples) * 2 >= self.samples,
        }
    }
}

/// Samples the probes once a second.
pub struct Sampler {
    /// Readings of the off-CPU sums that failed (the second is then sampled late), and the
    /// last error.
    pub read_errors: u64,
    /// The last failed reading's error.
    pub last_read_error: Option<String>,
    root: u32,
    /// The port the load enters at (the URL's): a front end's listener there is in front of
    /// the target, not behind it, and stays out of the stack's queue.
    entry_port: Option<u16>,
    start_ns: u64,
    next: u64,
    base: Option<OffcpuReading>,
    prev: Option<OffcpuReading>,
    /// tid → (bucket, credited ns) of the interval in progress at the last sample.
    credit: HashMap<u32, (Bucket, u64)>,
    /// The counters at the last sample.
    prev_counters: Counters,
    ncpu: f64,
    /// tid → how it was found at the samples and how long it waited for work, to tell
    /// workers from threads that never work.
    idle: HashMap<u32, ThreadSeen>,
    /// Every second so far.
    pub seconds: Vec<KernelSecond>,
    /// Lock objects seen: (dev, ino) → name (resolved while the file was open).
    pub lock_names: HashMap<(u32, u64), Vec<u8>>,
    /// The runtime's own threads, whose waits are not counted.
    pub runtime: super::runtime_threads::RuntimeThreads,
    /// The target's binding CPU quota, read when sampling starts.
    pub quota: Option<QuotaWatch>,
    /// Every other process's CPU at the last sample, by pid.
    prev_others: HashMap<u32, Other>,
    /// The traced processes' (start time, CPU ticks) at the last sample, by pid.
    prev_tree: HashMap<u32, (u64, u64)>,
    /// The working processes' threads' (start time, CPU ticks) at the last sample, by tid.
    prev_threads: HashMap<u32, (u64, u64)>,
    /// The traced processes that used CPU in the window: pid → (CPU ticks, executable path
    /// read when it first did).
    work_by_pid: HashMap<u32, (u64, Vec<u8>)>,
    /// Soft RLIMIT_NOFILE by (pid, start time): read once per process.
    nofile: HashMap<(u32, u64), Option<u64>>,
    /// Name and CPU of other processes over the window: pid → (comm, ticks).
    pub others_window: HashMap<u32, (Vec<u8>, u64)>,
    /// Who woke the traced threads, and the stack's processes, from a system call over the
    /// window (read when it ends).
    pub wakeups: super::stack::Wakeups,
    /// The processes that serve the traced set without being traced, found second by second
    /// (`trace::stack`).
    pub stack: super::stack::Stack,
    /// The accept queues' reader (its sock_diag socket opened once).
    backlog: backlog::Reader,
    /// The longest one reading took, ns (its own cost, which makes the next second late).
    pub slowest_reading_ns: u64,
    /// The most a reading started after its second had ended, ns (the loop that calls
    /// `tick` held up or starved of CPU).
    pub latest_start_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bucket {
    On,
    Runq,
    Off(OffKey),
}

fn bucket_of(state: u32, key: OffKey) -> Option<Bucket> {
    match state {
        ST_ON_CPU => Some(Bucket::On),
        ST_RUNNABLE => Some(Bucket::Runq),
        // A timed futex wait in progress is a sleep until another thread ends it: the kernel
        // adds it under `sleep` when it runs out (a timer thread's period, a request's
        // `Thread.sleep`), under `futex` when woken. Split as a futex wait, a 7 s timer's wait
        // read as a thread on a futex for the seconds it lasted, then its whole length went
        // under `sleep` in the second it ended (the part split before counted twice).
        ST_OFF_CPU if key.class == CLASS_FUTEX && key.dev == FUTEX_TIMED => {
            Some(Bucket::Off(OffKey {
                class: CLASS_SLEEP,
                ..Default::default()
            }))
        }
        ST_OFF_CPU => Some(Bucket::Off(key)),
        _ => None,
    }
}

/// The cumulative counters a second is the difference of, read at one sample.
#[derive(Default)]
struct Counters {
    /// FUSE requests by device.
    fuse: HashMap<u32, u64>,
    paths: u64,
    /// The host's (busy, total) ticks.
    cpu: Option<(u64, u64)>,
    /// trapdetect's own CPU ticks.
    me: u64,
    /// (served requests, accepts).
    served: (u64, u64),
    /// Per-CPU (busy, total) ticks.
    per_cpu: HashMap<u32, crate::host::host::CpuTicks>,
    /// accept() EMFILE/ENFILE failures.
    emfile: u64,
}

impl Counters {
    fn read(probes: &dyn KernelSource) -> Counters {
        Counters {
            fuse: probes.fuse_by_dev(),
            paths: probes.path_calls(),
            cpu: host_cpu(),
            me: self_ticks(),
            served: probes.served_now(),
            per_cpu: crate::host::host::per_cpu_ticks(),
            emfile: probes.accept_emfile(),
        }
    }

    /// The second's share of them since `prev` (`allowed`: the CPUs the target may use;
    /// `ncpu`: the host's).
    fn since(&self, prev: &Counters, allowed: &[u32], ncpu: f64, sec: &mut KernelSecond) {
        sec.path_calls = self.paths.saturating_sub(prev.paths);
        for (d, n) in &self.fuse {
            let d0 = prev.fuse.get(d).copied().unwrap_or(0);
            if *n > d0 {
                sec.fuse_ops.insert(*d, n - d0);
            }
        }
        if let (Some((b1, t1)), Some((b0, t0))) = (self.cpu, prev.cpu)
            && t1 > t0
        {
            sec.cores_busy = (b1 - b0) as f64 / (t1 - t0) as f64 * ncpu;
        }
        if sec.dt_s > 0.0 {
            sec.self_cores = (self.me.saturating_sub(prev.me)) as f64 / clock_ticks() / sec.dt_s;
        }
        sec.served_requests = self.served.0.saturating_sub(prev.served.0);
        sec.accepts = self.served.1.saturating_sub(prev.served.1);
        sec.accept_emfile = self.emfile.saturating_sub(prev.emfile);
        sec.allowed_busy = crate::host::host::busy_between(&prev.per_cpu, &self.per_cpu, allowed).0;
        sec.allowed_steal = crate::host::host::steal_between(&prev.per_cpu, &self.per_cpu, allowed);
    }
}

/// Clock ticks per second (`/proc`'s CPU times' unit).
fn clock_ticks() -> f64 {
    crate::util::sysconf(nix::unistd::SysconfVar::CLK_TCK).max(1) as f64
}

/// Host CPU jiffies (busy, total) from /proc/stat's first line.
fn host_cpu() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_proc_stat(&text)
}

/// (busy, total) jiffies of the `cpu` line: busy excludes idle and iowait.
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    let total: u64 = v.iter().sum();
    Some((total - v[3] - v[4], total))
}

/// utime + stime of this process, clock ticks.
fn self_ticks() -> u64 {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let g = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    g(11) + g(12)
}

/// Requests received on the target's own TCP ports and connections it accepted, so far.
fn served_now(probes: &Probes) -> (u64, u64) {
    let accepts = probes
        .counters()
        .ok()
        .and_then(|c| {
            c.get(trapdetect_common::counters::C_ACCEPTS as usize)
                .copied()
        })
        .unwrap_or(0);
    // A held-back tcp_probe (`trace::keepalive`): the accepts until it attaches, then it.
    (probes.requests_so_far(accepts).unwrap_or(0), accepts)
}

/// Of the traced processes' CPU ticks since the last sample (pid, ticks), the processes that did
/// the work: each with 5 % of the ticks or more. Their affinity is the CPUs the server's work
/// may use: nginx workers pinned to one CPU by `worker_cpu_affinity` under a master allowed
/// both, or gunicorn's workers under `taskset -p`, can use one, however idle the other. Every
/// process when none used the CPU (or at the first sample).
fn doing_the_work(ticks: &[(u32, u64)]) -> Vec<u32> {
    let total: u64 = ticks.iter().map(|t| t.1).sum();
    let busy: Vec<u32> = ticks
        .iter()
        .filter(|t| t.1 > 0 && t.1 * 20 >= total)
        .map(|t| t.0)
        .collect();
    if busy.is_empty() {
        ticks.iter().map(|t| t.0).collect()
    } else {
        busy
    }
}

/// The working threads' CPU time by affinity mask: for each distinct mask (`mask_of`, sorted)
/// of the threads whose time moved since the last sample (`ticks`: (tid, ticks)), their ticks
/// summed; largest first (ties by mask). Empty where no thread's time moved; a thread that
/// exited before its mask was read is left out.
fn work_by_mask(
    ticks: &[(u32, u64)],
    mask_of: impl Fn(u32) -> Option<Vec<u32>>,
) -> Vec<(Vec<u32>, u64)> {
    let mut groups: HashMap<Vec<u32>, u64> = HashMap::new();
    for &(tid, d) in ticks.iter().filter(|t| t.1 > 0) {
        if let Some(mut mask) = mask_of(tid) {
            mask.sort_unstable();
            mask.dedup();
            *groups.entry(mask).or_default() += d;
        }
    }
    let mut out: Vec<(Vec<u32>, u64)> = groups.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Bounds on the work within this ratio of the tightest are alike (peers pinned one to a CPU
/// split the work evenly give or take a tick of a second's counts): of such sets, the largest.
const TIGHTER: f64 = 0.9;

/// The CPUs that bound the work (`groups`: [`work_by_mask`]), sorted. A request's work runs
/// where its threads may: a share `f` of the work confined to a set of `n` CPUs can grow only
/// until it fills them, so the set bounds the work at `n / f` CPUs' worth, and the server's
/// capacity is that of the set with the tightest bound (every CPU the threads may use bounds it
/// at their number). Apache's worker threads pinned to CPU 1 (9 tenths of the work) under
/// listener threads that may use both bound it at 1.1 CPUs: capped by CPU 1 full while CPU 0
/// idles, and a CPU hog on CPU 0 takes nothing from them (judged on both CPUs they read half
/// busy, and their condition-variable waits for the listener a lock's queue). Peers pinned one
/// to each CPU bound it nowhere tighter than all of them. The candidates are the unions of the
/// largest groups' masks (the largest, the two largest, …, every one); of those whose bound is
/// within [`TIGHTER`] of the tightest, the largest. Empty where no work moved.
fn binding_cpus(groups: &[(Vec<u32>, u64)]) -> Vec<u32> {
    let total = groups.iter().map(|g| g.1).sum::<u64>() as f64;
    let mut candidates: Vec<(f64, Vec<u32>)> = vec![];
    let mut set: Vec<u32> = vec![];
    for (mask, _) in groups {
        set.extend(mask);
        set.sort_unstable();
        set.dedup();
        if candidates.last().is_some_and(|c| c.1 == set) {
            continue;
        }
        let confined: u64 = groups
            .iter()
            .filter(|g| g.0.iter().all(|c| set.contains(c)))
            .map(|g| g.1)
            .sum();
        candidates.push((
            set.len() as f64 * total / confined.max(1) as f64,
            set.clone(),
        ));
    }
    let tightest = candidates.iter().map(|c| c.0).fold(f64::INFINITY, f64::min);
    candidates
        .into_iter()
        .rev()
        .find(|c| TIGHTER * c.0 <= tightest)
        .map(|c| c.1)
        .unwrap_or_default()
}

/// A thread's affinity mask, the CPU ids it may run on (`None`: gone, or unreadable).
fn thread_mask(tid: u32) -> Option<Vec<u32>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(tid as i32)).ok()?;
    Some(
        (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .map(|c| c as u32)
            .collect(),
    )
}

/// The union of the affinity masks of `pids` (their main threads', [`thread_mask`]), sorted.
fn allowed_cpus(pids: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = pids
        .iter()
        .filter_map(|&p| thread_mask(p))
        .flatten()
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// CPU ticks of `id` since the last sample (`prev`: (start time, ticks) by id; `now`: its
/// own); `unseen` where it was not there then. A start time that changed is a reused id: unseen.
fn ticks_since(prev: &HashMap<u32, (u64, u64)>, id: u32, now: (u64, u64), unseen: u64) -> u64 {
    match prev.get(&id) {
        Some(&(start, before)) if start == now.0 => now.1.saturating_sub(before),
        _ => unseen,
    }
}

/// Share of `theirs` (a process's allowed CPUs) that lies in `ours`: the part of its CPU time
/// that can have been taken on the target's CPUs, were it spread evenly (1 when it could run
/// anywhere the target can and nowhere else; 0 when the masks are disjoint).
pub fn overlap(theirs: &[u32], ours: &[u32]) -> f64 {
    if theirs.is_empty() {
        return 1.0;
    }
    theirs.iter().filter(|c| ours.contains(c)).count() as f64 / theirs.len() as f64
}

/// Descriptors open in `pid` (`None`: unreadable).
fn fd_count(pid: u32) -> Option<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|rd| rd.count() as u64)
}

/// A self-monitoring counter of the probes.
fn counter(probes: &Probes, slot: u32) -> u64 {
    probes
        .counters()
        .ok()
        .and_then(|c| c.get(slot as usize).copied())
        .unwrap_or(0)
}

/// Threads of the traced tree, from one scan of /proc: its processes, their threads, and the
/// most threads one process has.
fn threads_of(root: u32, scan: &[process::ProcEntry]) -> (Vec<u32>, Vec<u32>, usize) {
    let (pids, tids, most, _) = tasks_of(root, scan);
    (pids, tids, most)
}

/// [`threads_of`], and each process's threads as listed (pid → tids).
fn tasks_of(
    root: u32,
    scan: &[process::ProcEntry],
) -> (Vec<u32>, Vec<u32>, usize, HashMap<u32, Vec<u32>>) {
    let pids = process::descendants(scan, root);
    let (mut tids, mut most, mut by_pid) = (vec![], 0, HashMap::new());
    for p in &pids {
        if let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) {
            let mine: Vec<u32> = rd
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
                .collect();
            most = most.max(mine.len());
            tids.extend(&mine);
            by_pid.insert(*p, mine);
        }
    }
    (pids, tids, most, by_pid)
}

/// What each thread in `slots` has spent in its current state up to `at`, by bucket (time
/// the kernel has not yet added to its totals).
fn credit_of(slots: &[ThreadSlot], at: u64) -> HashMap<u32, (Bucket, u64)> {
    let mut credit = HashMap::new();
    for s in slots {
        if let Some(b) = bucket_of(s.state, s.key) {
            credit.insert(s.tid, (b, at.saturating_sub(s.ts)));
        }
    }
    credit
}

/// Splits the second from `prev` to `reading` between on-CPU, run queue and the off-CPU
/// classes: the kernel's completed time, plus the open states' time now (`credit`), minus
/// theirs at the last sample (`prev_credit`); and counts the events lost.
fn split_time(
    sec: &mut KernelSecond,
    prev: &OffcpuReading,
    reading: &OffcpuReading,
    credit: &HashMap<u32, (Bucket, u64)>,
    prev_credit: &HashMap<u32, (Bucket, u64)>,
) {
    let mut on = 0i128;
    let mut runq = 0i128;
    let mut off = [0i128; NUM_CLASSES as usize];
    for (k, v) in &reading.keys {
        let before = prev.keys.get(k).map(|x| x.ns).unwrap_or(0);
        if let Some(c) = off.get_mut(k.class as usize) {
            *c += v.ns as i128 - before as i128;
        }
    }
    let t = |r: &OffcpuReading, i: u32| r.totals.get(i as usize).copied().unwrap_or(0) as i128;
    on += t(reading, S_ONCPU_NS) - t(prev, S_ONCPU_NS);
    runq += t(reading, S_RUNQ_NS) - t(prev, S_RUNQ_NS);
    sec.lost = (t(reading, S_SLOT_COLLISIONS) - t(prev, S_SLOT_COLLISIONS)
        + t(reading, S_KEY_INSERT_FAILS)
        - t(prev, S_KEY_INSERT_FAILS))
    .max(0) as u64;
    let mut apply = |b: Bucket, ns: i128| match b {
        Bucket::On => on += ns,
        Bucket::Runq => runq += ns,
        Bucket::Off(k) => {
            if let Some(c) = off.get_mut(k.class as usize) {
                *c += ns
            }
        }
    };
    for (b, ns) in credit.values() {
        apply(*b, *ns as i128);
    }
    for (b, ns) in prev_credit.values() {
        apply(*b, -(*ns as i128));
    }
    let s = |ns: i128| (ns.max(0) as f64) / 1e9;
    sec.on_cpu_s = s(on);
    sec.runq_s = s(runq);
    sec.runq_idle_s = s(t(reading, S_RUNQ_IDLE_NS) - t(prev, S_RUNQ_IDLE_NS));
    sec.runq_self_s = s(t(reading, S_RUNQ_SELF_NS) - t(prev, S_RUNQ_SELF_NS));
    for (i, v) in off.iter().enumerate() {
        sec.off_s[i] = s(*v);
    }
}

/// The off-CPU sums and the intervals each of the tree's threads is in, at one instant: two
/// of them split the time between ([`TimeMark::until`]), as the sampler splits a second.
pub struct TimeMark {
    reading: OffcpuReading,
    credit: HashMap<u32, (Bucket, u64)>,
    threads: usize,
    most_in_one_process: usize,
}

impl TimeMark {
    /// Now, for the threads of `root` and its descendants (`None`: the off-CPU probes are not
    /// attached, or their sums could not be read); the runtime's own threads among them
    /// marked first, into `runtime`, their waits left out.
    pub fn now(
        probes: &dyn KernelSource,
        root: u32,
        runtime: &mut super::runtime_threads::RuntimeThreads,
    ) -> Option<TimeMark> {
        if !probes.offcpu_attached() {
            return None;
        }
        let (pids, tids, most) = threads_of(root, &process::scan());
        runtime.update(probes, &pids);
        let reading = probes.offcpu_read().ok()?;
        let (mut slots, running) = runtime.split(probes.thread_slots(&tids).unwrap_or_default());
        slots.extend(running);
        Some(TimeMark {
            credit: credit_of(&slots, reading.at_ns),
            reading,
            threads: tids.len(),
            most_in_one_process: most,
        })
    }

    /// The threads' time from this mark to `later`: on a CPU, waiting for one, blocked by
    /// class (thread-seconds), the intervals lost, and the threads at `later`.
    pub fn until(&self, later: &TimeMark) -> KernelSecond {
        let mut sec = KernelSecond {
            dt_s: later.reading.at_ns.saturating_sub(self.reading.at_ns) as f64 / 1e9,
            threads: later.threads,
            most_in_one_process: later.most_in_one_process,
            ..Default::default()
        };
        split_time(
            &mut sec,
            &self.reading,
            &later.reading,
            &later.credit,
            &self.credit,
        );
        sec
    }
}

impl Sampler {
    /// The traced process that used the most CPU in the window and its executable (`None`:
    /// none used any, or its executable could not be read): the one that serves, whose runtime
    /// the verdicts speak of, where the pid given is a launcher (a shell that did not exec, a
    /// supervisor).
    pub fn busiest_process(&self) -> Option<(u32, &[u8])> {
        self.work_by_pid
            .iter()
            .filter(|(_, (_, exe))| !exe.is_empty())
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
            .map(|(pid, (_, exe))| (*pid, exe.as_slice()))
    }

    /// The share of the traced processes' CPU time the busiest of them used (`None`: none
    /// used any).
    pub fn busiest_share(&self) -> Option<f64> {
        let total: u64 = self.work_by_pid.values().map(|(t, _)| *t).sum();
        let most = self.work_by_pid.values().map(|(t, _)| *t).max()?;
        (total > 0).then(|| most as f64 / total as f64)
    }

    /// The most threads one of the target's processes had in any second (0: none read).
    pub fn most_in_one_process(&self) -> usize {
        self.seconds
            .iter()
            .map(|x| x.most_in_one_process)
            .max()
            .unwrap_or(0)
    }

    /// A sampler whose seconds count from `start_ns` (the load's measured start).
    pub fn new(root: u32, start_ns: u64) -> Self {
        Sampler {
            read_errors: 0,
            last_read_error: None,
            root,
            entry_port: None,
            start_ns,
            next: 1,
            base: None,
            prev: None,
            credit: HashMap::new(),
            prev_counters: Counters::default(),
            ncpu: std::thread::available_parallelism()
                .map(|n| n.get() as f64)
                .unwrap_or(1.0),
            idle: HashMap::new(),
            seconds: vec![],
            lock_names: HashMap::new(),
            runtime: Default::default(),
            quota: QuotaWatch::of_pid(root),
            prev_others: HashMap::new(),
            prev_tree: HashMap::new(),
            prev_threads: HashMap::new(),
            work_by_pid: HashMap::new(),
            nofile: HashMap::new(),
            others_window: HashMap::new(),
            wakeups: Default::default(),
            stack: Default::default(),
            backlog: backlog::Reader::new(root),
            slowest_reading_ns: 0,
            latest_start_ns: 0,
        }
    }

    /// The load enters at `port` (the URL's): the stack's queue ([`KernelSecond`]'s
    /// `stack_accept_queue`) leaves out a listener there, a front end's (nginx before a traced
    /// php-fpm), so that it counts only what serves the target, behind it.
    pub fn entering_at(mut self, port: u16) -> Self {
        self.entry_port = Some(port);
        self
    }

    /// Samples when a second boundary has passed (the first call takes the baseline).
    pub fn tick(&mut self, probes: &dyn KernelSource) {
        if !probes.offcpu_attached() {
            return;
        }
        let now = crate::util::mono_ns();
        if self.base.is_some() && now < self.start_ns + self.next * 1_000_000_000 {
            return;
        }
        if self.base.is_some() {
            let due = self.start_ns + self.next * 1_000_000_000;
            self.latest_start_ns = self.latest_start_ns.max(now.saturating_sub(due));
        }
        let t0 = crate::util::mono_ns();
        self.sample(probes, false);
        self.slowest_reading_ns = self
            .slowest_reading_ns
            .max(crate::util::mono_ns().saturating_sub(t0));
    }

    /// The last, partial second (call when the window ends).
    pub fn finish(&mut self, probes: &dyn KernelSource) {
        if probes.offcpu_attached() && self.base.is_some() {
            self.sample(probes, true);
            self.wakeups = probes.wakeups();
        }
    }

    /// Completed off-CPU time per key over the window.
    pub fn window_keys(&self) -> HashMap<OffKey, (u64, u64)> {
        let mut out = HashMap::new();
        if let (Some(b), Some(p)) = (&self.base, &self.prev) {
            for (k, v) in &p.keys {
                let (bn, bc) = b.keys.get(k).map(|x| (x.ns, x.count)).unwrap_or((0, 0));
                out.insert(*k, (v.ns.saturating_sub(bn), v.count.saturating_sub(bc)));
            }
        }
        out
    }

    /// Self-monitoring totals over the window (`S_*` deltas).
    pub fn window_totals(&self) -> Vec<u64> {
        match (&self.base, &self.prev) {
            (Some(b), Some(p)) => p
                .totals
                .iter()
                .zip(&b.totals)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            _ => vec![],
        }
    }

    fn sample(&mut self, probes: &dyn KernelSource, last: bool) {
        let scan = process::scan();
        let (pids, tids, most, tasks) = tasks_of(self.root, &scan);
        self.runtime.update(probes, &pids);
        let reading = match probes.offcpu_read() {
            Ok(r) => r,
            Err(e) => {
                self.read_errors += 1;
                self.last_read_error = Some(e.to_string());
                return;
            }
        };
        // The runtime's own threads: their time on and queued for a CPU, not their waits.
        let (slots, running) = self
            .runtime
            .split(probes.thread_slots(&tids).unwrap_or_default());
        let counters = Counters::read(probes);
        let (working, tree_ticks) = self.working(&scan, &pids);
        let allowed = self.allowed_of(&working, &tasks);
        let at = reading.at_ns;
        self.name_locks(&reading, &pids);
        let throttle = self.quota.as_mut().and_then(|q| q.tick());
        let tree_sockets = backlog::socket_inodes(&pids);
        let queue = self.backlog.sample(&tree_sockets);
        let send_holds = self.backlog.sends(&queue.ports);
        let mut credit = credit_of(&slots, at);
        credit.extend(credit_of(&running, at));
        let Some(prev) = self.prev.take() else {
            self.base = Some(reading.clone());
            self.prev = Some(reading);
            self.credit = credit;
            self.prev_counters = counters;
            self.others_since(&scan, &pids, &allowed, 0.0);
            return;
        };
        let mut sec = KernelSecond {
            t_s: self.next - 1,
            dt_s: (at.saturating_sub(prev.at_ns)) as f64 / 1e9,
            threads: tids.len(),
            most_in_one_process: most,
            throttle,
            accept_queue: (queue.listeners > 0).then_some(queue.queued),
            stack_accept_queue: self.stack_queue(&pids, &tree_sockets),
            send_holds,
            ..Default::default()
        };
        split_time(&mut sec, &prev, &reading, &credit, &self.credit);
        sec.sampled = self.count_idle(&slots, at);
        counters.since(&self.prev_counters, &allowed, self.ncpu, &mut sec);
        sec.charged_cpu_s = tree_ticks as f64 / clock_ticks();
        sec.others = self.others_since(&scan, &pids, &allowed, sec.dt_s);
        sec.allowed_cpus = allowed;
        sec.fd_peak = self.fd_peak(&scan, &pids);
        if !last {
            self.grow_stack(probes, &pids, at);
        }
        self.seconds.push(sec);
        self.prev = Some(reading);
        self.credit = credit;
        self.prev_counters = counters;
        if !last {
            self.next += 1;
        }
    }

    /// Connections waiting in the listeners of the stack's processes (those the traced tree
    /// does not hold too, and none on the port the load enters at); `None` when they have
    /// none.
    fn stack_queue(
        &mut self,
        tree: &[u32],
        tree_sockets: &std::collections::HashSet<u64>,
    ) -> Option<u64> {
        let me = std::process::id();
        let members: Vec<u32> = self
            .stack
            .members
            .keys()
            .copied()
            .filter(|p| *p != me && !tree.contains(p))
            .collect();
        if members.is_empty() {
            return None;
        }
        let only: std::collections::HashSet<u64> = backlog::socket_inodes(&members)
            .difference(tree_sockets)
            .copied()
            .collect();
        let q = self.backlog.sample_except(&only, self.entry_port);
        (q.listeners > 0).then_some(q.queued)
    }

    /// The wakers that joined the stack this second, marked in the kernel (a process of the
    /// traced tree never joins: the kernel counts none of its wakeups; a failed mark leaves the
    /// waker out: its CPU stays counted as noise, and `run` says the stack it found).
    fn grow_stack(&mut self, probes: &dyn KernelSource, tree: &[u32], at_ns: u64) {
        let now_s =
            at_ns.saturating_sub(self.base.as_ref().map_or(at_ns, |b| b.at_ns)) as f64 / 1e9;
        let mut new = self.stack.promote(&probes.wakeups(), now_s);
        new.retain(|p| !tree.contains(p) && *p != std::process::id());
        if !new.is_empty() && probes.mark_stack(&new).is_err() {
            for p in &new {
                self.stack.members.remove(p);
            }
        }
    }

    /// Counts, per thread, the samples, those that found it waiting for work, and its time
    /// waiting for work by the kernel's count up to `at`; returns each thread and whether it
    /// is busy now.
    fn count_idle(&mut self, slots: &[ThreadSlot], at: u64) -> ThreadBits {
        // Who is waiting for work right now ([`waits_for_work`]); threads that queue on a
        // contended mutex are the lock rule's, which reads the futex time itself. A timed
        // futex wait counts as busy, as a `nanosleep` does; whether it ran out is known only
        // when it ends (its time's class then).
        let mut now = ThreadBits::default();
        for s in slots {
            let idle = s.state == ST_OFF_CPU && waits_for_work(&s.key);
            let next = self.idle.len();
            let e = self.idle.entry(s.tid).or_insert_with(|| ThreadSeen {
                index: next,
                ..Default::default()
            });
            e.samples += 1;
            if idle {
                e.idle_samples += 1;
            }
            // Its time waiting for work so far: the closed waits, and the one it is in.
            let idle_ns = s.idle_ns + if idle { at.saturating_sub(s.ts) } else { 0 };
            let timed =
                s.state == ST_OFF_CPU && s.key.class == CLASS_FUTEX && s.key.dev == FUTEX_TIMED;
            let open_timed_ns = if timed {
                s.timed_ns + at.saturating_sub(s.ts)
            } else {
                0
            };
            e.time = match e.time {
                // The slot was taken over since (a tid collision): its time starts again.
                Some(t) if idle_ns >= t.idle_ns && at >= t.at => Some(IdleTime {
                    at,
                    idle_ns,
                    open_timed_ns,
                    ..t
                }),
                _ => Some(IdleTime {
                    first_at: at,
                    first_idle_ns: idle_ns,
                    at,
                    idle_ns,
                    open_timed_ns,
                }),
            };
            now.seen.set(e.index);
            if !idle {
                now.busy.set(e.index);
            }
        }
        now
    }

    /// Other processes' cores since the last sample, on the target's CPUs (scaled by how much
    /// of each one's affinity overlaps them); remembers this scan for the next second and adds
    /// each one's ticks to the window's totals.
    fn others_since(
        &mut self,
        scan: &[process::ProcEntry],
        tree: &[u32],
        allowed: &[u32],
        dt_s: f64,
    ) -> Vec<(u32, f64)> {
        let me = std::process::id();
        let hz = process::clock_ticks();
        let mut out = vec![];
        let mut next = HashMap::new();
        for e in scan {
            if tree.contains(&e.pid) || e.pid == me {
                continue;
            }
            let prev = self
                .prev_others
                .remove(&e.pid)
                .filter(|o| o.start_ticks == e.stat.start_ticks);
            let before = prev.as_ref().map(|o| o.cpu_ticks);
            let d = e
                .stat
                .cpu_ticks
                .saturating_sub(before.unwrap_or(e.stat.cpu_ticks));
            let mut other = prev.unwrap_or(Other {
                start_ticks: e.stat.start_ticks,
                cpu_ticks: e.stat.cpu_ticks,
                allowed: None,
            });
            other.cpu_ticks = e.stat.cpu_ticks;
            if d > 0 && dt_s > 0.0 {
                let theirs = other.allowed.get_or_insert_with(|| allowed_cpus(&[e.pid]));
                let overlap = overlap(theirs, allowed);
                let w = self
                    .others_window
                    .entry(e.pid)
                    .or_insert_with(|| (e.stat.comm.clone(), 0));
                w.1 += d;
                if overlap > 0.0 {
                    out.push((e.pid, d as f64 / hz / dt_s * overlap));
                }
            }
            next.insert(e.pid, other);
        }
        self.prev_others = next;
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// The traced processes doing the work since the last sample ([`doing_the_work`]), and
    /// their CPU ticks since then; the CPU ticks of each are remembered for the next.
    fn working(&mut self, scan: &[process::ProcEntry], pids: &[u32]) -> (Vec<u32>, u64) {
        let mut ticks = vec![];
        let mut next = HashMap::new();
        let first = self.prev_tree.is_empty();
        for e in scan.iter().filter(|e| pids.contains(&e.pid)) {
            let now = (e.stat.start_ticks, e.stat.cpu_ticks);
            // Forked since the last sample: all its time is this interval's.
            let d = ticks_since(&self.prev_tree, e.pid, now, if first { 0 } else { now.1 });
            ticks.push((e.pid, d));
            next.insert(e.pid, now);
            if d > 0 {
                self.work_by_pid
                    .entry(e.pid)
                    .or_insert_with(|| {
                        let exe = std::fs::read_link(format!("/proc/{}/exe", e.pid));
                        (
                            0,
                            exe.map(|p| p.into_os_string().into_vec())
                                .unwrap_or_default(),
                        )
                    })
                    .0 += d;
            }
        }
        self.prev_tree = next;
        let total = ticks.iter().map(|t| t.1).sum();
        (doing_the_work(&ticks), total)
    }

    /// The CPUs the work may use: those that bound it ([`binding_cpus`]) by the affinity masks of
    /// the working processes' threads and the CPU ticks each used since the last sample
    /// ([`work_by_mask`]; `tasks`: each process's threads, as [`tasks_of`] listed them). A
    /// thread's mask is its own: worker threads pinned one by one (`taskset -p -c 1 TID`, a
    /// server's per-thread CPU map) under a main thread that may use every CPU can use only
    /// theirs. Where no thread's time moved (an idle second, the first sample), the working
    /// processes' main threads' masks.
    fn allowed_of(&mut self, working: &[u32], tasks: &HashMap<u32, Vec<u32>>) -> Vec<u32> {
        let mut ticks = vec![];
        let mut next = HashMap::new();
        for &p in working {
            for &tid in tasks.get(&p).into_iter().flatten() {
                let Some(st) = std::fs::read(format!("/proc/{p}/task/{tid}/stat"))
                    .ok()
                    .and_then(|t| process::parse_stat(&t))
                else {
                    continue;
                };
                let now = (st.start_ticks, st.cpu_ticks);
                // A thread not seen at the last sample (its process was not working then, or it
                // is new): no interval to count.
                ticks.push((tid, ticks_since(&self.prev_threads, tid, now, 0)));
                next.insert(tid, now);
            }
        }
        self.prev_threads = next;
        let out = binding_cpus(&work_by_mask(&ticks, thread_mask));
        if out.is_empty() {
            return allowed_cpus(working);
        }
        out
    }

    /// The traced process with the fullest descriptor table against its soft limit.
    fn fd_peak(&mut self, scan: &[process::ProcEntry], pids: &[u32]) -> Option<FdPeak> {
        let mut best: Option<FdPeak> = None;
        for e in scan.iter().filter(|e| pids.contains(&e.pid)) {
            let soft = *self
                .nofile
                .entry((e.pid, e.stat.start_ticks))
                .or_insert_with(|| {
                    std::fs::read_to_string(format!("/proc/{}/limits", e.pid))
                        .ok()
                        .and_then(|t| crate::host::net::procfs::parse_nofile(&t))
                        .and_then(|(soft, _)| soft)
                });
            let (Some(soft), Some(open)) = (soft, fd_count(e.pid)) else {
                continue;
            };
            let fuller = best.as_ref().is_none_or(|b| {
                open as f64 / soft.max(1) as f64 > b.open as f64 / b.soft.max(1) as f64
            });
            if fuller {
                best = Some(FdPeak {
                    pid: e.pid,
                    comm: e.stat.comm.clone(),
                    open,
                    soft,
                });
            }
        }
        best
    }

    /// Threads doing something other than waiting for work (or parked on a futex) half their
    /// time or more ([`ThreadSeen::works`]): a master in epoll_wait that wakes for its
    /// once-a-second timer is not a worker, even when every sample finds it awake, nor is a
    /// runtime's parked thread; a worker of a saturated pool works nearly all its time.
    pub fn workers(&self) -> usize {
        self.worker_mask().ones()
    }

    /// The threads [`Sampler::workers`] counts, as bits by their index in
    /// [`KernelSecond::sampled`].
    pub fn worker_mask(&self) -> Bits {
        let mut mask = Bits::default();
        for t in self.idle.values() {
            if t.works() {
                mask.set(t.index);
            }
        }
        mask
    }

    /// Names lock objects with time on them while their file is still open somewhere.
    fn name_locks(&mut self, r: &OffcpuReading, pids: &[u32]) {
        let want: Vec<(u32, u64)> = r
            .keys
            .keys()
            .filter(|k| k.class == CLASS_FILE_LOCK && k.ino != 0)
            .map(|k| (k.dev, k.ino))
            .filter(|k| !self.lock_names.contains_key(k))
            .collect();
        if want.is_empty() {
            return;
        }
        use nix::sys::stat::{major, minor};
        use std::os::unix::fs::MetadataExt;
        for p in pids {
            let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/fd")) else {
                continue;
            };
            for e in rd.flatten() {
                let Ok(md) = std::fs::metadata(e.path()) else {
                    continue;
                };
                let dev = md.dev();
                let kdev = ((major(dev) as u32) << 20) | (minor(dev) as u32 & 0xfffff);
                if want.contains(&(kdev, md.ino()))
                    && let Ok(target) = std::fs::read_link(e.path())
                {
                    self.lock_names.insert(
                        (kdev, md.ino()),
                        target.as_os_str().as_encoded_bytes().to_vec(),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cpus_the_work_may_use_are_the_working_processes() {
        use super::doing_the_work;
        // gunicorn: the arbiter's heartbeat (1 tick) beside four workers (24-26 ticks each).
        let t = [(10, 1), (11, 25), (12, 24), (13, 26), (14, 25)];
        assert_eq!(doing_the_work(&t), vec![11, 12, 13, 14]);
        // One process does it all: itself, not its idle helpers.
        assert_eq!(doing_the_work(&[(1, 0), (2, 90), (3, 4)]), vec![2]);
        // 5 % exactly counts: 5 of 100.
        assert_eq!(doing_the_work(&[(1, 5), (2, 95)]), vec![1, 2]);
        // Nobody ran (an idle second, the first sample): every process.
        assert_eq!(doing_the_work(&[(1, 0), (2, 0)]), vec![1, 2]);
        assert!(doing_the_work(&[]).is_empty());
    }

    /// OpenJDK's HttpServer, its four pool threads pinned to CPU 1 one by one (`taskset -p -c
    /// 1 TID`) under a main thread and JVM threads that may use both: the work's CPUs are the
    /// pool's one (the process's main-thread mask read two, and the run read `cpu.run-queue`
    /// where pinned processes read `cpu.saturated`). An idle second says nothing.
    #[test]
    fn the_cpus_the_work_may_use_are_the_working_threads() {
        use super::{binding_cpus, work_by_mask};
        let mask = |t: u32| {
            Some(if (101..=104).contains(&t) {
                vec![1]
            } else {
                vec![1, 0]
            })
        };
        // Main thread 100 idle, a compiler thread 105 nearly; the pool busy.
        let t = [
            (100, 0),
            (101, 24),
            (102, 25),
            (103, 26),
            (104, 24),
            (105, 1),
        ];
        let groups = work_by_mask(&t, mask);
        assert_eq!(groups, vec![(vec![1], 99), (vec![0, 1], 1)]);
        assert_eq!(binding_cpus(&groups), vec![1]);
        // Nothing moved: empty (the caller falls back to the processes' masks).
        assert!(work_by_mask(&[(100, 0), (101, 0)], mask).is_empty());
        assert!(binding_cpus(&[]).is_empty());
        // A thread that exited before its mask was read leaves the others'.
        let gone = |t: u32| (t != 101).then(|| vec![1]);
        assert_eq!(
            work_by_mask(&[(101, 30), (102, 30)], gone),
            vec![(vec![1], 30)]
        );
    }

    /// Apache's event MPM, each child's 25 worker threads pinned to CPU 1 and its listener
    /// thread free (measured: the workers 294 ticks under wrk, the two listeners 34): the
    /// workers, a sliver each but 9 tenths of the work together, bound it on CPU 1. Where most
    /// of the work may run anywhere, or peers pinned one to a CPU share it, every CPU they may
    /// use.
    #[test]
    fn the_cpus_that_bound_the_work_are_the_tightest_bound_on_it() {
        use super::{binding_cpus, work_by_mask};
        let mask = |t: u32| Some(if t < 100 { vec![1] } else { vec![0, 1] });
        // 49 workers at 6 ticks each (294), two listeners at 17: each worker under the 5 % a
        // process needs to count as working, the listeners over it.
        let mut t: Vec<(u32, u64)> = (0..49).map(|w| (w, 6)).collect();
        t.extend([(100, 17), (101, 17)]);
        let groups = work_by_mask(&t, mask);
        assert_eq!(groups, vec![(vec![1], 294), (vec![0, 1], 34)]);
        // CPU 1 bounds it at 1 × 328 / 294 = 1.12 CPUs, against 2.
        assert_eq!(binding_cpus(&groups), vec![1]);
        // The listeners doing most of the work: CPU 1 bounds it at 4 CPUs, looser than 2.
        let groups = work_by_mask(&[(1, 10), (100, 30)], mask);
        assert_eq!(groups, vec![(vec![0, 1], 30), (vec![1], 10)]);
        assert_eq!(binding_cpus(&groups), vec![0, 1]);
        // nginx's `worker_cpu_affinity auto` on four CPUs: a worker on each, a tick apart.
        // Three of them bound their 76 % at 3.95 CPUs: no tighter than four.
        let own = |t: u32| Some(vec![t]);
        let groups = work_by_mask(&[(0, 26), (1, 25), (2, 25), (3, 24)], own);
        assert_eq!(binding_cpus(&groups), vec![0, 1, 2, 3]);
        // Two thirds on CPU 0 (a stage pinned there): 1.5 CPUs against 2.
        assert_eq!(
            binding_cpus(&work_by_mask(&[(0, 20), (1, 10)], own)),
            vec![0]
        );
        // Four fifths on CPUs 0 and 1 of four, a tick apart: CPU 0 alone bounds it at 2.44
        // CPUs, both at 2.5, all four at 4: the two.
        let groups = work_by_mask(&[(0, 41), (1, 39), (2, 10), (3, 10)], own);
        assert_eq!(binding_cpus(&groups), vec![0, 1]);
        // One mask: its own.
        assert_eq!(binding_cpus(&[(vec![2, 3], 7)]), vec![2, 3]);
    }

    use super::*;
    use trapdetect_common::offcpu::{CLASS_FUTEX, CLASS_SLEEP, CLASS_WAIT_WORK, FUTEX_TIMED};

    /// A timed futex wait in progress at a sample is split as a sleep: one that runs out 0.4 s
    /// into the next second (the kernel then adds its whole 1.0 s under `sleep`) leaves 0.4 s
    /// of sleep there and none on a futex; split as a futex wait it left 1.0 s of sleep there,
    /// the 0.6 s before counted twice.
    #[test]
    fn a_timed_wait_across_a_sample_is_a_sleep_until_it_ends() {
        use trapdetect_common::offcpu::{NUM_SCHED_SLOTS, OffVal};
        const S: u64 = 1_000_000_000;
        let sleep = OffKey {
            class: CLASS_SLEEP,
            ..Default::default()
        };
        let timed = ThreadSlot {
            tid: 7,
            state: ST_OFF_CPU,
            ts: 4 * S / 10,
            key: OffKey {
                class: CLASS_FUTEX,
                dev: FUTEX_TIMED,
                ino: 0,
            },
            ..Default::default()
        };
        let before = credit_of(&[timed], S);
        assert_eq!(before[&7], (Bucket::Off(sleep), 6 * S / 10));
        let running = ThreadSlot {
            tid: 7,
            state: ST_ON_CPU,
            ts: 14 * S / 10,
            ..Default::default()
        };
        let reading = |at_ns, keys: Vec<(OffKey, OffVal)>| OffcpuReading {
            at_ns,
            keys: keys.into_iter().collect(),
            totals: vec![0; NUM_SCHED_SLOTS as usize],
        };
        let mut sec = KernelSecond::default();
        split_time(
            &mut sec,
            &reading(S, vec![]),
            &reading(2 * S, vec![(sleep, OffVal { ns: S, count: 1 })]),
            &credit_of(&[running], 2 * S),
            &before,
        );
        assert!(
            (sec.off_s[CLASS_SLEEP as usize] - 0.4).abs() < 1e-9,
            "{sec:?}"
        );
        assert_eq!(sec.off_s[CLASS_FUTEX as usize], 0.0);
        assert!((sec.on_cpu_s - 0.6).abs() < 1e-9, "{sec:?}");
    }

    /// At a sample, threads waiting for work or parked on a futex are idle; a futex wait with
    /// a timeout is a deadline the thread set itself (Puma's threads in Ruby's `sleep`, a
    /// gthread worker in `Event.wait(0.02)`: `FUTEX_WAIT_BITSET` with a timeout) and counts
    /// as busy, as a thread on a CPU does.
    #[test]
    fn a_timed_futex_wait_is_busy_at_the_sample_an_untimed_one_idle() {
        let slot = |tid, state, class, dev| ThreadSlot {
            tid,
            state,
            key: OffKey { class, dev, ino: 0 },
            ..Default::default()
        };
        let slots = [
            slot(1, ST_OFF_CPU, CLASS_FUTEX, FUTEX_TIMED),
            slot(2, ST_OFF_CPU, CLASS_FUTEX, 0),
            slot(3, ST_OFF_CPU, CLASS_WAIT_WORK, 0),
            slot(4, ST_ON_CPU, CLASS_FUTEX, 0),
            slot(5, ST_OFF_CPU, CLASS_SLEEP, 0),
        ];
        let mut s = Sampler::new(1, 0);
        let first = s.count_idle(&slots, 7);
        assert_eq!((first.seen.ones(), first.busy.ones()), (5, 3));
        assert_eq!(s.count_idle(&slots, 7), first);
        // The workers are threads 1, 4 and 5: numbered in the order they were first seen,
        // bits 0, 3 and 4.
        let workers = s.worker_mask();
        assert_eq!(workers, bits(&[0, 3, 4]));
        assert_eq!(first.in_pool(&workers), (3, 3));
        assert_eq!(first.in_pool(&bits(&[1, 2])), (2, 0));
        // A thread first seen later takes the next index, whatever its tid.
        let later = s.count_idle(
            &[
                slot(2, ST_OFF_CPU, CLASS_FUTEX, 0),
                slot(9, ST_ON_CPU, 0, 0),
            ],
            7,
        );
        assert_eq!(later.seen, bits(&[1, 5]));
        assert_eq!(later.busy, bits(&[5]));
    }

    /// Workers by their time, not by where the samples find them. Three samples a second
    /// apart: a master that manages its pool once a second, in step with the sampler, is on a
    /// CPU at every sample but waited for work 99 % of the time; a worker that serves back
    /// to back is found in accept at every sample, 1 ms into it, and waited 10 % of the time;
    /// a worker in `usleep` (a sleep is work) never waited; a thread in accept since before
    /// the first sample waited all along. A thread seen at one sample only is judged by it.
    #[test]
    fn workers_are_told_by_their_time_waiting_for_work() {
        const S: u64 = 1_000_000_000;
        let mut s = Sampler::new(1, 0);
        for i in 1..=3u64 {
            let at = i * S;
            let mut slots = vec![
                slot(10, ST_ON_CPU, 0, at - 1_000, (i - 1) * S * 99 / 100),
                slot(
                    11,
                    ST_OFF_CPU,
                    CLASS_WAIT_WORK,
                    at - 1_000_000,
                    (i - 1) * S / 10,
                ),
                slot(12, ST_OFF_CPU, CLASS_SLEEP, at - 5, 0),
                slot(13, ST_OFF_CPU, CLASS_WAIT_WORK, S / 2, 0),
            ];
            if i == 3 {
                slots.push(slot(14, ST_ON_CPU, 0, at, 0));
            }
            let b = s.count_idle(&slots, at);
            assert_eq!(b.busy.ones(), if i == 3 { 3 } else { 2 }, "sample {i}");
        }
        // By the samples alone the master (bit 0) would be a worker and the first worker
        // (bit 1) not.
        assert_eq!(s.worker_mask(), bits(&[1, 2, 4]));
        // Its slot taken over by another thread (its count starts again, lower): the time
        // from there on.
        s.count_idle(&[slot(11, ST_ON_CPU, 0, 4 * S, 0)], 4 * S);
        s.count_idle(
            &[slot(11, ST_OFF_CPU, CLASS_WAIT_WORK, 4 * S + 1, 0)],
            5 * S,
        );
        assert_eq!(s.worker_mask(), bits(&[2, 4]));
    }

    /// A timed futex wait still in progress is left out of a thread's time: `java.util.Timer`'s
    /// thread, in one wait of its 30 s period the whole run, is no worker; a request thread
    /// found 5 ms into a `Thread.sleep(20)` at every sample (its waits ending as sleeps) is one.
    #[test]
    fn a_timed_wait_in_progress_is_neither_work_nor_idle() {
        const S: u64 = 1_000_000_000;
        let timed = |tid, ts, timed_ns, idle_ns| ThreadSlot {
            tid,
            state: ST_OFF_CPU,
            ts,
            key: OffKey {
                class: CLASS_FUTEX,
                dev: FUTEX_TIMED,
                ino: 0,
            },
            timed_ns,
            idle_ns,
            ..Default::default()
        };
        let mut s = Sampler::new(1, 0);
        for i in 1..=5u64 {
            let at = i * S;
            s.count_idle(
                &[
                    // The timer: in its wait since before the first sample.
                    timed(20, S / 2, 0, 0),
                    // A request thread 5 ms into a 20 ms sleep, its other waits sleeps.
                    timed(21, at - 5_000_000, 0, 0),
                    // A thread that waited for work, then entered a timed wait that has not
                    // ended: nothing of its window is known to be work.
                    if i == 1 {
                        slot(22, ST_OFF_CPU, CLASS_WAIT_WORK, 0, 0)
                    } else {
                        timed(22, S, 0, S)
                    },
                    // A thread that ran 3.5 s, then entered one: 2.5 s of its 4 s span are
                    // known to be work; one that ran 2.5 s is not a worker (1.5 s of 4).
                    if i <= 3 {
                        slot(23, ST_ON_CPU, 0, 0, 0)
                    } else {
                        timed(23, 7 * S / 2, 0, 0)
                    },
                    if i <= 2 {
                        slot(24, ST_ON_CPU, 0, 0, 0)
                    } else {
                        timed(24, 5 * S / 2, 0, 0)
                    },
                ],
                at,
            );
        }
        assert_eq!(s.worker_mask(), bits(&[1, 3]));
    }

    /// Thread `tid`'s slot: in `state` since `ts`, for `class`, `idle_ns` waited for work.
    fn slot(tid: u32, state: u32, class: u32, ts: u64, idle_ns: u64) -> ThreadSlot {
        ThreadSlot {
            tid,
            state,
            ts,
            key: OffKey {
                class,
                dev: 0,
                ino: 0,
            },
            idle_ns,
            ..Default::default()
        }
    }

    fn bits(ones: &[usize]) -> Bits {
        let mut b = Bits::default();
        for i in ones {
            b.set(*i);
        }
        b
    }

    /// Bits across word boundaries: a pool of 200 threads whose every third one is busy.
    #[test]
    fn bits_count_across_words() {
        let all = bits(&(0..200).collect::<Vec<_>>());
        let third = bits(&(0..200).step_by(3).collect::<Vec<_>>());
        assert_eq!((all.ones(), third.ones()), (200, 67));
        assert_eq!(third.ones_in(&all), 67);
        assert_eq!(all.ones_in(&third), 67);
        assert_eq!(bits(&[130]).ones_in(&bits(&[2])), 0);
        assert_eq!(Bits::default().ones_in(&all), 0);
    }

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n";
        assert_eq!(parse_proc_stat(text), Some((160, 1000)));
        assert_eq!(parse_proc_stat("intr 1 2\n"), None);
    }
}
