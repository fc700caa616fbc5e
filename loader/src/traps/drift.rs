//! env.drift (issue 23): what changed in the environment between `preflight --save FILE`
//! (before a run) and `preflight --since FILE` (after it): a reboot, the fingerprint (kernel,
//! CPUs, SMT, mitigations, THP, NUMA balancing, the server's binary and configuration), CPU
//! throttling and frequency, steal, CPU and memory pressure, kernel log lines, swapping, and
//! processes that used CPU during the run. Each is a finding, so a harness can refuse a run the
//! machine spoiled while it ran.

use super::{Finding, Id, Severity, round};
use crate::host::fingerprint::{Snapshot, differences};

/// Other processes' CPU over the run that counts as a neighbour (the same bound host.noise
/// uses for its sample).
const NOISE_CPUS: f64 = 0.25;
/// Steal share of CPU time over the run.
const STEAL_SHARE: f64 = 0.02;
/// CPU pressure (some) as a share of the run.
const CPU_PSI_SHARE: f64 = 0.10;
/// Memory pressure (some) as a share of the run.
const MEM_PSI_SHARE: f64 = 0.01;
/// A CPU's current frequency that fell by this share between the two snapshots.
const FREQ_DROP: f64 = 0.10;
/// Fingerprint fields whose change means another machine or another server: fail.
const IDENTITY: &[&str] = &[
    "kernel",
    "cpu_model",
    "cpus_online",
    "smt",
    "server_sha256",
    "config_sha256",
    "mitigations",
    "virt",
];

fn finding(sev: Severity, title: String, remedy: &str) -> Finding {
    Finding::new(Id::EnvDrift, sev, title).remedy(remedy.to_string())
}

/// Compares the snapshot saved before the run with the one taken now. `exclude`: pids whose
/// CPU is expected (the server's tree, trapdetect itself).
pub fn drift(
    before: &Snapshot,
    after: &Snapshot,
    exclude: &[u32],
    ticks_per_s: f64,
) -> Vec<Finding> {
    let mut out = vec![];
    let interval_s = (after.unix_time_s - before.unix_time_s).max(0.001);
    if before.boot_id != after.boot_id {
        out.push(
            finding(Severity::Fail, "the machine rebooted between --save and --since".into(), "rerun the benchmark: nothing measured before the reboot belongs to this environment")
                .with("boot_id_before", before.boot_id.clone())
                .with("boot_id_after", after.boot_id.clone()),
        );
        return out;
    }
    out.extend(changed_fields(before, after));
    let throttled: u64 = after
        .throttle_count
        .iter()
        .map(|(cpu, n)| n.saturating_sub(before.throttle_count.get(cpu).copied().unwrap_or(*n)))
        .sum();
    if throttled > 0 {
        out.push(
            finding(
                Severity::Fail,
                format!("the CPUs were thermally throttled {throttled} time(s) during the run"),
                "cool the machine or lower its load; rerun, and watch thermal_throttle/*_count",
            )
            .with("throttle_events", throttled),
        );
    }
    out.extend(frequency_drops(before, after));
    let d = after.cpu_ticks.since(&before.cpu_ticks);
    let steal = d.steal as f64 / d.total().max(1) as f64;
    if steal >= STEAL_SHARE {
        out.push(
            finding(Severity::Warn, format!("the hypervisor stole {:.1} % of CPU time during the run", steal * 100.0), "rerun on a quieter host or a dedicated instance; compare runs only with similar steal")
                .with("steal_pct", round(steal * 100.0, 2)),
        );
    }
    for (res, limit) in [("cpu", CPU_PSI_SHARE), ("memory", MEM_PSI_SHARE)] {
        if let (Some(a), Some(b)) = (
            before.psi_some_total_us.get(res),
            after.psi_some_total_us.get(res),
        ) {
            let share = b.saturating_sub(*a) as f64 / 1e6 / interval_s;
            if share >= limit {
                out.push(
                    finding(
                        Severity::Warn,
                        format!(
                            "tasks stalled on {res} {:.1} % of the run (/proc/pressure/{res})",
                            share * 100.0
                        ),
                        "find what competed for it (host.noise, host.memory) and rerun",
                    )
                    .with("resource", res)
                    .with("pressure_some_pct", round(share * 100.0, 2)),
                );
            }
        }
    }
    if let (Some(a), Some(b)) = (before.kmsg_seq, after.kmsg_seq)
        && b > a
    {
        out.push(
            finding(Severity::Warn, format!("{} kernel log line(s) were written during the run (host.kernel-log shows them)", b - a), "read them (`dmesg -T | tail`); a run that overlapped an OOM kill, SYN flooding or a full conntrack table measured the kernel")
                .with("kernel_log_lines", b - a),
        );
    }
    let swapped = (
        after.pswpin.saturating_sub(before.pswpin),
        after.pswpout.saturating_sub(before.pswpout),
    );
    if swapped.0 + swapped.1 > 0 {
        out.push(
            finding(Severity::Fail, format!("the machine swapped during the run ({} pages in, {} out)", swapped.0, swapped.1), "free memory (host.memory) and rerun: a page read back from swap inside a request costs a disk access")
                .with("pages_swapped_in", swapped.0)
                .with("pages_swapped_out", swapped.1),
        );
    }
    out.extend(busy_processes(
        before,
        after,
        exclude,
        ticks_per_s,
        interval_s,
    ));
    out
}

