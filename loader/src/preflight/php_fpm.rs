//! The php-fpm checks: the masters found (or the one running `--fpm-config`), their
//! configurations, each pool's rules, its error log and its workers' memory, and PHP's runtime
//! mode.

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use serde_json::json;

use super::{Options, observe::Observed};
use crate::{
    error::{Error, Result},
    escape,
    host::{
        cpu,
        fpm::{self, Master, Pool},
        runtime,
    },
    report::Skipped,
    traps::{self, Finding, fpm::MemoryBasis},
};

/// Bytes of the FPM error log scanned for the max_children warning.
const LOG_TAIL: u64 = 8 << 20;

pub(super) fn load_fpm_config(p: &Path) -> Result<fpm::FpmConfig> {
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
pub(super) fn fpm_checks(
    opts: &Options,
    given: Option<fpm::FpmConfig>,
    obs: &Observed,
    online: usize,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) -> Option<serde_json::Value> {
    let units = fpm_units(opts, given, obs, skipped);
    if units.is_empty() {
        if opts.mem_budget.is_some() {
            skipped.push(Skipped {
                check: "fpm.memory".into(),
                reason: "--mem-budget given, but no php-fpm master was found and no --fpm-config named one".into(),
            });
        }
        return None;
    }
    let out = units
        .iter()
        .map(|u| fpm_unit_checks(u, opts, obs, online, findings, skipped))
        .collect();
    Some(serde_json::Value::Array(out))
}

/// The php-fpm masters to check and their configurations (read now).
fn fpm_units(
    opts: &Options,
    given: Option<fpm::FpmConfig>,
    obs: &Observed,
    skipped: &mut Vec<Skipped>,
) -> Vec<FpmUnit> {
    let masters: Vec<u32> = match opts.pid {
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
            if opts.pid.is_none() {
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
    opts: &Options,
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
    fpm_memory(u, &pools, opts, obs, findings, skipped);
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

/// The workers' memory against what the pools may have (MemAvailable or `--mem-budget`, and
/// the master's cgroup limit); a pool with no worker running, or no master, is skipped.
fn fpm_memory(
    u: &FpmUnit,
    pools: &[Pool],
    opts: &Options,
    obs: &Observed,
    findings: &mut Vec<Finding>,
    skipped: &mut Vec<Skipped>,
) {
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
                budget_bytes: opts.mem_budget,
                cgroup_limit,
            };
            let (f, unmeasured) = traps::fpm::memory(pools, m, &basis);
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
