//! The rule registry: one typed table of every finding id trapdetect can emit, with the commands
//! that evaluate it, the part it plays in a verdict and its documentation (`trapdetect explain
//! ID`). Each entry also defines its [`Id`]: `Finding::new` takes an `Id`, so a finding whose id
//! is not registered here does not compile.
//!
//! Adding a finding? Add its entry to the `registry!` table below (in id order), emit it with
//! `Finding::new(Id::TheName, ..)`, name it in its doc page, and see docs/DESIGN.md.

/// A command that evaluates rules (its name on the command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// `trapdetect [trace] --pid N`.
    Trace,
    /// `trapdetect preflight`.
    Preflight,
    /// `trapdetect load`.
    Load,
    /// `trapdetect net-census` (hidden).
    NetCensus,
    /// `trapdetect run`.
    Run,
}

impl Command {
    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Command::Trace => "trace",
            Command::Preflight => "preflight",
            Command::Load => "load",
            Command::NetCensus => "net-census",
            Command::Run => "run",
        }
    }
}

/// One registered rule: what `explain` prints and what the consistency tests check.
#[derive(Debug)]
pub struct Rule {
    /// Stable id (`area.name`), as in the JSON `findings[].id` and `--ignore`.
    pub id: &'static str,
    /// One line: the trap.
    pub title: &'static str,
    /// Commands that evaluate it.
    pub commands: &'static [Command],
    /// Why it falsifies a benchmark.
    pub mechanism: &'static str,
    /// Main evidence keys (JSON `evidence` object; units are in the names).
    pub evidence: &'static [&'static str],
    /// What to do about it.
    pub remedy: &'static str,
    /// The page documenting it in full (relative to the repository root).
    pub doc: &'static str,
    /// A rule that can return `fail`: when its check is skipped (another user's /proc without
    /// CAP_SYS_PTRACE, a census that could not run), preflight's clean result is not a clean
    /// environment (listed as INCOMPLETE; `--strict` fails on it).
    pub can_fail: bool,
    /// A `run` cause that says what the server's threads waited on: `pool.too-small` is judged
    /// only when none of these was found.
    pub explains_ceiling: bool,
    /// A `run` cause ranked by the share of the threads' wall time it explains when the verdict
    /// picks one (after the generator's budget, descriptors, host noise and a quota).
    pub ranked: bool,
    /// A finding that follows from a `run` ceiling rather than causes one (errors, refusals,
    /// queue overflows): listed under the cause, as a warning at most.
    pub consequence: bool,
    /// As a `run` verdict's cause, the run measured something other than the server (exit 3).
    pub untrusting: bool,
    /// `run` causes this one is never ranked against when one of them was found, and is folded
    /// under (as a consequence) when one of them is the verdict: causes that measured the
    /// workers' time on a resource whose capacity bounds the rate, beside which this rule's
    /// waits are threads queued in front of that resource or idle beside the workers.
    pub yields_to: &'static [Id],
    /// The rule, when it judges only what preflight read of the machine ([`HostView`]):
    /// preflight runs every entry that has one, so a host check needs no call written.
    pub host: Option<fn(&HostView) -> Option<Finding>>,
    /// The rule, when `run` judges it from the run's observations: `run` evaluates every entry
    /// that has one, in [`RunRule::order`], so a run rule needs no call written.
    pub run: Option<RunRule>,
}

/// A rule `run` evaluates ([`super::run::rules`]).
#[derive(Clone, Copy, Debug)]
pub struct RunRule {
    /// Lower first: a rule sees what the rules before it found (a binding quota silences
    /// `cpu.saturated`; `pool.too-small` is judged only when nothing before explains the wait).
    pub order: u8,
    /// The findings, given the observations and what the rules before it found.
    pub eval: fn(&RunObs, &[Finding]) -> Vec<Finding>,
}

/// What preflight read of the machine and of the CPUs the target may use: the input of the
/// rules the registry runs for it ([`Rule::host`]).
#[derive(Clone, Copy, Debug)]
pub struct HostView<'a> {
    /// CPU topology, isolation and frequency.
    pub cpu: &'a CpuHost,
    /// Kernel and CPU settings (THP, NUMA balancing, NIC IRQs, perf_event_paranoid, SMT
    /// siblings).
    pub tuning: &'a Tuning,
    /// Virtualization.
    pub virt: &'a Virt,
    /// What the kernel offers the tracer.
    pub kernel: &'a KernelSupport,
    /// The CPUs the target may use (empty without `--pid`).
    pub server_cpus: &'a [u32],
    /// trapdetect runs as root.
    pub privileged: bool,
}

/// The findings of every rule with a [`Rule::host`] evaluation, in registry order.
pub fn run_host(v: &HostView) -> Vec<Finding> {
    RULES.iter().filter_map(|r| r.host?(v)).collect()
}

impl Rule {
    /// The fields every entry leaves at their default (all flags off).
    const PLAIN: Rule = Rule {
        id: "",
        title: "",
        commands: &[],
        mechanism: "",
        evidence: &[],
        remedy: "",
        doc: "",
        can_fail: false,
        explains_ceiling: false,
        ranked: false,
        consequence: false,
        untrusting: false,
        yields_to: &[],
        host: None,
        run: None,
    };
}

/// Defines [`Id`] (one variant per entry) and [`RULES`] (the entries, in the same order) from one
/// table; the flags an entry does not set are off.
macro_rules! registry {
    ($($name:ident => Rule { $($field:ident: $value:expr),* $(,)? }),* $(,)?) => {
        /// A registered finding id. Its variants are generated from the registry's entries, so
        /// `Finding::new` cannot be given an id that is not registered. Serialized as its
        /// string (`fs.cwd-slow`), ordered as that string.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Id {
            $(
                #[allow(missing_docs)]
                $name,
            )*
        }

        impl Id {
            /// Every id, in registry (sorted) order.
            pub const ALL: &'static [Id] = &[$(Id::$name),*];
        }

        /// Every finding id, sorted by id, at the index of its [`Id`].
        pub const RULES: &[Rule] = &[$(Rule { $($field: $value,)* ..Rule::PLAIN }),*];
    };
}

impl Id {
    /// Its registry entry.
    pub fn rule(self) -> &'static Rule {
        &RULES[self as usize]
    }

    /// The stable id string (`area.name`).
    pub fn as_str(self) -> &'static str {
        self.rule().id
    }

    /// The registered id spelled `s`.
    pub fn parse(s: &str) -> Option<Id> {
        Id::ALL.iter().copied().find(|i| i.as_str() == s)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialOrd for Id {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Id {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Id::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown finding id {s}")))
    }
}

/// Tests compare ids with their strings; a string that is not a registered id is a typo that
/// would make the comparison vacuous, so it panics.
#[cfg(test)]
impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        assert!(Id::parse(other).is_some(), "{other} is not a registered id");
        self.as_str() == *other
    }
}