/// The fingerprint fields that changed: fail when one is the machine's or the server's identity.
fn changed_fields(before: &Snapshot, after: &Snapshot) -> Option<Finding> {
    let diffs = differences(
        &serde_json::to_value(&before.fingerprint).unwrap_or_default(),
        &serde_json::to_value(&after.fingerprint).unwrap_or_default(),
    );
    if !diffs.is_empty() {
        let identity = diffs.iter().any(|(k, _, _)| {
            IDENTITY
                .iter()
                .any(|i| k == i || k.starts_with(&format!("{i}.")))
        });
        return Some(
            finding(
                if identity { Severity::Fail } else { Severity::Warn },
                format!(
                    "the environment changed during the run: {}",
                    diffs.iter().map(|(k, a, b)| format!("{k} {a} → {b}")).collect::<Vec<_>>().join("; ")
                ),
                "rerun with the environment held fixed (same binary, configuration, kernel settings) from --save to --since",
            )
            .with("changed_fields", diffs.iter().map(|(k, _, _)| k.clone()).collect::<Vec<_>>()),
        );
    }
    None
}

/// CPUs whose current frequency fell by [`FREQ_DROP`] or more.
fn frequency_drops(before: &Snapshot, after: &Snapshot) -> Option<Finding> {
    let drops: Vec<String> = after
        .cur_freq_khz
        .iter()
        .filter_map(|(cpu, f)| {
            let b = *before.cur_freq_khz.get(cpu)?;
            ((*f as f64) < b as f64 * (1.0 - FREQ_DROP)).then(|| {
                format!(
                    "cpu{cpu} {:.2} → {:.2} GHz",
                    b as f64 / 1e6,
                    *f as f64 / 1e6
                )
            })
        })
        .collect();
    if !drops.is_empty() {
        return Some(
            finding(Severity::Warn, format!("CPU frequency fell during the run: {}", drops.join(", ")), "set the performance governor (cpu.frequency) and check for thermal or power limits")
                .with("frequency_drops", drops),
        );
    }
    None
}

