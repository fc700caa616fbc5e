//! `--dir`, the CPU frequency and the host: kernel and CPU settings, memory, the kernel log
//! since the mark.

use std::path::Path;

use super::{Inputs, Options, Verdicts, observe::Observed};
use crate::{
    error::Result,
    host::{
        host::{self as hostinfo, KernelLog, Mark},
        mounts::normalize,
        process,
    },
    report::Skipped,
    traps::{self, registry},
};

/// How far back the kernel log is read when there is no mark, s.
const RECENT_KMSG_S: f64 = 600.0;

/// `--dir`, the CPU frequency, the host (virtualization, kernel support, memory, the kernel
/// log since the mark).
pub(super) fn dir_and_host(
    opts: &Options,
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
    let tuning = crate::host::tuning::Tuning {
        clock_cost: Some(crate::host::tuning::time_clock_reads()),
        ..crate::host::tuning::read(Path::new("/"))
    };
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
    match (opts.client, obs.target.is_some()) {
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
    let kmsg = kernel_log(opts, inputs.mark_path.as_deref(), obs, &mut v.skipped)?;
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

fn kernel_log(
    opts: &Options,
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
    if opts.mark && records.is_none() {
        skipped.push(Skipped {
            check: "--mark".into(),
            reason: "not set: the kernel log cannot be read, so there is no position to mark"
                .into(),
        });
    } else if opts.mark
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
