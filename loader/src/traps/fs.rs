//! Filesystem traps seen in traced path lookups: fs.cwd-slow (the server's working directory
//! is on a slow or remote filesystem and requests walk it) and fs.hot-path-slow (requests look
//! up other paths on such filesystems).

use serde_json::json;

use super::{Finding, Id, Severity, round};
use crate::{
    escape,
    host::mounts::{Mount, MountTable, is_prefix},
};

/// How a call's walk started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// An absolute path, walked from the root.
    Absolute,
    /// A relative path, walked from the working directory.
    Cwd,
    /// Relative to a directory file descriptor.
    Dirfd,
    /// No path walked (getcwd, fchdir, AT_EMPTY_PATH).
    None,
}

impl Base {
    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            Base::Absolute => "absolute",
            Base::Cwd => "cwd",
            Base::Dirfd => "dirfd",
            Base::None => "none",
        }
    }
}

/// All calls of one path key, resolved against the mount table.
#[derive(Clone, Debug)]
pub struct CallObs {
    /// Syscall name.
    pub syscall: &'static str,
    /// The path: normalized when absolute, as given when relative; `None` when unknown.
    pub path: Option<Vec<u8>>,
    /// How the walk started.
    pub base: Base,
    /// `AT_SYMLINK_NOFOLLOW` was set (`newfstatat` as `lstat`).
    pub nofollow: bool,
    /// Mount holding the object the call names.
    pub target: Option<usize>,
    /// Lookups one call makes, per mount index.
    pub walk: Vec<(usize, u32)>,
    /// Completed calls.
    pub count: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Summed latency, ns.
    pub sum_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// log2 latency histogram.
    pub hist: Vec<u64>,
}

impl CallObs {
    /// Lookups one call makes on mount `m`.
    pub fn lookups_on(&self, m: usize) -> u32 {
        self.walk
            .iter()
            .filter(|(i, _)| *i == m)
            .map(|(_, n)| n)
            .sum()
    }
}

/// A working directory of traced processes.
#[derive(Clone, Debug)]
pub struct CwdObs {
    /// Normalized absolute path (untrusted bytes).
    pub path: Vec<u8>,
    /// Processes sitting in it.
    pub processes: usize,
    /// Requests visit it (the traced processes chdir into it and the server was not started
    /// there: PHP's docroot): walks of it are the code's hot path, not a working-directory
    /// trap, and the remedy is to move the code, not the start directory.
    pub visited: bool,
}

/// FUSE requests measured at the fuse tracepoint.
#[derive(Clone, Debug)]
pub struct FuseObs {
    /// Mount of the connection, if found.
    pub mount: Option<usize>,
    /// Opcode name.
    pub opcode: &'static str,
    /// Requests.
    pub count: u64,
    /// Of those, sent from inside a traced path syscall (whose time the tracer measures).
    pub in_path_calls: u64,
}

/// What the trace saw, for the filesystem rules.
#[derive(Clone, Debug, Default)]
pub struct FsObservation {
    /// The target's mount table.
    pub mounts: MountTable,
    /// Calls by path key.
    pub calls: Vec<CallObs>,
    /// Working directories of the traced processes.
    pub cwds: Vec<CwdObs>,
    /// Requests in the window (`None`: per-second figures).
    pub requests: Option<u64>,
    /// Window, seconds.
    pub window_s: f64,
    /// FUSE requests by mount and opcode.
    pub fuse: Vec<FuseObs>,
    /// The fuse tracepoint was attached: an empty `fuse` means no FUSE request at all.
    pub fuse_measured: bool,
    /// The target's command line, to write the remedy (untrusted bytes).
    pub cmdline: Vec<Vec<u8>>,
    /// The target's executable (untrusted bytes).
    pub exe: Option<Vec<u8>>,
    /// What the traced processes spent in the window, to weigh a filesystem's cost against.
    pub work: Work,
}

/// The traced processes' own work in the window: the reference a filesystem's cost is weighed
/// against (docs/trace.md, "When a slow filesystem fails").
#[derive(Clone, Copy, Debug, Default)]
pub struct Work {
    /// On-CPU time of the traced processes' threads in the window, ns (`None`: unreadable).
    pub cpu_ns: Option<u64>,
    /// Threads of the traced processes.
    pub threads: usize,
    /// CPUs online.
    pub cpus: usize,
    /// Mean time the probe load's requests took, from first byte written to last byte read,
    /// ms (`None`: no probe load).
    pub request_ms: Option<f64>,
}

/// Share of the window a serialized filesystem may be busy before the load is called close
/// to its ceiling: at utilization ρ a single server queues ρ/(1−ρ) services per arrival
/// (M/M/1), so from ρ = 0.5 on the wait for it is as long as the work itself and doubling the
/// load (the next point of a sweep) saturates it.
pub const BUSY_LIMIT: f64 = 0.5;

/// Largest share of request time a slow mount may take with its walks before it fails, when
/// it does not serialize: a worker's throughput is 1 ÷ request time, so removing a share s
/// speeds it up by s ÷ (1 − s); at 10 % that is 11 %, more than twice the run-to-run
/// difference benchmarks treat as noise (the issue's two runs, ext4 vs cached FUSE: 4 %).
pub const SHARE_LIMIT: f64 = 0.1;

/// Share of request time (or of the window, busy if serialized) below which a slow mount's
/// measured cost is negligible: removing it would speed a worker by 1 %, a quarter of the 4 %
/// run-to-run difference benchmarks treat as noise. It decides only where nothing is latent:
/// every lookup reached the filesystem, so no cache hides a larger cost ([`uncached`]).
pub const NEGLIGIBLE_SHARE: f64 = 0.01;
/// Lookups per request on a mount below which the requests do not walk it (a path walked on
/// the request path makes one or more per request; a server's own metadata cache refreshing
/// makes a few a second, whatever the rate).
pub const RARE_WALKS_PER_REQUEST: f64 = 0.01;

/// Calls of one path key needed before their latency is a baseline for a local lookup
/// ([`FsObservation::native_ns_per_lookup`]): a median of ten.
pub const NATIVE_MIN_CALLS: u64 = 10;

impl FsObservation {
    /// What one lookup costs on the local filesystems in this trace: the latency of calls whose
    /// walks cross no slow mount, over their lookups (0 when there are none). Only calls made
    /// [`NATIVE_MIN_CALLS`] times or more count, each at its median: a call made once is a
    /// sample of whatever delayed it (one `openat` of /sys/devices/system/cpu/online by Go's
    /// runtime waited 8 ms for a CPU under a flood, set the baseline at 1.6 ms a lookup and hid a
    /// bindfs working directory that halved the server's capacity: "0 % of request time").
    pub fn native_ns_per_lookup(&self) -> f64 {
        let (mut ns, mut lookups) = (0.0, 0u64);
        for c in &self.calls {
            let local = !c.walk.is_empty()
                && c.walk
                    .iter()
                    .all(|(m, _)| self.mounts.mounts[*m].slow_kind().is_none());
            if local && c.count >= NATIVE_MIN_CALLS {
                let each = if c.hist.iter().any(|n| *n > 0) {
                    crate::figures::percentile_us(&c.hist, 0.5, c.max_ns) * 1e3
                } else {
                    c.sum_ns as f64 / c.count as f64
                };
                ns += each * c.count as f64;
                lookups += c.count * c.walk.iter().map(|(_, n)| *n as u64).sum::<u64>();
            }
        }
        if lookups == 0 {
            0.0
        } else {
            ns / lookups as f64
        }
    }

    /// Divides by requests, or by seconds when there is no request basis.
    fn per(&self, v: f64) -> f64 {
        match self.requests {
            Some(r) if r > 0 => v / r as f64,
            _ if self.window_s > 0.0 => v / self.window_s,
            _ => 0.0,
        }
    }

    /// Unit suffix for evidence keys.
    fn unit(&self) -> &'static str {
        match self.requests {
            Some(r) if r > 0 => "per_request",
            _ => "per_second",
        }
    }
}

/// A filesystem's measured cost weighed against the traced processes' own work.
struct Weight {
    /// Excess walk time ÷ (walk time + CPU time): the share of a request's time the mount
    /// adds over what the same lookups cost on the local filesystems.
    share: Option<f64>,
    /// min(1 ÷ parallelism, [`SHARE_LIMIT`]): above 1 ÷ parallelism a serializing mount caps
    /// throughput before the workers do.
    share_limit: f64,
    /// What one lookup costs on the local filesystems in this trace, ns.
    native_ns_per_lookup: f64,
    /// Walk time beyond that, ns.
    excess_ns: f64,
    /// Workers that can run at once: min(threads, CPUs).
    parallel: usize,
    /// Walk time ÷ window: how busy the mount would be if it served one call at a time.
    busy: f64,
    /// The cost is material: `fail`.
    material: bool,
}