use Command::{Load, NetCensus, Preflight, Run, Trace};

use super::{
    Finding, cpu, host,
    run::{RunObs, judge},
    tuning,
};
use crate::host::{
    cpu::CpuHost,
    host::{KernelSupport, Virt},
    tuning::Tuning,
};

const NET: &[Command] = &[Preflight, Trace, NetCensus];
const PRE: &[Command] = &[Preflight];

registry! {
    CpuAffinity => Rule {
        id: "cpu.affinity",
        title: "the server may run on fewer CPUs than the machine has",
        commands: PRE,
        mechanism: "Cpus_allowed (taskset, cpuset cgroup, container limits) covers fewer CPUs than \
                    are online: the server's ceiling is set by the mask, not by the machine, and a \
                    load generator sharing those CPUs competes with it.",
        evidence: &["cpus_allowed_list", "allowed_cpus", "online_cpus"],
        remedy: "widen the mask (taskset -pc 0-N PID, the cpuset of its cgroup) or pin the server \
                 and the load generator on disjoint CPUs on purpose, and say so in the results.",
        doc: "docs/preflight.md",
    },
    CpuFrequency => Rule {
        id: "cpu.frequency",
        title: "CPU frequency governor, turbo or SMT make results vary",
        commands: PRE,
        mechanism: "a governor other than `performance` ramps the clock with load, turbo/boost \
                    depends on temperature and the other cores, and SMT siblings share a core: \
                    the same run gives different numbers from one minute to the next.",
        evidence: &[
            "governors",
            "scaling_driver",
            "turbo",
            "turbo_source",
            "smt_active",
        ],
        remedy: "set the `performance` governor, disable turbo/boost and SMT for the run (as \
                 benchmark harnesses do), or report them with the results.",
        doc: "docs/preflight.md",
        host: Some(|v| cpu::frequency(v.cpu)),
    },
    CpuIsolated => Rule {
        id: "cpu.isolated",
        title: "the server may run on CPUs isolated from the scheduler (isolcpus=)",
        commands: PRE,
        mechanism: "the scheduler does not balance tasks across CPUs isolated with isolcpus=: a \
                    thread or process stays on the CPU it was created on unless pinned \
                    elsewhere, so a server given several isolated CPUs runs its workers on one, \
                    and one given isolated and housekeeping CPUs uses the housekeeping ones.",
        evidence: &[
            "isolated_list",
            "isolated_allowed",
            "allowed_cpus",
            "balanced_cpus",
        ],
        remedy: "run the server on the housekeeping CPUs, pin each worker to its own isolated \
                 CPU, or isolate with a cpuset partition that keeps load balancing.",
        doc: "docs/preflight.md",
        host: Some(|v| cpu::isolated(v.cpu, v.server_cpus)),
    },
    CpuOneCore => Rule {
        id: "cpu.one-core",
        run: Some(RunRule { order: 45, eval: judge::one_thread }),
        title: "the server runs about one core at a time while the load is capped",
        commands: &[Run],
        mechanism: "a single-threaded event loop (Node.js), an interpreter lock (CPython's GIL, \
                    Ruby's GVL) or one lock around the whole request path lets one thread run \
                    at a time: the ceiling is one core, whatever the threads or the cores; its \
                    other threads wait on futexes (idle pools, the lock) and look like contention.",
        evidence: &["target_cores", "cores", "cores_busy", "threads", "runtime", "gomaxprocs"],
        remedy: "run more processes (Node's cluster module or a process manager, gunicorn or \
                 uWSGI workers, Puma workers) or move the hot path off the one thread; a Go \
                 program under GOMAXPROCS=1: unset it.",
        doc: "docs/run.md",
        explains_ceiling: true,
        ranked: true,
    },
    CpuQuota => Rule {
        id: "cpu.quota",
        run: Some(RunRule { order: 30, eval: judge::quota }),
        title: "a cgroup CPU quota caps or throttles the server",
        commands: &[Preflight, Run],
        mechanism: "the tightest quota from the process's cgroup up to the root (v2 cpu.max, v1 \
                    cpu.cfs_quota_us/cfs_period_us) throttles the group each period once used: a \
                    flat ceiling below the core count with the CPUs idle.",
        evidence: &[
            "cgroup_version",
            "cgroup_dir",
            "quota_us",
            "period_us",
            "quota_cpus",
            "usable_cpus",
            "nr_throttled",
            "throttled_us",
            "throttled_share",
            "run_queue_threads",
            "cpu_ms_per_request",
        ],
        remedy: "raise or remove the quota (cpu.max `max`, docker --cpus, systemd CPUQuota=) for \
                 the benchmark, or report the quota as the machine size.",
        doc: "docs/preflight.md",
        can_fail: true,
        explains_ceiling: true,
    },
    CpuRunQueue => Rule {
        id: "cpu.run-queue",
        run: Some(RunRule { order: 60, eval: judge::run_queue }),
        title: "the server's threads wait for a CPU (runnable, not running)",
        commands: &[Run],
        mechanism: "threads that are runnable but not on a CPU queue behind other work or a CPU \
                    quota: the ceiling is CPU time, while the server's own CPU use looks modest.",
        evidence: &[
            "share_of_busy_thread_time_pct",
            "cores_busy",
            "runnable_waiting_for_idle_cpus",
            "runnable_behind_own_threads",
            "cores",
            "generator_cores",
            "cpu_quota",
        ],
        remedy: "find what else holds the CPUs (host.noise, the load generator on the same cores) \
                 or the quota (cpu.quota), and give the server CPUs of its own.",
        doc: "docs/run.md",
        explains_ceiling: true,
        ranked: true,
    },
    CpuSaturated => Rule {
        id: "cpu.saturated",
        run: Some(RunRule { order: 50, eval: judge::saturated }),
        title: "no trap: the CPUs the server may use are busy and it is at its capacity",
        commands: &[Run],
        mechanism: "when the load is capped, the CPUs the server may use (its affinity, its \
                    quota) are busy with the server and the processes that hand it work, and its \
                    threads spend their busy time on a CPU or waiting for one, the flat ceiling \
                    is the capacity of those CPUs, not a trap. CPUs busy with other processes \
                    are host.noise instead.",
        evidence: &[
            "target_cpus_busy",
            "allowed_cpus",
            "usable_cpus",
            "target_cores",
            "noise_cores",
            "share_of_busy_thread_time_pct",
        ],
        remedy: "nothing to fix in the environment: profile the server's CPU use, or add cores.",
        doc: "docs/run.md",
        ranked: true,
    },
    CpuSmtShared => Rule {
        id: "cpu.smt-shared",
        title: "the server and the load generator share CPUs or SMT siblings",
        commands: PRE,
        mechanism: "two hardware threads of one core share its execution units and caches: a \
                    load generator on the server's sibling (or CPU) takes from the server, and \
                    its work shows up as the server's latency.",
        evidence: &["server_cpus", "client_cpus", "shared_cpus", "sibling_pairs"],
        remedy: "pin them to different physical cores (taskset -c), whole cores each.",
        doc: "docs/preflight.md",
    },
    EnvDrift => Rule {
        id: "env.drift",
        title: "the environment changed between preflight --save and --since",
        commands: PRE,
        mechanism: "a run is spoiled while it runs when the machine reboots, the server's binary \
                    or configuration, kernel or CPU settings change, the CPUs are throttled or \
                    slow down, the hypervisor steals time, tasks stall on CPU or memory, the \
                    kernel logs trouble, the machine swaps or another process starts using CPU.",
        evidence: &[
            "changed_fields",
            "throttle_events",
            "frequency_drops",
            "steal_pct",
            "pressure_some_pct",
            "kernel_log_lines",
            "pages_swapped_in",
            "busy_processes",
        ],
        remedy: "discard the run and rerun with the environment held fixed (see each finding).",
        doc: "docs/preflight.md",
    },
    FpmAlertPatterns => Rule {
        id: "fpm.alert-patterns",
        title: "PHP-FPM reached max_children during earlier runs",
        commands: PRE,
        mechanism: "FPM logs `server reached pm.max_children setting` (dynamic) or `server \
                    reached max_children setting` (ondemand) when requests queue for a worker: \
                    the run measured the pool size, not the application.",
        evidence: &[
            "dynamic_pattern",
            "ondemand_pattern",
            "pools",
            "error_log",
            "dynamic_lines",
            "ondemand_lines",
            "last_line",
        ],
        remedy: "size pm.max_children for the planned load (and memory), and grep the error log \
                 for these lines after each run.",
        doc: "docs/preflight.md",
    },
    FpmMemory => Rule {
        id: "fpm.memory",
        title: "PHP-FPM pools can grow beyond the memory available",
        commands: PRE,
        mechanism: "FPM never multiplies max_children by a worker's size: under load the pool \
                    forks up to max_children, and Σ max_children × peak worker RSS beyond the \
                    budget swaps or gets OOM-killed mid-run.",
        evidence: &[
            "max_children",
            "peak_worker_rss_bytes",
            "peak_worker_pid",
            "product_bytes",
            "mem_available_bytes",
            "mem_budget_bytes",
            "headroom_bytes",
            "compared_against",
        ],
        remedy: "lower pm.max_children to budget ÷ peak worker RSS, or give the machine the \
                 memory.",
        doc: "docs/preflight.md",
        can_fail: true,
    },
    FpmOversized => Rule {
        id: "fpm.oversized",
        title: "PHP-FPM max_children well above the CPUs",
        commands: PRE,
        mechanism: "more workers than the master's CPUs can run turn CPU-bound requests into \
                    queueing in the scheduler: latency grows with no throughput gained.",
        evidence: &["max_children", "cpus", "workers_per_cpu"],
        remedy: "size max_children to the CPUs for CPU-bound pages (more only for I/O waits you \
                 measured).",
        doc: "docs/preflight.md",
    },
    FpmRamp => Rule {
        id: "fpm.ramp",
        title: "PHP-FPM needs seconds of load to fork up to max_children",
        commands: PRE,
        mechanism: "`pm = dynamic` forks at most pm.max_spawn_rate workers per maintenance second \
                    from start_servers; `pm = ondemand` forks on arrival and retires idle \
                    workers: the first seconds of a run measure the ramp.",
        evidence: &[
            "seconds_to_max_children",
            "workers_per_second",
            "process_idle_timeout_s",
        ],
        remedy: "warm up for at least seconds_to_max_children, or use `pm = static` for \
                 benchmarks.",
        doc: "docs/preflight.md",
    },
    FpmSocketPath => Rule {
        id: "fpm.socket-path",
        title: "a PHP-FPM unix socket path is too long and silently truncated",
        commands: PRE,
        mechanism: "sun_path holds 107 bytes + NUL; FPM truncates a longer `listen` path instead \
                    of refusing, so the web server connects to a socket that does not exist.",
        evidence: &["listen", "length_bytes", "fpm_listens_on"],
        remedy: "use a socket path under 108 bytes (e.g. /run/php/NAME.sock).",
        doc: "docs/preflight.md",
        can_fail: true,
    },
    FpmSpareServers => Rule {
        id: "fpm.spare-servers",
        title: "PHP-FPM spare-server settings FPM itself rejects",
        commands: PRE,
        mechanism: "FPM validates start/min/max spare servers of dynamic pools at start and \
                    refuses to run: the benchmark measures an error page or a pool that never \
                    came up.",
        evidence: &["fpm_alert"],
        remedy: "fix the pool so min_spare ≤ start_servers ≤ max_spare ≤ max_children.",
        doc: "docs/preflight.md",
        can_fail: true,
    },
    FsCwdSlow => Rule {
        id: "fs.cwd-slow",
        title: "the server's working directory is on a slow or remote filesystem",
        commands: &[Preflight, Trace],
        mechanism: "PHP chdirs around every request and the way back resolves the old cwd \
                    component by component; on WSL2 DrvFs, 9p, NFS, SMB, FUSE or virtiofs each \
                    component can be a round trip, and DrvFs serializes them machine-wide.",
        evidence: &[
            "cwd",
            "fs_type",
            "mount_point",
            "cwd_depth_below_mount",
            "lookups_per_request",
            "walk_ms_per_request",
            "share_of_request_time",
            "predicted_ceiling_rps_if_serialized",
        ],
        remedy: "start the server from a native directory: `( cd <native dir> && exec <exe> \
                 <args> )`; refuse such run directories in the harness (`trapdetect preflight \
                 --dir \"$RUN\" || exit 1`).",
        doc: "docs/trace.md",
        can_fail: true,
    },
    FsDirSlow => Rule {
        id: "fs.dir-slow",
        title: "a run directory (--dir) is slow: its operations measured against local",
        commands: PRE,
        mechanism: "a server started from, or reading files under, that directory pays what \
                    each operation costs there: preflight measures stat (cold and repeated), \
                    open+read+close, readdir and create+write+fsync+unlink beside the same \
                    operations on a local reference directory; a lookup 10 µs and 2× slower than \
                    local costs a request of 1 ms making 10 of them a tenth of its time (fail); \
                    other operations 100 µs slower warn; a mount the kernel answers from its \
                    cache passes with the figures.",
        evidence: &[
            "dir",
            "fs_type",
            "mount_point",
            "depth_below_mount",
            "probe",
            "lookup_excess_us",
            "lookup_floor_us",
            "other_floor_us",
            "ratio_floor",
            "severity_because",
        ],
        remedy: "move the run directory to a native filesystem; guard the harness with `case \
                 \"$RUN\" in <mount>/*)`.",
        doc: "docs/preflight.md",
        can_fail: true,
    },
    FsHotPathSlow => Rule {
        id: "fs.hot-path-slow",
        title: "files the server uses per request are on a slow filesystem",
        commands: &[Preflight, Trace],
        mechanism: "docroot, includes, sessions, databases or logs on a slow or remote mount: \
                    every stat, open and read of them pays a round trip.",
        evidence: &["files", "exe_on_mount", "paths"],
        remedy: "move those files to a native filesystem (or a cache directory on one).",
        doc: "docs/trace.md",
        can_fail: true,
    },
    // Judged by fs.slow-ops's run rule: `judge::filesystems` gives one of the two per mount.
    FsSerialized => Rule {
        id: "fs.serialized",
        title: "metadata operations serialized behind one filesystem",
        commands: &[Run],
        mechanism: "the filesystem's operation rate stays flat while the number of threads waiting \
                    in it grows (Little's law: waiters = rate × latency): one FUSE daemon thread, \
                    DrvFs under concurrency; throughput ≈ its capacity ÷ operations per request.",
        evidence: &[
            "mount",
            "mean_threads",
            "ops_per_s",
            "capacity_ops_per_s",
            "predicted_ceiling_per_s",
        ],
        remedy: "move what the requests touch (code, working directory, sessions) to a native \
                 filesystem, or enable caching on the mount.",
        doc: "docs/run.md",
        explains_ceiling: true,
        ranked: true,
    },
    FsSlowOps => Rule {
        id: "fs.slow-ops",
        run: Some(RunRule { order: 70, eval: judge::filesystems }),
        title: "the server's threads wait on a slow filesystem",
        commands: &[Run],
        mechanism: "threads spend their time blocked in operations on one filesystem; its rate is \
                    not (yet) seen to be flat, so it may scale, but the time is spent there.",
        evidence: &[
            "mount",
            "mean_threads",
            "ops_per_s",
            "share_of_thread_wall_time_pct",
        ],
        remedy: "move what the requests touch (code, working directory, sessions) to a native \
                 filesystem, or enable caching on the mount.",
        doc: "docs/run.md",
        explains_ceiling: true,
        ranked: true,
    },
    GenBudget => Rule {
        id: "gen.budget",
        run: Some(RunRule { order: 10, eval: judge::generator }),
        title: "the built-in generator's own budget capped the run",
        commands: &[Run],
        mechanism: "the generator holds at most --max-connections connections and opens at most \
                    --max-connect-rate new ones a second; when those held arrivals back while the \
                    server was at no limit of its own (no accept queue, no saturated CPU, no \
                    queued resource, no busy pool), the delivered rate is the generator's, not the \
                    server's (exit 3).",
        evidence: &[
            "max_connections",
            "busy_connections_max",
            "waited_for_connection",
            "connect_rate_per_s",
            "waited_for_connect",
            "flag",
        ],
        remedy: "raise the flag named (--max-connections or --max-connect-rate) and run again.",
        doc: "docs/run.md",
        untrusting: true,
    },
    GenClientStarved => Rule {
        id: "gen.client-starved",
        title: "an external load generator waited for a CPU",
        commands: &[Run],
        mechanism: "a generator run under `trapdetect run -- COMMAND` whose threads wait runnable \
                    for a tenth or more of the time they want a CPU, while the CPUs it may use \
                    have less than one free between them, sends late and counts its own wait \
                    as the server's latency: the numbers measure the generator (exit 3). With \
                    a CPU free its wait is the machine's wakeup latency, not a CPU taken.",
        evidence: &[
            "client_run_queue_mean",
            "client_run_queue_max",
            "client_cores_mean",
            "waiting_share_pct",
            "contended_seconds",
            "generator_cpus_idle_mean",
        ],
        remedy: "give the generator its own CPUs (taskset), or run it on another machine.",
        doc: "docs/run.md",
    },
    GenClosedLoop => Rule {
        id: "gen.closed-loop",
        title: "the load generator ran closed-loop",
        commands: &[Load, Trace],
        mechanism: "with at most N requests in flight, a slow server slows the generator down \
                    (coordinated omission): overload shows only as latency, never as lost \
                    arrivals.",
        evidence: &["concurrency", "in_flight_max", "rate_x_timeout"],
        remedy: "run open-loop (--rate without --concurrency) with a timeout, and read the \
                 status mix.",
        doc: "docs/load.md",
    },
    GenLag => Rule {
        id: "gen.lag",
        title: "the load generator fell behind its schedule",
        commands: &[Load, Trace],
        mechanism: "arrivals went out late or not at all, so the offered load was lower and \
                    burstier than planned: the numbers measure the generator (exit 3).",
        evidence: &[
            "sched_lag_p99_us",
            "sched_lag_max_us",
            "lag_budget_us",
            "unsent",
        ],
        remedy: "give the generator its own CPUs, lower the rate, or run it on another machine.",
        doc: "docs/load.md",
    },
    HostClocksource => Rule {
        id: "host.clocksource",
        title: "clock reads enter the kernel",
        commands: PRE,
        mechanism: "the vDSO reads tsc, kvm-clock or a Hyper-V page without a system call; with \
                    hpet or acpi_pm (a kernel not offered, or not trusting, a TSC) every \
                    timestamp the server, the load generator and the tracer take is a system \
                    call and a device read, microseconds on a VM.",
        evidence: &["clocksource", "clocksources_offered", "clock_read_ns", "syscall_ns"],
        remedy: "switch to tsc when it is offered; otherwise benchmark where it is, or state \
                 what a timestamp costs with the results.",
        doc: "docs/preflight.md",
        host: Some(|v| tuning::clocksource(v.tuning)),
    },
    HostKernelLog => Rule {
        id: "host.kernel-log",
        title: "the kernel logged trouble during or before the run",
        commands: PRE,
        mechanism: "OOM kills, SYN flooding, a full conntrack table, hung tasks, lockups, \
                    thermal throttling or I/O errors change what the benchmark measured without \
                    the server saying so.",
        evidence: &["since", "lines", "kinds", "lost_lines", "lines_shown"],
        remedy: "fix the cause the line names, then re-run; mark the log before each run \
                 (--kmsg-mark) to see only its lines.",
        doc: "docs/preflight.md",
    },
    HostKernelSupport => Rule {
        id: "host.kernel-support",
        title: "what this kernel offers the tracer (BTF, syscall tracepoints, fuse tracepoint)",
        commands: PRE,
        mechanism: "trace needs BTF and syscall tracepoints (Linux 5.8+); without them it cannot \
                    attach, and without the fuse tracepoint (6.13+) FUSE requests are estimated.",
        evidence: &["kernel_release", "btf"],
        remedy: "run on a kernel with BTF (CONFIG_DEBUG_INFO_BTF) and syscall tracepoints, or pass \
                 --btf FILE.",
        doc: "docs/preflight.md",
        host: Some(|v| Some(host::kernel_support(v.kernel))),
    },
    HostMemory => Rule {
        id: "host.memory",
        title: "swap in use, memory pressure or OOM kills",
        commands: PRE,
        mechanism: "pages swapped out or reclaimed under pressure add page-fault latency to \
                    requests at random; an OOM kill removes a worker mid-run.",
        evidence: &[
            "swap_used_bytes",
            "memory_pressure_some_avg10_pct",
            "oom_kills_since_mark",
        ],
        remedy: "free memory or add it; `swapoff -a` for the run; size pools to the memory.",
        doc: "docs/preflight.md",
    },
    HostNicIrqs => Rule {
        id: "host.nic-irqs",
        title: "the network interface's interrupts are served on the pinned server's CPUs",
        commands: PRE,
        mechanism: "packet processing (hard and soft IRQs) runs on the CPUs that take the \
                    interrupts: a server pinned to some CPUs that also serve the NIC loses time \
                    to every packet.",
        evidence: &["server_cpus", "nic_irqs"],
        remedy: "steer the NIC's IRQs away (/proc/irq/N/smp_affinity_list) or pin the server \
                 elsewhere.",
        doc: "docs/preflight.md",
        host: Some(|v| tuning::nic_irqs(v.tuning, v.server_cpus, v.cpu.online.len())),
    },
    HostNoise => Rule {
        id: "host.noise",
        run: Some(RunRule { order: 40, eval: judge::noise }),
        title: "other processes use the CPUs",
        commands: &[Preflight, Run],
        mechanism: "CPU time taken by other processes, CPU pressure or hypervisor steal is time \
                    the server and the generator do not get: results vary run to run.",
        evidence: &[
            "others_cpus",
            "target_cpus",
            "top_others",
            "load_1m",
            "cpu_pressure_some_avg10_pct",
            "steal_pct",
            "noise_cores",
            "steal_cores",
            "decides_verdict",
            "busiest_others",
        ],
        remedy: "stop the other work (the top consumers are named) or run on a quiet machine. \
                 Under `run`, when they decide a CPU ceiling the run is untrusted (exit 3).",
        doc: "docs/preflight.md",
    },
    HostNumaBalancing => Rule {
        id: "host.numa-balancing",
        title: "automatic NUMA balancing migrates pages during the run",
        commands: PRE,
        mechanism: "with more than one node, kernel.numa_balancing unmaps pages to sample their \
                    accesses and migrates them while the run runs: hinting faults and copies.",
        evidence: &["numa_balancing", "numa_nodes"],
        remedy: "sysctl -w kernel.numa_balancing=0 and bind the server to a node (numactl).",
        doc: "docs/preflight.md",
        host: Some(|v| tuning::numa_balancing(v.tuning)),
    },
    HostPerfParanoid => Rule {
        id: "host.perf-paranoid",
        title: "what perf_event_paranoid lets the tracer attach",
        commands: PRE,
        mechanism: "above 1, perf events (which carry the tracer's tracepoint programs) need \
                    CAP_PERFMON or root; Debian's level 3 refuses unprivileged ones altogether.",
        evidence: &["perf_event_paranoid", "privileged"],
        remedy: "run the tracer as root (or with CAP_BPF + CAP_PERFMON).",
        doc: "docs/preflight.md",
        host: Some(|v| tuning::perf_paranoid(v.tuning, v.privileged)),
    },
    HostThp => Rule {
        id: "host.thp",
        title: "transparent huge pages are set to `always`",
        commands: PRE,
        mechanism: "THP always backs large anonymous mappings with huge pages: faults may compact \
                    memory synchronously (defrag always) and khugepaged collapses pages in the \
                    background, so latency and RSS vary from run to run.",
        evidence: &["thp_enabled", "thp_defrag"],
        remedy: "madvise in /sys/kernel/mm/transparent_hugepage/{enabled,defrag}, or state it \
                 with the results.",
        doc: "docs/preflight.md",
        host: Some(|v| tuning::thp(v.tuning)),
    },
    HostTracer => Rule {
        id: "host.tracer",
        title: "a tracer is attached to the server",
        commands: PRE,
        mechanism: "a thread with a TracerPid (strace, gdb left running) stops at every syscall \
                    or signal: it costs a server most of its throughput.",
        evidence: &[
            "tracer_pid",
            "tracer_comm",
            "tracer_cmdline",
            "traced_threads",
        ],
        remedy: "detach the tracer (kill it or quit the debugger) before the run.",
        doc: "docs/preflight.md",
        can_fail: true,
    },
    HostVirt => Rule {
        id: "host.virt",
        title: "the machine is virtual (WSL2, a hypervisor)",
        commands: PRE,
        mechanism: "relative results transfer from a virtual machine, absolute numbers do not: \
                    I/O, timers and shared folders cost more than on bare metal.",
        evidence: &["wsl", "vendor", "hypervisor_flag"],
        remedy: "compare only runs on the same machine; state the virtualisation with results.",
        doc: "docs/preflight.md",
        host: Some(|v| host::virt(v.virt)),
    },
    LoadCeiling => Rule {
        id: "load.ceiling",
        title: "the server's delivered ceiling, below the offered rate",
        commands: &[Load, Run],
        mechanism: "above the server's capacity arrivals queue for a connection and are dropped \
                    after --max-wait: the 2xx per second inside the window is the server's \
                    ceiling, a result rather than a trap.",
        evidence: &[
            "offered_per_s",
            "delivered_2xx_per_s",
            "dropped",
            "queue_wait_p99_us",
            "busy_max",
        ],
        remedy: "read the delivered rate as the ceiling; raise --max-connections to check the \
                 budget is not what caps it.",
        doc: "docs/load.md",
        consequence: true,
    },
    LoadErrors => Rule {
        id: "load.errors",
        title: "errors above the --max-errors threshold",
        commands: &[Load, Run],
        mechanism: "arrivals that got no status (timeouts, resets, EOFs, refusals) above the \
                    threshold mean the run measured failures, not service.",
        evidence: &["errors_total", "errors_pct", "max_errors_pct", "sent", "overload_errors"],
        remedy: "lower the rate, fix what the error kinds point at, or raise --max-errors on \
                 purpose.",
        doc: "docs/load.md",
    },
    LoadRefusal => Rule {
        id: "load.refusal",
        title: "the server refused connections (EOF or reset before any byte)",
        commands: &[Load, Run],
        mechanism: "a fresh connection closed before any response byte is the server refusing it \
                    (nginx beyond worker_connections, a full accept queue), not a generic error.",
        evidence: &["refused", "listen_overflows", "listen_drops", "sent"],
        remedy: "raise the server's connection limit and listen backlog, or lower the generator's \
                 --max-connections.",
        doc: "docs/load.md",
        consequence: true,
    },
    LoadStatusMix => Rule {
        id: "load.status-mix",
        title: "a share of the arrivals did not get a 2xx",
        commands: &[Load, Trace, Run],
        mechanism: "a request rate counts errors too: 503s, timeouts and resets are fast and \
                    cheap, so the rate rises as the server fails.",
        evidence: &["sent", "delivered_2xx_per_s"],
        remedy: "compare goodput (2xx per second), and read the mix: 503 = said no, 429 = rate \
                 limit, timeout = said nothing, refused = process gone.",
        doc: "docs/load.md",
        consequence: true,
    },
    LockContention => Rule {
        id: "lock.contention",
        run: Some(RunRule { order: 90, eval: judge::locks }),
        title: "the server's threads wait on one lock",
        commands: &[Run],
        mechanism: "off-CPU time dominated by waits on one lock object (a flock'd file such as a \
                    PHP session, or a futex) serializes the workers whatever their number.",
        evidence: &[
            "object",
            "runtime_lock",
            "mean_threads",
            "share_of_thread_wall_time_pct",
        ],
        remedy: "remove the shared lock from the request path (per-user sessions, a lock-free \
                 store) or shorten what runs under it.",
        doc: "docs/run.md",
        explains_ceiling: true,
        ranked: true,
        // A mount at its capacity (fs.serialized) or holding every worker through each
        // request's wait there (fs.slow-ops) bounds the rate; a lock's capacity is never
        // measured (its ceiling is only the rate delivered), so beside them its waiters queue
        // in front of the mount or are idle pools parked on futexes (Node's V8 platform
        // threads while libuv's pool waits on the mount: as many thread-seconds).
        yields_to: &[Id::FsSerialized, Id::FsSlowOps],
    },
    NetEphemeralPorts => Rule {
        id: "net.ephemeral-ports",
        title: "ephemeral ports run out for one flow group",
        commands: &[Preflight, Trace, NetCensus, Load],
        mechanism: "ports run out per (client IP, server IP, server port), not per host: \
                    connect() searches longer as the range fills, and EADDRNOTAVAIL ends it.",
        evidence: &[
            "ephemeral_range",
            "ports_usable",
            "flow_group",
            "ports_used",
            "time_wait_ports",
            "headroom_ports",
            "planned_in_flight_connections",
        ],
        remedy: "`sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"` in the client's \
                 namespace, keep-alive, tcp_tw_reuse=1, more server ports or client addresses.",
        doc: "docs/net.md",
        can_fail: true,
    },
    NetFdLimit => Rule {
        id: "net.fd-limit",
        run: Some(RunRule { order: 20, eval: judge::descriptors }),
        title: "the descriptor limit is below what the run needs",
        commands: &[Preflight, Trace, NetCensus, Load, Run],
        mechanism: "an open-loop flood legitimately holds rate × timeout connections; past the \
                    soft RLIMIT_NOFILE, accept() or connect() fails with EMFILE.",
        evidence: &[
            "pid",
            "role",
            "in_flight_needed_connections",
            "open_fds",
            "soft_limit_fds",
            "hard_limit_fds",
            "headroom_fds",
            "accept_emfile",
        ],
        remedy: "`prlimit --pid P --nofile=N:N` for the running process, `ulimit -n N` or \
                 systemd LimitNOFILE=N at start (N = need + 25 %).",
        doc: "docs/net.md",
        can_fail: true,
    },
    NetListenOverflow => Rule {
        id: "net.listen-overflow",
        title: "the accept queue overflows",
        commands: NET,
        mechanism: "when the accept loop cannot keep up the listen backlog fills: arrivals never \
                    reach the server's limiter and dials hang until the client gives up.",
        evidence: &[
            "listen_overflows",
            "listen_drops",
            "listener",
            "accept_queue_connections",
            "backlog_connections",
            "somaxconn",
        ],
        remedy: "`sysctl -w net.core.somaxconn=4096` and a larger listen() backlog; an accept \
                 loop that keeps up; a fast 503 instead of the kernel queue.",
        doc: "docs/net.md",
        can_fail: true,
        consequence: true,
    },
    NetNagle => Rule {
        id: "net.nagle",
        run: Some(RunRule { order: 95, eval: judge::send_holds }),
        title: "the server's connections hold response tails until the client acknowledges",
        commands: &[Trace, Run],
        mechanism: "a response written in pieces on a socket without TCP_NODELAY: Nagle's \
                    algorithm holds the last piece, smaller than a segment, until the client \
                    acknowledges the first, and a client delays that acknowledgment (Linux: \
                    40 ms or more). The server is idle through the wait; latency measures the \
                    client's delayed-ACK timer and a closed-loop generator's throughput is its \
                    connections over it.",
        evidence: &[
            "seconds_with_held_connections",
            "seconds_read",
            "held_connections_mean",
            "held_connections_max",
            "connections_mean",
        ],
        remedy: "set TCP_NODELAY on the server's accepted sockets, or write each response in one \
                 call (Java's built-in HttpServer: -Dsun.net.httpserver.nodelay=true; Python's \
                 socketserver handlers: disable_nagle_algorithm = True).",
        doc: "docs/net.md",
    },
    NetTimeWait => Rule {
        id: "net.time-wait",
        title: "TIME_WAIT sockets left from earlier runs or building up",
        commands: NET,
        mechanism: "TIME_WAIT sockets hold ports and kernel buckets for 60 s: back-to-back \
                    points inherit tens of thousands and reruns differ by up to 8× in goodput.",
        evidence: &[
            "time_wait_sockets",
            "top_local_port",
            "closed_first_by_server_sockets",
            "closed_first_by_client_sockets",
            "top_flow_group",
            "drain_all_s",
            "below_1000_in_s",
            "time_wait_growth_per_s",
            "time_wait_entered_server_side",
            "time_wait_entered_client_side",
            "new_connections_during_trace",
            "requests_during_trace",
        ],
        remedy: "keep-alive, a fresh instance or port per point, and between points `trapdetect \
                 wait-drain --port P --below 1000 --timeout T`.",
        doc: "docs/net.md",
        can_fail: true,
    },
    NetUpstreamTimeWait => Rule {
        id: "net.upstream-time-wait",
        title: "the server's own upstream connections (one per request) leave TIME_WAIT",
        commands: NET,
        mechanism: "a proxy that opens one upstream connection per request (nginx to FastCGI \
                    over TCP without fastcgi_keep_conn) leaves a TIME_WAIT socket per request on \
                    the upstream port: the server's own flows, which keep-alive in the load \
                    generator does not change.",
        evidence: &[
            "upstream",
            "upstream_port",
            "time_wait_sockets",
            "closed_first_by_upstream_sockets",
            "closed_first_by_target_sockets",
            "live_upstream_connections",
        ],
        remedy: "reuse upstream connections: `fastcgi_keep_conn on` with an upstream keepalive \
                 pool, or a unix socket to php-fpm; for proxy_pass, HTTP/1.1 upstream keepalive.",
        doc: "docs/net.md",
    },
    PoolTooSmall => Rule {
        id: "pool.too-small",
        run: Some(RunRule { order: 100, eval: judge::pool }),
        title: "every worker is busy while the CPUs are idle",
        commands: &[Run],
        mechanism: "all workers busy (at work, or blocked in calls to an upstream or a database \
                    while connections queue for them), requests queueing, CPUs idle: the pool \
                    size, not the machine, caps throughput at workers ÷ busy time per request.",
        evidence: &[
            "workers",
            "busy_workers",
            "busy_ms_per_request",
            "predicted_ceiling_per_s",
            "accept_queue_max",
            "wait_in_reads_share_pct",
            "calls_answered_by",
        ],
        remedy: "raise the pool (pm.max_children, worker count) or shorten what a worker waits \
                 on.",
        doc: "docs/run.md",
        ranked: true,
    },
    ProcNotFresh => Rule {
        id: "proc.not-fresh",
        title: "the server instance carries an earlier run",
        commands: PRE,
        mechanism: "a high-water RSS far above the current one, a long uptime or many open \
                    descriptors mean an earlier flood left caches, queues and heap behind: the \
                    next point does not start from the same state.",
        evidence: &["uptime_s", "vm_rss_bytes", "vm_hwm_bytes", "fd_count"],
        remedy: "restart the server before each point.",
        doc: "docs/preflight.md",
    },
    ProcProvenance => Rule {
        id: "proc.provenance",
        title: "which binary runs",
        commands: PRE,
        mechanism: "results belong to one build: a binary replaced on disk (`(deleted)`) or a \
                    different libc (musl vs glibc: 3-4× on allocation-heavy loops) changes them.",
        evidence: &["exe", "sha256", "build_id", "libc", "interpreter"],
        remedy: "record the sha256 and build id with the results; restart a server whose binary \
                 was replaced.",
        doc: "docs/preflight.md",
    },
    RunClassesUnavailable => Rule {
        id: "run.classes-unavailable",
        run: Some(RunRule { order: 110, eval: judge::classes }),
        title: "this kernel cannot say why threads wait",
        commands: &[Run],
        mechanism: "without bpf_task_pt_regs (Linux 5.15+) and without the raw_tp/sys_enter probe \
                    that records the syscall at entry instead, the syscall a thread blocked in \
                    is unknown: off-CPU time is measured but not classified.",
        evidence: &["unknown_off_cpu_pct"],
        remedy: "see the probes table for why offcpu_sys_enter did not attach (raw tracepoints \
                 need Linux 4.17+).",
        doc: "docs/run.md",
    },
    RuntimeDebugBuild => Rule {
        id: "runtime.debug-build",
        title: "the server is a debug build (Go -race, a debug CPython)",
        commands: PRE,
        mechanism: "a Go binary built with -race instruments every memory access (Go's \
                    documentation: 5-10× the memory, 2-20× the time); a debug CPython (Py_DEBUG, \
                    ABI flag d) checks reference counts on every operation: the run measures the \
                    instrumentation.",
        evidence: &["build", "go_version", "go_build_settings", "exe"],
        remedy: "benchmark the release build: `go build` without -race, python3 rather than \
                 python3.X-dbg.",
        doc: "docs/preflight.md",
    },
    RuntimeDevMode => Rule {
        id: "runtime.dev-mode",
        title: "the server's environment puts its framework or interpreter in development mode",
        commands: PRE,
        mechanism: "NODE_ENV other than production (Express re-reads views per request), \
                    RAILS_ENV/RACK_ENV=development (code reloading), FLASK_DEBUG, FLASK_ENV, \
                    DJANGO_DEBUG or a dev settings module, PYTHONDEVMODE, PYTHONASYNCIODEBUG, \
                    PYTHONMALLOC=debug, PYTHONTRACEMALLOC, costly GODEBUG settings: read from \
                    /proc/PID/environ, the environment the server started with.",
        evidence: &["variable", "value", "exe"],
        remedy: "start the server with its production settings (NODE_ENV=production, \
                 RAILS_ENV=production, no debug variables).",
        doc: "docs/preflight.md",
    },
    RuntimeGomaxprocs => Rule {
        id: "runtime.gomaxprocs",
        title: "a Go server's GOMAXPROCS lets it run on fewer CPUs than it may use",
        commands: PRE,
        mechanism: "Go runs goroutines on at most GOMAXPROCS threads at once. Set in the \
                    server's environment below the CPUs the process may use (its affinity, \
                    and a binding cgroup quota's whole CPUs), it caps a CPU-bound server below \
                    the machine it is measured on: Caddy under GOMAXPROCS=1 on two CPUs served \
                    22,201 req/s on 1.01 cores.",
        evidence: &["gomaxprocs", "cpus", "exe"],
        remedy: "unset GOMAXPROCS (Go then uses every CPU the process may use); under a CPU \
                 quota, set it to the quota's whole CPUs.",
        doc: "docs/preflight.md",
    },
    RuntimeNginxLog => Rule {
        id: "runtime.nginx-log",
        title: "nginx logs at debug level, or per request to a slow filesystem",
        commands: PRE,
        mechanism: "Debian's nginx is built --with-debug: `error_log FILE debug` writes dozens of \
                    lines per request; an access_log without buffer= writes once per request, a \
                    round trip each on a FUSE, NFS, 9p or SMB mount.",
        evidence: &["directive", "args", "at", "path", "fs_type", "buffered"],
        remedy: "error_log at `error` or `notice`, access logs on a local filesystem (or off, or \
                 buffer=64k) for the benchmark, then `nginx -s reload`.",
        doc: "docs/preflight.md",
    },
    RuntimeOpcache => Rule {
        id: "runtime.opcache",
        title: "PHP compiles every script on every request (OPcache off), or revalidates on a slow mount",
        commands: PRE,
        mechanism: "without OPcache (not loaded, or opcache.enable = 0 in the effective ini or \
                    the pool) PHP parses and compiles every script per request; with \
                    validate_timestamps on and revalidate_freq 0 it stats every include per \
                    request, a round trip each on a slow mount.",
        evidence: &["opcache_loaded", "opcache_enable", "set_at", "code_mount"],
        remedy: "opcache.enable = 1 (and validate_timestamps = 0 for a benchmark), then \
                 restart php-fpm.",
        doc: "docs/preflight.md",
    },
    RuntimeXdebug => Rule {
        id: "runtime.xdebug",
        title: "PHP runs with Xdebug loaded",
        commands: PRE,
        mechanism: "Xdebug hooks every function call; in its default mode (develop) a loop of \
                    function calls ran about 14× slower here (2.1-2.7 s against 0.13-0.19 s).",
        evidence: &["xdebug_mode", "xdebug_mode_set_at", "loaded"],
        remedy: "`phpdismod xdebug` (or remove zend_extension=xdebug.so) and restart php-fpm.",
        doc: "docs/preflight.md",
    },
}

/// The rule with this id.
pub fn lookup(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// Every registered id, sorted.
pub fn ids() -> impl Iterator<Item = &'static str> {
    RULES.iter().map(|r| r.id)
}

/// Ids a command evaluates, sorted.
pub fn ids_of(c: Command) -> impl Iterator<Item = &'static str> {
    RULES
        .iter()
        .filter(move |r| r.commands.contains(&c))
        .map(|r| r.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn rules_are_sorted_unique_and_complete() {
        let ids: Vec<_> = ids().collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            ids, sorted,
            "RULES must be sorted by id, without duplicates"
        );
        for r in RULES {
            let (area, name) = r.id.split_once('.').expect("ids are area.name");
            assert!(!area.is_empty() && !name.is_empty(), "{}", r.id);
            assert!(!r.commands.is_empty(), "{}: no command", r.id);
            for s in [r.title, r.mechanism, r.remedy] {
                assert!(!s.trim().is_empty(), "{}: empty text", r.id);
            }
            assert!(!r.evidence.is_empty(), "{}: no evidence key", r.id);
        }
    }

    #[test]
    fn each_id_is_its_entry() {
        assert_eq!(Id::ALL.len(), RULES.len());
        for (i, id) in Id::ALL.iter().enumerate() {
            assert_eq!(*id as usize, i);
            assert_eq!(id.as_str(), RULES[i].id);
            assert_eq!(Id::parse(RULES[i].id), Some(*id));
            // The variant is the id in camel case: `fs.cwd-slow` is `FsCwdSlow`.
            let camel: String = RULES[i]
                .id
                .split(['.', '-'])
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            assert_eq!(format!("{id:?}"), camel);
        }
        assert_eq!(Id::parse("no.such-id"), None);
        let json = serde_json::to_string(&Id::FsCwdSlow).unwrap();
        assert_eq!(json, "\"fs.cwd-slow\"");
        assert_eq!(serde_json::from_str::<Id>(&json).unwrap(), Id::FsCwdSlow);
        assert!(serde_json::from_str::<Id>("\"no.such-id\"").is_err());
    }

    #[test]
    fn flags_belong_to_their_commands() {
        for r in RULES {
            if r.can_fail {
                assert!(r.commands.contains(&Command::Preflight), "{}", r.id);
            }
            if r.host.is_some() {
                assert!(r.commands.contains(&Command::Preflight), "{}", r.id);
            }
            if r.explains_ceiling || r.ranked || r.untrusting || r.run.is_some() {
                assert!(r.commands.contains(&Command::Run), "{}", r.id);
            }
        }
        // One place in `run`'s order for each run rule.
        let mut orders: Vec<u8> = RULES.iter().filter_map(|r| Some(r.run?.order)).collect();
        let n = orders.len();
        orders.sort();
        orders.dedup();
        assert_eq!(orders.len(), n, "two run rules share an order");
    }

    #[test]
    fn evidence_keys_exist_in_the_code() {
        let mut files = vec![];
        rust_files(&root().join("loader/src"), &mut files);
        let code: String = files
            .iter()
            .filter(|f| !f.ends_with("traps/registry.rs"))
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        for r in RULES {
            for k in r.evidence {
                assert!(
                    code.contains(&format!("\"{k}\"")),
                    "{}: evidence key {k} appears nowhere in loader/src",
                    r.id
                );
            }
        }
    }

    #[test]
    fn each_rule_is_documented_on_its_page() {
        for r in RULES {
            let page = std::fs::read_to_string(root().join(r.doc)).unwrap();
            assert!(
                page.contains(&format!("**{}**", r.id))
                    || page.contains(&format!("`{}`", r.id))
                    || page.contains(&format!("### {}", r.id)),
                "{} is not listed in {}",
                r.id,
                r.doc
            );
        }
    }

    #[test]
    fn preflight_lists_match_the_registry() {
        let registered: Vec<_> = ids_of(Command::Preflight).collect();
        let help = crate::cli::Cli::command()
            .find_subcommand_mut("preflight")
            .unwrap()
            .render_long_help()
            .to_string();
        for id in &registered {
            assert!(help.contains(id), "{id} missing from preflight --help");
        }
        let page = std::fs::read_to_string(root().join("docs/preflight.md")).unwrap();
        for id in &registered {
            assert!(page.contains(id), "{id} missing from docs/preflight.md");
        }
    }
}
