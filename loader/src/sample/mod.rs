//! Without eBPF: the /proc sampling backend (`--backend sample`, and `auto` where the probes
//! cannot attach). A thread reads every thread of the target's tree at a bounded rate and keeps
//! the sums the off-CPU probes keep, so `run`'s join and rules judge the same observations;
//! what only exact counts give (operations per request, FUSE requests per second, path lookups)
//! is marked unavailable, and every sampled figure states the samples behind it.

pub mod procfs;
pub mod source;

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use serde_json::json;
use trapdetect_common::offcpu::{CLASS_FILE_IO, CLASS_NAMES, CLASS_PATH};

pub use self::source::{ProcSource, SampleStats};
use crate::{
    error::{Error, Result},
    escape,
    host::{
        mounts::{MountTable, normalize},
        process::{self, ReadOptions},
    },
    report::{BackendInfo, Report, Requests, Target},
    trace::{self, LoadDriver, seconds::Sampler},
    traps::{Finding, round, run::FsLoad},
};

/// Which backend measures (`--backend`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// The eBPF probes (root, or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE).
    Ebpf,
    /// /proc sampling: no privilege beyond reading the target's /proc (its user, or
    /// CAP_SYS_PTRACE).
    Sample,
    /// eBPF when it can attach, else sampling.
    #[default]
    Auto,
}

/// `--backend` and `--sample-hz`, shared by `trace` and `run`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendArgs {
    /// How to measure: the eBPF probes, /proc sampling (no eBPF; sampled figures with their
    /// error stated), or auto (eBPF when it can attach, else sampling; the report says which
    /// and why).
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// Sampling rounds per second of the sample backend (every thread of the target's tree
    /// each round).
    #[arg(long, value_name = "HZ", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sample_hz: u32,
}

/// Sampling rate when `BackendArgs` is absent (tests).
pub const DEFAULT_HZ: u32 = 200;

/// Whether an eBPF error is one sampling can stand in for: privilege or kernel support
/// missing (exit 4), not bad input.
pub fn falls_back(e: &Error) -> bool {
    matches!(e, Error::Privilege(_) | Error::Kernel(_))
}

/// The measurement's backend line, for `report.measurement`.
pub fn info(name: &'static str, reason: String, stats: Option<&SampleStats>) -> BackendInfo {
    BackendInfo {
        name,
        reason,
        sample_hz: stats.map(|s| s.hz),
        samples: stats.map(|s| s.thread_samples),
    }
}

/// Records which backend measured and why, as JSON `measurement.backend` and the first note.
pub fn record(report: &mut Report, b: BackendInfo) {
    let line = match b.sample_hz {
        Some(hz) => format!(
            "backend: /proc sampling at {hz} Hz ({} thread samples): {}",
            b.samples.unwrap_or(0),
            b.reason
        ),
        None => format!("backend: eBPF: {}", b.reason),
    };
    report.measurement.notes.insert(0, line);
    report.measurement.backend = Some(b);
}

/// What a sampled session gave beside its report.
pub struct Sampled {
    /// The samples behind the figures.
    pub stats: SampleStats,
    /// Lock files named while a thread waited on them: (dev, ino) → path.
    pub lock_names: HashMap<(u32, u64), Vec<u8>>,
}

