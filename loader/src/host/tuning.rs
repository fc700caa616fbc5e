//! Kernel and CPU settings that change what a benchmark measures (issue 23): transparent huge
//! pages, NUMA balancing, the IRQs of the network interfaces and the CPUs that serve them,
//! `perf_event_paranoid` (what the tracer itself may do), the SMT siblings of each CPU, and the
//! clocksource with what a clock read costs beside a system call (timed, not read).
//! Parsers are pure; readers take a filesystem root so recorded trees exercise them.

use std::{collections::BTreeMap, path::Path};

use serde::Serialize;

use super::{cpu::under, fingerprint::selected, process::parse_cpu_list};
use crate::util::read_trim;

/// The interrupts of one network interface's device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NicIrq {
    /// The interface (escaped).
    pub interface: String,
    /// IRQ number.
    pub irq: u32,
    /// Its name in /proc/interrupts (escaped).
    pub name: String,
    /// Interrupts served per CPU since boot, by CPU.
    pub count_by_cpu: BTreeMap<u32, u64>,
    /// /proc/irq/N/smp_affinity_list.
    pub affinity: Vec<u32>,
}

/// The settings read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tuning {
    /// THP `enabled` mode.
    pub thp_enabled: Option<String>,
    /// THP `defrag` mode.
    pub thp_defrag: Option<String>,
    /// kernel.numa_balancing.
    pub numa_balancing: Option<String>,
    /// NUMA nodes online.
    pub numa_nodes: usize,
    /// kernel.perf_event_paranoid.
    pub perf_event_paranoid: Option<i32>,
    /// NIC interrupts.
    pub nic_irqs: Vec<NicIrq>,
    /// Each CPU's SMT siblings (itself included).
    pub siblings: BTreeMap<u32, Vec<u32>>,
    /// The clocksource the kernel keeps time with (clocksource0/current_clocksource).
    pub clocksource: Option<String>,
    /// The ones it offers (clocksource0/available_clocksource).
    pub clocksources: Vec<String>,
    /// What a clock read and a system call cost this process ([`time_clock_reads`]; `None`
    /// where not timed: a recorded tree).
    pub clock_cost: Option<ClockCost>,
}

/// A clock read timed beside a system call, both in this process (ns per call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClockCost {
    /// `clock_gettime(CLOCK_MONOTONIC)` as every server, load generator and tracer calls it
    /// (Rust's `Instant::now`): through the vDSO, without entering the kernel, where the
    /// clocksource allows it.
    pub clock_read_ns: u64,
    /// `getppid()`, a system call that does nothing else: what entering the kernel costs here.
    pub syscall_ns: u64,
}

/// One timed batch of `f` (up to 5,000 calls or 5 ms), in ns per call.
fn batch_ns(f: &mut dyn FnMut()) -> u64 {
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while n < 5_000 {
        f();
        n += 1;
        if n.is_multiple_of(500) && start.elapsed() > std::time::Duration::from_millis(5) {
            break;
        }
    }
    (start.elapsed().as_nanos() / u128::from(n)) as u64
}

/// Times a clock read beside a system call, here and now (about 80 ms at most): eight batches
/// of each, alternating, so both see the machine in the same moments (under emulation the
/// same call's cost moves by ×2 within seconds); the fastest batch of each, the one least
/// disturbed.
pub fn time_clock_reads() -> ClockCost {
    let mut read = || {
        std::hint::black_box(std::time::Instant::now());
    };
    let mut syscall = || {
        // SAFETY: getppid takes no argument and cannot fail.
        std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    };
    let (mut r, mut s) = (u64::MAX, u64::MAX);
    for _ in 0..8 {
        r = r.min(batch_ns(&mut read));
        s = s.min(batch_ns(&mut syscall));
    }
    ClockCost {
        clock_read_ns: r,
        syscall_ns: s,
    }
}

/// Parses /proc/interrupts: IRQ number → (counts by CPU, name).
pub fn parse_interrupts(text: &str) -> BTreeMap<u32, (BTreeMap<u32, u64>, String)> {
    let mut lines = text.lines();
    let cpus: Vec<u32> = lines
        .next()
        .unwrap_or("")
        .split_ascii_whitespace()
        .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
        .collect();
    let mut out = BTreeMap::new();
    for l in lines {
        let Some((irq, rest)) = l.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = irq.parse::<u32>() else {
            continue;
        };
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        let counts: BTreeMap<u32, u64> = cpus
            .iter()
            .zip(&fields)
            .filter_map(|(c, v)| Some((*c, v.parse().ok()?)))
            .collect();
        let name = fields
            .last()
            .map(|n| crate::escape::text(n))
            .unwrap_or_default();
        out.insert(irq, (counts, name));
    }
    out
}

