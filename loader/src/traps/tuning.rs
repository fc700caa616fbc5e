//! Kernel and CPU settings a benchmark inherits (issue 23): host.thp (transparent huge pages
//! set to `always`), host.numa-balancing (pages migrated between nodes while the run runs),
//! host.nic-irqs (the network interface's interrupts served on the CPUs a pinned server was
//! given), host.perf-paranoid (what the tracer itself may attach), cpu.smt-shared (the server
//! and the load generator on two hyperthreads of one core). Pure rules on `host::tuning`.

use super::{Finding, Id, Severity};
use crate::host::tuning::Tuning;

fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

/// host.thp: `enabled = always` backs every large anonymous mapping with huge pages: page
/// faults may compact memory synchronously (with `defrag = always`) and khugepaged collapses
/// pages in the background, so latency and RSS vary from run to run.
pub fn thp(t: &Tuning) -> Option<Finding> {
    let e = t.thp_enabled.as_deref()?;
    let d = t.thp_defrag.as_deref().unwrap_or("?");
    if e != "always" && d != "always" {
        return None;
    }
    Some(
        Finding::new(
            Id::HostThp,
            Severity::Warn,
            format!("transparent huge pages: enabled [{e}], defrag [{d}]"),
        )
        .with("thp_enabled", e.to_string())
        .with("thp_defrag", d.to_string())
        .predict("page faults may stall on compaction (defrag always) and khugepaged rewrites the server's memory in the background: tail latency and RSS move between runs")
        .remedy("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (and defrag), or state the setting with the results"),
    )
}

/// A clock read costing this share of a bare system call or more enters the kernel. Two
/// classes, far apart: a vDSO read is a fraction of a system call (0.31 here with tsc, 0.20-
/// 0.27 in a TCG guest with tsc), a read in the kernel is a system call and a device read (1.6-
/// 3.9 in TCG guests with hpet, once 0.87 when the two were timed in separate moments); the
/// line sits between them with room on both sides.
const KERNEL_READ_RATIO: f64 = 0.6;

/// host.clocksource: a clock read that costs about a system call or more is one. A read through
/// the vDSO never enters the kernel and costs a fraction of the barest system call; a
/// clocksource the vDSO cannot read (hpet, acpi_pm: a kernel that does not trust or is not
/// offered a TSC) turns every timestamp the server, its load generator and the tracer take
/// into a system call and a device read. Judged on the two costs timed side by side in one
/// process, so the rule holds on any machine's speed.
pub fn clocksource(t: &Tuning) -> Option<Finding> {
    let c = t.clock_cost?;
    if c.syscall_ns == 0 || (c.clock_read_ns as f64) < KERNEL_READ_RATIO * c.syscall_ns as f64 {
        return None;
    }
    let current = t.clocksource.as_deref().unwrap_or("unknown");
    let offered = t.clocksources.join(" ");
    let remedy = if current == "tsc" {
        "the clocksource is already tsc and reads still enter the kernel: check whether the vDSO is off (vdso= on the kernel command line) or the process runs in a sandbox that intercepts the clock (gVisor)".to_string()
    } else if t.clocksources.iter().any(|s| s == "tsc") {
        "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource (clocksource=tsc on the kernel command line keeps it), then run preflight again: clock reads should cost less than a system call. If the kernel switched away from tsc on its own (dmesg | grep -i clocksource), it found the TSC unstable: fix that on the host (an invariant TSC passed to the guest) rather than forcing it".to_string()
    } else {
        format!(
            "the kernel offers no clocksource its vDSO reads (offered: {offered}): benchmark on a host that passes the guest a stable TSC (or kvm-clock), or state the cost of a timestamp with the results"
        )
    };
    Some(
        Finding::new(
            Id::HostClocksource,
            Severity::Warn,
            format!(
                "a clock read costs {} ns, {:.1}× a bare system call: the clocksource `{current}` is read in the kernel, not the vDSO",
                c.clock_read_ns,
                c.clock_read_ns as f64 / c.syscall_ns as f64
            ),
        )
        .with("clocksource", current.to_string())
        .with("clocksources_offered", offered)
        .with("clock_read_ns", c.clock_read_ns)
        .with("syscall_ns", c.syscall_ns)
        .predict(format!(
            "every timestamp the server (access logs, timers, request timing), its load generator (each latency) and the tracer take costs {} ns of CPU instead of tens: servers that timestamp often lose throughput, and measured latencies include the clock's own cost",
            c.clock_read_ns
        ))
        .remedy(remedy),
    )
}

