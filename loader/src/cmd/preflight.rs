//! `trapdetect preflight`: a fast static check a harness runs before it measures, so it can
//! refuse a bad environment instead of documenting it. No tracing; most checks need no root
//! (the ones that do are listed as skipped, with the missing capability).
//!
//! Flow: validate the inputs (exit 2 on a missing pid or dir, an unreadable or malformed FPM
//! config, conflicting flags) → snapshot (`host::*`) → rules (`traps::*`) → one report.

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::{
    error::{Error, Result},
    escape,
    host::{
        cpu::{self, CpuHost},
        dirprobe::{self, DirProbe},
        fingerprint,
        fpm::{self, Master, Pool},
        host::{self as hostinfo, KernelLog, Mark},
        mounts::{MountTable, normalize},
        process::{self, ProcEntry, Process},
        runtime,
    },
    report::{
        Report, Skipped, Target,
        preflight::{DirProbeSection, FpmSection, GivenDir, HostSection, PreflightSection},
    },
    traps::{self, Finding, fpm::MemoryBasis, host::Tracer, registry},
    util::{parse_duration, parse_rate},
};

/// How far back the kernel log is read when there is no mark, s.
const RECENT_KMSG_S: f64 = 600.0;
/// Bytes of the FPM error log scanned for the max_children warning.
const LOG_TAIL: u64 = 8 << 20;

/// `preflight --help`'s epilogue: the ids it checks, from the rule registry, then the
/// harness line and the exit codes.
fn after_help() -> String {
    let mut ids = String::from("Checks (ids for --ignore):");
    let mut width = ids.len();
    for id in registry::ids_of(registry::Command::Preflight) {
        if width + 1 + id.len() > 92 {
            ids.push('\n');
            width = 0;
        } else {
            ids.push(' ');
            width += 1;
        }
        ids.push_str(id);
        width += id.len();
    }
    format!("{ids}\n(see docs/preflight.md and docs/net.md).\n\n{AFTER_HELP}")
}

const AFTER_HELP: &str = "In a harness:
  trapdetect preflight --dir \"$RUN\" --pid \"$SRV_PID\" || exit 1

Exit codes:
  0  no `fail` finding
  1  at least one `fail` finding (with --strict: or a `warn` finding)
  1  also with --strict: a check that could fail was skipped (listed as INCOMPLETE)
  2  bad usage or bad input (missing pid or dir, unreadable or malformed FPM config)
Checks that need a privilege this run lacks are listed as `skipped`, with the reason.";

/// Flags of `trapdetect preflight`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(after_help = after_help())]
pub struct PreflightArgs {
    /// The server to check: its cwd, exe and open files, cgroup CPU quota, affinity, tracer,
    /// age and peak memory (give php-fpm's master to cover its pools).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// A directory the run uses (run dir, docroot, databases); fails on a slow or remote
    /// filesystem. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub dir: Vec<PathBuf>,
    /// The load generator's pid: whether it shares CPUs or SMT siblings with the server.
    #[arg(long, value_name = "PID")]
    pub client: Option<u32>,
    /// Port the server listens on (for the network census).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Planned offered load, requests per second (with --timeout: the census sizes for
    /// rate × timeout connections).
    #[arg(long, value_name = "REQ/S", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// The load generator's request timeout (with --rate).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// A php-fpm configuration to check (default: the config of the php-fpm masters found by
    /// process name, or of --pid when it is php-fpm).
    #[arg(long, value_name = "FILE")]
    pub fpm_config: Option<PathBuf>,
    /// Memory the php-fpm pools may have, e.g. 2G, 512M, 1.5GiB (powers of 1024); default:
    /// MemAvailable plus what the workers hold now.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub mem_budget: Option<u64>,
    /// Sample other processes' CPU for this long (default 250ms with --pid, none without).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub sample: Option<Duration>,
    /// Do not sample (host.noise then uses the load average and CPU pressure only).
    #[arg(long)]
    pub no_sample: bool,
    /// Set a mark in the kernel log after checking: later runs report the lines since it.
    #[arg(long)]
    pub mark: bool,
    /// Where the mark lives (default $XDG_RUNTIME_DIR/trapdetect/kmsg.mark, or
    /// /run/trapdetect/kmsg.mark for root).
    #[arg(long, value_name = "FILE")]
    pub mark_file: Option<PathBuf>,
    /// Before a run: save the environment's fingerprint and moving counters (frequency,
    /// throttling, steal, pressure, kernel log position, swap, processes' CPU) to FILE.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// After a run: compare the environment with the one saved by --save FILE; what drifted
    /// is an env.drift finding (exit 1 when one fails).
    #[arg(long, value_name = "FILE")]
    pub since: Option<PathBuf>,
    /// --ignore and --strict.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
    /// --json, --json-out, --html and the exports.
    #[command(flatten)]
    pub output: crate::cmd::OutputArgs,
    /// No progress on stderr (preflight shows none; accepted so `-q` works in every command).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Text: show each finding's evidence and the host facts under the one-line summary.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// Parses a memory size: bytes, or a number with K, M, G, T (powers of 1024; `KiB`... too).
/// Decimal `MB`/`GB` are refused rather than guessed.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (try 2G, 512M, 1.5GiB)"))?;
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "K" | "k" | "KiB" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TiB" => 1024.0f64.powi(4),
        "KB" | "kB" | "MB" | "GB" | "TB" => {
            return Err(format!(
                "`{s}`: decimal units are ambiguous here; use K/M/G (powers of 1024) or a byte count"
            ));
        }
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use K, M, G or T)")),
    };
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!("`{s}`: the size must be at least one byte"));
    }
    if bytes > 2f64.powi(62) {
        return Err(format!("`{s}`: larger than any machine"));
    }
    Ok(bytes as u64)
}