/// Whether the walks of a slow filesystem (`walk_ns` over `lookups`) are material. Their cost
/// is what they take beyond the same number of lookups on the local filesystems of this trace
/// (a lookup the kernel answers from its cache costs the same on FUSE as on ext4). A
/// filesystem that serializes (DrvFs, a single-threaded FUSE daemon) serves at most
/// 1 ÷ (that cost per request) requests per second; `parallel` workers serve at most
/// parallel ÷ (request time): the mount caps throughput first when its share of request time
/// exceeds 1 ÷ parallel. Without serialization it still slows every request by its share
/// ([`SHARE_LIMIT`]). A load that keeps it busy half the window is already queueing for it
/// ([`BUSY_LIMIT`]). None of these needs the request count: all are ratios of totals over the
/// same window.
fn weigh(obs: &FsObservation, cost: &Cost) -> Weight {
    let parallel = obs.work.threads.min(obs.work.cpus).max(1);
    let share_limit = (1.0 / parallel as f64).min(SHARE_LIMIT);
    let native_ns_per_lookup = obs.native_ns_per_lookup();
    let walk_ns = cost.typical_ns();
    let excess_ns = (walk_ns - cost.lookups as f64 * native_ns_per_lookup).max(0.0);
    let share = share_of_requests(obs, excess_ns, walk_ns);
    let busy = if obs.window_s > 0.0 {
        excess_ns / (obs.window_s * 1e9)
    } else {
        0.0
    };
    let material = share.is_some_and(|s| s >= share_limit) || busy >= BUSY_LIMIT;
    Weight {
        share,
        share_limit,
        native_ns_per_lookup,
        excess_ns,
        parallel,
        busy,
        material,
    }
}

/// `excess_ns` of walk time (of `walk_ns` in all) as a share of the requests' time: against the
/// time the probe load measured for them, else the traced threads' CPU time plus the walk.
fn share_of_requests(obs: &FsObservation, excess_ns: f64, walk_ns: f64) -> Option<f64> {
    match (obs.work.request_ms, obs.requests) {
        (Some(ms), Some(r)) if ms > 0.0 && r > 0 => {
            Some((excess_ns / r as f64 / 1e6 / ms).min(1.0))
        }
        _ => obs.work.cpu_ns.and_then(|c| {
            let total = c as f64 + walk_ns;
            (total > 0.0).then(|| excess_ns / total)
        }),
    }
}

fn pct(v: f64) -> String {
    if v < 0.1 {
        format!("{} %", round(v * 100.0, 1))
    } else {
        format!("{} %", round(v * 100.0, 0))
    }
}

impl Weight {
    /// "N % of request time (fails from M % with P workers)".
    fn describe(&self) -> String {
        match self.share {
            Some(s) => format!(
                "{} of request time (fails from {} with {} worker(s) at once)",
                pct(s),
                pct(self.share_limit),
                self.parallel
            ),
            None => format!(
                "the mount busy {} of the window if it serializes (fails from {})",
                pct(self.busy),
                pct(BUSY_LIMIT)
            ),
        }
    }

    /// The measured cost is below [`NEGLIGIBLE_SHARE`] of request time (of the window when the
    /// request time is unknown).
    fn negligible(&self) -> bool {
        self.share.unwrap_or(self.busy) < NEGLIGIBLE_SHARE
    }

    fn evidence(&self, f: Finding, obs: &FsObservation) -> Finding {
        f.with_opt("share_of_request_time", self.share.map(|s| round(s, 4)))
            .with("native_ns_per_lookup", round(self.native_ns_per_lookup, 0))
            .with(
                &format!("excess_ms_{}", obs.unit()),
                round(obs.per(self.excess_ns) / 1e6, 4),
            )
            .with_opt(
                "cpu_ms_in_window",
                obs.work.cpu_ns.map(|c| round(c as f64 / 1e6, 3)),
            )
            .with_opt(
                "request_ms",
                obs.work.request_ms.map(|m| round(m, 3)),
            )
            .with("share_limit", round(self.share_limit, 4))
            .with("parallel_workers", self.parallel as u64)
            .with("busy_share_if_serialized", round(self.busy, 4))
            .with("busy_limit", BUSY_LIMIT)
            .with(
                "cost_basis",
                "time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized",
            )
    }
}

/// Every lookup the traced calls made on mount `m` reached the filesystem: the FUSE tracepoint
/// counted at least as many LOOKUP requests there as the calls' path components below it, so
/// the kernel's cache answered none and the cost measured is already the uncached one (a
/// server that caches file metadata itself, as lighttpd's stat cache does, looks up a path
/// once a second, not per request). Returns (lookups, LOOKUP requests); None where the FUSE
/// requests were not counted or the cache answered some.
fn uncached(obs: &FsObservation, m: usize) -> Option<(u64, u64)> {
    if !obs.fuse_measured {
        return None;
    }
    let lookups: u64 = obs
        .calls
        .iter()
        .map(|c| c.count * c.lookups_on(m) as u64)
        .sum();
    let reached = fuse_count(obs, m, Some("LOOKUP"));
    (lookups > 0 && reached >= lookups).then_some((lookups, reached))
}

/// FUSE requests counted on mount `m`: of one opcode, or of every opcode (`None`).
fn fuse_count(obs: &FsObservation, m: usize, opcode: Option<&str>) -> u64 {
    obs.fuse
        .iter()
        .filter(|f| f.mount == Some(m) && opcode.is_none_or(|o| f.opcode == o))
        .map(|f| f.count)
        .sum()
}

/// Where the finding is information: not material, and under [`NEGLIGIBLE_SHARE`] with every
/// lookup reached the filesystem ([`uncached`]) or even were every lookup a round trip
/// ([`worst_if_uncached`]); the words that say so.
fn negligible(obs: &FsObservation, m: usize, cost: &Cost, w: &Weight) -> Option<String> {
    if w.material {
        return None;
    }
    // The requests do not walk it: fewer than one in a hundred did. A server that caches file
    // metadata itself walks the mount when its cache refreshes, whatever the rate (lighttpd's
    // stat cache on a gocryptfs docroot: 24 lookups in 15,000 requests, about five a second),
    // so no expiry of the kernel's cache adds walks to the requests, and what it costs is
    // that refresh, not a request's (it read "cheaply now: 1 % of request time", warn, when
    // those 24 lookups took twice their usual time).
    if let Some(r) = obs.requests.filter(|&r| r > 0)
        && (cost.lookups as f64) < RARE_WALKS_PER_REQUEST * r as f64
    {
        return Some(format!(
            "{}; {}; negligible: fewer than one request in {:.0} walks it ({} lookups in {} requests), so the server does not walk it per request (a cache of its own) and no expiry of the kernel's cache makes it the requests' cost",
            w.describe(),
            cheap_because(obs, m, cost),
            1.0 / RARE_WALKS_PER_REQUEST,
            cost.lookups,
            r
        ));
    }
    if w.negligible() && uncached(obs, m).is_some() {
        return Some(format!(
            "{}; {}; negligible (under {})",
            w.describe(),
            cheap_because(obs, m, cost),
            pct(NEGLIGIBLE_SHARE)
        ));
    }
    let worst = worst_if_uncached(obs, m, cost).filter(|&s| s < NEGLIGIBLE_SHARE)?;
    Some(format!(
        "{}; {}; negligible even so: were every one a round trip, {} of request time (under {})",
        w.describe(),
        cheap_because(obs, m, cost),
        pct(worst),
        pct(NEGLIGIBLE_SHARE)
    ))
}

/// The share of the requests' time the walks on mount `m` would take if every lookup the
/// kernel's cache answered had reached the filesystem as the others did: the walk time scaled
/// by the mount's lookups ÷ its LOOKUP requests (each of those is charged all the walk time measured, the
/// cached lookups none: an upper bound), none of it left out as native. `None` where the FUSE
/// requests were not counted or none reached the filesystem (no round trip to scale by). A
/// server that caches file metadata itself (lighttpd's stat cache: 25 lookups in 50,000
/// requests on a gocryptfs docroot, 10 of them LOOKUP requests) walks the mount so rarely that
/// no cache expiry can make it matter.
fn worst_if_uncached(obs: &FsObservation, m: usize, cost: &Cost) -> Option<f64> {
    if !obs.fuse_measured || cost.lookups == 0 {
        return None;
    }
    // The mount's: the LOOKUP requests are counted per mount, not per call.
    let lookups: u64 = obs
        .calls
        .iter()
        .map(|c| c.count * c.lookups_on(m) as u64)
        .sum();
    let reached = fuse_count(obs, m, Some("LOOKUP"));
    if reached == 0 {
        return None;
    }
    let scale = (lookups as f64 / reached as f64).max(1.0);
    let worst_ns = cost.sum_ns as f64 * scale;
    share_of_requests(obs, worst_ns, worst_ns)
}

/// Why a walked mount that is cheap now can become expensive, with what shows it is cached;
/// or, where every lookup reached the filesystem, that nothing is hidden.
fn cheap_because(obs: &FsObservation, m: usize, cost: &Cost) -> String {
    if let Some((lookups, reached)) = uncached(obs, m) {
        return format!(
            "every lookup reached the filesystem ({reached} requests for {lookups} lookups): no cache answered them, so none hides a larger cost"
        );
    }
    let fuse_lookups = obs
        .fuse_measured
        .then(|| fuse_count(obs, m, Some("LOOKUP")));
    let now = match fuse_lookups {
        Some(n) if cost.lookups > 0 => format!(
            "the kernel answered {} of its {} lookups from its cache ({} reached the filesystem)",
            pct(1.0 - (n as f64 / cost.lookups as f64).min(1.0)),
            cost.lookups,
            n
        ),
        _ if cost.lookups > 0 => format!(
            "{} µs per lookup",
            round(cost.sum_ns as f64 / cost.lookups as f64 / 1000.0, 2)
        ),
        _ => "no lookups".into(),
    };
    format!(
        "{now}; when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip"
    )
}