/// host.numa-balancing: with more than one NUMA node, automatic balancing unmaps pages to
/// sample their accesses and migrates them while the run runs.
pub fn numa_balancing(t: &Tuning) -> Option<Finding> {
    let v = t.numa_balancing.as_deref()?;
    if v == "0" || t.numa_nodes < 2 {
        return None;
    }
    Some(
        Finding::new(
            Id::HostNumaBalancing,
            Severity::Warn,
            format!("NUMA balancing is on (kernel.numa_balancing = {v}) on {} nodes", t.numa_nodes),
        )
        .with("numa_balancing", v.to_string())
        .with("numa_nodes", t.numa_nodes as u64)
        .predict("hinting faults and page migrations during the run: throughput and latency drift as pages move")
        .remedy("sysctl -w kernel.numa_balancing=0 and pin the server and its memory to a node (numactl --cpunodebind=N --membind=N), or report it"),
    )
}

/// host.nic-irqs: a server pinned to some CPUs (fewer than online) while the network
/// interface's interrupts are served on those same CPUs: softirq work for every packet lands
/// on the cores the server was given.
pub fn nic_irqs(t: &Tuning, server_cpus: &[u32], online: usize) -> Option<Finding> {
    if server_cpus.is_empty() || server_cpus.len() >= online {
        return None;
    }
    let on_server: Vec<String> = t
        .nic_irqs
        .iter()
        .filter(|n| {
            n.count_by_cpu
                .iter()
                .any(|(c, k)| *k > 0 && server_cpus.contains(c))
        })
        .map(|n| {
            format!(
                "{} {} (irq {}, affinity {})",
                n.interface,
                n.name,
                n.irq,
                list(&n.affinity)
            )
        })
        .collect();
    if on_server.is_empty() {
        return None;
    }
    Some(
        Finding::new(
            Id::HostNicIrqs,
            Severity::Warn,
            format!(
                "the server is pinned to CPU {} and the network interrupts are served there too: {}",
                list(server_cpus),
                on_server.join("; ")
            ),
        )
        .with("server_cpus", list(server_cpus))
        .with("nic_irqs", on_server)
        .predict("packet processing (hard and soft IRQs) takes time from the server's own cores")
        .remedy("steer the NIC's IRQs away from the server's CPUs (echo CPUS > /proc/irq/N/smp_affinity_list, or irqbalance --banirq), or pin the server elsewhere"),
    )
}

/// host.perf-paranoid: what the tracer (`trapdetect --pid`, `run`) may attach. It needs
/// CAP_PERFMON (or root) whenever perf_event_paranoid is above 1 (Debian and Ubuntu ship 2
/// or more, Debian's own level 3 refuses unprivileged perf events altogether).
pub fn perf_paranoid(t: &Tuning, privileged: bool) -> Option<Finding> {
    let p = t.perf_event_paranoid?;
    let (sev, title) = match (p > 1, privileged) {
        (true, false) => (
            Severity::Warn,
            format!(
                "perf_event_paranoid = {p} and this run has no CAP_PERFMON: `trapdetect --pid` and `run` cannot attach their tracepoints here without root"
            ),
        ),
        _ => (
            Severity::Info,
            format!(
                "perf_event_paranoid = {p}: the tracer {}",
                if privileged {
                    "has the privilege it needs"
                } else {
                    "may attach as this user"
                }
            ),
        ),
    };
    Some(
        Finding::new(Id::HostPerfParanoid, sev, title)
            .with("perf_event_paranoid", p as i64)
            .with("privileged", privileged)
            .remedy(if sev == Severity::Warn {
                "run the tracer as root (or with CAP_BPF + CAP_PERFMON); lowering kernel.perf_event_paranoid opens perf events to every user"
            } else {
                "nothing to do"
            }),
    )
}