/// Flag combinations clap cannot express as one-line errors.
fn validate(a: &PreflightArgs) -> Result<()> {
    if a.sample.is_some() && a.no_sample {
        return Err(Error::usage("--sample and --no-sample conflict"));
    }
    if a.rate.is_some() != a.timeout.is_some() {
        return Err(Error::usage(
            "--rate and --timeout go together (the census sizes for rate × timeout connections)",
        ));
    }
    if a.output.json && a.verbose {
        return Err(Error::usage(
            "--verbose is for text; --json always carries the full evidence",
        ));
    }
    for id in &a.verdict.ignore {
        if !registry::ids_of(registry::Command::Preflight).any(|k| k == id) {
            return Err(Error::usage(format!(
                "--ignore {}: no such finding id (known: {})",
                escape::text(id),
                registry::ids_of(registry::Command::Preflight)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// A --dir, resolved.
struct Dir {
    given: PathBuf,
    real: Vec<u8>,
}

fn resolve_dirs(dirs: &[PathBuf]) -> Result<Vec<Dir>> {
    dirs.iter()
        .map(|d| {
            let real = std::fs::canonicalize(d)
                .map_err(|e| Error::input(format!("--dir {}", d.display()), e))?;
            if !real.is_dir() {
                return Err(Error::usage(format!(
                    "--dir {}: not a directory",
                    d.display()
                )));
            }
            Ok(Dir {
                given: d.clone(),
                real: real.as_os_str().as_bytes().to_vec(),
            })
        })
        .collect()
}

/// Everything preflight observed; rules run on this.
struct Observed {
    target: Option<Process>,
    scan: Vec<ProcEntry>,
    cpu_host: CpuHost,
    load: Option<hostinfo::LoadAvg>,
    cpu_psi: Option<hostinfo::Psi>,
    memory: hostinfo::Memory,
    virt: hostinfo::Virt,
    kernel: hostinfo::KernelSupport,
    self_mounts: Option<MountTable>,
    target_mounts: Option<MountTable>,
    /// The directory probe of each --dir, in order.
    dir_probes: Vec<DirProbe>,
    /// The read-only probe of the target's working directory, when it is on a slow kind of
    /// mount.
    cwd_probe: Option<DirProbe>,
    /// The target's runtime mode (maps, environment, build info).
    runtime: Option<runtime::Runtime>,
    /// Read-only probes of the directories of the target's open files on slow kinds of
    /// mounts (at most [`OPEN_DIRS_PROBED`]), with the mount point each is on.
    open_dir_probes: Vec<(String, DirProbe)>,
}

/// Directories of a target's open files probed, at most.
const OPEN_DIRS_PROBED: usize = 3;

/// Runs the command; returns the exit code.
pub fn run(args: PreflightArgs) -> Result<i32> {
    crate::output::check_all(&[
        ("--json-out", args.output.json_out.as_deref()),
        ("--html", args.output.html.as_deref()),
    ])?;
    crate::output::check_all(&args.output.export.paths())?;
    let report = check(&args)?;
    let j = report.to_json() + "\n";
    let shown = if args.output.json {
        j.clone()
    } else {
        crate::report::preflight::render_text(&report, args.verbose)
    };
    let h = args
        .output
        .html
        .as_ref()
        .map(|_| crate::report::html::render(&report))
        .unwrap_or_default();
    crate::output::emit(
        &shown,
        &[
            ("--json-out", args.output.json_out.as_deref(), j.as_bytes()),
            ("--html", args.output.html.as_deref(), h.as_bytes()),
        ],
    )?;
    args.output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

/// What preflight was given, checked before anything is read.
struct Inputs {
    dirs: Vec<Dir>,
    given_cfg: Option<fpm::FpmConfig>,
    mark_path: Option<PathBuf>,
    since: Option<fingerprint::Snapshot>,
}

/// Reads a snapshot saved by `--save` (exit 2 on anything else).
fn load_since(p: &Path) -> Result<fingerprint::Snapshot> {
    let b = crate::input::read_capped(
        &format!("--since {}", p.display()),
        p,
        crate::input::REPORT_CAP,
    )?;
    let snap: fingerprint::Snapshot = serde_json::from_slice(&b).map_err(|e| {
        Error::usage(format!(
            "--since {}: not a snapshot saved by `preflight --save` ({e})",
            p.display()
        ))
    })?;
    if snap.schema != fingerprint::SNAPSHOT_SCHEMA {
        return Err(Error::usage(format!(
            "--since {}: schema {} is not {}",
            p.display(),
            escape::text(&snap.schema),
            fingerprint::SNAPSHOT_SCHEMA
        )));
    }
    Ok(snap)
}

/// Checks every input first, so bad ones fail before any time is spent.
fn inputs(args: &PreflightArgs) -> Result<Inputs> {
    validate(args)?;
    let dirs = resolve_dirs(&args.dir)?;
    if let Some(pid) = args.pid {
        process::read_basic(pid)?;
        if process::is_zombie(pid) {
            return Err(Error::usage(format!(
                "--pid {pid} is a zombie (it exited and its parent has not reaped it): nothing to check"
            )));
        }
    }
    let given_cfg = match &args.fpm_config {
        Some(p) => Some(load_fpm_config(p)?),
        None => None,
    };
    let mark_path = args.mark_file.clone().or_else(hostinfo::default_mark_path);
    if args.mark
        && let Some(p) = &mark_path
    {
        crate::output::check_target("--mark-file", p)?;
    }
    if args.mark && mark_path.is_none() {
        return Err(Error::usage(
            "--mark: no place for the mark ($XDG_RUNTIME_DIR and $HOME unset); give --mark-file",
        ));
    }
    if let Some(p) = &args.save {
        crate::output::check_target("--save", p)?;
    }
    if let Some(c) = args.client {
        process::read_basic(c).map_err(|e| Error::usage(format!("--client: {e}")))?;
    }
    let since = args.since.as_deref().map(load_since).transpose()?;
    Ok(Inputs {
        dirs,
        given_cfg,
        mark_path,
        since,
    })
}

impl Observed {
    /// Reads the target and the host, once.
    fn gather(pid: Option<u32>, dirs: &[Dir]) -> Result<Observed> {
        let root = Path::new("/");
        let target = match pid {
            Some(pid) => Some(process::read(
                pid,
                process::ReadOptions {
                    hash_exe: true,
                    ..Default::default()
                },
            )?),
            None => None,
        };
        let self_mounts = MountTable::read(Path::new("/proc/self/mountinfo")).ok();
        let dir_probes = dirs
            .iter()
            .map(|d| {
                dirprobe::probe(dirprobe::ProbeRequest {
                    open: PathBuf::from(std::ffi::OsStr::from_bytes(&d.real)),
                    shown: escape::bytes(&d.real),
                    write: true,
                    reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                })
            })
            .collect();
        let target_mounts = pid.and_then(|p| MountTable::of_pid(p).ok());
        // The working directory through /proc/PID/cwd (its own mount namespace), read-only.
        let cwd_probe = match (&target, &target_mounts) {
            (Some(t), Some(tm)) => t
                .cwd
                .as_ref()
                .filter(|c| {
                    tm.mount_of(c)
                        .is_some_and(|i| tm.mounts[i].slow_kind().is_some())
                })
                .map(|c| {
                    dirprobe::probe(dirprobe::ProbeRequest {
                        open: PathBuf::from(format!("/proc/{}/cwd", t.pid)),
                        shown: escape::bytes(c),
                        write: false,
                        reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                    })
                }),
            _ => None,
        };
        // The directories the target's open files live in, on slow kinds of mounts, through
        // its own root (/proc/PID/root), read-only.
        let mut open_dir_probes = vec![];
        if let (Some(t), Some(tm)) = (&target, &target_mounts) {
            let mut dirs: Vec<(Vec<u8>, String)> = vec![];
            for p in &t.open_paths {
                let Some(i) = tm.mount_of(p) else { continue };
                if tm.mounts[i].slow_kind().is_none() {
                    continue;
                }
                let d = match p.iter().rposition(|&c| c == b'/') {
                    Some(0) => b"/".to_vec(),
                    Some(k) => p[..k].to_vec(),
                    None => continue,
                };
                if !dirs.iter().any(|(x, _)| *x == d) && dirs.len() < OPEN_DIRS_PROBED {
                    dirs.push((d, tm.mounts[i].mount_point_display()));
                }
            }
            for (d, mp) in dirs {
                let mut open = PathBuf::from(format!("/proc/{}/root", t.pid));
                open.push(std::ffi::OsStr::from_bytes(
                    d.strip_prefix(b"/").unwrap_or(&d),
                ));
                open_dir_probes.push((
                    mp,
                    dirprobe::probe(dirprobe::ProbeRequest {
                        open,
                        shown: escape::bytes(&d),
                        write: false,
                        reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                    }),
                ));
            }
        }
        Ok(Observed {
            open_dir_probes,
            runtime: pid.map(runtime::read),
            dir_probes,
            cwd_probe,
            target_mounts,
            scan: process::scan(),
            cpu_host: cpu::read_cpu_host(root),
            load: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| hostinfo::parse_loadavg(&t)),
            cpu_psi: hostinfo::read_psi(root, "cpu"),
            memory: hostinfo::read_memory(root),
            virt: hostinfo::read_virt(root),
            kernel: hostinfo::read_kernel_support(root),
            self_mounts,
            target,
        })
    }
}

/// Findings and skipped checks as the rules produce them.
#[derive(Default)]
struct Verdicts {
    findings: Vec<Finding>,
    skipped: Vec<Skipped>,
}

impl Verdicts {
    fn skip(&mut self, check: &str, reason: String) {
        self.skipped.push(Skipped {
            check: check.to_string(),
            reason,
        })
    }
}

/// Builds the report (everything but printing): inputs, observations, rules, sections.
pub fn check(args: &PreflightArgs) -> Result<Report> {
    let started = Instant::now();
    let inputs = inputs(args)?;
    // The sample runs on its own thread while everything else is read.
    let window = if args.no_sample {
        None
    } else {
        args.sample.or(args.pid.map(|_| Duration::from_millis(250)))
    };
    let sample_targets: Vec<u32> = args.pid.into_iter().collect();
    let sampler =
        window.map(|w| std::thread::spawn(move || hostinfo::sample_noise(w, &sample_targets)));
    let obs = Observed::gather(args.pid, &inputs.dirs)?;
    let online = obs.cpu_host.online.len();
    let mut v = Verdicts::default();
    let target = cpu_and_target(&obs, &inputs.dirs, &mut v);
    let kmsg_seq = dir_and_host(args, &inputs, &obs, &mut v)?;
    let fpm_json = fpm_checks(
        args,
        inputs.given_cfg,
        &obs,
        online,
        &mut v.findings,
        &mut v.skipped,
    );
    // nginx's logging: the master given (or the one of a worker given), else every master.
    for pid in crate::host::nginx::masters(&obs.scan, args.pid) {
        match (crate::host::nginx::read_master(pid), &obs.self_mounts) {
            (Some(m), Some(t)) => {
                for u in &m.unreadable {
                    v.skip("runtime.nginx-log", u.clone());
                }
                v.findings.extend(traps::runtime::nginx_log(&m, t));
            }
            _ => v.skip(
                "runtime.nginx-log",
                format!("nginx {pid}: its title or the mount table could not be read"),
            ),
        }
    }
    // The network census (host::net + traps::net): TIME_WAIT left from earlier runs,
    // ephemeral ports, the listener's accept queue, descriptors for --rate × --timeout.
    let network = network_census(args, &mut v.findings, &mut v.skipped);
    // Noise, last: the sample has been running all along.
    let sample = sampler.and_then(|h| h.join().ok());
    if let Some(l) = &obs.load {
        v.findings.extend(traps::host::noise(
            l,
            online,
            sample.as_ref(),
            obs.cpu_psi.as_ref(),
        ));
    }

    // The environment's fingerprint, then the before/after gate.
    let mut fp = fingerprint::read(Path::new("/"), &obs.virt, &obs.cpu_host);
    fp.server_sha256 = obs
        .target
        .as_ref()
        .and_then(|t| t.exe.as_ref())
        .and_then(|e| e.sha256.clone());
    for f in fpm_json
        .iter()
        .flat_map(|j| j.as_array().into_iter().flatten())
        .flat_map(|u| u["files"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
    {
        if let Some(h) = fingerprint::file_sha256(Path::new(f)) {
            fp.config_sha256.insert(f.to_string(), h);
        }
    }
    if args.save.is_some() || inputs.since.is_some() {
        let now = fingerprint::snapshot(Path::new("/"), fp.clone(), kmsg_seq);
        if let Some(p) = &args.save {
            crate::output::write(
                "--save",
                p,
                (serde_json::to_string(&now).unwrap_or_default() + "\n").as_bytes(),
            )?;
        }
        if let Some(before) = &inputs.since {
            let mut exclude = vec![std::process::id()];
            if let Some(pid) = args.pid {
                exclude.extend(process::descendants(&obs.scan, pid));
            }
            v.findings.extend(traps::drift::drift(
                before,
                &now,
                &exclude,
                process::clock_ticks(),
            ));
        }
    }
    let mut r = Report::new("preflight");
    r.target = target;
    r.findings = v.findings;
    r.skipped = v.skipped;
    let elapsed_ms = traps::round(started.elapsed().as_secs_f64() * 1000.0, 1);
    r.window_s = sample.as_ref().map(|s| s.window_s);
    r.add(&HostSection::of(
        &obs.cpu_host,
        obs.load,
        obs.cpu_psi,
        &obs.memory,
        &obs.virt,
        sample.as_ref(),
    ));
    r.add(&fp);
    if let Some(j) = fpm_json {
        r.add(&FpmSection(j));
    }
    if let Some(obs) = &network {
        r.add(obs);
    }
    let probes: Vec<DirProbe> = obs
        .dir_probes
        .iter()
        .chain(&obs.cwd_probe)
        .chain(obs.open_dir_probes.iter().map(|(_, p)| p))
        .cloned()
        .collect();
    if !probes.is_empty() {
        r.add(&DirProbeSection::of(&probes));
    }
    let incomplete = crate::report::incomplete(&r.skipped, &args.verdict.ignore);
    r.add(&PreflightSection {
        elapsed_ms,
        sample_window_s: sample.as_ref().map(|s| s.window_s),
        dirs: inputs
            .dirs
            .iter()
            .map(|d| GivenDir {
                given: escape::bytes(d.given.as_os_str().as_bytes()),
                resolved: escape::bytes(&d.real),
            })
            .collect(),
        strict: args.verdict.strict,
        verbose: args.verbose,
        mark_file: inputs
            .mark_path
            .as_ref()
            .map(|p| escape::bytes(p.as_os_str().as_bytes())),
        incomplete,
    });
    r.incomplete_fails_strict = true;
    r.finish(&args.verdict.ignore, args.verdict.strict);
    Ok(r)
}

/// The CPUs the target (or, without --pid, what this shell would hand a server) may use, its
/// cgroup quota, and the target's own checks; returns the report's target line.
fn cpu_and_target(obs: &Observed, dirs: &[Dir], v: &mut Verdicts) -> Option<Target> {
    let (subject, cg_pid, allowed_list) = match &obs.target {
        // The process of the tree with the fewest CPUs binds (a worker pinned apart from its
        // master): it is named when it is not the pid given.
        Some(t) => match process::binding_affinity(&obs.scan, t.pid) {
            Some((pid, comm, list)) if pid != t.pid => (
                format!("the target's process {pid} ({})", escape::bytes(&comm)),
                pid,
                list,
            ),
            _ => (
                "the target".to_string(),
                t.pid,
                t.status.cpus_allowed_list.clone(),
            ),
        },
        None => (
            "this shell (and what it starts)".to_string(),
            std::process::id(),
            std::fs::read_to_string("/proc/self/status")
                .map(|t| process::parse_status(&t).cpus_allowed_list)
                .unwrap_or_default(),
        ),
    };
    let subject = subject.as_str();
    let allowed = process::parse_cpu_list(&allowed_list).unwrap_or_default();
    v.findings.extend(traps::cpu::affinity(
        &allowed,
        &allowed_list,
        &obs.cpu_host.online,
        &obs.cpu_host.online_list,
        subject,
    ));
    let usable = allowed
        .iter()
        .filter(|c| obs.cpu_host.online.contains(c))
        .count()
        .max(1);
    match cpu::cpu_cgroup_of(cg_pid, obs.self_mounts.as_ref()) {
        Ok(Some(cg)) => v.findings.extend(traps::cpu::quota(&cg, usable, subject)),
        Ok(None) => v.skip(
            "cpu.quota",
            "no cgroup hierarchy with the cpu controller is mounted".into(),
        ),
        Err(e) => v.skip("cpu.quota", e),
    }
    let t = obs.target.as_ref()?;
    target_checks(t, obs, dirs, &mut v.findings, &mut v.skipped);
    Some(Target {
        pid: t.pid,
        comm: escape::bytes(&t.stat.comm),
        exe: t
            .exe
            .as_ref()
            .map(|e| escape::bytes(&e.path))
            .unwrap_or_else(|| "?".into()),
        cwd: t
            .cwd
            .as_deref()
            .map(escape::bytes)
            .unwrap_or_else(|| "?".into()),
        processes: process::descendants(&obs.scan, t.pid).len(),
        exited_after_s: None,
    })
}

/// `--dir`, the CPU frequency, the host (virtualization, kernel support, memory, the kernel
/// log since the mark).
fn dir_and_host(
    args: &PreflightArgs,
    inputs: &Inputs,
    obs: &Observed,
    v: &mut Verdicts,
) -> Result<Option<u64>> {
    if !inputs.dirs.is_empty() {
        match &obs.self_mounts {
            Some(t) => {
                for (d, p) in inputs.dirs.iter().zip(&obs.dir_probes) {
                    v.findings
                        .extend(traps::dir_probe::dir(t, &normalize(&d.real), p));
                }
            }
            None => v.skip("fs.dir-slow", "/proc/self/mountinfo unreadable".into()),
        }
    }
    if obs.cpu_host.freq.is_empty() {
        v.skip(
            "cpu.frequency",
            "no cpufreq in /sys/devices/system/cpu/cpu*/cpufreq (usual in a VM: the hypervisor sets the clock); governor and turbo not checked".into(),
        );
    }
    // Kernel and CPU settings the run inherits.
    let tuning = crate::host::tuning::read(Path::new("/"));
    let cpus_of = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|t| process::parse_cpu_list(&process::parse_status(&t).cpus_allowed_list))
            .unwrap_or_default()
    };
    let server_cpus = obs
        .target
        .as_ref()
        .and_then(|t| process::parse_cpu_list(&t.status.cpus_allowed_list))
        .unwrap_or_default();
    // The rules that judge only these readings run from the registry.
    v.findings.extend(registry::run_host(&registry::HostView {
        cpu: &obs.cpu_host,
        tuning: &tuning,
        virt: &obs.virt,
        kernel: &obs.kernel,
        server_cpus: &server_cpus,
        privileged: nix::unistd::geteuid().is_root(),
    }));
    match (args.client, obs.target.is_some()) {
        (Some(c), true) => v.findings.extend(traps::tuning::smt_shared(
            &tuning,
            &server_cpus,
            &cpus_of(c),
        )),
        (Some(_), false) => v.skip(
            "cpu.smt-shared",
            "--client without --pid: no server to compare its CPUs with".into(),
        ),
        _ => {}
    }
    let kmsg = kernel_log(args, inputs.mark_path.as_deref(), obs, &mut v.skipped)?;
    let oom_since_mark = kmsg
        .as_ref()
        .and_then(|k| k.mark.as_ref())
        .and_then(|m| Some(obs.memory.oom_kill?.saturating_sub(m.oom_kill?)));
    v.findings
        .extend(traps::host::memory(&obs.memory, oom_since_mark));
    if let Some(k) = &kmsg {
        v.findings.extend(traps::host::kernel_log(k));
    }
    Ok(kmsg.map(|k| k.last_seq))
}

fn denied_reason(t: &Process, what: &str) -> Option<String> {
    t.denied.iter().find(|d| d.what == what).map(|d| {
        format!(
            "/proc/{}/{}: {} (needs ptrace access to the process: the same user, or CAP_SYS_PTRACE)",
            t.pid,
            what.split(' ').next().unwrap_or(what),
            d.reason
        )
    })
}

fn target_checks(
    t: &Process,
    obs: &Observed,
    dirs: &[Dir],
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) {
    let mut skip = |check: &str, reason: String| {
        skipped.push(Skipped {
            check: check.to_string(),
            reason,
        })
    };
    findings.extend(traps::process::not_fresh(t));
    // Runtime modes (PHP's are judged with its pools, in fpm_checks).
    if let Some(r) = &obs.runtime {
        if let Some(e) = &r.env_error {
            skip("runtime.dev-mode", e.clone());
        }
        findings.extend(traps::runtime::dev_mode(r));
        findings.extend(traps::runtime::debug_build(r));
    }
    match denied_reason(t, "exe") {
        Some(r) => skip("proc.provenance", r),
        None => {
            if let Some(r) = denied_reason(t, "exe (contents)") {
                skip("proc.provenance (sha256, build-id, libc)", r);
            }
            findings.extend(traps::process::provenance(t));
        }
    }
    // Tracers: the target's threads and its direct children.
    let tracers: Vec<Tracer> = {
        let mut pids: Vec<u32> = t.traced.iter().map(|x| x.tracer_pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids.into_iter()
            .map(|pid| Tracer {
                pid,
                comm: process::comm_of(pid),
                cmdline: process::cmdline_of(pid),
            })
            .collect()
    };
    findings.extend(traps::host::tracer(&t.traced, &tracers));

    // Filesystems, in the target's own mount namespace (its cwd is relative to its root).
    if let Some(r) = denied_reason(t, "fd") {
        skip("fs.hot-path-slow (open files)", r);
    }
    let Some(table) = &obs.target_mounts else {
        skip(
            "fs.cwd-slow",
            format!("/proc/{}/mountinfo unreadable", t.pid),
        );
        return;
    };
    let native = dirs
        .iter()
        .find(|d| {
            obs.self_mounts
                .as_ref()
                .and_then(|m| {
                    m.mount_of(&d.real)
                        .map(|i| m.mounts[i].slow_kind().is_none())
                })
                .unwrap_or(false)
        })
        .map(|d| escape::bytes(&d.real));
    let restart = traps::fs::restart_command(
        native.as_deref(),
        t.exe.as_ref().map(|e| e.path.as_slice()),
        &t.cmdline,
    );
    match &t.cwd {
        Some(c) => {
            let mut seen = vec![c.clone()];
            findings.extend(traps::dir_probe::cwd(
                traps::fs_static::cwd(table, t.pid, c, &restart),
                obs.cwd_probe.as_ref(),
                table.mount_of(c).map(|i| &table.mounts[i]),
            ));
            // Children (php-fpm workers with `chdir =`) may run elsewhere.
            for (pid, cwd) in &t.children {
                if let Some(cwd) = cwd
                    && !seen.contains(cwd)
                {
                    seen.push(cwd.clone());
                    findings.extend(traps::fs_static::cwd(table, *pid, cwd, &restart));
                }
            }
        }
        None => skip(
            "fs.cwd-slow",
            denied_reason(t, "cwd").unwrap_or_else(|| "cwd unreadable".into()),
        ),
    }
    findings.extend(
        traps::fs_static::hot_paths(
            table,
            t.pid,
            t.exe.as_ref().map(|e| e.path.as_slice()),
            &t.open_paths,
        )
        .into_iter()
        .map(|f| traps::dir_probe::hot_path(f, &obs.open_dir_probes)),
    );
}

fn load_fpm_config(p: &Path) -> Result<fpm::FpmConfig> {
    // A directory, a device, a FIFO, an oversized or unreadable file is bad input (exit 2),
    // said in one line.
    crate::input::read_capped(
        &format!("--fpm-config {}", p.display()),
        p,
        crate::input::FPM_CONFIG_CAP,
    )?;
    fpm::load(p, fpm::DEFAULT_PREFIX)
        .map_err(|e| Error::usage(format!("malformed FPM config: {e}")))
}

fn kernel_log(
    args: &PreflightArgs,
    mark_path: Option<&Path>,
    obs: &Observed,
    skipped: &mut Vec<Skipped>,
) -> Result<Option<KernelLog>> {
    let boot = hostinfo::boot_id();
    let mark = match mark_path.map(hostinfo::read_mark) {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            skipped.push(Skipped {
                check: "host.kernel-log (mark)".into(),
                reason: format!(
                    "{}: {e}",
                    mark_path
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                ),
            });
            None
        }
        None => None,
    };
    let records = match hostinfo::read_kmsg() {
        Ok(r) => Some(r),
        Err(e) => {
            let restrict = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            skipped.push(Skipped {
                check: "host.kernel-log".into(),
                reason: if e.kind() == std::io::ErrorKind::PermissionDenied {
                    format!("/dev/kmsg: {e} (needs CAP_SYSLOG: kernel.dmesg_restrict = {restrict})")
                } else {
                    format!("/dev/kmsg: {e}")
                },
            });
            None
        }
    };
    let uptime = process::uptime_s().unwrap_or(0.0);
    let log = records
        .as_ref()
        .map(|all| hostinfo::select_records(all, mark.as_ref(), &boot, uptime, RECENT_KMSG_S));
    if args.mark && records.is_none() {
        skipped.push(Skipped {
            check: "--mark".into(),
            reason: "not set: the kernel log cannot be read, so there is no position to mark"
                .into(),
        });
    } else if args.mark
        && let Some(path) = mark_path
    {
        let new = Mark {
            boot_id: boot,
            seq: log.as_ref().map(|l| l.last_seq).unwrap_or(0),
            oom_kill: obs.memory.oom_kill,
            unix_time_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        hostinfo::write_mark(path, &new)?;
    }
    Ok(log)
}

/// One php-fpm to check: a configuration and, when it runs, its master.
struct FpmUnit {
    config_path: Option<PathBuf>,
    config: Option<fpm::FpmConfig>,
    master: Option<Master>,
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// A master's configuration path, resolved against its cwd when relative.
fn master_config_path(m: &Master) -> Option<PathBuf> {
    let c = m.config.clone()?;
    if c.is_absolute() {
        return Some(c);
    }
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", m.pid)).ok()?;
    Some(cwd.join(c))
}

/// The php-fpm checks: each master found (or the one running `--fpm-config`), with its
/// configuration; then each pool's rules, its error log and its workers' memory.
fn fpm_checks(
    args: &PreflightArgs,
    given: Option<fpm::FpmConfig>,
    obs: &Observed,
    online: usize,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) -> Option<serde_json::Value> {
    let units = fpm_units(args, given, obs, skipped);
    if units.is_empty() {
        if args.mem_budget.is_some() {
            skipped.push(Skipped {
                check: "fpm.memory".into(),
                reason: "--mem-budget given, but no php-fpm master was found and no --fpm-config named one".into(),
            });
        }
        return None;
    }
    let out = units
        .iter()
        .map(|u| fpm_unit_checks(u, args, obs, online, findings, skipped))
        .collect();
    Some(serde_json::Value::Array(out))
}

/// The php-fpm masters to check and their configurations (read now).
fn fpm_units(
    args: &PreflightArgs,
    given: Option<fpm::FpmConfig>,
    obs: &Observed,
    skipped: &mut Vec<Skipped>,
) -> Vec<FpmUnit> {
    let masters: Vec<u32> = match args.pid {
        Some(pid) => fpm::master_of(&obs.scan, pid).into_iter().collect(),
        None => fpm::find_masters(&obs.scan),
    };
    let mut units: Vec<FpmUnit> = vec![];
    let mut given = given;
    for pid in masters {
        let m = fpm::read_master(&obs.scan, pid);
        let path = master_config_path(&m);
        // With --fpm-config, a master running that file is measured with it; without --pid,
        // masters running other files are not what was asked about.
        if let Some(g) = &given {
            if path.as_deref().is_some_and(|p| same_file(p, &g.main)) {
                units.push(FpmUnit {
                    config_path: Some(g.main.clone()),
                    config: given.take(),
                    master: Some(m),
                });
                continue;
            }
            if args.pid.is_none() {
                continue;
            }
        }
        let config = match &path {
            Some(p) => match fpm::load(p, fpm::DEFAULT_PREFIX) {
                Ok(c) => Some(c),
                Err(e) => {
                    skipped.push(Skipped {
                        check: format!("fpm.* (master {pid})"),
                        reason: format!("its configuration cannot be read now: {e}"),
                    });
                    None
                }
            },
            None => {
                skipped.push(Skipped {
                    check: format!("fpm.* (master {pid})"),
                    reason: "its title names no configuration file".into(),
                });
                None
            }
        };
        units.push(FpmUnit {
            config_path: path,
            config,
            master: Some(m),
        });
    }
    if let Some(g) = given {
        units.push(FpmUnit {
            config_path: Some(g.main.clone()),
            config: Some(g),
            master: None,
        });
    }
    units
}

/// One master's (or one configuration's) checks; returns its `fpm` JSON entry.
fn fpm_unit_checks(
    u: &FpmUnit,
    args: &PreflightArgs,
    obs: &Observed,
    online: usize,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) -> serde_json::Value {
    let pools: Vec<Pool> = u
        .config
        .as_ref()
        .map(|c| {
            c.pools
                .iter()
                .map(|p| Pool::from_config(p, fpm::DEFAULT_PREFIX))
                .collect()
        })
        .unwrap_or_default();
    let cpus = u
        .master
        .as_ref()
        .map(|m| m.cpus_allowed)
        .filter(|&c| c > 0)
        .unwrap_or(online);
    if let Some(m) = &u.master {
        php_runtime(m, u.config.as_ref(), obs, findings);
    }
    for p in &pools {
        findings.extend(traps::fpm::spare_servers(p));
        findings.extend(traps::fpm::socket_path(p));
        findings.extend(traps::fpm::ramp(p));
        findings.extend(traps::fpm::oversized(p, cpus));
    }
    let log_path = u
        .config
        .as_ref()
        .and_then(|c| fpm::error_log(c, fpm::DEFAULT_PREFIX));
    let counts = match &log_path {
        Some(p) => match fpm::scan_log(p, LOG_TAIL) {
            Ok(c) => Some(c),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                skipped.push(Skipped {
                    check: "fpm.alert-patterns (log counts)".into(),
                    reason: format!("{}: {e}", p.display()),
                });
                None
            }
        },
        None => None,
    };
    let log_s = log_path
        .as_ref()
        .map(|p| escape::bytes(p.as_os_str().as_bytes()));
    findings.extend(traps::fpm::alert_patterns(
        &pools,
        counts.as_ref(),
        log_s.as_deref(),
    ));
    match &u.master {
        Some(m) if !pools.is_empty() => {
            let cgroup_limit = std::fs::read_to_string(format!("/proc/{}/cgroup", m.pid))
                .ok()
                .and_then(|t| {
                    let lines = cpu::parse_proc_cgroup(&t);
                    cpu::cgroup_dir(&lines, obs.self_mounts.as_ref()?, "memory", Path::new("/"))
                })
                .and_then(|at| cpu::read_memory_limit(&at, Path::new("/")));
            let basis = MemoryBasis {
                mem_available_bytes: obs.memory.mem_available_kib * 1024,
                budget_bytes: args.mem_budget,
                cgroup_limit,
            };
            let (f, unmeasured) = traps::fpm::memory(&pools, m, &basis);
            findings.extend(f);
            for name in unmeasured {
                skipped.push(Skipped {
                    check: format!("fpm.memory (pool {name})"),
                    reason: "no worker of this pool is running, so its peak is unknown: drive one request per worker and rerun".into(),
                });
            }
        }
        Some(_) => {}
        None => skipped.push(Skipped {
            check: "fpm.memory".into(),
            reason: format!(
                "no running master uses {}: worker RSS cannot be measured (start the pool, drive a request per worker, rerun)",
                u.config_path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
        }),
    }
    json!({
        "config": u.config_path.as_ref().map(|p| escape::bytes(p.as_os_str().as_bytes())),
        "files": u.config.as_ref().map(|c| c.files.iter().map(|f| escape::bytes(f.as_os_str().as_bytes())).collect::<Vec<_>>()),
        "warnings": u.config.as_ref().map(|c| c.warnings.clone()),
        "master": u.master,
        "pools": pools,
        "error_log": log_s,
        "alerts": counts,
    })
}

/// PHP's runtime mode for one running master: Xdebug and OPcache from what it mapped, its
/// effective ini (Debian's php.ini and conf.d, then each pool's php_value/php_admin_value), and
/// where its workers run from (revalidation on a slow mount).
fn php_runtime(
    m: &Master,
    config: Option<&fpm::FpmConfig>,
    obs: &Observed,
    findings: &mut Vec<Finding>,
) {
    let r = runtime::read(m.pid);
    let files = runtime::read_php_ini(Path::new("/"), &runtime::php_version(&r.exe_name), "fpm");
    let mut ini = files.clone();
    for pool in config.map(|c| c.pools.as_slice()).unwrap_or_default() {
        for (k, d) in &pool.directives {
            let key = [
                "php_admin_value[",
                "php_value[",
                "php_admin_flag[",
                "php_flag[",
            ]
            .iter()
            .find_map(|p| k.strip_prefix(p))
            .and_then(|k| k.strip_suffix(']'));
            if let Some(key) = key {
                ini.insert(
                    key.to_string(),
                    runtime::IniValue {
                        value: escape::text(&d.value),
                        at: escape::text(&d.at()),
                    },
                );
            }
        }
    }
    let slow = m.workers.iter().find_map(|w| {
        let cwd = std::fs::read_link(format!("/proc/{}/cwd", w.pid)).ok()?;
        let t = obs.self_mounts.as_ref()?;
        let i = t.mount_of(cwd.as_os_str().as_bytes())?;
        t.mounts[i].slow_kind().map(|_| {
            format!(
                "{} ({})",
                t.mounts[i].mount_point_display(),
                escape::text(&t.mounts[i].fs_type)
            )
        })
    });
    // xdebug.mode is read once at startup, from the ini files only (a pool's php_value does
    // not change it).
    findings.extend(traps::runtime::xdebug(&r, files.get("xdebug.mode")));
    findings.extend(traps::runtime::opcache(&r, &ini, slow.as_deref()));
}

/// The network census, in the target's network namespace when there is a target; returns the
/// `network` section. A census that cannot run is a skipped check, not a failed preflight.
fn network_census(
    args: &PreflightArgs,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) -> Option<crate::host::net::NetObservation> {
    let ports: Vec<u16> = args.port.into_iter().collect();
    match crate::cmd::net_census::check(None, args.pid, args.rate.zip(args.timeout), &ports, None) {
        Ok(c) => {
            findings.extend(c.findings);
            skipped.extend(c.skipped);
            Some(c.obs)
        }
        Err(e) => {
            skipped.push(Skipped {
                check: "net.* (network census)".into(),
                reason: e.to_string(),
            });
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::traps::{Id, Severity};
    use clap::Parser;

    fn parse(args: &[&str]) -> PreflightArgs {
        let mut v = vec!["trapdetect", "preflight"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v).unwrap().command {
            Some(Command::Preflight(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_parse() {
        let a = parse(&[
            "--pid",
            "42",
            "--dir",
            "/srv/run",
            "--dir",
            "/srv/www",
            "--port",
            "8080",
            "--rate",
            "800",
            "--timeout",
            "10s",
            "--fpm-config",
            "/etc/php/8.2/fpm/php-fpm.conf",
            "--mem-budget",
            "2G",
            "--strict",
            "--ignore",
            "cpu.affinity",
            "--ignore",
            "host.virt",
            "--json",
            "--json-out",
            "/tmp/p.json",
            "--mark",
        ]);
        assert_eq!(a.pid, Some(42));
        assert_eq!(a.dir.len(), 2);
        assert_eq!(a.port, Some(8080));
        assert_eq!(a.rate, Some(800.0));
        assert_eq!(a.timeout, Some(Duration::from_secs(10)));
        assert_eq!(a.mem_budget, Some(2 << 30));
        assert!(a.verdict.strict && a.output.json && a.mark);
        assert_eq!(a.verdict.ignore, ["cpu.affinity", "host.virt"]);
        assert!(validate(&a).is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert!(parse_size("2GB").unwrap_err().contains("ambiguous"));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
    }

    #[test]
    fn conflicting_flags_are_one_line_usage_errors() {
        for (args, needle) in [
            (vec!["--sample", "1s", "--no-sample"], "conflict"),
            (vec!["--rate", "800"], "go together"),
            (vec!["--timeout", "10s"], "go together"),
            (vec!["--json", "--verbose"], "--verbose is for text"),
            (vec!["--ignore", "cpu.qouta"], "no such finding id"),
        ] {
            let e = validate(&parse(&args)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let msg = e.to_string();
            assert!(msg.contains(needle), "{args:?}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        assert!(validate(&parse(&["--ignore", "net.time-wait"])).is_ok());
    }

    #[test]
    fn a_skipped_check_that_could_fail_is_prominent_and_fails_strict() {
        // As `build` assembles it: the section lists them, `finish` decides the exit code.
        let report = |skipped: Vec<Skipped>, ignore: &[String], strict: bool| {
            let mut r = Report::new("preflight");
            r.skipped = skipped;
            let incomplete = crate::report::incomplete(&r.skipped, ignore);
            r.sections.insert(
                "preflight".into(),
                json!({ "strict": strict, "incomplete": incomplete }),
            );
            r.incomplete_fails_strict = true;
            r.finish(ignore, strict);
            r
        };
        for strict in [false, true] {
            let r = report(
                vec![
                    Skipped {
                        check: "fs.cwd-slow".into(),
                        reason: "/proc/42/cwd: permission denied (needs CAP_SYS_PTRACE)".into(),
                    },
                    // cpu.frequency cannot fail: skipping it leaves the verdict whole.
                    Skipped {
                        check: "cpu.frequency".into(),
                        reason: "no cpufreq".into(),
                    },
                ],
                &[],
                strict,
            );
            assert_eq!(r.exit_code, if strict { 1 } else { 0 });
            assert_eq!(
                r.sections["preflight"]["incomplete"],
                json!(["fs.cwd-slow"])
            );
            let t = crate::report::preflight::render_text(&r, false);
            assert!(
                t.lines().nth(1).unwrap().starts_with(
                    "INCOMPLETE: 1 check that could fail did not run: fs.cwd-slow (why:"
                ),
                "{t}"
            );
        }
        // Ignored by the user: not missed.
        let r = report(
            vec![Skipped {
                check: "net.fd-limit".into(),
                reason: "census failed".into(),
            }],
            &["net.fd-limit".to_string()],
            true,
        );
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.sections["preflight"]["incomplete"], json!([]));
    }

    #[test]
    fn every_id_is_documented_in_help() {
        let help = after_help();
        for id in registry::ids_of(registry::Command::Preflight) {
            assert!(help.contains(id), "{id} missing from --help");
        }
        assert!(help.lines().all(|l| l.len() <= 100), "{help}");
    }

    #[test]
    fn text_is_one_line_per_finding_fail_first() {
        let mut r = Report::new("preflight");
        r.findings
            .push(Finding::new(Id::HostVirt, Severity::Info, "virtual machine").remedy("compare"));
        r.findings.push(
            Finding::new(Id::FsDirSlow, Severity::Fail, "--dir /mnt/c/x is on DrvFs")
                .with("fs_type", "9p")
                .remedy("use a local dir"),
        );
        r.findings
            .push(Finding::new(Id::CpuAffinity, Severity::Warn, "1 of 2").remedy("taskset"));
        r.skipped.push(Skipped {
            check: "host.kernel-log".into(),
            reason: "needs CAP_SYSLOG".into(),
        });
        r.finish(&["cpu.affinity".into()], false);
        let t = crate::report::preflight::render_text(&r, false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[1],
            "FAIL fs.dir-slow: --dir /mnt/c/x is on DrvFs — fix: use a local dir"
        );
        assert_eq!(lines[2], "INFO host.virt: virtual machine — fix: compare");
        assert_eq!(lines[3], "ignored WARN cpu.affinity: 1 of 2");
        assert_eq!(lines[4], "skipped host.kernel-log: needs CAP_SYSLOG");
        assert_eq!(
            lines[5],
            "preflight: 1 fail, 0 warn, 1 info; 1 ignored, 1 skipped -> exit 1"
        );
        assert_eq!(lines.len(), 6);
    }
}