/// Measures with the backend asked for: `trace::run` (eBPF), [`run`] (sampling), or under
/// `auto` eBPF first and sampling when the probes cannot attach for want of privilege or
/// kernel support (nothing was started then: the load starts once attached). The report's
/// measurement says which backend and why.
pub fn measure(
    b: &BackendArgs,
    opts: &trace::Options,
    mut load: Option<&mut dyn LoadDriver>,
) -> Result<(Report, Option<Sampled>)> {
    fn sampled(
        opts: &trace::Options,
        hz: u32,
        load: Option<&mut dyn LoadDriver>,
        why: String,
    ) -> Result<(Report, Option<Sampled>)> {
        let (mut r, s) = run(opts, hz, load)?;
        record(&mut r, info("sample", why, Some(&s.stats)));
        Ok((r, Some(s)))
    }
    match b.backend {
        Backend::Sample => sampled(
            opts,
            b.sample_hz,
            load,
            "asked for (--backend sample)".into(),
        ),
        Backend::Ebpf => {
            let mut r = trace::run(opts, load)?;
            record(
                &mut r,
                info("ebpf", "asked for (--backend ebpf)".into(), None),
            );
            Ok((r, None))
        }
        Backend::Auto => {
            match trace::run(opts, load.as_mut().map(|l| &mut **l as &mut dyn LoadDriver)) {
                Ok(mut r) => {
                    record(
                        &mut r,
                        info("ebpf", "auto: the probes attached".into(), None),
                    );
                    Ok((r, None))
                }
                Err(e) if falls_back(&e) => {
                    eprintln!("trapdetect: eBPF unavailable ({e}): sampling /proc instead");
                    sampled(
                        opts,
                        b.sample_hz,
                        load,
                        format!("auto: eBPF could not attach: {e}"),
                    )
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Checks that the target's threads' `syscall` files can be read (the same access as
/// `/proc/PID/mem`: the target's user, or CAP_SYS_PTRACE).
fn check_access(pid: u32) -> Result<()> {
    match std::fs::read_to_string(format!("/proc/{pid}/syscall")) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::usage(format!("no process with pid {pid}")))
        }
        Err(e) => Err(Error::Privilege(format!(
            "sampling needs to read /proc/{pid}/syscall ({e}): run trapdetect as the target's user, or with CAP_SYS_PTRACE"
        ))),
    }
}

/// A sampled session: the window held as `trace::run` holds it (with the same load drivers,
/// ticked with the sampler as their kernel source), then a report with the target, the
/// request count and the `sample` section. No path table: lookups per request need exact
/// counts.
pub fn run(
    opts: &trace::Options,
    hz: u32,
    mut load: Option<&mut dyn LoadDriver>,
) -> Result<(Report, Sampled)> {
    trace::install_signal_handlers();
    let target = process::read(opts.pid, ReadOptions::identity())?;
    check_access(opts.pid)?;
    let mounts = MountTable::of_pid(opts.pid)?;
    let mut source = ProcSource::start(opts.pid, hz, mounts.clone());
    if opts.progress.says_start() {
        eprintln!(
            "Tracing pid {} ({}) and its children for {:.1} s by sampling /proc at {hz} Hz (no eBPF)... Ctrl-C to end.",
            opts.pid,
            escape::bytes(&target.stat.comm),
            opts.duration.as_secs_f64(),
        );
    }
    // The first round is the baseline.
    std::thread::sleep(Duration::from_millis(20));
    if let Some(l) = load.as_deref_mut() {
        l.start()?;
    }
    let start = Instant::now();
    let mut exited_after = None;
    while start.elapsed() < opts.duration && !trace::interrupted() {
        std::thread::sleep(
            Duration::from_millis(50).min(opts.duration.saturating_sub(start.elapsed())),
        );
        if let Some(l) = load.as_deref_mut() {
            l.tick(&source);
            if l.done() {
                break;
            }
        }
        if !process::alive(opts.pid, target.stat.start_ticks) {
            exited_after = Some(start.elapsed().as_secs_f64());
            break;
        }
    }
    let window_s = start.elapsed().as_secs_f64();
    if let Some(l) = load.as_deref_mut() {
        l.end(&source);
    }
    let (stats, lock_names) = source.stop();
    if trace::interrupted() {
        eprintln!("interrupted after {window_s:.1} s: reporting what was gathered");
    }
    let mut report = Report::new("trace");
    let basis = match load {
        Some(l) => {
            let outcome = l.finish()?;
            let count = outcome.count;
            outcome.record(&mut report);
            count
        }
        None => None,
    };
    let processes = process::tree_now(opts.pid).len().max(1);
    report.target = Some(Target {
        pid: opts.pid,
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
    });
    report.window_s = Some(round(window_s, 3));
    report.requests = Some(Requests {
        count: basis.map(|b| b.0),
        basis: basis.map(|b| b.1).unwrap_or("none"),
        rate_per_s: basis.map(|b| round(b.0 as f64 / window_s.max(1e-9), 2)),
        note: None,
        served: None,
    });
    notes(&mut report.measurement.notes, &stats, exited_after);
    report.add(&SampleSection::of(&stats, &mounts));
    if let Ok(v) = serde_json::to_value(crate::host::fingerprint::gather(Some(opts.pid))) {
        report.sections.insert("fingerprint".into(), v);
    }
    Ok((report, Sampled { stats, lock_names }))
}

/// What limits a sampled session's figures: what sampling cannot count, unreadable threads,
/// late rounds, a target that exited.
fn notes(notes: &mut Vec<String>, stats: &SampleStats, exited_after: Option<f64>) {
    notes.push(
        "sampled: lookups and operations per request, FUSE requests and accepted connections need exact counts (eBPF, or --from-strace for path lookups) and are not reported".into(),
    );
    if stats.unreadable > 0 {
        notes.push(format!(
            "{} of {} thread samples could not read the blocked thread's syscall (another user's process without CAP_SYS_PTRACE): their blocked time is `unknown`",
            stats.unreadable, stats.thread_samples
        ));
    }
    if stats.late * 10 > stats.rounds.max(1) {
        notes.push(format!(
            "{} of {} sampling rounds started late (the sampler waited for a CPU): fewer samples than asked",
            stats.late, stats.rounds
        ));
    }
    if let Some(s) = exited_after {
        notes.push(format!(
            "the target exited {s:.1} s into the window; figures cover what was gathered until then"
        ));
    }
}

/// 95 % interval half-width, in points, of a share estimated from `n` samples of which `k`
/// fell in it (normal approximation; samples of one long wait are not independent, so this is
/// the least the error can be).
pub fn ci95_pct(k: u64, n: u64) -> f64 {
    if n == 0 {
        return 100.0;
    }
    let p = k as f64 / n as f64;
    round(1.96 * (p * (1.0 - p) / n as f64).sqrt() * 100.0, 1)
}

/// The filesystems the threads waited on, from the sampled keys: path walks and file I/O
/// blocked on each mount (the sampler resolves every path to the mount it ends on). No
/// operation counts: sampling sees waits, not operations.
pub fn filesystems(k: &Sampler, mounts: &MountTable, pid: u32) -> Vec<FsLoad> {
    let start_mount = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .ok()
        .and_then(|c| mounts.mount_of(&normalize(c.as_os_str().as_encoded_bytes())));
    let mut by_dev: HashMap<u32, f64> = HashMap::new();
    for (key, (ns, _)) in k.window_keys() {
        if (key.class == CLASS_PATH || key.class == CLASS_FILE_IO) && key.dev != 0 {
            *by_dev.entry(key.dev).or_default() += ns as f64 / 1e9;
        }
    }
    let mut out: Vec<FsLoad> = by_dev
        .into_iter()
        .filter_map(|(dev, s)| {
            let i = mounts.by_dev(dev, &[])?;
            let m = &mounts.mounts[i];
            Some(FsLoad {
                mount: m.mount_point_display(),
                fs_type: m.fs_type.clone(),
                slow: m.slow_kind().map(|x| x.describe().to_string()),
                syscall_s: s,
                ops: 0,
                ops_kind: "unavailable (sampled)",
                // Who answered the waits is not known from /proc or a log.
                serving: vec![],
                ops_per_s: vec![],
                holds_start_cwd: start_mount
                    .is_some_and(|sm| mounts.mounts[sm].kernel_dev() == dev),
                latency_by_ahead: vec![],
            })
        })
        .collect();
    out.sort_by(|a, b| b.syscall_s.total_cmp(&a.syscall_s));
    out
}

/// States the sampling behind each sampled finding: the thread samples its time rests on and
/// the 95 % interval of its share; operation figures a rule derived from a count sampling does
/// not have are replaced by `unavailable`.
pub fn annotate(findings: &mut [Finding], stats: &SampleStats, mounts: &MountTable) {
    let n = stats.thread_samples;
    for f in findings.iter_mut() {
        let k = match f.id.as_str() {
            "fs.serialized" | "fs.slow-ops" => {
                let mount = f
                    .evidence
                    .get("mount")
                    .and_then(|m| m.as_str())
                    .unwrap_or("");
                mounts
                    .mounts
                    .iter()
                    .find(|m| m.mount_point_display() == mount)
                    .and_then(|m| stats.by_dev.get(&m.kernel_dev()).copied())
                    .unwrap_or(0)
            }
            "lock.contention" => {
                let futex = f
                    .evidence
                    .get("object")
                    .and_then(|o| o.as_str())
                    .is_some_and(|o| o.contains("futex"));
                stats.by_class[if futex { 3 } else { 2 }]
            }
            "pool.too-small" => stats
                .by_class
                .iter()
                .enumerate()
                .filter(|(c, _)| *c != trapdetect_common::offcpu::CLASS_WAIT_WORK as usize)
                .map(|(_, v)| v)
                .sum(),
            id if id.starts_with("cpu.") => {
                f.evidence.insert(
                    "sampled".into(),
                    json!("on-CPU and run-queue time: exact (schedstat)"),
                );
                continue;
            }
            _ => continue,
        };
        if f.id.as_str().starts_with("fs.") {
            for key in ["ops_per_s", "capacity_ops_per_s", "ops_per_request"] {
                f.evidence.remove(key);
            }
            f.evidence.insert(
                "ops_per_request".into(),
                json!("unavailable: sampling sees waits, not operations"),
            );
        }
        if f.id.as_str() == "lock.contention" {
            f.evidence.insert(
                "waits_basis".into(),
                json!("waits seen by sampling (a lower bound: short waits between two samples count once)"),
            );
        }
        f.evidence.insert("samples".into(), json!(k));
        f.evidence.insert("thread_samples".into(), json!(n));
        f.evidence
            .insert("sample_share_ci95_pct".into(), json!(ci95_pct(k, n)));
    }
}

/// The `sample` section: the rate, the samples, where the blocked threads were seen. JSON and
/// text come from this one struct (a saved trace prints as the live one did).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SampleSection {
    /// Sampling rounds per second.
    pub hz: u32,
    /// Rounds taken.
    pub rounds: u64,
    /// Rounds that started late.
    pub late_rounds: u64,
    /// Thread samples taken.
    pub thread_samples: u64,
    /// Threads whose state could not be read.
    pub unreadable: u64,
    /// Blocked threads seen, by class (`CLASS_NAMES` order).
    pub blocked_by_class: serde_json::Map<String, serde_json::Value>,
    /// Blocked on a path or file I/O, by mount, most first.
    pub blocked_by_mount: Vec<MountSamples>,
    /// The paths blocked walks were on, most first (at most 12).
    pub paths: Vec<PathSamples>,
    /// Kernel wait channels seen.
    pub wchan: Vec<WchanSamples>,
    /// CPU the sampler used, s.
    pub sampler_cpu_s: f64,
    /// The same, in cores over the window.
    pub sampler_cores: f64,
}

/// Samples blocked on one mount.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct MountSamples {
    /// Mount point (type).
    pub mount: String,
    /// Samples.
    pub samples: u64,
    /// Share of thread samples, %.
    pub share_pct: f64,
    /// 95 % interval half-width, points.
    pub ci95_pct: f64,
}

/// Samples of one path.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PathSamples {
    /// The path (escaped).
    pub path: String,
    /// Samples.
    pub samples: u64,
}