/// Reads the settings under `root`.
pub fn read(root: &Path) -> Tuning {
    let thp = |f: &str| {
        read_trim(&under(root, "/sys/kernel/mm/transparent_hugepage").join(f))
            .and_then(|t| selected(&t))
    };
    let interrupts = parse_interrupts(
        &std::fs::read_to_string(under(root, "/proc/interrupts")).unwrap_or_default(),
    );
    let mut nic_irqs = vec![];
    if let Ok(rd) = std::fs::read_dir(under(root, "/sys/class/net")) {
        let mut ifs: Vec<_> = rd.flatten().collect();
        ifs.sort_by_key(|e| e.file_name());
        for e in ifs {
            let dev = e.path().join("device");
            // The MSI vectors of the device, or of its PCI parent (virtio-net sits below one).
            let irqs: Vec<u32> = [dev.join("msi_irqs"), dev.join("../msi_irqs")]
                .iter()
                .find_map(|d| std::fs::read_dir(d).ok())
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|x| x.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            for irq in irqs {
                let Some((counts, name)) = interrupts.get(&irq) else {
                    continue;
                };
                if name.ends_with("-config") {
                    continue;
                }
                nic_irqs.push(NicIrq {
                    interface: crate::escape::text(&e.file_name().to_string_lossy()),
                    irq,
                    name: name.clone(),
                    count_by_cpu: counts.clone(),
                    affinity: read_trim(&under(
                        root,
                        &format!("/proc/irq/{irq}/smp_affinity_list"),
                    ))
                    .and_then(|l| parse_cpu_list(&l))
                    .unwrap_or_default(),
                });
            }
        }
    }
    nic_irqs.sort_by_key(|n| n.irq);
    let mut siblings = BTreeMap::new();
    let base = under(root, "/sys/devices/system/cpu");
    for cpu in read_trim(&base.join("online"))
        .and_then(|l| parse_cpu_list(&l))
        .unwrap_or_default()
    {
        if let Some(s) = read_trim(&base.join(format!("cpu{cpu}/topology/thread_siblings_list")))
            .and_then(|l| parse_cpu_list(&l))
        {
            siblings.insert(cpu, s);
        }
    }
    Tuning {
        thp_enabled: thp("enabled"),
        thp_defrag: thp("defrag"),
        numa_balancing: read_trim(&under(root, "/proc/sys/kernel/numa_balancing")),
        numa_nodes: read_trim(&under(root, "/sys/devices/system/node/online"))
            .and_then(|l| parse_cpu_list(&l))
            .map(|n| n.len())
            .unwrap_or(1),
        perf_event_paranoid: read_trim(&under(root, "/proc/sys/kernel/perf_event_paranoid"))
            .and_then(|v| v.parse().ok()),
        nic_irqs,
        siblings,
        clocksource: read_trim(&under(
            root,
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )),
        clocksources: read_trim(&under(
            root,
            "/sys/devices/system/clocksource/clocksource0/available_clocksource",
        ))
        .map(|l| l.split_ascii_whitespace().map(str::to_string).collect())
        .unwrap_or_default(),
        clock_cost: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_by_cpu_and_name() {
        // Recorded on this VM (virtio-net eth0 is virtio2 on PCI 0000:00:03.0).
        let t = "           CPU0       CPU1       \n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\n 38:          0      11034 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 39:       7275          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\nNMI:          0          0   Non-maskable interrupts\n";
        let m = parse_interrupts(t);
        assert_eq!(m.len(), 3);
        assert_eq!(m[&38].0[&1], 11034);
        assert_eq!(m[&38].1, "virtio2-input.0");
        assert_eq!(m[&39].0[&0], 7275);
    }

    #[test]
    fn reads_this_machine() {
        let t = read(Path::new("/"));
        assert!(!t.siblings.is_empty());
        assert!(t.numa_nodes >= 1);
        // Every kernel with sysfs has a clocksource, and it is one of those it offers.
        let cs = t.clocksource.expect("current_clocksource");
        assert!(t.clocksources.contains(&cs), "{cs} in {:?}", t.clocksources);
        assert_eq!(
            t.clock_cost, None,
            "read() only reads; timing is time_clock_reads()"
        );
    }

    #[test]
    fn clocksource_from_a_recorded_tree() {
        let root = std::env::temp_dir().join(format!("td-clocksource-{}", std::process::id()));
        let d = root.join("sys/devices/system/clocksource/clocksource0");
        std::fs::create_dir_all(&d).unwrap();
        // A Xen guest's layout: its own clock first, the others it may switch to after.
        std::fs::write(d.join("current_clocksource"), "xen\n").unwrap();
        std::fs::write(d.join("available_clocksource"), "xen tsc hpet acpi_pm \n").unwrap();
        let t = read(&root);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(t.clocksource.as_deref(), Some("xen"));
        assert_eq!(t.clocksources, ["xen", "tsc", "hpet", "acpi_pm"]);
    }

    #[test]
    fn clock_reads_and_system_calls_are_timed() {
        let c = time_clock_reads();
        // Both are timed (a call takes at least a nanosecond), and every batch ends (at most
        // 5,000 calls or 5 ms).
        assert!(c.clock_read_ns >= 1 && c.syscall_ns >= 1, "{c:?}");
    }
}
