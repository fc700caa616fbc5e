//! `trapdetect run --pid N --url URL --rate R`: the open-loop load and the tracing at once, on
//! one clock, joined second by second, and a verdict on what the server's threads waited on
//! when throughput went flat.

use std::{collections::BTreeMap, path::PathBuf};

use trapdetect_common::offcpu::{CLASS_FILE_LOCK, CLASS_FUTEX, CLASS_NAMES, NUM_CLASSES};

use crate::{
    error::{Error, Result},
    escape,
    host::mounts::MountTable,
    load::{self, Plan, Running, Summary},
    probe::offcpu::classes_method_of,
    report::Report,
    trace::run::external::{ExternalDriver, LoadSide},
    trace::{
        self, LoadDriver,
        run::section::RunSection,
        seconds::{KernelSource, Sampler},
    },
    traps::{
        self,
        run::{FdPeakObs, FsLoad, LockLoad, ProcCpu, QuotaObs, RunObs, RunSecond},
    },
};

/// Flags of `trapdetect run`: the load generator's, plus the target.
#[derive(Debug, Clone, clap::Args)]
// `--url` is the built-in generator's: another one (`-- COMMAND`, `--load-results`) has none.
#[command(mut_arg("url", |a| a.required(false).default_value("")))]
pub struct RunArgs {
    /// Server to trace, with every process it forks (php-fpm's master covers its workers).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: u32,
    /// Kernel BTF to read struct offsets from, instead of /sys/kernel/btf/vmlinux.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The load: every flag of `trapdetect load`.
    #[command(flatten)]
    pub load: crate::cmd::load::LoadArgs,
    /// Results of your own generator to join second by second: read when the window ends
    /// (after COMMAND exits, when one is given). oha JSON, vegeta results (JSON lines, CSV)
    /// or JSON report, k6 summary export or JSON lines, wrk or hey text, hey CSV,
    /// trapdetect load JSON.
    #[arg(long, value_name = "FILE")]
    pub load_results: Option<PathBuf>,
    /// Your own generator instead of the built-in one, run for the window (which ends at
    /// --duration or when it exits) and watched as a client; its stdout is read as its
    /// results unless --load-results names them.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// --backend and --sample-hz.
    #[command(flatten)]
    pub backend: crate::sample::BackendArgs,
}

/// `run.classes_method` when the blocked syscall was sampled from /proc.
const METHOD_SAMPLED: u32 = u32::MAX;

/// Drives the full open-loop load during the trace and samples the kernel once a second.
struct RunDriver {
    pid: u32,
    plan: Plan,
    running: Option<Running>,
    sampler: Option<Sampler>,
    summary: Option<Summary>,
}

impl LoadDriver for RunDriver {
    fn start(&mut self) -> Result<()> {
        let r = load::start(self.plan.clone())?;
        self.sampler = Some(Sampler::new(self.pid, r.measured_start_ns()));
        self.running = Some(r);
        Ok(())
    }

    fn progress(&self) -> Option<u64> {
        self.running.as_ref().map(|r| r.live().completed)
    }

    fn tick(&mut self, probes: &dyn KernelSource) {
        if let Some(s) = self.sampler.as_mut() {
            s.tick(probes);
        }
    }

    fn end(&mut self, probes: &dyn KernelSource) {
        // The last, partial second.
        if let Some(s) = self.sampler.as_mut() {
            s.finish(probes);
        }
    }

    fn finish(&mut self, report: &mut Report) -> Result<Option<(u64, &'static str)>> {
        let running = self
            .running
            .take()
            .ok_or_else(|| Error::Untrusted("the load never started".into()))?;
        let s = running.stop()?;
        report.add(&s);
        report.findings.extend(load::findings(&s, &self.plan));
        // Unlike the tracer's light probe, this load is the measurement: a generator that
        // fell behind its schedule measured itself.
        for p in load::problems(&s, &self.plan) {
            report.measurement.trusted = false;
            report.measurement.problems.push(p);
        }
        let answered = s.ok_2xx + s.non_2xx;
        self.summary = Some(s);
        Ok((answered > 0).then_some((answered, "run-load")))
    }
}