/// Samples in one wait channel.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct WchanSamples {
    /// Kernel function.
    pub wchan: String,
    /// Samples.
    pub samples: u64,
}

impl SampleSection {
    /// The section of a sampled window.
    fn of(s: &SampleStats, mounts: &MountTable) -> SampleSection {
        let n = s.thread_samples;
        let share = |k: u64| round(k as f64 * 100.0 / n.max(1) as f64, 1);
        let window_s = s.window_ns as f64 / 1e9;
        SampleSection {
            hz: s.hz,
            rounds: s.rounds,
            late_rounds: s.late,
            thread_samples: n,
            unreadable: s.unreadable,
            blocked_by_class: CLASS_NAMES
                .iter()
                .zip(&s.by_class)
                .map(|(c, k)| {
                    (
                        c.to_string(),
                        json!({"samples": k, "share_pct": share(*k), "ci95_pct": ci95_pct(*k, n)}),
                    )
                })
                .collect(),
            blocked_by_mount: mount_rows(s, mounts)
                .into_iter()
                .map(|(mount, k)| MountSamples {
                    mount,
                    samples: k,
                    share_pct: share(k),
                    ci95_pct: ci95_pct(k, n),
                })
                .collect(),
            paths: top_paths(s)
                .into_iter()
                .map(|(path, samples)| PathSamples { path, samples })
                .collect(),
            wchan: s
                .wchan
                .iter()
                .map(|(w, k)| WchanSamples {
                    wchan: escape::text(w.trim()),
                    samples: *k,
                })
                .collect(),
            sampler_cpu_s: round(s.self_cpu_ns as f64 / 1e9, 3),
            sampler_cores: round(s.self_cpu_ns as f64 / 1e9 / window_s.max(1e-9), 4),
        }
    }
}

