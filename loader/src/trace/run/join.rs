//! `run`'s join: the load's seconds and the kernel's, second by second, and the observations the
//! run's rules read (the threads' time by class, the filesystems and locks waited on, the other
//! processes on the target's CPUs, the quota).

use std::collections::BTreeMap;

use trapdetect_common::offcpu::{CLASS_FILE_LOCK, CLASS_FUTEX, CLASS_NAMES, NUM_CLASSES};

use super::external::LoadSide;
use crate::{
    escape,
    host::mounts::MountTable,
    report::Report,
    trace::seconds::{KernelSecond, Sampler},
    traps::{
        self,
        run::{
            AheadLatency, FdPeakObs, FsLoad, LockLoad, ProcCpu, QuotaObs, RunObs, RunSecond,
            SendHoldsObs,
        },
    },
};

/// `run.classes_method` when the blocked syscall was sampled from /proc.
pub const METHOD_SAMPLED: u32 = u32::MAX;

fn mount_name(mounts: &MountTable, dev: u32) -> String {
    mounts
        .by_dev(dev, &[])
        .map(|i| mounts.mounts[i].mount_point_display())
        .unwrap_or_else(|| format!("dev {}:{}", dev >> 20, dev & 0xfffff))
}

/// Joins the load's seconds with the kernel's and gathers the window totals.
/// What the kernel's `served` column counts: requests on the target's own TCP ports where
/// `tcp_probe` saw any, else the connections it accepted (php-fpm behind nginx: one per
/// request).
fn served_by_requests(k: &Sampler) -> bool {
    k.seconds.iter().any(|s| s.served_requests > 0)
}

fn served_of(ks: &crate::trace::seconds::KernelSecond, by_requests: bool) -> u64 {
    if by_requests {
        ks.served_requests
    } else {
        ks.accepts
    }
}

pub fn delivered_basis(side: &LoadSide, k: &Sampler) -> &'static str {
    match (side.per_second_2xx, served_by_requests(k)) {
        (true, _) => "generator-2xx",
        (false, true) => "kernel-served-requests",
        (false, false) => "kernel-accepted-connections",
    }
}

/// The CPUs the server's work may use over the run: of the sets the seconds read (the
/// affinity of the processes that did each second's work), the one under which the target
/// did most of its work (charged CPU), the later on a tie. Not the last second's: a short
/// last interval holds a few ticks, and an idle master's one tick there passed for work and
/// widened pinned workers' one CPU to the master's two.
fn allowed_cpus(seconds: &[crate::trace::seconds::KernelSecond]) -> Vec<u32> {
    let mut by_set: Vec<(&Vec<u32>, f64)> = vec![];
    for s in seconds.iter().filter(|s| !s.allowed_cpus.is_empty()) {
        match by_set.iter_mut().find(|(set, _)| **set == s.allowed_cpus) {
            Some((_, w)) => *w += s.charged_cpu_s,
            None => by_set.push((&s.allowed_cpus, s.charged_cpu_s)),
        }
    }
    by_set
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(set, _)| (*set).clone())
        .unwrap_or_default()
}

/// The threads' seconds over the window: blocked by class, on a CPU, charged, runnable.
fn thread_seconds(k: &Sampler) -> (Vec<f64>, f64, f64, [f64; 3]) {
    let mut off_s = vec![0.0; NUM_CLASSES as usize];
    let (mut on, mut charged) = (0.0, 0.0);
    // Runnable: all, the waits that ended on an idle CPU, those behind the traced threads.
    let mut runq = [0.0; 3];
    for ks in &k.seconds {
        for (i, v) in ks.off_s.iter().enumerate() {
            off_s[i] += v;
        }
        on += ks.on_cpu_s;
        charged += ks.charged_cpu_s;
        runq[0] += ks.runq_s;
        runq[1] += ks.runq_idle_s;
        runq[2] += ks.runq_self_s;
    }
    (off_s, on, charged, runq)
}