/// Everything the traced processes asked of one mount over the window, beyond the walks one
/// rule looks at: the time of every traced path call that crossed it and, where the FUSE
/// tracepoint counted them, the requests of every opcode, with those sent from inside a timed
/// path call apart. A request's cost on the mount is its walks plus its file I/O there (the
/// open, fstat, reads and release of a template: 9 FUSE requests, of which the walk is 2 to 4),
/// and only the walks are timed: the rest is the timed part scaled by all requests over the
/// timed ones (the same cost per request of the filesystem, which holds for a daemon that takes
/// one lock per operation and is an estimate otherwise).
#[derive(Clone, Copy, Debug, Default)]
struct MountLoad {
    /// Time in traced path calls whose walk crossed the mount, ns.
    timed_ns: f64,
    /// FUSE requests of every opcode on it.
    fuse_all: u64,
    /// Of those, sent from inside a timed path call.
    fuse_timed: u64,
}

impl MountLoad {
    fn of(obs: &FsObservation, m: usize) -> MountLoad {
        let timed_ns = obs
            .calls
            .iter()
            .filter(|c| c.lookups_on(m) > 0)
            .map(|c| c.sum_ns as f64)
            .sum();
        let (mut fuse_all, mut fuse_timed) = (0, 0);
        for f in obs.fuse.iter().filter(|f| f.mount == Some(m)) {
            fuse_all += f.count;
            fuse_timed += f.in_path_calls;
        }
        MountLoad {
            timed_ns,
            fuse_all,
            fuse_timed,
        }
    }

    /// All operations on the mount over the timed ones (1 when only the walks are known).
    fn scale(&self) -> f64 {
        if self.fuse_timed > 0 && self.fuse_all > self.fuse_timed {
            self.fuse_all as f64 / self.fuse_timed as f64
        } else {
            1.0
        }
    }

    /// What the cost counts.
    fn basis(&self) -> &'static str {
        if self.fuse_timed > 0 {
            "path walks and the file I/O on the mount (FUSE requests of every opcode: the timed walks scaled by all requests over the walks' own)"
        } else {
            "path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)"
        }
    }

    /// Mean threads in operations on the mount over the window (Little's law: their time ÷
    /// the window).
    fn waiters(&self, window_s: f64) -> f64 {
        if window_s > 0.0 {
            self.timed_ns * self.scale() / (window_s * 1e9)
        } else {
            0.0
        }
    }

    /// The requests per second the mount sustains if it serializes its operations: with a
    /// thread waiting on it on average or more it is busy all the time, and the rate it served
    /// is its capacity; below that, a request's whole cost there is its service time (the
    /// walk's time per request includes the wait behind other threads only when they queue).
    fn ceiling_if_serialized(&self, obs: &FsObservation) -> Option<f64> {
        let requests = obs.requests.filter(|r| *r > 0)? as f64;
        let rate = requests / obs.window_s.max(1e-9);
        let l = self.waiters(obs.window_s);
        (l > 0.0).then(|| rate / l.min(1.0))
    }
}

/// Aggregated cost of a set of calls on one mount.
#[derive(Default)]
struct Cost {
    calls: u64,
    lookups: u64,
    sum_ns: u64,
    max_ns: u64,
    hist: Vec<u64>,
    by_syscall: Vec<(&'static str, u64)>,
}

impl Cost {
    /// The walks' time for deciding: the 90th-percentile walk × walks, capped by the measured
    /// total, so the few walks that wait for a cache refresh, or whose thread the scheduler
    /// preempted on a busy machine, do not decide alone.
    fn typical_ns(&self) -> f64 {
        if self.calls == 0 || self.hist.iter().all(|&n| n == 0) {
            return self.sum_ns as f64;
        }
        let p90 = crate::figures::latency(&self.hist, self.calls, self.sum_ns, self.max_ns).p90_us;
        (p90 * 1000.0 * self.calls as f64).min(self.sum_ns as f64)
    }

