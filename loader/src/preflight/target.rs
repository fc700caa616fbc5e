//! The CPUs the target may use, its cgroup quota, and the target's own checks (freshness,
//! runtime mode, provenance, tracers, filesystems).

use super::{Dir, Verdicts, observe::Observed};
use crate::{
    escape,
    host::{
        cpu,
        process::{self, Process},
    },
    report::{Skipped, Target},
    traps::{self, Finding, host::Tracer},
};

/// The CPUs the target (or, without --pid, what this shell would hand a server) may use, its
/// cgroup quota, and the target's own checks; returns the report's target line.
pub(super) fn cpu_and_target(obs: &Observed, dirs: &[Dir], v: &mut Verdicts) -> Option<Target> {
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
    // What the target may run on at once: its usable CPUs, or a binding quota's where fewer.
    let mut cpus = usable as f64;
    match cpu::cpu_cgroup_of(cg_pid, obs.self_mounts.as_ref()) {
        Ok(Some(cg)) => {
            if let Some(b) = cg.binding() {
                cpus = cpus.min(b.cpus());
            }
            v.findings.extend(traps::cpu::quota(&cg, usable, subject))
        }
        Ok(None) => v.skip(
            "cpu.quota",
            "no cgroup hierarchy with the cpu controller is mounted".into(),
        ),
        Err(e) => v.skip("cpu.quota", e),
    }
    let t = obs.target.as_ref()?;
    target_checks(t, obs, dirs, cpus, &mut v.findings, &mut v.skipped);
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
        selected_by: None,
    })
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

/// `cpus`: what the target may run on at once (usable CPUs, or a binding quota's).
fn target_checks(
    t: &Process,
    obs: &Observed,
    dirs: &[Dir],
    cpus: f64,
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
        findings.extend(traps::runtime::gomaxprocs(r, cpus));
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
    target_fs_checks(t, obs, dirs, findings, skipped);
}

/// Filesystems, in the target's own mount namespace (its cwd is relative to its root): its
/// working directory (and its children's), its executable and open files.
fn target_fs_checks(
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