/// Run's observations, gathered once from the load side, the kernel sampler and the trace's
/// report: the joined timeline, the threads' time by class, the filesystems and lock objects
/// waited on, the worker pool and the quota.
pub fn observe(
    s: &LoadSide,
    k: &Sampler,
    report: &Report,
    mounts: &MountTable,
    attached: bool,
    pid: u32,
) -> RunObs {
    let others = Others::of(k, &s.client_pids);
    // The runtime is the serving process's: the one that used the most CPU, where the pid
    // given is a launcher (a shell that did not exec, a supervisor) of another executable.
    let serving = k.busiest_process();
    let mut seconds = timeline(s, k, mounts, attached);
    others.mark_noise(k, &mut seconds);
    let (off_s, on, charged, [runq, runq_idle, runq_self]) = thread_seconds(k);
    let window_s = k
        .seconds
        .iter()
        .map(|x| x.dt_s)
        .sum::<f64>()
        .max(s.measured_s.min(1e-3));
    let by_requests = served_by_requests(k);
    // 2xx from the generator; where it gave only a summary, the kernel's served count. Kernel
    // sampling stops when the window ends: every sampled second is in it.
    let answered_window: u64 = if s.per_second_2xx {
        answered_within(&s.seconds, window_s)
    } else {
        k.seconds.iter().map(|x| served_of(x, by_requests)).sum()
    };
    let path_off = off_s[trapdetect_common::offcpu::CLASS_PATH as usize];
    let runtime = crate::host::runtime::read(serving.map_or(pid, |(p, _)| p));
    RunObs {
        seconds,
        window_s,
        // Online CPUs (the machine's), not trapdetect's own affinity.
        cores: crate::util::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN).max(1) as f64,
        offered_rate: s.offered_rate,
        // 2xx while the kernel was watched: the drain after the window is not the ceiling.
        delivered_rate: answered_window as f64 / window_s,
        answered: answered_window,
        off_s,
        on_cpu_s: on,
        charged_cpu_s: charged,
        runq_s: runq,
        // The waits that ended are the ones classified: at most the window's.
        runq_idle_s: Some(runq_idle.min(runq)),
        runq_self_s: Some(runq_self.min(runq)),
        workers: k.workers(),
        // Once-a-second samples are no time measure for one thread: a thread that lives for
        // one connection, sampled once while busy, would read as a worker busy all the time
        // (python's http.server: 663 such threads made its pool "full" and hid gen.budget).
        // The tree's work time over the window is the figure here.
        workers_busy: None,
        runtime_threads: k.runtime.by_name(),
        most_in_one_process: k.most_in_one_process(),
        busiest_share: k.busiest_share(),
        filesystems: filesystems(k, report, mounts, pid, path_off, answered_window, window_s),
        locks: locks(k),
        classified: attached,
        quota: quota_obs(k),
        exe: serving
            .map(|(_, exe)| escape::bytes(exe))
            .or_else(|| report.target.as_ref().map(|t| t.exe.clone()))
            .unwrap_or_default(),
        go_maxprocs: runtime.go_maxprocs(),
        go: runtime.go.is_some(),
        allowed_cpus: allowed_cpus(&k.seconds),
        noise: others.listed(k, false, window_s),
        peers: others
            .listed(k, true, window_s)
            .into_iter()
            .map(|p| ProcCpu {
                load_generator: p.pid == std::process::id() || s.client_pids.contains(&p.pid),
                ..p
            })
            .collect(),
        fd_peak: k
            .seconds
            .iter()
            .filter_map(|x| x.fd_peak.as_ref())
            .max_by(|a, b| {
                (a.open as f64 / a.soft.max(1) as f64)
                    .total_cmp(&(b.open as f64 / b.soft.max(1) as f64))
            })
            .map(|p| FdPeakObs {
                pid: p.pid,
                comm: escape::bytes(&p.comm),
                open: p.open,
                soft: p.soft,
            }),
        accept_emfile: k.seconds.iter().map(|x| x.accept_emfile).sum(),
        generator: s.generator.clone(),
        send_holds: send_holds(&k.seconds, window_s),
        cpu_unknown: false,
    }
}

