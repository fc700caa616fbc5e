//! CPU traps: cpu.quota (a cgroup caps the target below the CPUs it may use), cpu.affinity
//! (the target may run on fewer CPUs than the machine has), cpu.frequency (governor, turbo,
//! SMT: warn only, as benchmark harnesses check).

use super::{Finding, Id, Severity, round};
use crate::host::cpu::{CgroupVersion, CpuCgroup, CpuHost};

/// cpu.quota: the tightest quota on the path from the target's cgroup to the root, against
/// the CPUs the target may run on. Fail when the quota is below them; warn when it is not but
/// the group was throttled anyway (bursts exceed the per-period budget).
/// `subject` names whose cgroup it is (`the target`, `this shell and what it starts`).
pub fn quota(cg: &CpuCgroup, usable_cpus: usize, subject: &str) -> Option<Finding> {
    let b = cg.binding()?;
    let cpus = b.cpus();
    let usable = usable_cpus.max(1) as f64;
    let throttled_share = match (b.nr_throttled, b.nr_periods) {
        (Some(t), Some(p)) if p > 0 => Some(round(t as f64 / p as f64, 4)),
        _ => None,
    };
    let capped = cpus < usable;
    if !capped && b.nr_throttled.unwrap_or(0) == 0 {
        return None;
    }
    let file_desc = match cg.at.version {
        CgroupVersion::V2 => format!("cpu.max \"{} {}\"", b.quota_us, b.period_us),
        CgroupVersion::V1 => format!(
            "cpu.cfs_quota_us {} / cpu.cfs_period_us {}",
            b.quota_us, b.period_us
        ),
    };
    let throttled = match (b.nr_throttled, b.nr_periods) {
        (Some(t), Some(p)) => format!("; throttled in {t} of {p} periods"),
        _ => String::new(),
    };
    let (severity, title) = if capped {
        (
            Severity::Fail,
            format!(
                "cgroup {} caps {subject} at {:.2} CPU of the {} it may use ({file_desc}){throttled}",
                b.dir, cpus, usable_cpus
            ),
        )
    } else {
        (
            Severity::Warn,
            format!(
                "cgroup {} was throttled although its quota ({:.2} CPU, {file_desc}) covers the {} CPUs {subject} may use{throttled}",
                b.dir, cpus, usable_cpus
            ),
        )
    };
    let remedy = match cg.at.version {
        CgroupVersion::V2 => format!(
            "echo max > {}/cpu.max (or raise it: systemctl set-property <unit> CPUQuota=, docker update --cpus)",
            b.dir
        ),
        CgroupVersion::V1 => format!(
            "echo -1 > {}/cpu.cfs_quota_us (or raise it: docker update --cpus)",
            b.dir
        ),
    };
    let max_stall_ms = (b.period_us.saturating_sub(b.quota_us.min(b.period_us))) as f64 / 1000.0;
    Some(
        Finding::new(Id::CpuQuota, severity, title)
            .with("cgroup_version", format!("{:?}", cg.at.version).to_lowercase())
            .with("cgroup", cg.at.cgroup.clone())
            .with("cgroup_dir", b.dir.clone())
            .with("file", b.file.clone())
            .with("quota_us", b.quota_us)
            .with("period_us", b.period_us)
            .with("quota_cpus", round(cpus, 3))
            .with("usable_cpus", usable_cpus as u64)
            .with("levels_with_quota", cg.quotas.len() as u64)
            .with_opt("nr_periods", b.nr_periods)
            .with_opt("nr_throttled", b.nr_throttled)
            .with_opt("throttled_us", b.throttled_us)
            .with_opt("throttled_share", throttled_share)
            .predict(if capped {
                format!(
                    "CPU-bound throughput ≤ {:.2} ÷ {} = {:.0} % of what the CPUs give, with the CPUs partly idle; a throttled period stalls every thread for up to {max_stall_ms:.0} ms",
                    cpus,
                    usable_cpus,
                    cpus / usable * 100.0
                )
            } else {
                format!(
                    "bursts above {:.2} CPU within one {:.0} ms period stall for the rest of it (tail latency)",
                    cpus,
                    b.period_us as f64 / 1000.0
                )
            })
            .remedy(remedy),
    )
}