/// Runs the command; returns the exit code.
pub fn run(args: RunArgs) -> Result<i32> {
    if args.load.closed_loop {
        return Err(Error::usage(
            "trapdetect run drives an open-loop load: drop --closed-loop",
        ));
    }
    crate::cmd::check_ignore(&args.load.verdict.ignore)?;
    let external = !args.command.is_empty() || args.load_results.is_some();
    if external && (!args.load.url.is_empty() || args.load.rate.is_some()) {
        return Err(Error::usage(
            "--url and --rate drive the built-in generator: with -- COMMAND or --load-results, drop them",
        ));
    }
    if !external && args.load.url.is_empty() {
        return Err(Error::usage(
            "--url is required (or your own generator after --, or --load-results FILE)",
        ));
    }
    if args.load.rate.as_ref().is_some_and(|r| r.to.is_some()) {
        return Err(Error::usage(
            "trapdetect run drives one rate: steps (--rate A..B) belong to `trapdetect load`",
        ));
    }
    let plan = if external {
        None
    } else {
        let plan = crate::cmd::load::plan(&args.load)?;
        plan.resolve()?;
        Some(plan)
    };
    // Output paths are refused now, before anything is attached.
    crate::output::check_all(&[
        ("--json-out", args.load.output.json_out.as_deref()),
        ("--html", args.load.output.html.as_deref()),
        ("--samples-out", args.load.samples_out.as_deref()),
    ])?;
    crate::output::check_all(&args.load.output.export.paths())?;
    let opts = trace::Options {
        pid: args.pid,
        duration: args.load.duration,
        top: 12,
        loss_budget_pct: 1.0,
        progress: crate::util::Progress::new(args.load.quiet, args.load.progress),
        btf: args.btf.clone(),
        watch_clients: vec![],
        skip_probes: vec![],
        offcpu: true,
    };
    let mut builtin = plan.map(|plan| RunDriver {
        pid: args.pid,
        plan,
        running: None,
        sampler: None,
        summary: None,
    });
    let mut other = if external {
        Some(ExternalDriver::new(
            args.pid,
            args.command.clone(),
            args.load_results.clone(),
        )?)
    } else {
        None
    };
    let driver: &mut dyn LoadDriver = match (&mut builtin, &mut other) {
        (Some(b), _) => b,
        (None, Some(o)) => o,
        (None, None) => unreachable!("one generator or the other"),
    };
    let (mut report, sampled) = crate::sample::measure(&args.backend, &opts, Some(driver))?;
    report.command = "run";
    let method = if sampled.is_some() {
        METHOD_SAMPLED
    } else {
        classes_method_of(&report.probes)
    };
    let offcpu_attached = sampled.is_some()
        || report.probes.iter().any(|p| {
            (p.program == trapdetect_common::offcpu::PROG_OFFCPU_SWITCH
                || p.program == trapdetect_common::offcpu::PROG_OFFCPU_SWITCH_RAW)
                && p.attached
        });
    let mounts = MountTable::of_pid(args.pid).unwrap_or_default();
    if let Some(s) = &sampled {
        let samplers = [
            builtin.as_mut().and_then(|b| b.sampler.as_mut()),
            other.as_mut().and_then(|o| o.sampler.as_mut()),
        ];
        for k in samplers.into_iter().flatten() {
            k.lock_names.extend(s.lock_names.clone());
        }
    }
    let joined = match (&builtin, &other) {
        (Some(b), _) => b
            .summary
            .as_ref()
            .zip(b.sampler.as_ref())
            .map(|(s, k)| (LoadSide::from_summary(s), k)),
        (None, Some(o)) => o.sampler.as_ref().map(|k| {
            let window_s = k.seconds.iter().map(|x| x.dt_s).sum::<f64>();
            (
                LoadSide::from_external(o.results.as_ref(), &o.client, window_s),
                k,
            )
        }),
        (None, None) => None,
    };
    if let Some((side, sampler)) = &joined {
        if !offcpu_attached {
            report.measurement.notes.push(
                "the off-CPU probes did not attach (see the probes table): the timeline has no kernel columns and there is no wait verdict".into(),
            );
        }
        let mut obs = observe(side, sampler, &report, &mounts, offcpu_attached, args.pid);
        obs.classified = method != trapdetect_common::offcpu::METHOD_UNKNOWN;
        if sampled.is_some() {
            obs.filesystems = crate::sample::filesystems(sampler, &mounts, args.pid);
        }
        report.findings.extend(traps::run::rules(&obs));
        if offcpu_attached {
            let inputs = traps::run::VerdictInputs {
                delivered_basis: delivered_basis(side, sampler).to_string(),
                timeouts: side
                    .seconds
                    .iter()
                    .filter_map(|x| x.errors.get("timeout"))
                    .sum(),
            };
            let v = traps::run::verdict(&obs, &mut report.findings, &inputs);
            if !v.trusted {
                report.measurement.trusted = false;
                report.measurement.problems.push(format!(
                    "the verdict is that the run measured something other than the server: {}",
                    v.summary
                ));
            }
            report.verdict = Some(v);
        }
        if let Some(s) = &sampled {
            crate::sample::annotate(&mut report.findings, &s.stats, &mounts);
        }
        // A row of the timeline that covers two seconds or more: a whole second is missing
        // (a failed reading, a starved loop), and the per-second join averages what it should
        // have resolved. Said, and the run is not trusted. (A row a few hundred ms long, a
        // tick late on a saturated machine, still resolves its second.)
        // Untrusted when fewer rows than half the window's seconds remain (the join then has
        // little of its per-second resolution left); one late row on a saturated machine is
        // stated.
        if let Some(worst) = sampler
            .seconds
            .iter()
            .map(|s| s.dt_s)
            .filter(|dt| *dt >= 2.0)
            .max_by(f64::total_cmp)
        {
            let window: f64 = sampler.seconds.iter().map(|s| s.dt_s).sum();
            let text = format!(
                "the per-second kernel sampler ran late: one row of the timeline covers {worst:.1} s (its slowest reading took {:.0} ms, one started {:.0} ms after its second had ended){}",
                sampler.slowest_reading_ns as f64 / 1e6,
                sampler.latest_start_ns as f64 / 1e6,
                sampler
                    .last_read_error
                    .as_ref()
                    .map(|e| format!(
                        " ({} failed readings of the off-CPU sums: {e})",
                        sampler.read_errors
                    ))
                    .unwrap_or_default()
            );
            if (sampler.seconds.len() as f64) < 0.5 * window {
                report.measurement.trusted = false;
                report.measurement.problems.push(text);
            } else {
                report.measurement.notes.push(text);
            }
        }
        let lost: u64 = sampler.seconds.iter().map(|s| s.lost).sum();
        if lost > 0 {
            report.measurement.notes.push(format!(
                "{lost} off-CPU intervals were lost (thread slot collisions or a full map); the seconds are marked"
            ));
        }
        let switches = sampler
            .window_totals()
            .get(trapdetect_common::offcpu::S_SWITCHES as usize)
            .copied()
            .unwrap_or(0);
        report.add(&RunSection::of(
            &obs,
            switches,
            &side.missing,
            delivered_basis(side, sampler),
            method_name(method),
        ));
    }
    report.finish(&args.load.verdict.ignore, args.load.verdict.strict);
    crate::cmd::trace::emit(
        &report,
        args.load.output.json,
        args.load.output.json_out.as_deref(),
        args.load.output.html.as_deref(),
    )?;
    args.load
        .output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

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

fn delivered_basis(side: &LoadSide, k: &Sampler) -> &'static str {
    match (side.per_second_2xx, served_by_requests(k)) {
        (true, _) => "generator-2xx",
        (false, true) => "kernel-served-requests",
        (false, false) => "kernel-accepted-connections",
    }
}