/// The looks at the target's connections in the window's whole seconds (the sample after it
/// holds the drain); `None` where no second was read.
fn send_holds(seconds: &[KernelSecond], window_s: f64) -> Option<SendHoldsObs> {
    let whole = window_s.floor() as u64;
    let mut o = SendHoldsObs::default();
    for h in seconds
        .iter()
        .filter(|x| x.t_s < whole)
        .filter_map(|x| x.send_holds)
    {
        o.add(h);
    }
    (o.seconds_read > 0).then_some(o)
}

/// The generator's 2xx inside the span the sampler covered, `window_s` from the measured
/// start: whole seconds, and the part of the last one the span covers (a late sampler's row
/// covers several seconds: counting only seconds with a row of their own made a clean server
/// at 3,000/s look capped at 594/s; counting a whole second of which the span covered 0.06 s
/// made php-fpm serialized on a 20 ms flock deliver 53.3/s, above the 50/s it can).
fn answered_within(seconds: &[RunSecond], window_s: f64) -> u64 {
    seconds
        .iter()
        .map(|p| p.ok_2xx as f64 * (window_s - p.t_s as f64).clamp(0.0, 1.0))
        .sum::<f64>()
        .round() as u64
}

/// The other processes that ran on the target's CPUs, split into the benchmark's own (the
/// processes that woke its threads from a system call: its front end, its upstreams; the
/// processes that serve those the same way, found while sampling (`trace::stack`); and an
/// external generator's tree; trapdetect is not among them) and noise (everything else).
struct Others {
    stack: std::collections::HashSet<u32>,
}

impl Others {
    /// A process that woke the target's threads at least 10 times a second on average and for
    /// 1 % of all such wakeups is a peer (`trace::stack::is_peer`): it hands the server work
    /// or answers. An interrupt that lands on a CPU hog wakes no one from the hog's system
    /// calls, nor a timer's callback (a sleep ran out) whatever it interrupted, nor one on an
    /// idle CPU: the kernel program counts none of them.
    fn of(k: &Sampler, client: &[u32]) -> Others {
        let window_s = k.seconds.iter().map(|x| x.dt_s).sum::<f64>().max(1.0);
        let by_waker = k.wakeups.target_by_waker();
        let total: u64 = by_waker.values().sum();
        let mut stack: std::collections::HashSet<u32> = by_waker
            .iter()
            .filter(|(_, n)| crate::trace::stack::is_peer(**n, total, window_s))
            .map(|(p, _)| *p)
            .collect();
        stack.extend(k.stack.members.keys().copied());
        stack.extend(client.iter().copied());
        Others { stack }
    }

    /// Cores that processes outside the benchmark took on the target's CPUs in `ks`.
    fn noise_in(&self, ks: &crate::trace::seconds::KernelSecond) -> f64 {
        ks.others
            .iter()
            .filter(|(p, _)| !self.stack.contains(p))
            .map(|(_, c)| c)
            .sum()
    }

    /// Each second's noise: the cores processes outside the benchmark took on the target's
    /// CPUs, and what the hypervisor took there (steal time: taken from the server as surely
    /// as another process's time, and no process list shows it).
    fn mark_noise(&self, k: &Sampler, seconds: &mut [RunSecond]) {
        for r in seconds {
            if let Some(ks) = k.seconds.iter().find(|x| x.t_s == r.t_s) {
                r.steal_cores = traps::round(ks.allowed_steal, 2);
                r.noise_cores = traps::round(self.noise_in(ks) + ks.allowed_steal, 2);
            }
        }
    }

    /// The peers (`stack`) or the noise, busiest first, with their mean cores over the window.
    fn listed(&self, k: &Sampler, stack: bool, window_s: f64) -> Vec<ProcCpu> {
        processes(k, |p| self.stack.contains(&p) == stack, stack, window_s)
    }
}