/// cpu.affinity: Cpus_allowed of the target against the online CPUs.
pub fn affinity(
    allowed: &[u32],
    allowed_list: &str,
    online: &[u32],
    online_list: &str,
    subject: &str,
) -> Option<Finding> {
    let usable = allowed.iter().filter(|c| online.contains(c)).count();
    if online.is_empty() || usable >= online.len() {
        return None;
    }
    Some(
        Finding::new(
            Id::CpuAffinity,
            Severity::Warn,
            format!(
                "{subject} may run on {usable} of {} online CPUs (Cpus_allowed_list {allowed_list})",
                online.len()
            ),
        )
        .with("cpus_allowed_list", allowed_list.to_string())
        .with("allowed_cpus", usable as u64)
        .with("online_cpus", online.len() as u64)
        .with("online_list", online_list.to_string())
        .predict(format!(
            "at most {usable} CPU(s) of work at once; a load generator on the same CPUs competes with the server"
        ))
        .remedy(format!(
            "taskset -a -p -c {online_list} <pid> (or its cpuset cgroup); if the pinning is deliberate, keep the load generator off CPUs {allowed_list} and --ignore cpu.affinity"
        )),
    )
}

/// cpu.isolated: the target may use CPUs isolated with `isolcpus=` (/sys/devices/system/cpu/
/// isolated). The scheduler does not balance tasks across isolated CPUs: a thread or process
/// stays on the CPU it was created on unless it is pinned elsewhere, so a server given several
/// isolated CPUs runs its workers on the one it started on (fail), and one given isolated and
/// housekeeping CPUs is spread over the housekeeping ones only (warn). A server pinned to one
/// isolated CPU is a deliberate setup, as is a target on housekeeping CPUs only: no finding.
pub fn isolated(h: &CpuHost, server_cpus: &[u32]) -> Option<Finding> {
    let isolated = crate::host::process::parse_cpu_list(&h.isolated)?;
    let on: Vec<u32> = server_cpus
        .iter()
        .copied()
        .filter(|c| isolated.contains(c))
        .collect();
    if on.is_empty() || server_cpus.len() < 2 {
        return None;
    }
    let balanced = server_cpus.len() - on.len();
    let on_list = on.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let f = if balanced == 0 {
        Finding::new(
            Id::CpuIsolated,
            Severity::Fail,
            format!(
                "the target may run on {} CPUs ({on_list}), all isolated (isolcpus={}): the scheduler does not spread its threads over them, each stays on the CPU it started on",
                on.len(),
                h.isolated
            ),
        )
        .predict(format!(
            "about 1 CPU of work at once (where its threads were started), not {}, unless each worker is pinned to its own CPU",
            on.len()
        ))
    } else {
        Finding::new(
            Id::CpuIsolated,
            Severity::Warn,
            format!(
                "the target may run on {} CPUs, {} of them isolated ({on_list}, isolcpus={}): the scheduler balances its threads over the other {balanced} only",
                server_cpus.len(),
                on.len(),
                h.isolated
            ),
        )
        .predict(format!(
            "at most {balanced} CPU(s) of balanced work, not {}",
            server_cpus.len()
        ))
    };
    Some(
        f.with("isolated_list", h.isolated.clone())
            .with("isolated_allowed", on_list)
            .with("allowed_cpus", server_cpus.len() as u64)
            .with("balanced_cpus", balanced as u64)
            .remedy(
                "run the server on the housekeeping (non-isolated) CPUs (taskset -a -p -c LIST <pid>), pin each worker to its own isolated CPU, or isolate with a cpuset partition that keeps load balancing instead of isolcpus=",
            ),
    )
}