    fn add(&mut self, c: &CallObs, lookups: u32) {
        self.calls += c.count;
        self.lookups += c.count * lookups as u64;
        self.sum_ns += c.sum_ns;
        self.max_ns = self.max_ns.max(c.max_ns);
        crate::figures::merge_hist(&mut self.hist, &c.hist);
        match self.by_syscall.iter_mut().find(|(s, _)| *s == c.syscall) {
            Some((_, n)) => *n += c.count,
            None => self.by_syscall.push((c.syscall, c.count)),
        }
    }
}

/// The command that restarts a server from `native_dir`, for remedies (trace and preflight).
/// It execs the executable by its absolute path (argv[0] may be relative to the directory being
/// left), with the arguments when argv[0] still names it; a process that rewrote its title
/// (php-fpm shows "php-fpm: master process (...)") gets `<its arguments>`.
pub fn restart_command(native_dir: Option<&str>, exe: Option<&[u8]>, argv: &[Vec<u8>]) -> String {
    let dir = native_dir
        .map(escape::shell)
        .unwrap_or_else(|| "<native dir>".into());
    let shell = |a: &[u8]| escape::shell(&escape::bytes(a));
    let base = |p: &[u8]| p.rsplit(|&b| b == b'/').next().unwrap_or(p).to_vec();
    let mut words = vec![];
    match (exe, argv.first()) {
        (Some(e), Some(a0)) if base(e) == base(a0) => {
            words.push(shell(e));
            words.extend(argv[1..].iter().map(|a| shell(a)));
        }
        (Some(e), _) => words.extend([shell(e), "<its arguments>".into()]),
        (None, Some(_)) => words.extend(argv.iter().map(|a| shell(a))),
        (None, None) => words.extend(["<server>".into(), "<its arguments>".into()]),
    }
    format!("( cd {dir} && exec {} )", words.join(" "))
}

/// What the traced processes asked of the mount in all (the rules' ceiling basis).
fn mount_load_evidence(f: Finding, obs: &FsObservation, load: &MountLoad) -> Finding {
    f.with(
        &format!("mount_ms_{}", obs.unit()),
        round(obs.per(load.timed_ns * load.scale()) / 1e6, 4),
    )
    .with_opt(
        &format!("fuse_requests_all_{}", obs.unit()),
        (load.fuse_all > 0).then(|| round(obs.per(load.fuse_all as f64), 3)),
    )
    .with("mount_waiters", round(load.waiters(obs.window_s), 3))
    .with("mount_cost_basis", load.basis())
}

/// What every filesystem finding says about the mount, with the same keys in trace and
/// preflight.
pub fn mount_evidence(f: Finding, m: &Mount) -> Finding {
    f.with("fs_type", escape::text(&m.fs_type))
        .with("slow_because", json!(m.slow_kind()))
        .with("drvfs", m.is_drvfs())
        .with("mount_point", m.mount_point_display())
        .with("mount_source", escape::bytes(&m.source))
        .with("mount_options", escape::text(&m.options_summary()))
}

fn remedy_start_elsewhere(obs: &FsObservation) -> String {
    let cmd = restart_command(None, obs.exe.as_deref(), &obs.cmdline);
    format!(
        "start the server from a directory on a local filesystem: {cmd}; \
         in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"
    )
}

/// Runs both rules.
pub fn rules(obs: &FsObservation) -> Vec<Finding> {
    let mut out = cwd_slow(obs);
    out.extend(hot_path_slow(obs));
    out
}

/// Whether a call is part of walking the working directory `cwd` on mount `m`: an absolute
/// path on that mount that is the cwd or one of its ancestors (NTS PHP's chdir back; a ZTS
/// build's lstat of every component), or a relative path walked from a working directory on
/// that mount (it starts at the cwd: a walk of the cwd's filesystem). Relative walks go to the
/// first working directory on the mount (most processes), so none is counted twice.
fn walks_cwd(obs: &FsObservation, c: &CallObs, m: usize, cwd: &[u8]) -> bool {
    let mp = &obs.mounts.mounts[m].mount_point;
    match (&c.path, c.base) {
        (Some(p), Base::Absolute) => is_prefix(mp, p) && is_prefix(p, cwd) && c.lookups_on(m) > 0,
        (Some(_), Base::Cwd) => {
            c.lookups_on(m) > 0
                && obs
                    .cwds
                    .iter()
                    .filter(|w| !w.visited)
                    .find(|w| obs.mounts.depth_below_mount(&w.path).map(|(i, _)| i) == Some(m))
                    .is_some_and(|w| w.path == cwd)
        }
        _ => false,
    }
}

/// FUSE requests of every opcode on mount `m`, per request (per second without requests);
/// `None` where none were counted.
fn fuse_requests_per(obs: &FsObservation, m: usize) -> Option<f64> {
    let n = fuse_count(obs, m, None);
    (n > 0).then(|| obs.per(n as f64))
}

/// "chdir:1 openat:0.5": the walks' syscalls, per request (per second without requests).
fn walk_syscalls(obs: &FsObservation, cost: &Cost) -> String {
    cost.by_syscall
        .iter()
        .map(|(s, n)| format!("{s}:{}", round(obs.per(*n as f64), 2)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// fs.cwd-slow.
pub fn cwd_slow(obs: &FsObservation) -> Vec<Finding> {
    let mut out = vec![];
    let unit = obs.unit();
    // A directory requests visit is not where the server was started: its walks are hot paths.
    for cwd in obs.cwds.iter().filter(|c| !c.visited) {
        let Some((m, depth)) = obs.mounts.depth_below_mount(&cwd.path) else {
            continue;
        };
        let mount = &obs.mounts.mounts[m];
        let Some(kind) = mount.slow_kind() else {
            continue;
        };
        let mut cost = Cost::default();
        for c in obs.calls.iter().filter(|c| walks_cwd(obs, c, m, &cwd.path)) {
            cost.add(c, c.lookups_on(m));
        }
        let lookups_per = obs.per(cost.lookups as f64);
        let calls_per = obs.per(cost.calls as f64);
        let ms_per = obs.per(cost.sum_ns as f64) / 1e6;
        let fuse_per = fuse_requests_per(obs, m);
        let w = weigh(obs, &cost);
        let per_unit = unit.replace('_', " ");
        let (severity, title) = if cost.lookups == 0 {
            (
                Severity::Warn,
                format!(
                    "working directory is on {} but no traced call walked it during the trace; any relative path, \
                     or a PHP chdir back to it, would cost a round trip per component when not cached",
                    kind.describe()
                ),
            )
        } else if w.material {
            (
                Severity::Fail,
                format!(
                    "working directory is on {}: {} lookups {per_unit} walk it, {} ms {per_unit}, {}",
                    kind.describe(),
                    round(lookups_per, 1),
                    round(ms_per, 3),
                    w.describe()
                ),
            )
        } else if let Some(verdict) = negligible(obs, m, &cost, &w) {
            (
                Severity::Info,
                format!(
                    "working directory is on {} and requests walk it ({} lookups {per_unit}): {} ms {per_unit}, {verdict}",
                    kind.describe(),
                    round(lookups_per, 2),
                    round(ms_per, 3),
                ),
            )
        } else {
            (
                Severity::Warn,
                format!(
                    "working directory is on {} and requests walk it ({} lookups {per_unit}), cheaply now: {} ms {per_unit}, {}; {}",
                    kind.describe(),
                    round(lookups_per, 2),
                    round(ms_per, 3),
                    w.describe(),
                    cheap_because(obs, m, &cost)
                ),
            )
        };
        let f = Finding::new(Id::FsCwdSlow, severity, title)
            .with("cwd", escape::bytes(&cwd.path))
            .with("processes_in_cwd", cwd.processes);
        let mut f = mount_evidence(f, mount)
            .with("cwd_depth_below_mount", depth)
            .with(&format!("lookups_{unit}"), round(lookups_per, 3))
            .with(&format!("walk_syscalls_{unit}"), round(calls_per, 3))
            .with("walk_syscalls", walk_syscalls(obs, &cost))
            .with(&format!("walk_ms_{unit}"), round(ms_per, 4));
        f = w.evidence(f, obs);
        f = walk_latency_evidence(f, &cost);
        f = f.with_opt(
            &format!("fuse_requests_{unit}"),
            fuse_per.map(|v| round(v, 3)),
        );
        f = f.with(
            "lookups_basis",
            "path strings resolved against the target's mount table; one lookup per path component",
        );
        let load = MountLoad::of(obs, m);
        f = mount_load_evidence(f, obs, &load);
        f = cwd_ceiling(f, obs, mount, &load, ms_per);
        out.push(f.remedy(remedy_start_elsewhere(obs)));
    }
    out
}

/// fs.hot-path-slow: lookups on slow filesystems other than walks of the working directory.
pub fn hot_path_slow(obs: &FsObservation) -> Vec<Finding> {
    let mut out = vec![];
    let unit = obs.unit();
    for (m, mount) in obs.mounts.mounts.iter().enumerate() {
        let Some(kind) = mount.slow_kind() else {
            continue;
        };
        let mut cost = Cost::default();
        let mut top: Vec<(&CallObs, u64)> = vec![];
        for c in &obs.calls {
            let l = c.lookups_on(m);
            if l == 0 {
                continue;
            }
            if obs
                .cwds
                .iter()
                .any(|cwd| !cwd.visited && walks_cwd(obs, c, m, &cwd.path))
            {
                continue;
            }
            cost.add(c, l);
            top.push((c, c.count * l as u64));
        }
        if cost.lookups == 0 {
            continue;
        }
        top.sort_by_key(|t| std::cmp::Reverse(t.1));
        let lookups_per = obs.per(cost.lookups as f64);
        let ms_per = obs.per(cost.sum_ns as f64) / 1e6;
        let w = weigh(obs, &cost);
        let negligible = negligible(obs, m, &cost, &w);
        let severity = if w.material {
            Severity::Fail
        } else if negligible.is_some() {
            Severity::Info
        } else {
            Severity::Warn
        };
        let verdict = if w.material {
            w.describe()
        } else if let Some(v) = negligible {
            v
        } else {
            format!(
                "cheaply now: {}; {}",
                w.describe(),
                cheap_because(obs, m, &cost)
            )
        };
        let paths = top_paths(obs, &top, unit);
        let f = mount_evidence(
            Finding::new(
                Id::FsHotPathSlow,
                severity,
                format!(
                    "requests look up paths on {} at {}: {} lookups {}, {} ms {}, {verdict}",
                    kind.describe(),
                    mount.mount_point_display(),
                    round(lookups_per, 2),
                    unit.replace('_', " "),
                    round(ms_per, 3),
                    unit.replace('_', " ")
                ),
            ),
            mount,
        )
        .with(&format!("lookups_{unit}"), round(lookups_per, 3))
        .with(
            &format!("syscalls_{unit}"),
            round(obs.per(cost.calls as f64), 3),
        )
        .with(&format!("syscall_ms_{unit}"), round(ms_per, 4))
        .with("top_paths", paths.join("; "));
        let load = MountLoad::of(obs, m);
        let f = mount_load_evidence(w.evidence(f, obs), obs, &load)
            .with_opt(
                "predicted_ceiling_rps_if_serialized",
                load.ceiling_if_serialized(obs)
                    .filter(|_| ms_per > 0.0)
                    .map(|c| round(c, 0)),
            )
            .remedy(format!(
            "move what requests read (docroot, includes, sessions, databases, logs) from {} to a local \
             filesystem, or enable the filesystem's attribute/entry caching",
            mount.mount_point_display()
        ));
        out.push(f);
    }
    out
}

/// The walk's latency, mean, p99 and per lookup, when it was timed.
fn walk_latency_evidence(mut f: Finding, cost: &Cost) -> Finding {
    if cost.calls > 0 {
        let lat = crate::figures::latency(&cost.hist, cost.calls, cost.sum_ns, cost.max_ns);
        f = f
            .with("walk_latency_mean_us", lat.mean_us)
            .with("walk_latency_p99_us", lat.p99_us);
        if cost.lookups > 0 {
            f = f.with(
                "latency_per_lookup_us",
                round(cost.sum_ns as f64 / cost.lookups as f64 / 1000.0, 2),
            );
        }
    }
    f
}

/// fs.cwd-slow's ceiling if the mount serializes its operations, with its arithmetic.
fn cwd_ceiling(
    mut f: Finding,
    obs: &FsObservation,
    mount: &Mount,
    load: &MountLoad,
    ms_per: f64,
) -> Finding {
    if let Some(ceiling) = load.ceiling_if_serialized(obs).filter(|_| ms_per > 0.0) {
        let l = load.waiters(obs.window_s);
        f = f
            .with("predicted_ceiling_rps_if_serialized", round(ceiling, 0))
            .with("observed_rps", round(obs.requests.unwrap_or(0) as f64 / obs.window_s.max(1e-9), 1))
            .predict(format!(
            "if {} serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), \
             throughput levels off near {} req/s, however many workers the server has: {}; a deeper working \
             directory lowers it",
            escape::text(&mount.fs_type),
            round(ceiling, 0),
            if l >= 1.0 {
                format!("{} threads waited on the mount on average, so it was busy all the time and the rate it served is its capacity", round(l, 2))
            } else {
                format!(
                    "1000 ms ÷ {} ms per request on the mount ({} ms of walk × {} for {})",
                    round(obs.per(load.timed_ns * load.scale()) / 1e6, 3),
                    round(obs.per(load.timed_ns) / 1e6, 3),
                    round(load.scale(), 2),
                    if load.fuse_timed > 0 { "the file I/O beside the walks" } else { "the walks alone" }
                )
            }
        ));
    }
    f
}

/// The five paths looked up most on a mount, each with its calls per unit.
fn top_paths(obs: &FsObservation, top: &[(&CallObs, u64)], unit: &str) -> Vec<String> {
    top.iter()
        .take(5)
        .map(|(c, _)| {
            format!(
                "{} {} ({} calls {})",
                c.syscall,
                c.path
                    .as_deref()
                    .map(escape::bytes)
                    .unwrap_or_else(|| "?".into()),
                round(obs.per(c.count as f64), 2),
                unit.replace('_', " ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist_at(ns: u64, n: u64) -> Vec<u64> {
        let mut h = vec![0u64; trapdetect_common::hist::HIST_BUCKETS as usize];
        h[trapdetect_common::hist::bucket_of(ns) as usize] = n;
        h
    }

    fn wsl_obs() -> FsObservation {
        let mounts = MountTable::parse(include_str!("../../fixtures/mountinfo/wsl2.txt")).unwrap();
        let root = mounts.mount_of(b"/").unwrap();
        let c = mounts.mount_of(b"/mnt/c/x").unwrap();
        let cwd = b"/mnt/c/Users/luther/AppData/Local/Temp/bench/run".to_vec();
        let hist = |n: u64| {
            let mut h = vec![0u64; trapdetect_common::hist::HIST_BUCKETS as usize];
            h[trapdetect_common::hist::bucket_of(300_000) as usize] = n;
            h
        };
        // 1000 requests; each: getcwd (no walk), chdir(docroot on ext4), chdir back to the
        // DrvFs cwd (7 DrvFs lookups), and 2 stats of a DrvFs session file.
        let calls = vec![
            CallObs {
                syscall: "getcwd",
                path: None,
                base: Base::None,
                nofollow: false,
                target: Some(c),
                walk: vec![],
                count: 1000,
                errors: 0,
                sum_ns: 1_000_000,
                max_ns: 5000,
                hist: hist(0),
            },
            CallObs {
                syscall: "chdir",
                path: Some(b"/srv/www".to_vec()),
                base: Base::Absolute,
                nofollow: false,
                target: Some(root),
                walk: vec![(root, 2)],
                count: 1000,
                errors: 0,
                sum_ns: 2_000_000,
                max_ns: 9000,
                hist: hist(0),
            },
            CallObs {
                syscall: "chdir",
                path: Some(cwd.clone()),
                base: Base::Absolute,
                nofollow: false,
                target: Some(c),
                walk: vec![(root, 2), (c, 7)],
                count: 1000,
                errors: 0,
                sum_ns: 1000 * 7 * 300_000,
                max_ns: 3_000_000,
                hist: hist_at(2_100_000, 1000),
            },
            CallObs {
                syscall: "newfstatat",
                path: Some(b"/mnt/c/sessions/sess_1".to_vec()),
                base: Base::Absolute,
                nofollow: false,
                target: Some(c),
                walk: vec![(root, 2), (c, 2)],
                count: 2000,
                errors: 2000,
                sum_ns: 2000 * 600_000,
                max_ns: 900_000,
                hist: hist_at(600_000, 2000),
            },
        ];
        FsObservation {
            mounts,
            calls,
            cwds: vec![CwdObs {
                path: cwd,
                processes: 5,
                visited: false,
            }],
            requests: Some(1000),
            window_s: 10.0,
            fuse: vec![],
            fuse_measured: true,
            cmdline: vec![
                b"/usr/local/bin/ephpm".to_vec(),
                b"serve".to_vec(),
                b"--config".to_vec(),
                b"/srv/run/it's.toml".to_vec(),
            ],
            exe: Some(b"/usr/local/bin/ephpm".to_vec()),
            // 1 ms of CPU per request; 5 threads on 8 CPUs.
            work: Work {
                cpu_ns: Some(1000 * 1_000_000),
                threads: 5,
                cpus: 8,
                request_ms: None,
            },
        }
    }

    /// The chdir back to the DrvFs cwd, with `us_per_call` per call and `cpu_ms` of CPU per
    /// request.
    fn cwd_walk_costing(us_per_call: u64, cpu_ms: u64) -> FsObservation {
        let mut obs = wsl_obs();
        obs.calls[2].sum_ns = 1000 * us_per_call * 1000;
        obs.calls[2].max_ns = us_per_call * 1200;
        obs.calls[2].hist = hist_at(us_per_call * 1000, 1000);
        obs.work.cpu_ns = Some(1000 * cpu_ms * 1_000_000);
        obs
    }

    #[test]
    fn drvfs_cwd_walked_every_request_is_a_fail_with_arithmetic() {
        let f = cwd_slow(&wsl_obs());
        assert_eq!(f.len(), 1);
        let f = &f[0];
        assert_eq!(f.id, "fs.cwd-slow");
        assert_eq!(f.severity, Severity::Fail);
        let e = &f.evidence;
        assert_eq!(e["fs_type"], "9p");
        assert_eq!(e["drvfs"], true);
        assert_eq!(e["mount_point"], "/mnt/c");
        assert_eq!(e["cwd_depth_below_mount"], 7);
        assert_eq!(e["lookups_per_request"], 7.0);
        assert_eq!(e["walk_syscalls_per_request"], 1.0);
        assert_eq!(e["walk_ms_per_request"], 2.1);
        assert_eq!(e["latency_per_lookup_us"], 300.0);
        // A request's cost on the mount is the chdir back (2.1 ms) and the two stats of the
        // session file there (1.2 ms): 1000 ms / 3.3 ms, if DrvFs serializes them all.
        assert_eq!(e["mount_ms_per_request"], 3.3);
        assert_eq!(e["predicted_ceiling_rps_if_serialized"], 303.0);
        assert_eq!(e["mount_waiters"], 0.33);
        assert!(
            e["mount_cost_basis"]
                .as_str()
                .unwrap()
                .starts_with("path walks only"),
            "{e:?}"
        );
        assert!(
            f.remedy
                .contains("exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml'"),
            "{}",
            f.remedy
        );
    }

    /// The local baseline is the median of calls made often enough: Go's runtime opened
    /// /sys/devices/system/cpu/online once under a flood and waited 8 ms for a CPU (5 lookups:
    /// "1.6 ms a lookup" on ext4 hid the mount). Made once, it is no baseline; made a thousand
    /// times with the same outlier among them, its median is.
    #[test]
    fn a_local_call_made_once_is_no_baseline_for_a_lookup() {
        let mut o = wsl_obs();
        let local = o
            .calls
            .iter()
            .position(|c| c.syscall == "chdir" && c.walk.len() == 1)
            .unwrap();
        assert_eq!(o.native_ns_per_lookup(), 1000.0);
        o.calls[local].count = 1;
        o.calls[local].sum_ns = 8_000_000;
        o.calls[local].max_ns = 8_000_000;
        o.calls[local].hist = hist_at(8_000_000, 1);
        assert_eq!(o.native_ns_per_lookup(), 0.0);
        let f = &cwd_slow(&o)[0];
        // The whole 2.1 ms walk is the mount's.
        assert_eq!(f.evidence["excess_ms_per_request"], 2.1);
        // A thousand calls at 2 µs, one of them 8 ms: the mean would say 5 µs a lookup.
        let mut h = hist_at(2_000, 999);
        h[trapdetect_common::hist::bucket_of(8_000_000) as usize] += 1;
        o.calls[local].count = 1000;
        o.calls[local].sum_ns = 999 * 2_000 + 8_000_000;
        o.calls[local].hist = h.clone();
        let median_ns = crate::figures::percentile_us(&h, 0.5, 8_000_000) * 1e3;
        assert!((1_024.0..2_048.0).contains(&median_ns), "{median_ns}");
        assert_eq!(o.native_ns_per_lookup(), median_ns / 2.0);
    }

    #[test]
    fn the_share_of_request_time_decides_not_the_mount_type() {
        // The chdir to the ext4 docroot: 1 µs per lookup. 2.1 ms of walk, 7 µs of it what ext4
        // would cost, against 1 ms of CPU: 68 % of request time; limit min(1/5, 10 %).
        let f = &cwd_slow(&wsl_obs())[0];
        assert_eq!(f.evidence["native_ns_per_lookup"], 1000.0);
        assert_eq!(f.evidence["excess_ms_per_request"], 2.093);
        assert_eq!(f.evidence["share_of_request_time"], 0.6752);
        assert_eq!(f.evidence["share_limit"], 0.1);
        assert_eq!(f.evidence["parallel_workers"], 5);
        // 2.093 s of excess walk in a 10 s window.
        assert_eq!(f.evidence["busy_share_if_serialized"], 0.2093);
        assert!(
            f.title.contains("68 % of request time (fails from 10 %"),
            "{}",
            f.title
        );
        // The same walk, 100 ms of CPU per request: 2 % of request time, a warning.
        let f = &cwd_slow(&cwd_walk_costing(2100, 100))[0];
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["share_of_request_time"], 0.0205);
        assert!(f.title.contains("cheaply now"), "{}", f.title);
        assert!(f.title.contains("cold start"), "{}", f.title);
        // The limit follows the parallelism: 4 % of request time is fine for 5 workers, but
        // 40 workers behind one serialized mount would hit its ceiling first.
        let mut obs = cwd_walk_costing(2100, 50);
        assert_eq!(cwd_slow(&obs)[0].evidence["share_of_request_time"], 0.0402);
        assert_eq!(cwd_slow(&obs)[0].severity, Severity::Warn);
        obs.work.threads = 40;
        obs.work.cpus = 40;
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.evidence["share_limit"], 0.025);
        assert_eq!(f.severity, Severity::Fail);
    }

    #[test]
    fn a_cached_walk_is_a_warning_that_says_the_cache_answered() {
        // 11 µs per chdir (dcache hits), 0.2 ms of CPU per request; 3 LOOKUPs reached FUSE.
        let mut obs = cwd_walk_costing(11, 0);
        obs.work.cpu_ns = Some(1000 * 200_000);
        obs.fuse = lookups_on_c(&obs, 3);
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Warn);
        // 11 ms of walk, 7 ms of it what ext4 costs: 4 ms over 211 ms.
        assert_eq!(f.evidence["share_of_request_time"], 0.019);
        assert!(
            f.title
                .contains("the kernel answered 100 % of its 7000 lookups from its cache (3 reached the filesystem)"),
            "{}",
            f.title
        );
        // Still the ceiling it would have if it serialized: the cached walk (0.011 ms) and the
        // session file's stats (1.2 ms) per request.
        assert_eq!(f.evidence["predicted_ceiling_rps_if_serialized"], 826.0);
    }

    /// `count` FUSE LOOKUPs on the /mnt/c mount, each from a traced path call.
    fn lookups_on_c(obs: &FsObservation, count: u64) -> Vec<FuseObs> {
        let c = obs.mounts.mount_of(b"/mnt/c/x").unwrap();
        vec![FuseObs {
            mount: Some(c),
            opcode: "LOOKUP",
            count,
            in_path_calls: count,
        }]
    }

    /// A server that caches file metadata itself (lighttpd's stat cache) stats its file on the
    /// mount a few times a window, not per request: every lookup reaching the filesystem and
    /// negligible, it is information, with nothing latent. Where the kernel's cache answered
    /// some, the ones that reached the filesystem price a round trip: still negligible were
    /// every lookup one (13 of 14 reached it), information; where the cached ones could make
    /// it matter (2 of 14), or none reached it to price one, the warning.
    fn rare_stats() -> FsObservation {
        let mut obs = wsl_obs();
        obs.calls.retain(|c| c.syscall == "newfstatat");
        obs.calls[0].count = 7;
        obs.calls[0].errors = 0;
        obs.calls[0].sum_ns = 7 * 600_000;
        obs.calls[0].hist = hist_at(600_000, 7);
        obs
    }

    /// The same 7 stats (14 lookups, 2 of them reaching the filesystem: a warning above) in
    /// 15,000 requests: fewer than one request in a hundred walks the mount, so the requests
    /// do not walk it and no expiry of the kernel's cache makes them; information. One lookup
    /// in 100 requests is the line: 14 in 1,400 keep the warning.
    #[test]
    fn a_mount_walked_by_fewer_than_one_request_in_a_hundred_is_information() {
        let mut obs = rare_stats();
        obs.fuse = lookups_on_c(&obs, 2);
        obs.requests = Some(15_000);
        let f = &hot_path_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Info, "{}", f.title);
        assert!(
            f.title.ends_with(
                "; negligible: fewer than one request in 100 walks it (14 lookups in 15000 requests), so the server does not walk it per request (a cache of its own) and no expiry of the kernel's cache makes it the requests' cost"
            ),
            "{}",
            f.title
        );
        obs.requests = Some(1_400);
        assert_eq!(hot_path_slow(&obs)[0].severity, Severity::Warn);
    }

    #[test]
    fn a_negligible_cost_with_every_lookup_uncached_is_information() {
        let mut obs = rare_stats();
        obs.fuse = lookups_on_c(&obs, 14);
        let f = &hot_path_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Info);
        // 7 stats' 4.2 ms, 14 µs of it what ext4 costs, against 1 s of CPU: 0.4 %.
        assert_eq!(f.evidence["share_of_request_time"], 0.0042);
        assert!(
            f.title.ends_with(
                "0.4 % of request time (fails from 10 % with 5 worker(s) at once); every lookup reached the filesystem (14 requests for 14 lookups): no cache answered them, so none hides a larger cost; negligible (under 1 %)"
            ),
            "{}",
            f.title
        );
        obs.fuse = lookups_on_c(&obs, 13);
        let f = &hot_path_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Info);
        // 4.2 ms × 14 ÷ 13 against 1 s of CPU and that walk: 0.45 %.
        assert!(
            f.title.ends_with(
                "the kernel answered 7.1 % of its 14 lookups from its cache (13 reached the filesystem); when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip; negligible even so: were every one a round trip, 0.5 % of request time (under 1 %)"
            ),
            "{}",
            f.title
        );
        // 2 of 14: seven times 4.2 ms, 2.9 %.
        obs.fuse = lookups_on_c(&obs, 2);
        let f = &hot_path_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.title.contains("cheaply now"), "{}", f.title);
        // None reached it: no round trip to price the cached ones by.
        obs.fuse = lookups_on_c(&obs, 0);
        assert_eq!(hot_path_slow(&obs)[0].severity, Severity::Warn);
        // The working directory's walk the same way: 7 uncached lookups a request, 2.1 ms
        // against 300 ms of CPU.
        let mut obs = cwd_walk_costing(2100, 300);
        obs.fuse = lookups_on_c(&obs, 11_000);
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.evidence["share_of_request_time"], 0.0069);
        assert_eq!(f.severity, Severity::Info);
        assert!(f.title.contains("negligible (under 1 %)"), "{}", f.title);
        // One answered by the cache: priced by the others, still negligible.
        obs.fuse = lookups_on_c(&obs, 10_999);
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Info);
        assert!(
            f.title.ends_with(
                "negligible even so: were every one a round trip, 0.7 % of request time (under 1 %)"
            ),
            "{}",
            f.title
        );
        // Half of them: were every lookup a round trip, 1.5 %.
        obs.fuse = lookups_on_c(&obs, 5_000);
        assert_eq!(cwd_slow(&obs)[0].severity, Severity::Warn);
        let mut obs = rare_stats();
        // Every lookup uncached but 2 % of request time: a measured cost, a warning.
        obs.fuse = lookups_on_c(&obs, 14);
        obs.work.cpu_ns = Some(200_000_000);
        let f = &hot_path_slow(&obs)[0];
        assert_eq!(f.evidence["share_of_request_time"], 0.0206);
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.title.contains("cheaply now: 2.1 % of request time (fails from 10 % with 5 worker(s) at once); every lookup reached the filesystem"),
            "{}",
            f.title
        );
    }

    /// Issue 22: a request that reads a template by a relative path on a FUSE mount costs 9
    /// FUSE requests, of which the walks send 4 (LOOKUPs and the open, from inside timed path
    /// calls); the read, fstat's GETATTR, FLUSH and RELEASE come from calls the tracer does not
    /// time. The mount's cost per request is the timed part × 9/4, and the ceiling follows it.
    /// With threads queued on the mount (the walk timed behind others), the rate it served is
    /// its capacity, not 1 ÷ the queued latency.
    #[test]
    fn the_cost_on_a_mount_is_everything_requests_do_there() {
        let mut obs = wsl_obs();
        obs.calls.truncate(3);
        let c = obs.mounts.mount_of(b"/mnt/c/x").unwrap();
        let op = |opcode: &'static str, count: u64, in_path_calls: u64| FuseObs {
            mount: Some(c),
            opcode,
            count,
            in_path_calls,
        };
        obs.fuse = vec![
            op("LOOKUP", 3000, 3000),
            op("OPEN", 1000, 1000),
            op("GETATTR", 1000, 0),
            op("READ", 2000, 0),
            op("FLUSH", 1000, 0),
            op("RELEASE", 1000, 0),
        ];
        let f = &cwd_slow(&obs)[0];
        let e = &f.evidence;
        // 2.1 ms of timed walk per request × 9,000 / 4,000.
        assert_eq!(e["mount_ms_per_request"], 4.725);
        assert_eq!(e["fuse_requests_all_per_request"], 9.0);
        assert_eq!(e["predicted_ceiling_rps_if_serialized"], 212.0);
        assert!(
            e["mount_cost_basis"]
                .as_str()
                .unwrap()
                .starts_with("path walks and the file I/O"),
            "{e:?}"
        );
        // The same requests at 10x the rate, with the walk timed at 10x its latency because
        // 4.7 threads queued for the mount: 1,000 req/s served is its capacity.
        obs.window_s = 1.0;
        obs.calls[2].sum_ns *= 10;
        obs.calls[2].hist = hist_at(21_000_000, 1000);
        let e = &cwd_slow(&obs)[0].evidence;
        assert_eq!(e["mount_waiters"], 47.25);
        assert_eq!(e["predicted_ceiling_rps_if_serialized"], 1000.0);
    }

    #[test]
    fn a_few_slow_walks_do_not_decide_alone() {
        // 980 walks from the cache (11 µs) and 20 that waited 20 ms for a refresh (or were
        // preempted): the mean says 0.41 ms, the 90th percentile 11 µs.
        let mut obs = cwd_walk_costing(11, 0);
        obs.work.cpu_ns = Some(1000 * 200_000);
        let c = &mut obs.calls[2];
        c.sum_ns = 980 * 11_000 + 20 * 20_000_000;
        c.max_ns = 20_000_000;
        c.hist = hist_at(11_000, 980);
        c.hist[trapdetect_common::hist::bucket_of(20_000_000) as usize] = 20;
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.evidence["walk_ms_per_request"], 0.4108);
        assert_eq!(f.severity, Severity::Warn, "{}", f.title);
        assert!(f.evidence["share_of_request_time"].as_f64().unwrap() < 0.1);
        // When most walks are slow, the 90th percentile is slow too.
        let c = &mut obs.calls[2];
        c.hist = hist_at(20_000_000, 1000);
        c.sum_ns = 1000 * 20_000_000;
        assert_eq!(cwd_slow(&obs)[0].severity, Severity::Fail);
    }

    #[test]
    fn a_mount_busy_half_the_window_fails_without_cpu_figures() {
        let mut obs = cwd_walk_costing(5100, 0);
        obs.work.cpu_ns = None;
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["busy_share_if_serialized"], 0.5093);
        assert!(!f.evidence.contains_key("share_of_request_time"));
        assert!(f.title.contains("busy 51 % of the window"), "{}", f.title);
        obs.calls[2].sum_ns /= 2;
        assert_eq!(cwd_slow(&obs)[0].severity, Severity::Warn);
    }

    #[test]
    fn relative_walks_from_the_cwd_are_walks_of_the_cwd() {
        let mut obs = wsl_obs();
        let c = obs.mounts.mount_of(b"/mnt/c/x").unwrap();
        // 3 relative stats per request (vendor/a/b.php: 3 lookups on DrvFs).
        obs.calls.push(CallObs {
            syscall: "newfstatat",
            path: Some(b"vendor/a/b.php".to_vec()),
            base: Base::Cwd,
            nofollow: false,
            target: Some(c),
            walk: vec![(c, 3)],
            count: 3000,
            errors: 0,
            sum_ns: 3000 * 100_000,
            max_ns: 200_000,
            hist: vec![],
        });
        let f = &cwd_slow(&obs)[0];
        assert_eq!(f.evidence["lookups_per_request"], 16.0);
        assert_eq!(f.evidence["walk_syscalls"], "chdir:1 newfstatat:3");
        // Not counted again as a hot path: only the session file's 4 lookups.
        assert_eq!(hot_path_slow(&obs)[0].evidence["lookups_per_request"], 4.0);
    }

    /// Scenario 2: started from a native directory, code on the slow mount; the workers chdir
    /// into the docroot there for each request (and are found in it).
    #[test]
    fn a_slow_directory_requests_visit_is_a_hot_path_not_the_cwd() {
        let mut obs = wsl_obs();
        let root = obs.mounts.mount_of(b"/").unwrap();
        let c = obs.mounts.mount_of(b"/mnt/c/x").unwrap();
        obs.cwds = vec![
            CwdObs {
                path: b"/root/run".to_vec(),
                processes: 1,
                visited: false,
            },
            CwdObs {
                path: b"/mnt/c/www".to_vec(),
                processes: 4,
                visited: true,
            },
        ];
        // chdir(docroot on DrvFs), chdir back to /root/run, the session stats.
        obs.calls[1].path = Some(b"/mnt/c/www".to_vec());
        obs.calls[1].walk = vec![(root, 1), (c, 2)];
        obs.calls[1].target = Some(c);
        obs.calls[2].path = Some(b"/root/run".to_vec());
        obs.calls[2].walk = vec![(root, 2)];
        obs.calls[2].target = Some(root);
        // A relative open of the script from the docroot.
        obs.calls.push(CallObs {
            syscall: "openat",
            path: Some(b"index.php".to_vec()),
            base: Base::Cwd,
            nofollow: false,
            target: Some(c),
            walk: vec![(c, 1)],
            count: 1000,
            errors: 0,
            sum_ns: 1000 * 300_000,
            max_ns: 400_000,
            hist: vec![],
        });
        let f = rules(&obs);
        let ids: Vec<&str> = f.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["fs.hot-path-slow"], "{f:#?}");
        // chdir 2 + openat 1 + the session's 4.
        assert_eq!(f[0].evidence["lookups_per_request"], 7.0);
        assert!(!f[0].remedy.contains("start the server"), "{}", f[0].remedy);
        assert!(f[0].remedy.starts_with("move what requests read"));
    }

    #[test]
    fn other_drvfs_lookups_are_hot_path_not_cwd() {
        let f = hot_path_slow(&wsl_obs());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "fs.hot-path-slow");
        assert_eq!(f[0].severity, Severity::Fail);
        assert_eq!(f[0].evidence["lookups_per_request"], 4.0);
        assert_eq!(f[0].evidence["mount_point"], "/mnt/c");
        assert!(
            f[0].evidence["top_paths"]
                .as_str()
                .unwrap()
                .starts_with("newfstatat /mnt/c/sessions/sess_1 (2 calls per request)")
        );
    }

    #[test]
    fn native_cwd_gives_no_finding() {
        let mut obs = wsl_obs();
        obs.cwds = vec![CwdObs {
            path: b"/root/run".to_vec(),
            processes: 1,
            visited: false,
        }];
        obs.calls
            .retain(|c| c.path.as_deref() != Some(b"/mnt/c/sessions/sess_1"));
        obs.calls[2].path = Some(b"/root/run".to_vec());
        obs.calls[2].walk = vec![(obs.mounts.mount_of(b"/").unwrap(), 2)];
        assert!(rules(&obs).is_empty());
    }

    #[test]
    fn unwalked_slow_cwd_is_a_warning_and_per_second_without_requests() {
        let mut obs = wsl_obs();
        obs.calls.retain(|c| c.syscall == "getcwd");
        obs.requests = None;
        let f = cwd_slow(&obs);
        assert_eq!(f[0].severity, Severity::Warn);
        assert_eq!(f[0].evidence["lookups_per_second"], 0.0);
        assert!(
            !f[0]
                .evidence
                .contains_key("predicted_ceiling_rps_if_serialized")
        );
    }

    #[test]
    fn rewritten_command_lines_fall_back_to_the_executable() {
        let mut obs = wsl_obs();
        obs.cmdline = vec![b"php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)".to_vec()];
        obs.exe = Some(b"/usr/sbin/php-fpm8.2".to_vec());
        let f = cwd_slow(&obs);
        assert!(
            f[0].remedy
                .contains("exec /usr/sbin/php-fpm8.2 <its arguments> )"),
            "{}",
            f[0].remedy
        );
    }

    #[test]
    fn restart_command_execs_the_executable_by_absolute_path() {
        // Started as ./srv from its own directory: after the cd, only the absolute path works.
        assert_eq!(
            restart_command(
                Some("/srv/run"),
                Some(b"/opt/srv/bin/srv"),
                &[b"./srv".to_vec(), b"--port".to_vec(), b"80".to_vec()]
            ),
            "( cd /srv/run && exec /opt/srv/bin/srv --port 80 )"
        );
        // No arguments: none invented.
        assert_eq!(
            restart_command(None, Some(b"/opt/srv"), &[b"srv".to_vec()]),
            "( cd <native dir> && exec /opt/srv )"
        );
        // Unreadable exe: the command line as given.
        assert_eq!(
            restart_command(None, None, &[b"srv".to_vec(), b"a b".to_vec()]),
            "( cd <native dir> && exec srv 'a b' )"
        );
    }

    #[test]
    fn hostile_cwd_bytes_are_escaped() {
        let mut obs = wsl_obs();
        obs.cwds[0].path = b"/mnt/c/\x1b[2Jevil\xff".to_vec();
        let f = cwd_slow(&obs);
        assert_eq!(f[0].evidence["cwd"], "/mnt/c/\\x1b[2Jevil\\xff");
    }

    /// fs.cwd-slow and fs.hot-path-slow on the recorded WSL2 observation and its variants
    /// (cheap, cached, FUSE-heavy, queued, unwalked, without CPU figures), pinned whole.
    #[test]
    fn fs_findings_are_pinned() {
        let mut all = rules(&wsl_obs());
        all.extend(rules(&cwd_walk_costing(2100, 100)));
        let mut obs = cwd_walk_costing(11, 0);
        obs.work.cpu_ns = Some(1000 * 200_000);
        obs.fuse = lookups_on_c(&obs, 3);
        all.extend(rules(&obs));
        let mut obs = wsl_obs();
        obs.calls.truncate(3);
        let c = obs.mounts.mount_of(b"/mnt/c/x").unwrap();
        let op = |opcode: &'static str, count: u64, in_path_calls: u64| FuseObs {
            mount: Some(c),
            opcode,
            count,
            in_path_calls,
        };
        obs.fuse = vec![
            op("LOOKUP", 3000, 3000),
            op("OPEN", 1000, 1000),
            op("READ", 2000, 0),
        ];
        all.extend(rules(&obs));
        obs.window_s = 1.0;
        obs.calls[2].sum_ns *= 10;
        obs.calls[2].hist = hist_at(21_000_000, 1000);
        all.extend(rules(&obs));
        let mut obs = cwd_walk_costing(5100, 0);
        obs.work.cpu_ns = None;
        all.extend(rules(&obs));
        let mut obs = wsl_obs();
        obs.calls.retain(|c| c.syscall == "getcwd");
        obs.requests = None;
        all.extend(rules(&obs));
        crate::traps::assert_pinned(
            &all,
            &[
                r##"{"id":"fs.cwd-slow","severity":"fail","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p): 7 lookups per request walk it, 2.1 ms per request, 68 % of request time (fails from 10 % with 5 worker(s) at once)","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":2.1,"share_of_request_time":0.6752,"native_ns_per_lookup":1000.0,"excess_ms_per_request":2.093,"cpu_ms_in_window":1000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.2093,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":2100.0,"walk_latency_p99_us":2616.2,"latency_per_lookup_us":300.0,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":3.3,"mount_waiters":0.33,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":303.0,"observed_rps":100.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 303 req/s, however many workers the server has: 1000 ms ÷ 3.3 ms per request on the mount (3.3 ms of walk × 1 for the walks alone); a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.hot-path-slow","severity":"fail","title":"requests look up paths on WSL2 DrvFs (a Windows drive over 9p) at /mnt/c: 4 lookups per request, 1.2 ms per request, 54 % of request time (fails from 10 % with 5 worker(s) at once)","evidence":{"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","lookups_per_request":4.0,"syscalls_per_request":2.0,"syscall_ms_per_request":1.2,"top_paths":"newfstatat /mnt/c/sessions/sess_1 (2 calls per request)","share_of_request_time":0.5436,"native_ns_per_lookup":1000.0,"excess_ms_per_request":1.196,"cpu_ms_in_window":1000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.1196,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","mount_ms_per_request":3.3,"mount_waiters":0.33,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":303.0},"remedy":"move what requests read (docroot, includes, sessions, databases, logs) from /mnt/c to a local filesystem, or enable the filesystem's attribute/entry caching"}"##,
                r##"{"id":"fs.cwd-slow","severity":"warn","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p) and requests walk it (7 lookups per request), cheaply now: 2.1 ms per request, 2 % of request time (fails from 10 % with 5 worker(s) at once); the kernel answered 100 % of its 7000 lookups from its cache (0 reached the filesystem); when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":2.1,"share_of_request_time":0.0205,"native_ns_per_lookup":1000.0,"excess_ms_per_request":2.093,"cpu_ms_in_window":100000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.2093,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":2100.0,"walk_latency_p99_us":2515.77,"latency_per_lookup_us":300.0,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":3.3,"mount_waiters":0.33,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":303.0,"observed_rps":100.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 303 req/s, however many workers the server has: 1000 ms ÷ 3.3 ms per request on the mount (3.3 ms of walk × 1 for the walks alone); a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.hot-path-slow","severity":"warn","title":"requests look up paths on WSL2 DrvFs (a Windows drive over 9p) at /mnt/c: 4 lookups per request, 1.2 ms per request, cheaply now: 1.2 % of request time (fails from 10 % with 5 worker(s) at once); the kernel answered 100 % of its 4000 lookups from its cache (0 reached the filesystem); when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip","evidence":{"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","lookups_per_request":4.0,"syscalls_per_request":2.0,"syscall_ms_per_request":1.2,"top_paths":"newfstatat /mnt/c/sessions/sess_1 (2 calls per request)","share_of_request_time":0.0118,"native_ns_per_lookup":1000.0,"excess_ms_per_request":1.196,"cpu_ms_in_window":100000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.1196,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","mount_ms_per_request":3.3,"mount_waiters":0.33,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":303.0},"remedy":"move what requests read (docroot, includes, sessions, databases, logs) from /mnt/c to a local filesystem, or enable the filesystem's attribute/entry caching"}"##,
                r##"{"id":"fs.cwd-slow","severity":"warn","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p) and requests walk it (7 lookups per request), cheaply now: 0.011 ms per request, 1.9 % of request time (fails from 10 % with 5 worker(s) at once); the kernel answered 100 % of its 7000 lookups from its cache (3 reached the filesystem); when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":0.011,"share_of_request_time":0.019,"native_ns_per_lookup":1000.0,"excess_ms_per_request":0.004,"cpu_ms_in_window":200.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.0004,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":11.0,"walk_latency_p99_us":12.27,"latency_per_lookup_us":1.57,"fuse_requests_per_request":0.003,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":1.211,"fuse_requests_all_per_request":0.003,"mount_waiters":0.121,"mount_cost_basis":"path walks and the file I/O on the mount (FUSE requests of every opcode: the timed walks scaled by all requests over the walks' own)","predicted_ceiling_rps_if_serialized":826.0,"observed_rps":100.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 826 req/s, however many workers the server has: 1000 ms ÷ 1.211 ms per request on the mount (1.211 ms of walk × 1 for the file I/O beside the walks); a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.hot-path-slow","severity":"fail","title":"requests look up paths on WSL2 DrvFs (a Windows drive over 9p) at /mnt/c: 4 lookups per request, 1.2 ms per request, 85 % of request time (fails from 10 % with 5 worker(s) at once)","evidence":{"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","lookups_per_request":4.0,"syscalls_per_request":2.0,"syscall_ms_per_request":1.2,"top_paths":"newfstatat /mnt/c/sessions/sess_1 (2 calls per request)","share_of_request_time":0.8543,"native_ns_per_lookup":1000.0,"excess_ms_per_request":1.196,"cpu_ms_in_window":200.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.1196,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","mount_ms_per_request":1.211,"fuse_requests_all_per_request":0.003,"mount_waiters":0.121,"mount_cost_basis":"path walks and the file I/O on the mount (FUSE requests of every opcode: the timed walks scaled by all requests over the walks' own)","predicted_ceiling_rps_if_serialized":826.0},"remedy":"move what requests read (docroot, includes, sessions, databases, logs) from /mnt/c to a local filesystem, or enable the filesystem's attribute/entry caching"}"##,
                r##"{"id":"fs.cwd-slow","severity":"fail","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p): 7 lookups per request walk it, 2.1 ms per request, 68 % of request time (fails from 10 % with 5 worker(s) at once)","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":2.1,"share_of_request_time":0.6752,"native_ns_per_lookup":1000.0,"excess_ms_per_request":2.093,"cpu_ms_in_window":1000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.2093,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":2100.0,"walk_latency_p99_us":2616.2,"latency_per_lookup_us":300.0,"fuse_requests_per_request":6.0,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":3.15,"fuse_requests_all_per_request":6.0,"mount_waiters":0.315,"mount_cost_basis":"path walks and the file I/O on the mount (FUSE requests of every opcode: the timed walks scaled by all requests over the walks' own)","predicted_ceiling_rps_if_serialized":317.0,"observed_rps":100.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 317 req/s, however many workers the server has: 1000 ms ÷ 3.15 ms per request on the mount (2.1 ms of walk × 1.5 for the file I/O beside the walks); a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.cwd-slow","severity":"fail","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p): 7 lookups per request walk it, 21 ms per request, 95 % of request time (fails from 10 % with 5 worker(s) at once)","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":21.0,"share_of_request_time":0.9542,"native_ns_per_lookup":1000.0,"excess_ms_per_request":20.9645,"cpu_ms_in_window":1000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":20.9645,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":21000.0,"walk_latency_p99_us":20971.52,"latency_per_lookup_us":3000.0,"fuse_requests_per_request":6.0,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":31.5,"fuse_requests_all_per_request":6.0,"mount_waiters":31.5,"mount_cost_basis":"path walks and the file I/O on the mount (FUSE requests of every opcode: the timed walks scaled by all requests over the walks' own)","predicted_ceiling_rps_if_serialized":1000.0,"observed_rps":1000.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 1000 req/s, however many workers the server has: 31.5 threads waited on the mount on average, so it was busy all the time and the rate it served is its capacity; a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.cwd-slow","severity":"fail","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p): 7 lookups per request walk it, 5.1 ms per request, the mount busy 51 % of the window if it serializes (fails from 50 %)","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_request":7.0,"walk_syscalls_per_request":1.0,"walk_syscalls":"chdir:1","walk_ms_per_request":5.1,"native_ns_per_lookup":1000.0,"excess_ms_per_request":5.093,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.5093,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","walk_latency_mean_us":5100.0,"walk_latency_p99_us":5232.39,"latency_per_lookup_us":728.57,"lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_request":6.3,"mount_waiters":0.63,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":159.0,"observed_rps":100.0},"predicted":"if 9p serializes its operations (WSL2 DrvFs does; so does a single-threaded FUSE daemon), throughput levels off near 159 req/s, however many workers the server has: 1000 ms ÷ 6.3 ms per request on the mount (6.3 ms of walk × 1 for the walks alone); a deeper working directory lowers it","remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
                r##"{"id":"fs.hot-path-slow","severity":"warn","title":"requests look up paths on WSL2 DrvFs (a Windows drive over 9p) at /mnt/c: 4 lookups per request, 1.2 ms per request, cheaply now: the mount busy 12 % of the window if it serializes (fails from 50 %); the kernel answered 100 % of its 4000 lookups from its cache (0 reached the filesystem); when cached entries expire (FUSE/NFS TTLs), on a cold start, or on a machine whose mount does not cache (another host, other mount options, WSL2 DrvFs), each lookup becomes a round trip","evidence":{"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","lookups_per_request":4.0,"syscalls_per_request":2.0,"syscall_ms_per_request":1.2,"top_paths":"newfstatat /mnt/c/sessions/sess_1 (2 calls per request)","native_ns_per_lookup":1000.0,"excess_ms_per_request":1.196,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.1196,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","mount_ms_per_request":6.3,"mount_waiters":0.63,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)","predicted_ceiling_rps_if_serialized":159.0},"remedy":"move what requests read (docroot, includes, sessions, databases, logs) from /mnt/c to a local filesystem, or enable the filesystem's attribute/entry caching"}"##,
                r##"{"id":"fs.cwd-slow","severity":"warn","title":"working directory is on WSL2 DrvFs (a Windows drive over 9p) but no traced call walked it during the trace; any relative path, or a PHP chdir back to it, would cost a round trip per component when not cached","evidence":{"cwd":"/mnt/c/Users/luther/AppData/Local/Temp/bench/run","processes_in_cwd":5,"fs_type":"9p","slow_because":"wsl-drvfs","drvfs":true,"mount_point":"/mnt/c","mount_source":"C:\\\\","mount_options":"noatime,dirsync,aname=drvfs,msize=262144,trans=virtio","cwd_depth_below_mount":7,"lookups_per_second":0.0,"walk_syscalls_per_second":0.0,"walk_syscalls":"","walk_ms_per_second":0.0,"share_of_request_time":0.0,"native_ns_per_lookup":0.0,"excess_ms_per_second":0.0,"cpu_ms_in_window":1000.0,"share_limit":0.1,"parallel_workers":5,"busy_share_if_serialized":0.0,"busy_limit":0.5,"cost_basis":"time in traced path syscalls whose walk crosses the mount (90th-percentile walk × walks, capped by the total), beyond what as many lookups cost on the local filesystems of this trace, against the probe load's request time (else the traced threads' CPU time plus that walk time); fail when the share reaches min(1 ÷ min(threads, CPUs), 10 %) or the mount would be busy half the window if it serialized","lookups_basis":"path strings resolved against the target's mount table; one lookup per path component","mount_ms_per_second":-0.0,"mount_waiters":-0.0,"mount_cost_basis":"path walks only (file I/O on the mount is not measured without the fuse tracepoint, Linux 6.13: an upper bound)"},"remedy":"start the server from a directory on a local filesystem: ( cd <native dir> && exec /usr/local/bin/ephpm serve --config '/srv/run/it'\\''s.toml' ); in the harness, refuse run directories on such mounts (trapdetect preflight --dir \"$RUN\" || exit 1)"}"##,
            ],
        );
    }
}