/// cpu.smt-shared: the server and the load generator (`--client`) on two hardware threads of
/// one core (or on the same CPUs): they compete for the core's execution units and caches,
/// and the generator's work shows up as the server's latency.
pub fn smt_shared(t: &Tuning, server_cpus: &[u32], client_cpus: &[u32]) -> Option<Finding> {
    let same: Vec<u32> = server_cpus
        .iter()
        .copied()
        .filter(|c| client_cpus.contains(c))
        .collect();
    let mut pairs = vec![];
    for s in server_cpus {
        for sib in t.siblings.get(s).into_iter().flatten() {
            if sib != s && client_cpus.contains(sib) && !server_cpus.contains(sib) {
                pairs.push(format!("{s}/{sib}"));
            }
        }
    }
    if same.is_empty() && pairs.is_empty() {
        return None;
    }
    let title = if same.is_empty() {
        format!(
            "the server and the load generator run on sibling hyperthreads of the same cores ({})",
            pairs.join(", ")
        )
    } else {
        format!(
            "the server and the load generator may run on the same CPUs ({})",
            list(&same)
        )
    };
    Some(
        Finding::new(Id::CpuSmtShared, Severity::Warn, title)
            .with("server_cpus", list(server_cpus))
            .with("client_cpus", list(client_cpus))
            .with("shared_cpus", list(&same))
            .with("sibling_pairs", pairs)
            .predict("the generator's work competes for the server's cores: its latency is partly the generator's")
            .remedy("pin them to different physical cores (taskset -c), taking whole cores (both siblings) for each"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tuning::NicIrq;

    fn clocked(current: &str, offered: &[&str], read: u64, syscall: u64) -> Tuning {
        Tuning {
            clocksource: Some(current.into()),
            clocksources: offered.iter().map(|s| s.to_string()).collect(),
            clock_cost: Some(crate::host::tuning::ClockCost {
                clock_read_ns: read,
                syscall_ns: syscall,
            }),
            ..Tuning::default()
        }
    }

    #[test]
    fn a_clock_read_in_the_kernel_is_named_with_both_costs() {
        // The kernel matrix's TCG guest: hpet, 2,156 ns a read (timed there), beside a system
        // call of 900 ns; tsc not offered.
        let f = clocksource(&clocked("hpet", &["hpet", "acpi_pm"], 2156, 900)).unwrap();
        assert_eq!(f.id, Id::HostClocksource);
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(
            f.title,
            "a clock read costs 2156 ns, 2.4× a bare system call: the clocksource `hpet` is read in the kernel, not the vDSO"
        );
        assert_eq!(f.evidence["clocksource"], "hpet");
        assert_eq!(f.evidence["clocksources_offered"], "hpet acpi_pm");
        assert_eq!(f.evidence["clock_read_ns"], 2156);
        assert_eq!(f.evidence["syscall_ns"], 900);
        let r = f.remedy.as_str();
        assert!(
            r.starts_with(
                "the kernel offers no clocksource its vDSO reads (offered: hpet acpi_pm)"
            ),
            "{r}"
        );
        // tsc offered but not used: switch to it.
        let f = clocksource(&clocked("acpi_pm", &["tsc", "hpet", "acpi_pm"], 1400, 150)).unwrap();
        assert!(f.remedy.as_str().starts_with(
            "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
        ));
        // Even with tsc current, a read that costs a system call is one (the vDSO disabled),
        // and the remedy does not send the user to the clocksource they already have.
        let f = clocksource(&clocked("tsc", &["tsc"], 300, 290)).unwrap();
        assert!(
            f.remedy
                .as_str()
                .starts_with("the clocksource is already tsc and reads still enter the kernel")
        );
        // The 6.1 guest's hpet once timed below its system call (1,040 against 1,192 ns):
        // still a kernel read.
        assert!(clocksource(&clocked("hpet", &["hpet", "acpi_pm"], 1040, 1192)).is_some());
    }

    #[test]
    fn a_vdso_clock_read_is_no_finding_on_any_machine_speed() {
        // This machine: tsc, 45 ns against a 145 ns getppid; kvm-clock 54 ns.
        assert!(clocksource(&clocked("tsc", &["tsc", "kvm-clock"], 45, 145)).is_none());
        assert!(clocksource(&clocked("kvm-clock", &["tsc", "kvm-clock"], 54, 145)).is_none());
        // A machine ten times slower throughout reads the same ratio; the TCG guest's tsc.
        assert!(clocksource(&clocked("tsc", &["tsc"], 450, 1450)).is_none());
        assert!(clocksource(&clocked("tsc", &["tsc", "hpet"], 215, 1077)).is_none());
        // Not timed (a recorded tree), or a system call timed at nothing: no judgement.
        assert!(clocksource(&Tuning::default()).is_none());
        assert!(clocksource(&clocked("hpet", &["hpet"], 2000, 0)).is_none());
    }

    fn t() -> Tuning {
        Tuning {
            thp_enabled: Some("always".into()),
            thp_defrag: Some("madvise".into()),
            numa_balancing: Some("1".into()),
            numa_nodes: 2,
            perf_event_paranoid: Some(3),
            nic_irqs: vec![NicIrq {
                interface: "eth0".into(),
                irq: 38,
                name: "virtio2-input.0".into(),
                count_by_cpu: [(0, 0), (1, 11034)].into(),
                affinity: vec![0, 1],
            }],
            siblings: [
                (0, vec![0, 2]),
                (1, vec![1, 3]),
                (2, vec![0, 2]),
                (3, vec![1, 3]),
            ]
            .into(),
            ..Tuning::default()
        }
    }

    #[test]
    fn thp_and_numa() {
        let f = thp(&t()).unwrap();
        assert_eq!(
            f.title,
            "transparent huge pages: enabled [always], defrag [madvise]"
        );
        let mut quiet = t();
        quiet.thp_enabled = Some("madvise".into());
        assert!(thp(&quiet).is_none());
        assert_eq!(numa_balancing(&t()).unwrap().evidence["numa_nodes"], 2);
        quiet.numa_nodes = 1;
        assert!(
            numa_balancing(&quiet).is_none(),
            "one node: nothing to balance"
        );
    }

    #[test]
    fn nic_irqs_on_a_pinned_servers_cpus() {
        let f = nic_irqs(&t(), &[1], 4).unwrap();
        assert!(
            f.title
                .contains("eth0 virtio2-input.0 (irq 38, affinity 0,1)"),
            "{}",
            f.title
        );
        assert!(
            nic_irqs(&t(), &[0], 4).is_none(),
            "no interrupt served on CPU 0"
        );
        assert!(nic_irqs(&t(), &[0, 1, 2, 3], 4).is_none(), "not pinned");
    }

    #[test]
    fn perf_paranoid_by_privilege() {
        assert_eq!(perf_paranoid(&t(), false).unwrap().severity, Severity::Warn);
        assert_eq!(perf_paranoid(&t(), true).unwrap().severity, Severity::Info);
    }

    #[test]
    fn smt_siblings_and_shared_cpus() {
        let f = smt_shared(&t(), &[0], &[2]).unwrap();
        assert_eq!(f.evidence["sibling_pairs"][0], "0/2");
        assert!(
            f.title
                .starts_with("the server and the load generator run on sibling hyperthreads")
        );
        let f = smt_shared(&t(), &[0, 1], &[1]).unwrap();
        assert_eq!(f.evidence["shared_cpus"], "1");
        assert!(
            smt_shared(&t(), &[0, 2], &[1, 3]).is_none(),
            "whole cores each"
        );
    }
}
