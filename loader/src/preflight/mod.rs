//! preflight's gathering and checks: a fast static look at the target and the host before a
//! run, so a harness can refuse a bad environment instead of documenting it. `cmd::preflight`
//! holds the flags and builds [`Options`]; this module reads, judges and fills the report.
//!
//! Flow: the inputs (exit 2 on a missing pid or dir, an unreadable or malformed FPM config)
//! → snapshot (`host::*`, in `observe`) → rules (`traps::*`, grouped by subject in `target`,
//! `host_checks` and `php_fpm`) → one report.

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    error::{Error, Result},
    escape,
    host::{
        dirprobe::DirProbe,
        fingerprint, fpm,
        host::{self as hostinfo},
        process,
    },
    report::{
        Report, Skipped,
        preflight::{DirProbeSection, FpmSection, GivenDir, HostSection, PreflightSection},
    },
    traps::{self, Finding},
};

mod host_checks;
mod observe;
mod php_fpm;
mod target;

use host_checks::dir_and_host;
use observe::Observed;
use php_fpm::{fpm_checks, load_fpm_config};
use target::cpu_and_target;

/// What preflight checks and how: `trapdetect preflight`'s flags, without clap (see
/// `cmd::preflight::PreflightArgs` for each one's meaning).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--pid`: the server to check.
    pub pid: Option<u32>,
    /// `--dir`: the directories the run uses.
    pub dir: Vec<PathBuf>,
    /// `--client`: the load generator's pid.
    pub client: Option<u32>,
    /// `--port`: the port the server listens on.
    pub port: Option<u16>,
    /// `--rate`: planned offered load, requests per second.
    pub rate: Option<f64>,
    /// `--timeout`: the load generator's request timeout.
    pub timeout: Option<Duration>,
    /// `--fpm-config`: a php-fpm configuration to check.
    pub fpm_config: Option<PathBuf>,
    /// `--mem-budget`: memory the php-fpm pools may have, bytes.
    pub mem_budget: Option<u64>,
    /// `--sample`: how long other processes' CPU is sampled.
    pub sample: Option<Duration>,
    /// `--no-sample`.
    pub no_sample: bool,
    /// `--mark`: set a mark in the kernel log after checking.
    pub mark: bool,
    /// `--mark-file`: where the mark lives.
    pub mark_file: Option<PathBuf>,
    /// `--save`: the file the environment's snapshot is saved to.
    pub save: Option<PathBuf>,
    /// `--since`: a snapshot saved by `--save` to compare with.
    pub since: Option<PathBuf>,
    /// `--ignore`: finding ids silenced.
    pub ignore: Vec<String>,
    /// `--strict`.
    pub strict: bool,
    /// `--verbose` (recorded in the `preflight` section).
    pub verbose: bool,
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
fn inputs(opts: &Options) -> Result<Inputs> {
    let dirs = resolve_dirs(&opts.dir)?;
    if let Some(pid) = opts.pid {
        process::read_basic(pid)?;
        if process::is_zombie(pid) {
            return Err(Error::usage(format!(
                "--pid {pid} is a zombie (it exited and its parent has not reaped it): nothing to check"
            )));
        }
    }
    let given_cfg = match &opts.fpm_config {
        Some(p) => Some(load_fpm_config(p)?),
        None => None,
    };
    let mark_path = opts.mark_file.clone().or_else(hostinfo::default_mark_path);
    if opts.mark
        && let Some(p) = &mark_path
    {
        crate::output::check_target("--mark-file", p)?;
    }
    if opts.mark && mark_path.is_none() {
        return Err(Error::usage(
            "--mark: no place for the mark ($XDG_RUNTIME_DIR and $HOME unset); give --mark-file",
        ));
    }
    if let Some(p) = &opts.save {
        crate::output::check_target("--save", p)?;
    }
    if let Some(c) = opts.client {
        process::read_basic(c).map_err(|e| Error::usage(format!("--client: {e}")))?;
    }
    let since = opts.since.as_deref().map(load_since).transpose()?;
    Ok(Inputs {
        dirs,
        given_cfg,
        mark_path,
        since,
    })
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
pub fn check(opts: &Options) -> Result<Report> {
    let started = Instant::now();
    let inputs = inputs(opts)?;
    // The sample runs on its own thread while everything else is read.
    let window = if opts.no_sample {
        None
    } else {
        opts.sample.or(opts.pid.map(|_| Duration::from_millis(250)))
    };
    let sample_targets: Vec<u32> = opts.pid.into_iter().collect();
    let sampler =
        window.map(|w| std::thread::spawn(move || hostinfo::sample_noise(w, &sample_targets)));
    let obs = Observed::gather(opts.pid, &inputs.dirs)?;
    let online = obs.cpu_host.online.len();
    let mut v = Verdicts::default();
    let target = cpu_and_target(&obs, &inputs.dirs, &mut v);
    let kmsg_seq = dir_and_host(opts, &inputs, &obs, &mut v)?;
    let fpm_json = fpm_checks(
        opts,
        inputs.given_cfg,
        &obs,
        online,
        &mut v.findings,
        &mut v.skipped,
    );
    nginx_checks(&obs, opts.pid, &mut v);
    // The network census (host::net + traps::net): TIME_WAIT left from earlier runs,
    // ephemeral ports, the listener's accept queue, descriptors for --rate × --timeout.
    let network = network_census(opts, &mut v.findings, &mut v.skipped);
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
    let fp = fingerprint_and_drift(
        opts,
        inputs.since.as_ref(),
        &obs,
        fpm_json.as_ref(),
        kmsg_seq,
        &mut v.findings,
    )?;
    let mut r = Report::new("preflight");
    r.target = target;
    r.findings = v.findings;
    r.skipped = v.skipped;
    let elapsed_ms = traps::round(started.elapsed().as_secs_f64() * 1000.0, 1);
    r.window_s = sample.as_ref().map(|s| s.window_s);
    add_sections(
        &mut r,
        &obs,
        sample.as_ref(),
        &fp,
        fpm_json,
        network.as_ref(),
    );
    let incomplete = crate::report::incomplete(&r.skipped, &opts.ignore);
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
        strict: opts.strict,
        verbose: opts.verbose,
        mark_file: inputs
            .mark_path
            .as_ref()
            .map(|p| escape::bytes(p.as_os_str().as_bytes())),
        incomplete,
    });
    r.incomplete_fails_strict = true;
    r.finish(&opts.ignore, opts.strict);
    Ok(r)
}