/// The processes `pick` selects among those that ran on the target's CPUs, busiest first, with
/// their mean cores over the window (at most 10); `peers`: with their wakeups, and those that
/// woke the server without using its CPUs named too.
fn processes(k: &Sampler, pick: impl Fn(u32) -> bool, peers: bool, window_s: f64) -> Vec<ProcCpu> {
    let mut by_pid: BTreeMap<u32, f64> = BTreeMap::new();
    for ks in &k.seconds {
        for (p, c) in &ks.others {
            if pick(*p) {
                *by_pid.entry(*p).or_default() += c * ks.dt_s;
            }
        }
    }
    let (target, stack) = (k.wakeups.target_by_waker(), k.wakeups.stack_by_waker());
    let wakeups_of = |pid: u32| target.get(&pid).or_else(|| stack.get(&pid)).copied();
    let mut out: Vec<ProcCpu> = by_pid
        .into_iter()
        .map(|(pid, cs)| ProcCpu {
            pid,
            comm: k
                .others_window
                .get(&pid)
                .map(|(c, _)| escape::bytes(c))
                .unwrap_or_default(),
            cores: traps::round(cs / window_s.max(1e-9), 3),
            wakeups: peers.then(|| wakeups_of(pid)).flatten(),
            load_generator: false,
        })
        .filter(|p| p.cores > 0.0 || peers)
        .collect();
    if peers {
        // Peers that woke the server without using its CPUs are still named.
        for (pid, n) in target.iter().chain(&stack) {
            if pick(*pid) && !out.iter().any(|p| p.pid == *pid) {
                out.push(ProcCpu {
                    pid: *pid,
                    comm: std::fs::read(format!("/proc/{pid}/comm"))
                        .map(|c| escape::bytes(c.strip_suffix(b"\n").unwrap_or(&c)))
                        .unwrap_or_default(),
                    cores: 0.0,
                    wakeups: Some(*n),
                    load_generator: false,
                });
            }
        }
    }
    out.sort_by(|a, b| b.cores.total_cmp(&a.cores).then(a.pid.cmp(&b.pid)));
    out.truncate(10);
    out
}

/// The load side's seconds joined with the kernel's, each marked where its figures are
/// incomplete.
fn timeline(s: &LoadSide, k: &Sampler, mounts: &MountTable, attached: bool) -> Vec<RunSecond> {
    let mut seconds: Vec<RunSecond> = s.seconds.clone();
    let by_requests = served_by_requests(k);
    let workers = k.worker_mask();
    for ks in &k.seconds {
        let i = match seconds.iter().position(|r| r.t_s == ks.t_s) {
            Some(i) => i,
            None => {
                seconds.push(RunSecond {
                    t_s: ks.t_s,
                    ..Default::default()
                });
                seconds.len() - 1
            }
        };
        let r = &mut seconds[i];
        let dt = ks.dt_s.max(1e-3);
        r.served = Some(served_of(ks, by_requests));
        r.cores_busy = traps::round(ks.cores_busy, 2);
        r.target_cpus_busy = traps::round(ks.allowed_busy, 2);
        r.target_cores = traps::round(ks.on_cpu_s / dt, 2);
        r.charged_cores = Some(traps::round(ks.charged_cpu_s / dt, 2));
        r.run_queue = traps::round(ks.runq_s / dt, 2);
        for (c, v) in CLASS_NAMES.iter().zip(ks.off_s.iter()) {
            if *v > 0.0 {
                r.off_cpu.insert(c, traps::round(v / dt, 2));
            }
        }
        r.threads = ks.threads;
        r.busy_threads = ks.sampled.busy.ones();
        if ks.sampled.seen.ones() > 0 {
            let (seen, busy) = ks.sampled.in_pool(&workers);
            r.workers = Some(seen);
            r.busy_workers = Some(busy);
        }
        r.path_calls = (ks.path_calls as f64 / dt).round() as u64;
        for (d, n) in &ks.fuse_ops {
            r.fs_ops
                .insert(mount_name(mounts, *d), (*n as f64 / dt).round() as u64);
        }
        r.accept_queue = ks.accept_queue;
        r.stack_accept_queue = ks.stack_accept_queue;
        if let Some(t) = ks.throttle {
            r.throttled_periods = Some(t.nr_throttled);
            r.throttled_ms = Some(traps::round(t.throttled_us as f64 / 1e3, 1));
        }
        if ks.lost > 0 {
            r.marks.push("lost-events");
        }
        // The sample came late (the sampler starved of CPU): the second's figures are
        // rates over a longer span.
        if ks.dt_s > 1.5 {
            r.marks.push("late-sample");
        }
    }
    for r in &mut seconds {
        if attached && !k.seconds.iter().any(|ks| ks.t_s == r.t_s) {
            r.marks.push("no-kernel-data");
        }
    }
    seconds.sort_by_key(|r| r.t_s);
    seconds
}