/// cpu.frequency: governors other than `performance`, turbo on, SMT active. Warn only:
/// these add variance, they do not cap a server.
pub fn frequency(h: &CpuHost) -> Option<Finding> {
    let mut reasons = vec![];
    let mut governors: Vec<(String, usize)> = vec![];
    for f in &h.freq {
        let g = f.governor.clone().unwrap_or_else(|| "?".into());
        match governors.iter_mut().find(|(n, _)| *n == g) {
            Some((_, c)) => *c += 1,
            None => governors.push((g, 1)),
        }
    }
    let not_perf: usize = governors
        .iter()
        .filter(|(g, _)| g != "performance")
        .map(|(_, c)| c)
        .sum();
    if not_perf > 0 {
        reasons.push(format!(
            "{not_perf} of {} CPUs not on the performance governor",
            h.freq.len()
        ));
    }
    if h.turbo.as_ref().is_some_and(|t| t.enabled) {
        reasons.push("turbo/boost on".into());
    }
    if h.smt_active == Some(true) {
        reasons.push("SMT active (sibling threads share a core)".into());
    }
    if reasons.is_empty() {
        return None;
    }
    let gov = governors
        .iter()
        .map(|(g, c)| format!("{g}×{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut remedy = vec![];
    if not_perf > 0 {
        remedy.push("cpupower frequency-set -g performance".to_string());
    }
    if let Some(t) = h.turbo.as_ref().filter(|t| t.enabled) {
        remedy.push(if t.source.ends_with("no_turbo") {
            format!("echo 1 > {}", t.source)
        } else {
            format!("echo 0 > {}", t.source)
        });
    }
    if h.smt_active == Some(true) {
        remedy.push("echo off > /sys/devices/system/cpu/smt/control (or pin server and generator to distinct cores)".into());
    }
    let f0 = h.freq.first();
    Some(
        Finding::new(
            Id::CpuFrequency,
            Severity::Warn,
            format!("CPU frequency varies run to run: {}", reasons.join("; ")),
        )
        .with("governors", if gov.is_empty() { "-".to_string() } else { gov })
        .with_opt("scaling_driver", f0.and_then(|f| f.driver.clone()))
        .with_opt("scaling_min_khz", f0.and_then(|f| f.min_khz))
        .with_opt("scaling_max_khz", f0.and_then(|f| f.max_khz))
        .with_opt("hw_max_khz", f0.and_then(|f| f.hw_max_khz))
        .with_opt("turbo", h.turbo.as_ref().map(|t| t.enabled))
        .with_opt("turbo_source", h.turbo.as_ref().map(|t| t.source.clone()))
        .with_opt("smt_active", h.smt_active)
        .with_opt("smt_control", h.smt_control.clone())
        .predict("the clock follows load and temperature: run-to-run differences of several percent that are not the server's")
        .remedy(format!("{} (or `pyperf system tune`)", remedy.join("; "))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cpu::{CgroupDir, QuotaLevel, read_cpu_host};
    use std::path::Path;

    fn cg(version: CgroupVersion, quota: u64, period: u64, throttled: u64) -> CpuCgroup {
        CpuCgroup {
            at: CgroupDir {
                version,
                cgroup: "/bench".into(),
                mount_point: "/sys/fs/cgroup/cpu".into(),
                dir: "/sys/fs/cgroup/cpu/bench".into(),
            },
            quotas: vec![QuotaLevel {
                dir: "/sys/fs/cgroup/cpu/bench".into(),
                file: "cpu.cfs_quota_us".into(),
                quota_us: quota,
                period_us: period,
                nr_periods: Some(100),
                nr_throttled: Some(throttled),
                throttled_us: Some(throttled * 70_000),
            }],
            leaf_nr_throttled: Some(throttled),
        }
    }

    #[test]
    fn quota_below_usable_cpus_fails_with_the_arithmetic() {
        let f = quota(&cg(CgroupVersion::V1, 30_000, 100_000, 97), 2, "the target").unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["quota_us"], 30_000);
        assert_eq!(f.evidence["period_us"], 100_000);
        assert_eq!(f.evidence["quota_cpus"], 0.3);
        assert_eq!(f.evidence["throttled_share"], 0.97);
        assert!(f.title.contains("0.30 CPU of the 2"), "{}", f.title);
        assert!(f.predicted.as_ref().unwrap().contains("= 15 %"));
        assert!(f.predicted.as_ref().unwrap().contains("70 ms"));
        assert_eq!(
            f.remedy,
            "echo -1 > /sys/fs/cgroup/cpu/bench/cpu.cfs_quota_us (or raise it: docker update --cpus)"
        );
    }

    #[test]
    fn generous_quota_is_silent_unless_throttled() {
        assert!(quota(&cg(CgroupVersion::V2, 400_000, 100_000, 0), 2, "the target").is_none());
        let f = quota(&cg(CgroupVersion::V2, 200_000, 100_000, 3), 2, "the target").unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.remedy
                .starts_with("echo max > /sys/fs/cgroup/cpu/bench/cpu.max")
        );
    }

    #[test]
    fn affinity_names_the_fraction() {
        let f = affinity(&[0], "0", &[0, 1], "0-1", "the target").unwrap();
        assert_eq!(
            f.title,
            "the target may run on 1 of 2 online CPUs (Cpus_allowed_list 0)"
        );
        assert_eq!(f.evidence["allowed_cpus"], 1);
        assert_eq!(f.evidence["online_cpus"], 2);
        assert!(affinity(&[0, 1], "0-1", &[0, 1], "0-1", "the target").is_none());
        // Offline CPUs in the mask do not count.
        assert!(affinity(&[0, 1, 2, 3], "0-3", &[0, 1], "0-1", "the target").is_none());
    }

    #[test]
    fn isolated_cpus_are_not_balanced() {
        let host = |isolated: &str| CpuHost {
            online: vec![0, 1, 2, 3],
            online_list: "0-3".into(),
            isolated: isolated.into(),
            ..Default::default()
        };
        // Given two isolated CPUs and nothing else: one CPU's worth.
        let f = isolated(&host("2-3"), &[2, 3]).unwrap();
        assert_eq!(f.id, "cpu.isolated");
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.title,
            "the target may run on 2 CPUs (2,3), all isolated (isolcpus=2-3): the scheduler does not spread its threads over them, each stays on the CPU it started on"
        );
        assert_eq!(f.evidence["isolated_list"], "2-3");
        assert_eq!(f.evidence["isolated_allowed"], "2,3");
        assert_eq!(f.evidence["allowed_cpus"], 2);
        assert_eq!(f.evidence["balanced_cpus"], 0);
        // Housekeeping and isolated CPUs: balanced over the housekeeping ones.
        let f = isolated(&host("3"), &[0, 1, 2, 3]).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["isolated_allowed"], "3");
        assert_eq!(f.evidence["balanced_cpus"], 3);
        assert_eq!(
            f.predicted.as_deref(),
            Some("at most 3 CPU(s) of balanced work, not 4")
        );
        // Pinned to one isolated CPU on purpose, on housekeeping CPUs only, no isolation, no
        // target: nothing.
        assert!(isolated(&host("2-3"), &[2]).is_none());
        assert!(isolated(&host("2-3"), &[0, 1]).is_none());
        assert!(isolated(&host(""), &[0, 1, 2, 3]).is_none());
        assert!(isolated(&host("2-3"), &[]).is_none());
    }

    #[test]
    fn frequency_from_recorded_sysfs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/sys");
        let f = frequency(&read_cpu_host(&root.join("laptop-powersave"))).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["governors"], "powersave×3, performance×1");
        assert!(
            f.title
                .contains("3 of 4 CPUs not on the performance governor")
        );
        assert!(f.title.contains("turbo/boost on"));
        assert!(f.title.contains("SMT active"));
        assert!(
            f.remedy
                .contains("echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo")
        );
        // No cpufreq, no SMT: nothing to say.
        assert!(frequency(&read_cpu_host(&root.join("this-vm"))).is_none());
    }
}