/// Run's observations, gathered once from the load side, the kernel sampler and the trace's
/// report: the joined timeline, the threads' time by class, the filesystems and lock objects
/// waited on, the worker pool and the quota.
fn observe(
    s: &LoadSide,
    k: &Sampler,
    report: &Report,
    mounts: &MountTable,
    attached: bool,
    pid: u32,
) -> RunObs {
    let others = Others::of(k, &s.client_pids);
    let mut seconds = timeline(s, k, mounts, attached);
    for r in &mut seconds {
        if let Some(ks) = k.seconds.iter().find(|x| x.t_s == r.t_s) {
            r.noise_cores = traps::round(others.noise_in(ks), 2);
        }
    }
    let mut off_s = vec![0.0; NUM_CLASSES as usize];
    let (mut on, mut runq) = (0.0, 0.0);
    for ks in &k.seconds {
        for (i, v) in ks.off_s.iter().enumerate() {
            off_s[i] += v;
        }
        on += ks.on_cpu_s;
        runq += ks.runq_s;
    }
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
        // The generator's seconds inside the span the sampler covered (a late sampler's row
        // covers several: counting only seconds with a row of their own made a clean server
        // at 3,000/s look capped at 594/s).
        s.seconds
            .iter()
            .filter(|p| (p.t_s as f64) < window_s - 1e-6)
            .map(|p| p.ok_2xx)
            .sum()
    } else {
        k.seconds.iter().map(|x| served_of(x, by_requests)).sum()
    };
    let path_off = off_s[trapdetect_common::offcpu::CLASS_PATH as usize];
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
        runq_s: runq,
        workers: k.workers(),
        filesystems: filesystems(k, report, mounts, pid, path_off, answered_window),
        locks: locks(k),
        classified: attached,
        quota: quota_obs(k),
        exe: report
            .target
            .as_ref()
            .map(|t| t.exe.clone())
            .unwrap_or_default(),
        allowed_cpus: k
            .seconds
            .iter()
            .rev()
            .find(|x| !x.allowed_cpus.is_empty())
            .map(|x| x.allowed_cpus.clone())
            .unwrap_or_default(),
        noise: others.listed(k, false, window_s),
        peers: others.listed(k, true, window_s),
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
    }
}