/// The filesystems the threads waited on. Time: the kernel's path-class off-CPU time of this
/// window, shared out between mounts as the tracer's per-path attribution shares its path
/// syscall time (a blocked walk's filesystem needs the path string), plus file I/O blocked on
/// the mount's device. Operations: FUSE requests in the sampled seconds, per 2xx completed in
/// them (a request that timed out on the client or got a fast 502 is not a served request).
fn filesystems(
    k: &Sampler,
    report: &Report,
    mounts: &MountTable,
    pid: u32,
    path_off: f64,
    answered_window: u64,
    window_s: f64,
) -> Vec<FsLoad> {
    let mut serving = k.stack.serving_filesystems(&k.wakeups);
    // A FUSE daemon that woke the threads only from path walks (PHP's stats of its scripts,
    // a chdir: no device is known there) serves the one FUSE mount they walked, when there is
    // one: gocryptfs under php-fpm's docroot took 0.31 of 2 cores at its ceiling and the
    // verdict read "no trap".
    let fuse_devs: Vec<u32> = report
        .filesystems
        .iter()
        .filter(|row| row.fs_type.starts_with("fuse"))
        .filter_map(|row| row_dev(mounts, row))
        .collect();
    if let [dev] = fuse_devs[..] {
        for p in k.stack.fuse_daemons() {
            serving.entry(p).or_insert(dev);
        }
    }
    let requests = report.requests.as_ref().and_then(|q| q.count).unwrap_or(0) as f64;
    let row_s =
        |row: &crate::report::FsRow| row.syscall_ms_per_request.unwrap_or(0.0) * requests / 1e3;
    let all_rows_s: f64 = report.filesystems.iter().map(row_s).sum();
    let window_keys = k.window_keys();
    // The directory the server was started in and stays in (its root process's; PHP's
    // workers visit the docroot per request and come back).
    let start_mount = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .ok()
        .and_then(|c| {
            mounts.depth_below_mount(&crate::host::mounts::normalize(
                c.as_os_str().as_encoded_bytes(),
            ))
        })
        .map(|(m, _)| mounts.mounts[m].mount_point_display());
    report
        .filesystems
        .iter()
        .map(|row| {
            let dev = row_dev(mounts, row);
            let file_io = window_keys.iter().filter(|(key, _)| {
                key.class == trapdetect_common::offcpu::CLASS_FILE_IO && Some(key.dev) == dev
            });
            let file_io_s: f64 = file_io.clone().map(|(_, (ns, _))| *ns as f64 / 1e9).sum();
            // fstat/read/close on its files that blocked: operations too, when no FUSE count
            // says better.
            let file_io_waits: u64 = file_io.map(|(_, (_, n))| *n).sum();
            let share = if all_rows_s > 0.0 {
                row_s(row) / all_rows_s
            } else {
                0.0
            };
            let (ops, ops_kind, ops_per_s) =
                mount_ops(k, dev, row, (requests, answered_window), file_io_waits);
            FsLoad {
                mount: row.mount_point.clone(),
                fs_type: row.fs_type.clone(),
                slow: row.slow.map(|x| x.describe().to_string()),
                syscall_s: path_off * share + file_io_s,
                ops,
                ops_kind,
                ops_per_s,
                holds_start_cwd: start_mount.as_deref() == Some(row.mount_point.as_str()),
                serving: match dev {
                    Some(d) => processes(k, |p| serving.get(&p) == Some(&d), true, window_s),
                    None => vec![],
                },
                latency_by_ahead: row
                    .fuse_queue
                    .iter()
                    .map(|q| AheadLatency {
                        ahead: q.ahead,
                        count: q.count,
                        mean_us: q.mean_us,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The kernel's device number of the mount a report row is about.
fn row_dev(mounts: &MountTable, row: &crate::report::FsRow) -> Option<u32> {
    mounts
        .mounts
        .iter()
        .find(|m| m.mount_point_display() == row.mount_point)
        .map(|m| m.kernel_dev())
}

/// The operations on a mount over the window, what they count, and their rate each second.
/// FUSE requests where the kernel counts them (its tracepoint, Linux 6.13+). Elsewhere the path
/// lookups, known for the whole trace and scaled to the window (`requests` in the trace,
/// answered in the window), plus the file I/O on its files that blocked; their rate each
/// second estimated as the traced threads' path calls that second × those operations per
/// path call: the work done that second (also for requests whose client had given up, which
/// no 2xx count holds; a server's requests make the same calls), so whether the mount's rate
/// stayed flat while threads queued on it is known on every kernel, not only where FUSE is
/// counted.
fn mount_ops(
    k: &Sampler,
    dev: Option<u32>,
    row: &crate::report::FsRow,
    (requests, answered_window): (f64, u64),
    file_io_waits: u64,
) -> (u64, &'static str, Vec<u64>) {
    let counts: Vec<(u64, f64)> = match dev {
        Some(d) => k
            .seconds
            .iter()
            .map(|x| (x.fuse_ops.get(&d).copied().unwrap_or(0), x.dt_s.max(1e-3)))
            .collect(),
        None => vec![],
    };
    let fuse: u64 = counts.iter().map(|c| c.0).sum();
    if fuse > 0 {
        // Rates, not counts: the last second is partial.
        let per_s = counts
            .iter()
            .map(|(n, dt)| (*n as f64 / dt).round() as u64)
            .collect();
        return (fuse, "FUSE requests", per_s);
    }
    let kind = if file_io_waits > 0 {
        "lookups and blocked file I/O"
    } else {
        "lookups"
    };
    if requests <= 0.0 {
        return (file_io_waits, kind, vec![]);
    }
    let lookups = (row.lookups as f64 * answered_window as f64 / requests).round() as u64;
    let ops = lookups + file_io_waits;
    let calls: u64 = k.seconds.iter().map(|x| x.path_calls).sum();
    if calls == 0 {
        return (ops, kind, vec![]);
    }
    let per_call = ops as f64 / calls as f64;
    let per_s = k
        .seconds
        .iter()
        .map(|x| (x.path_calls as f64 * per_call / x.dt_s.max(1e-3)).round() as u64)
        .collect();
    (ops, kind, per_s)
}

/// The lock objects waited on: flock/fcntl locks by file, futexes together.
fn locks(k: &Sampler) -> Vec<LockLoad> {
    let mut locks: BTreeMap<String, LockLoad> = BTreeMap::new();
    for (key, (ns, count)) in k.window_keys() {
        let object = match key.class {
            CLASS_FILE_LOCK => match k.lock_names.get(&(key.dev, key.ino)) {
                Some(p) => escape::bytes(p),
                None => format!(
                    "inode {} on device {}:{} (closed before it could be named)",
                    key.ino,
                    key.dev >> 20,
                    key.dev & 0xfffff
                ),
            },
            CLASS_FUTEX => crate::traps::run::FUTEX_OBJECT.to_string(),
            _ => continue,
        };
        let e = locks.entry(object.clone()).or_insert(LockLoad {
            futex: key.class == CLASS_FUTEX,
            object,
            ..Default::default()
        });
        e.wait_s += ns as f64 / 1e9;
        e.waits += count;
    }
    locks.into_values().collect()
}

/// The target's cgroup CPU quota and its throttling over the window.
fn quota_obs(k: &Sampler) -> Option<QuotaObs> {
    k.quota.as_ref().map(|q| {
        let mut o = QuotaObs {
            version: match q.version {
                crate::host::cpu::CgroupVersion::V1 => "v1",
                crate::host::cpu::CgroupVersion::V2 => "v2",
            },
            dir: escape::text(&q.level.dir),
            quota_us: q.level.quota_us,
            period_us: q.level.period_us,
            ..Default::default()
        };
        for t in k.seconds.iter().filter_map(|x| x.throttle) {
            o.nr_periods += t.nr_periods;
            o.nr_throttled += t.nr_throttled;
            o.throttled_us += t.throttled_us;
        }
        o
    })
}

/// `run.classes_method`: `exact`, `syscall-entry`, `sampled` or `unknown`.
pub fn method_name(method: u32) -> &'static str {
    if method == METHOD_SAMPLED {
        return super::section::METHOD_SAMPLED;
    }
    trapdetect_common::offcpu::METHOD_NAMES
        .get(method as usize)
        .copied()
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answered_requests_are_those_of_the_span_the_kernel_covered() {
        // Recorded in the 6.1 guest (php-fpm on a 20 ms flock, 6 s offered): the sampler's
        // last row ended 0.06 s into second 6, whose 47 answers are the drain.
        let seconds: Vec<RunSecond> = [41, 48, 48, 46, 46, 47, 47, 44]
            .iter()
            .enumerate()
            .map(|(t, n)| RunSecond {
                t_s: t as u64,
                ok_2xx: *n,
                ..Default::default()
            })
            .collect();
        // 276 in the six whole seconds, 2.82 of the seventh.
        assert_eq!(answered_within(&seconds, 6.06), 279);
        assert_eq!(answered_within(&seconds, 6.0), 276);
        assert_eq!(answered_within(&seconds, 2.5), 41 + 48 + 24);
        assert_eq!(answered_within(&seconds, 0.0), 0);
        // A span longer than the generator's seconds takes them all.
        assert_eq!(answered_within(&seconds, 20.0), 367);
    }
    use crate::trace::seconds::KernelSecond;

    /// Pinned workers did the run's work on CPU 1; the short last interval, where the idle
    /// master's one tick passed for work, read both CPUs: the run's set is the workers'.
    #[test]
    fn the_cpus_are_those_under_which_most_work_was_done() {
        let sec = |cpus: &[u32], charged: f64| KernelSecond {
            allowed_cpus: cpus.to_vec(),
            charged_cpu_s: charged,
            ..Default::default()
        };
        let run = [
            sec(&[1], 0.97),
            sec(&[1], 0.99),
            sec(&[1], 0.98),
            sec(&[], 0.0),
            sec(&[0, 1], 0.02),
        ];
        assert_eq!(allowed_cpus(&run), vec![1]);
        // A set that carried more of the work wins wherever it stands; on a tie, the later.
        assert_eq!(
            allowed_cpus(&[sec(&[0], 0.5), sec(&[0, 1], 1.5)]),
            vec![0, 1]
        );
        assert_eq!(allowed_cpus(&[sec(&[0], 1.0), sec(&[1], 1.0)]), vec![1]);
        assert_eq!(allowed_cpus(&[sec(&[], 1.0)]), Vec::<u32>::new());
    }
}