/// nginx's logging: the master given (or the one of a worker given), else every master.
fn nginx_checks(obs: &Observed, pid: Option<u32>, v: &mut Verdicts) {
    for pid in crate::host::nginx::masters(&obs.scan, pid) {
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
}

/// The environment's fingerprint, then the before/after gate: `--save` writes the snapshot,
/// `--since` compares it with the one saved (env.drift findings).
fn fingerprint_and_drift(
    opts: &Options,
    since: Option<&fingerprint::Snapshot>,
    obs: &Observed,
    fpm_json: Option<&Value>,
    kmsg_seq: Option<u64>,
    findings: &mut Vec<Finding>,
) -> Result<fingerprint::Fingerprint> {
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
    if opts.save.is_some() || since.is_some() {
        let now = fingerprint::snapshot(Path::new("/"), fp.clone(), kmsg_seq);
        if let Some(p) = &opts.save {
            crate::output::write(
                "--save",
                p,
                (serde_json::to_string(&now).unwrap_or_default() + "\n").as_bytes(),
            )?;
        }
        if let Some(before) = since {
            let mut exclude = vec![std::process::id()];
            if let Some(pid) = opts.pid {
                exclude.extend(process::descendants(&obs.scan, pid));
            }
            findings.extend(traps::drift::drift(
                before,
                &now,
                &exclude,
                process::clock_ticks(),
            ));
        }
    }
    Ok(fp)
}

/// The observation sections, in order: `host`, the fingerprint, `fpm`, `network`, `dir_probe`.
fn add_sections(
    r: &mut Report,
    obs: &Observed,
    sample: Option<&hostinfo::NoiseSample>,
    fp: &fingerprint::Fingerprint,
    fpm_json: Option<Value>,
    network: Option<&crate::host::net::NetObservation>,
) {
    r.add(&HostSection::of(
        &obs.cpu_host,
        obs.load,
        obs.cpu_psi,
        &obs.memory,
        &obs.virt,
        sample,
    ));
    r.add(fp);
    if let Some(j) = fpm_json {
        r.add(&FpmSection(j));
    }
    if let Some(obs) = network {
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
}

/// The network census, in the target's network namespace when there is a target; returns the
/// `network` section. A census that cannot run is a skipped check, not a failed preflight.
fn network_census(
    opts: &Options,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) -> Option<crate::host::net::NetObservation> {
    let ports: Vec<u16> = opts.port.into_iter().collect();
    match crate::trace::census::check(None, opts.pid, opts.rate.zip(opts.timeout), &ports, None) {
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