/// The other processes that ran on the target's CPUs, split into the benchmark's own (the
/// processes that woke its threads from a system call: its front end, its upstreams; and an
/// external generator's tree; trapdetect is not among them) and noise (everything else).
struct Others {
    stack: std::collections::HashSet<u32>,
}

impl Others {
    /// A process that woke the target's threads at least 10 times a second on average and for
    /// 1 % of all such wakeups is a peer: it hands the server work or answers. An interrupt
    /// that lands on a CPU hog wakes no one from the hog's system calls.
    fn of(k: &Sampler, client: &[u32]) -> Others {
        let window_s = k.seconds.iter().map(|x| x.dt_s).sum::<f64>().max(1.0);
        let total: u64 = k.wakers.values().sum();
        let mut stack: std::collections::HashSet<u32> = k
            .wakers
            .iter()
            .filter(|(_, n)| **n as f64 >= 10.0 * window_s && **n as f64 >= 0.01 * total as f64)
            .map(|(p, _)| *p)
            .collect();
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

    /// The peers (`stack`) or the noise, busiest first, with their mean cores over the window.
    fn listed(&self, k: &Sampler, stack: bool, window_s: f64) -> Vec<ProcCpu> {
        let mut by_pid: BTreeMap<u32, f64> = BTreeMap::new();
        for ks in &k.seconds {
            for (p, c) in &ks.others {
                if self.stack.contains(p) == stack {
                    *by_pid.entry(*p).or_default() += c * ks.dt_s;
                }
            }
        }
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
                wakeups: stack.then(|| k.wakers.get(&pid).copied()).flatten(),
            })
            .filter(|p| p.cores > 0.0 || stack)
            .collect();
        if stack {
            // Peers that woke the server without using its CPUs are still named.
            for (pid, n) in &k.wakers {
                if self.stack.contains(pid) && !out.iter().any(|p| p.pid == *pid) {
                    out.push(ProcCpu {
                        pid: *pid,
                        comm: std::fs::read(format!("/proc/{pid}/comm"))
                            .map(|c| escape::bytes(c.strip_suffix(b"\n").unwrap_or(&c)))
                            .unwrap_or_default(),
                        cores: 0.0,
                        wakeups: Some(*n),
                    });
                }
            }
        }
        out.sort_by(|a, b| b.cores.total_cmp(&a.cores).then(a.pid.cmp(&b.pid)));
        out.truncate(10);
        out
    }
}