/// Samples blocked on each mount, most first.
fn mount_rows(s: &SampleStats, mounts: &MountTable) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = s
        .by_dev
        .iter()
        .map(|(d, n)| {
            (
                mounts
                    .by_dev(*d, &[])
                    .map(|i| {
                        let m = &mounts.mounts[i];
                        format!("{} ({})", m.mount_point_display(), escape::text(&m.fs_type))
                    })
                    .unwrap_or_else(|| format!("dev {}:{}", d >> 20, d & 0xfffff)),
                *n,
            )
        })
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    rows
}

/// The 12 paths most sampled.
fn top_paths(s: &SampleStats) -> Vec<(String, u64)> {
    let mut p: Vec<(String, u64)> = s
        .paths
        .iter()
        .map(|(k, v)| (escape::bytes(k), *v))
        .collect();
    p.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    p.truncate(12);
    p
}

impl crate::report::Section for SampleSection {
    fn name(&self) -> &'static str {
        "sample"
    }
    fn json(&self) -> std::result::Result<serde_json::Value, String> {
        crate::report::section::to_json(self)
    }
    fn text(&self) -> String {
        use std::fmt::Write as _;
        let n = self.thread_samples;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "/proc sampling at {} Hz: {} rounds ({} late), {} thread samples; the sampler used {:.3} s of CPU ({:.2} % of a core)",
            self.hz,
            self.rounds,
            self.late_rounds,
            n,
            self.sampler_cpu_s,
            self.sampler_cores * 100.0
        );
        let _ = writeln!(
            out,
            "Blocked threads seen, by class (share of thread samples, 95 % interval):"
        );
        for (c, k) in self
            .blocked_by_class
            .iter()
            .map(|(c, v)| (c, v["samples"].as_u64().unwrap_or(0)))
            .filter(|(_, k)| *k > 0)
        {
            let _ = writeln!(
                out,
                "  {c:<12} {k:8}  {:5.1} % ± {:.1}",
                k as f64 * 100.0 / n.max(1) as f64,
                ci95_pct(k, n)
            );
        }
        if !self.blocked_by_mount.is_empty() {
            let _ = writeln!(out, "Blocked on a path or file I/O, by mount:");
            for m in &self.blocked_by_mount {
                let k = m.samples;
                let _ = writeln!(
                    out,
                    "  {}  {k} samples  {:.1} % ± {:.1}",
                    m.mount,
                    k as f64 * 100.0 / n.max(1) as f64,
                    ci95_pct(k, n)
                );
            }
        }
        if !self.paths.is_empty() {
            let _ = writeln!(out, "Paths blocked walks were on (samples):");
            for p in &self.paths {
                let _ = writeln!(out, "  {:8}  {}", p.samples, p.path);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_narrows_with_samples() {
        assert_eq!(ci95_pct(0, 0), 100.0);
        // Half of 1,000 samples: ±3.1 points; of 100,000: ±0.3.
        assert_eq!(ci95_pct(500, 1000), 3.1);
        assert_eq!(ci95_pct(50_000, 100_000), 0.3);
        assert_eq!(ci95_pct(0, 1000), 0.0);
    }

    #[test]
    fn sampled_fs_findings_lose_the_operation_figures_and_gain_their_samples() {
        let mounts = MountTable::parse(
            "36 25 0:44 / /mnt/slow rw - fuse.slowfs slowfs rw,user_id=0\n25 1 8:1 / / rw - ext4 /dev/sda1 rw\n",
        )
        .unwrap();
        let mut stats = SampleStats {
            thread_samples: 4000,
            ..Default::default()
        };
        stats.by_dev.insert(mounts.mounts[0].kernel_dev(), 2400);
        let mut f = vec![
            Finding::new(
                crate::traps::Id::FsSlowOps,
                crate::traps::Severity::Fail,
                "x",
            )
            .with("mount", "/mnt/slow")
            .with("ops_per_s", 0.0)
            .with("ops_per_request", 0.0),
        ];
        annotate(&mut f, &stats, &mounts);
        let e = &f[0].evidence;
        assert_eq!(e["samples"], 2400);
        assert_eq!(e["sample_share_ci95_pct"], 1.5);
        assert!(e.get("ops_per_s").is_none());
        assert!(
            e["ops_per_request"]
                .as_str()
                .unwrap()
                .starts_with("unavailable")
        );
    }
}