/// Processes outside `exclude` that used [`NOISE_CPUS`] or more over the run.
fn busy_processes(
    before: &Snapshot,
    after: &Snapshot,
    exclude: &[u32],
    ticks_per_s: f64,
    interval_s: f64,
) -> Option<Finding> {
    let mut busy: Vec<(u32, String, f64, bool)> = vec![];
    for p in &after.processes {
        if exclude.contains(&p.pid) {
            continue;
        }
        let prev = before
            .processes
            .iter()
            .find(|b| b.pid == p.pid && b.start_ticks == p.start_ticks);
        let cpus = p
            .cpu_ticks
            .saturating_sub(prev.map(|b| b.cpu_ticks).unwrap_or(0)) as f64
            / ticks_per_s
            / interval_s;
        if cpus >= NOISE_CPUS {
            busy.push((p.pid, p.comm.clone(), round(cpus, 2), prev.is_none()));
        }
    }
    busy.sort_by(|a, b| b.2.total_cmp(&a.2));
    if !busy.is_empty() {
        let list: Vec<String> = busy
            .iter()
            .take(5)
            .map(|(pid, comm, c, new)| {
                format!(
                    "{pid} {comm} {c:.2} CPU{}",
                    if *new {
                        " (started during the run)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        return Some(
            finding(Severity::Warn, format!("other processes used CPU during the run: {}", list.join(", ")), "stop them (or pin them away from the server and the load generator) and rerun; give --pid so the server's own tree is not counted")
                .with("busy_processes", list)
                .with("interval_s", round(interval_s, 1)),
        );
    }
    None
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{
        fingerprint::{Fingerprint, ProcTicks},
        host::CpuTimes,
    };

    fn snap(t: f64) -> Snapshot {
        Snapshot {
            schema: "trapdetect.snapshot/1".into(),
            unix_time_s: t,
            boot_id: "b".into(),
            fingerprint: Fingerprint {
                kernel: "6.1".into(),
                thp: Some("madvise".into()),
                ..Default::default()
            },
            cpu_ticks: CpuTimes {
                user: 100,
                system: 0,
                idle: 900,
                iowait: 0,
                steal: 0,
            },
            kmsg_seq: Some(10),
            processes: vec![ProcTicks {
                pid: 7,
                start_ticks: 1,
                cpu_ticks: 100,
                comm: "server".into(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_quiet_run_has_no_drift() {
        let a = snap(0.0);
        let mut b = snap(10.0);
        b.cpu_ticks.idle += 2000;
        b.processes[0].cpu_ticks = 2100; // the server, excluded
        assert!(drift(&a, &b, &[7], 100.0).is_empty());
    }

    #[test]
    fn each_kind_of_drift_is_named() {
        let a = snap(0.0);
        let mut b = snap(10.0);
        b.fingerprint.thp = Some("always".into());
        b.cpu_ticks = CpuTimes {
            user: 1100,
            system: 0,
            idle: 1700,
            iowait: 0,
            steal: 200,
        };
        b.kmsg_seq = Some(13);
        b.pswpin = 5;
        b.processes.push(ProcTicks {
            pid: 99,
            start_ticks: 500,
            cpu_ticks: 800,
            comm: "apt".into(),
        });
        let f = drift(&a, &b, &[7], 100.0);
        let titles: Vec<&str> = f.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(f.len(), 5, "{titles:#?}");
        assert_eq!(
            f[0].severity,
            Severity::Warn,
            "THP is not the machine's identity"
        );
        assert_eq!(
            titles[0],
            "the environment changed during the run: thp madvise → always"
        );
        assert!(titles[1].starts_with("the hypervisor stole 10.0 %"));
        assert!(titles[2].starts_with("3 kernel log line(s)"));
        assert_eq!(f[3].severity, Severity::Fail);
        assert_eq!(
            titles[4],
            "other processes used CPU during the run: 99 apt 0.80 CPU (started during the run)"
        );
        // A new server binary is another server: fail.
        let mut c = snap(10.0);
        c.fingerprint.server_sha256 = Some("ab".into());
        assert_eq!(drift(&a, &c, &[7], 100.0)[0].severity, Severity::Fail);
        let mut r = snap(10.0);
        r.boot_id = "other".into();
        assert_eq!(
            drift(&a, &r, &[7], 100.0)[0].title,
            "the machine rebooted between --save and --since"
        );
    }

    /// Every kind of drift at once, pinned whole (ids, severities, titles, evidence, order).
    #[test]
    fn every_drift_finding_is_pinned() {
        let mut a = snap(0.0);
        a.cur_freq_khz = [(0, 3_000_000), (1, 3_000_000)].into();
        a.throttle_count = [(0, 4), (1, 0)].into();
        a.psi_some_total_us = [("cpu".to_string(), 0), ("memory".to_string(), 0)].into();
        a.processes.push(ProcTicks {
            pid: 50,
            start_ticks: 3,
            cpu_ticks: 10,
            comm: "cron".into(),
        });
        let mut b = snap(10.0);
        b.fingerprint.thp = Some("always".into());
        b.fingerprint.kernel = "6.2".into();
        b.cur_freq_khz = [(0, 2_000_000), (1, 2_900_000)].into();
        b.throttle_count = [(0, 7), (1, 2)].into();
        b.psi_some_total_us = [
            ("cpu".to_string(), 2_000_000),
            ("memory".to_string(), 200_000),
        ]
        .into();
        b.cpu_ticks = CpuTimes {
            user: 1100,
            system: 0,
            idle: 1700,
            iowait: 0,
            steal: 200,
        };
        b.kmsg_seq = Some(13);
        b.pswpin = 5;
        b.pswpout = 9;
        b.processes.push(ProcTicks {
            pid: 50,
            start_ticks: 3,
            cpu_ticks: 510,
            comm: "cron".into(),
        });
        for (i, t) in [
            (99, 800),
            (100, 300),
            (101, 310),
            (102, 320),
            (103, 330),
            (104, 30),
        ] {
            b.processes.push(ProcTicks {
                pid: i,
                start_ticks: 500,
                cpu_ticks: t,
                comm: format!("p{i}"),
            });
        }
        let mut all = drift(&a, &b, &[7], 100.0);
        let mut r = snap(10.0);
        r.boot_id = "other".into();
        all.extend(drift(&a, &r, &[7], 100.0));
        crate::traps::assert_pinned(
            &all,
            &[
                r##"{"id":"env.drift","severity":"fail","title":"the environment changed during the run: kernel 6.1 → 6.2; thp madvise → always","evidence":{"changed_fields":["kernel","thp"]},"remedy":"rerun with the environment held fixed (same binary, configuration, kernel settings) from --save to --since"}"##,
                r##"{"id":"env.drift","severity":"fail","title":"the CPUs were thermally throttled 5 time(s) during the run","evidence":{"throttle_events":5},"remedy":"cool the machine or lower its load; rerun, and watch thermal_throttle/*_count"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"CPU frequency fell during the run: cpu0 3.00 → 2.00 GHz","evidence":{"frequency_drops":["cpu0 3.00 → 2.00 GHz"]},"remedy":"set the performance governor (cpu.frequency) and check for thermal or power limits"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"the hypervisor stole 10.0 % of CPU time during the run","evidence":{"steal_pct":10.0},"remedy":"rerun on a quieter host or a dedicated instance; compare runs only with similar steal"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"tasks stalled on cpu 20.0 % of the run (/proc/pressure/cpu)","evidence":{"resource":"cpu","pressure_some_pct":20.0},"remedy":"find what competed for it (host.noise, host.memory) and rerun"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"tasks stalled on memory 2.0 % of the run (/proc/pressure/memory)","evidence":{"resource":"memory","pressure_some_pct":2.0},"remedy":"find what competed for it (host.noise, host.memory) and rerun"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"3 kernel log line(s) were written during the run (host.kernel-log shows them)","evidence":{"kernel_log_lines":3},"remedy":"read them (`dmesg -T | tail`); a run that overlapped an OOM kill, SYN flooding or a full conntrack table measured the kernel"}"##,
                r##"{"id":"env.drift","severity":"fail","title":"the machine swapped during the run (5 pages in, 9 out)","evidence":{"pages_swapped_in":5,"pages_swapped_out":9},"remedy":"free memory (host.memory) and rerun: a page read back from swap inside a request costs a disk access"}"##,
                r##"{"id":"env.drift","severity":"warn","title":"other processes used CPU during the run: 99 p99 0.80 CPU (started during the run), 50 cron 0.50 CPU, 103 p103 0.33 CPU (started during the run), 102 p102 0.32 CPU (started during the run), 101 p101 0.31 CPU (started during the run)","evidence":{"busy_processes":["99 p99 0.80 CPU (started during the run)","50 cron 0.50 CPU","103 p103 0.33 CPU (started during the run)","102 p102 0.32 CPU (started during the run)","101 p101 0.31 CPU (started during the run)"],"interval_s":10.0},"remedy":"stop them (or pin them away from the server and the load generator) and rerun; give --pid so the server's own tree is not counted"}"##,
                r##"{"id":"env.drift","severity":"fail","title":"the machine rebooted between --save and --since","evidence":{"boot_id_before":"b","boot_id_after":"other"},"remedy":"rerun the benchmark: nothing measured before the reboot belongs to this environment"}"##,
            ],
        );
    }
}