/// The load side's seconds joined with the kernel's, each marked where its figures are
/// incomplete.
fn timeline(s: &LoadSide, k: &Sampler, mounts: &MountTable, attached: bool) -> Vec<RunSecond> {
    let mut seconds: Vec<RunSecond> = s.seconds.clone();
    let by_requests = served_by_requests(k);
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
        r.run_queue = traps::round(ks.runq_s / dt, 2);
        for (c, v) in CLASS_NAMES.iter().zip(ks.off_s.iter()) {
            if *v > 0.0 {
                r.off_cpu.insert(c, traps::round(v / dt, 2));
            }
        }
        r.threads = ks.threads;
        r.busy_threads = ks.busy_now;
        r.path_calls = (ks.path_calls as f64 / dt).round() as u64;
        for (d, n) in &ks.fuse_ops {
            r.fs_ops
                .insert(mount_name(mounts, *d), (*n as f64 / dt).round() as u64);
        }
        r.accept_queue = ks.accept_queue;
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
) -> Vec<FsLoad> {
    let requests = report.requests.as_ref().and_then(|q| q.count).unwrap_or(0) as f64;
    let row_s =
        |row: &crate::report::FsRow| row.syscall_ms_per_request.unwrap_or(0.0) * requests / 1e3;
    let all_rows_s: f64 = report.filesystems.iter().map(row_s).sum();
    let window_keys = k.window_keys();
    let in_window: Vec<&crate::trace::seconds::KernelSecond> = k.seconds.iter().collect();
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
            let dev = mounts
                .mounts
                .iter()
                .find(|m| m.mount_point_display() == row.mount_point)
                .map(|m| m.kernel_dev());
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
            let counts: Vec<(u64, f64)> = match dev {
                Some(d) => in_window
                    .iter()
                    .map(|x| (x.fuse_ops.get(&d).copied().unwrap_or(0), x.dt_s.max(1e-3)))
                    .collect(),
                None => vec![],
            };
            let fuse: u64 = counts.iter().map(|c| c.0).sum();
            // Rates, not counts: the last second is partial.
            let ops_per_s: Vec<u64> = counts
                .iter()
                .map(|(n, dt)| (*n as f64 / dt).round() as u64)
                .collect();
            let (ops, ops_kind, ops_per_s) = if fuse > 0 {
                (fuse, "FUSE requests", ops_per_s)
            } else {
                // Lookups are only known for the whole trace: scale them to this window.
                let scale = if requests > 0.0 {
                    answered_window as f64 / requests
                } else {
                    0.0
                };
                (
                    (row.lookups as f64 * scale).round() as u64 + file_io_waits,
                    if file_io_waits > 0 {
                        "lookups and blocked file I/O"
                    } else {
                        "lookups"
                    },
                    vec![],
                )
            };
            FsLoad {
                mount: row.mount_point.clone(),
                fs_type: row.fs_type.clone(),
                slow: row.slow.map(|x| x.describe().to_string()),
                syscall_s: path_off * share + file_io_s,
                ops,
                ops_kind,
                ops_per_s,
                holds_start_cwd: start_mount.as_deref() == Some(row.mount_point.as_str()),
            }
        })
        .collect()
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
            CLASS_FUTEX => "a futex in user space".to_string(),
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
fn method_name(method: u32) -> &'static str {
    if method == METHOD_SAMPLED {
        return trace::run::section::METHOD_SAMPLED;
    }
    trapdetect_common::offcpu::METHOD_NAMES
        .get(method as usize)
        .copied()
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn run_takes_the_load_flags() {
        let cli = Cli::try_parse_from([
            "trapdetect",
            "run",
            "--pid",
            "42",
            "--url",
            "http://127.0.0.1:8080/",
            "--rate",
            "800",
            "--duration",
            "60s",
            "--json-out",
            "/tmp/x.json",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Run(r)) => {
                assert_eq!(r.pid, 42);
                assert_eq!(r.load.rate.map(|r| (r.from, r.to)), Some((800.0, None)));
                assert_eq!(r.load.duration, std::time::Duration::from_secs(60));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            vec![
                "trapdetect",
                "run",
                "--url",
                "http://127.0.0.1/",
                "--rate",
                "5",
            ],
            vec![
                "trapdetect",
                "run",
                "--pid",
                "x",
                "--url",
                "http://127.0.0.1/",
            ],
        ] {
            assert_eq!(Cli::try_parse_from(&bad).unwrap_err().exit_code(), 2);
        }
    }

    #[test]
    fn a_closed_loop_or_a_bad_url_is_refused_before_anything_attaches() {
        for args in [
            vec!["--url", "http://127.0.0.1:1/", "--closed-loop", "-c", "4"],
            vec!["--url", "ftp://127.0.0.1/", "--rate", "5"],
            vec!["--url", "http://127.0.0.1:1/"],
        ] {
            let mut a = vec!["trapdetect", "run", "--pid", "1"];
            a.extend(args.iter().copied());
            let Some(Command::Run(r)) = Cli::try_parse_from(&a).unwrap().command else {
                panic!("{a:?}");
            };
            let e = super::run(*r).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}: {e}");
        }
    }
}
