//! Host traps: host.noise (other processes using CPU, load average, CPU pressure, steal),
//! host.tracer (a tracer attached to the target), host.virt (WSL2, a hypervisor),
//! host.memory (swap in use, memory pressure, OOM kills), host.kernel-log (new kernel log
//! lines since a mark), host.kernel-support (what this kernel offers `trapdetect --pid`).

use super::{Finding, Id, Severity, fpm::human_bytes, round};
use crate::host::{
    host::{KernelLog, KernelSupport, LoadAvg, Memory, NoiseSample, Psi, Virt},
    process::Traced,
};

/// CPUs' worth of other processes' work that makes a sample noisy.
const NOISE_CPUS: f64 = 0.25;
/// CPU pressure (some, avg10, %) that says tasks wait for a CPU.
const CPU_PSI_PCT: f64 = 10.0;
/// Steal share of CPU time that says the hypervisor is busy elsewhere.
const STEAL_SHARE: f64 = 0.02;

/// host.noise.
pub fn noise(
    load: &LoadAvg,
    online: usize,
    sample: Option<&NoiseSample>,
    cpu_psi: Option<&Psi>,
) -> Option<Finding> {
    let mut reasons = vec![];
    if let Some(s) = sample
        && s.others_cpus >= NOISE_CPUS
    {
        let top: Vec<String> = s
            .top
            .iter()
            .take(3)
            .map(|b| format!("{} {} {:.2}", b.pid, b.comm, b.cpus))
            .collect();
        reasons.push(format!(
            "other processes used {:.2} CPU over {:.2} s (top: {})",
            s.others_cpus,
            s.window_s,
            top.join(", ")
        ));
    }
    // Without a sample the load average is the only history there is.
    if sample.is_none() && load.one >= 0.5 * online.max(1) as f64 {
        reasons.push(format!(
            "load average {:.2} on {online} CPUs before the run",
            load.one
        ));
    }
    if let Some(p) = cpu_psi
        && p.some.avg10 >= CPU_PSI_PCT
    {
        reasons.push(format!(
            "tasks waited for a CPU {:.1} % of the last 10 s (/proc/pressure/cpu)",
            p.some.avg10
        ));
    }
    if let Some(s) = sample
        && s.steal_share >= STEAL_SHARE
    {
        reasons.push(format!(
            "the hypervisor stole {:.1} % of CPU time",
            s.steal_share * 100.0
        ));
    }
    if reasons.is_empty() {
        return None;
    }
    let mut f = Finding::new(Id::HostNoise, Severity::Warn, reasons.join("; "))
        .with("load_1m", load.one)
        .with("load_5m", load.five)
        .with("load_15m", load.fifteen)
        .with("runnable_now", load.running as u64)
        .with("online_cpus", online as u64)
        .with_opt("cpu_pressure_some_avg10_pct", cpu_psi.map(|p| p.some.avg10));
    if let Some(s) = sample {
        f = f
            .with("sample_window_s", s.window_s)
            .with("others_cpus", s.others_cpus)
            .with("target_cpus", s.target_cpus)
            .with("steal_pct", round(s.steal_share * 100.0, 2))
            .with(
                "top_others",
                serde_json::to_value(&s.top).unwrap_or_default(),
            );
    }
    Some(
        f.predict("other work shares the CPUs with the server and the load generator: throughput and tail latency move with it")
            .remedy("stop the other work (see top_others; `top -o %CPU`), or run on a quiet machine; rerun preflight until this clears"),
    )
}

/// Who traces the target: pid, comm, cmdline (escaped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracer {
    /// Pid.
    pub pid: u32,
    /// comm.
    pub comm: String,
    /// Command line.
    pub cmdline: String,
}

/// host.tracer: any thread of the target (or of its children) with a TracerPid.
pub fn tracer(traced: &[Traced], tracers: &[Tracer]) -> Option<Finding> {
    let first = traced.first()?;
    let t = tracers.iter().find(|t| t.pid == first.tracer_pid);
    let comm = t.map(|t| t.comm.clone()).unwrap_or_else(|| "?".into());
    let mut pids: Vec<u32> = traced.iter().map(|t| t.tracer_pid).collect();
    pids.sort_unstable();
    pids.dedup();
    Some(
        Finding::new(
            Id::HostTracer,
            Severity::Fail,
            format!(
                "pid {} ({comm}) is tracing the target: {} traced thread(s)",
                first.tracer_pid,
                traced.len()
            ),
        )
        .with("tracer_pid", first.tracer_pid as u64)
        .with("tracer_comm", comm)
        .with_opt("tracer_cmdline", t.map(|t| t.cmdline.clone()))
        .with("tracer_pids", pids.iter().map(|&p| p as u64).collect::<Vec<u64>>())
        .with("traced_tids", traced.iter().take(16).map(|t| t.tid as u64).collect::<Vec<u64>>())
        .with("traced_threads", traced.len() as u64)
        .predict("every syscall of a traced thread stops for the tracer: strace -f costs a tight loop 87–98 % of its throughput")
        .remedy(format!(
            "end the tracer: kill {} (a left-over strace/gdb session), then rerun",
            pids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
        )),
    )
}

/// The kernel versions the probes need and the matrix tests (defined with the probes).
pub use crate::probe::{MIN_KERNEL, OLDEST_TESTED};

fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// host.kernel-support: whether `trapdetect --pid` can trace on this kernel, and what it
/// would lack. Always reported (info when everything is there), so a WSL2 or cloud user sees
/// the answer before tracing.
pub fn kernel_support(k: &KernelSupport) -> Finding {
    let mut lacks = vec![];
    if !k.btf {
        lacks.push("BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)".to_string());
    }
    if k.syscall_tracepoints == Some(false) {
        lacks.push(
            "syscall tracepoints (raw_syscalls, CONFIG_HAVE_SYSCALL_TRACEPOINTS)".to_string(),
        );
    }
    let old = major_minor(&k.release).is_some_and(|v| v < MIN_KERNEL);
    if old {
        lacks.push(format!(
            "Linux {}.{} or later (BPF ring buffer)",
            MIN_KERNEL.0, MIN_KERNEL.1
        ));
    }
    let (severity, title) = if lacks.is_empty() {
        let fuse = match k.fuse_tracepoint {
            Some(false) => {
                "; no fuse tracepoint (Linux 6.13+): FUSE requests are estimated from paths, not counted"
            }
            _ => "",
        };
        let unknown = if k.syscall_tracepoints.is_none() {
            " (syscall tracepoints not checked: tracefs unreadable)"
        } else {
            ""
        };
        (
            Severity::Info,
            format!(
                "kernel {} can be traced: BTF and syscall tracepoints present{unknown}{fuse}",
                k.release
            ),
        )
    } else {
        (
            Severity::Warn,
            format!(
                "kernel {} cannot be traced by trapdetect --pid (exit 4): it lacks {}",
                k.release,
                lacks.join(", ")
            ),
        )
    };
    let f = Finding::new(Id::HostKernelSupport, severity, title)
        .with("kernel_release", k.release.clone())
        .with("btf", k.btf)
        .with_opt("syscall_tracepoints", k.syscall_tracepoints)
        .with_opt("fuse_tracepoint", k.fuse_tracepoint)
        .with("basis", k.basis.clone())
        .with(
            "minimum_kernel",
            format!(
                "{}.{} (tested from {OLDEST_TESTED})",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        );
    if lacks.is_empty() {
        f.remedy("nothing to do")
    } else {
        f.remedy(format!(
            "trace on a kernel with BTF and syscall tracepoints, Linux {OLDEST_TESTED} or later (Debian 11+, Ubuntu 22.04, RHEL 9, WSL2 5.15.74.2+), or pass --btf FILE for a kernel built without BTF"
        ))
    }
}

/// host.virt: WSL2 is a warning (DrvFs and a different kernel and I/O path); any other
/// hypervisor is information.
pub fn virt(v: &Virt) -> Option<Finding> {
    let base = |f: Finding| {
        f.with("kernel_version", v.kernel_version.clone())
            .with("hypervisor_flag", v.hypervisor_flag)
            .with_opt("vendor", v.vendor.clone())
            .with_opt("hypervisor_type", v.hypervisor_type.clone())
            .with_opt("dmi_sys_vendor", v.dmi.get("sys_vendor").cloned())
            .with_opt("dmi_product_name", v.dmi.get("product_name").cloned())
    };
    if let Some(w) = v.wsl {
        return Some(
            base(Finding::new(
                Id::HostVirt,
                Severity::Warn,
                format!(
                    "running under {} (Windows host): relative results transfer, absolute numbers do not",
                    if w == "wsl2" { "WSL2" } else { "WSL1" }
                ),
            ))
            .with("wsl", w)
            .predict("WSL2 runs in a Hyper-V VM; /mnt/* paths are DrvFs over 9p, about 20,000 lookups/s across all threads on one measured box")
            .remedy("keep every path the server touches (cwd included) on the WSL ext4 disk; benchmark absolute numbers on the target OS"),
        );
    }
    if v.hypervisor_flag || v.vendor.is_some() {
        let name = v.vendor.clone().unwrap_or_else(|| "a hypervisor".into());
        return Some(
            base(Finding::new(
                Id::HostVirt,
                Severity::Info,
                format!("virtual machine ({name}): steal time and the host's neighbours add variance"),
            ))
            .remedy("compare runs on the same instance type; watch steal (host.noise reports it in the sample)"),
        );
    }
    None
}

/// host.memory.
pub fn memory(m: &Memory, oom_since_mark: Option<u64>) -> Option<Finding> {
    let mut reasons = vec![];
    if m.swap_used_kib > 0 {
        reasons.push(format!(
            "{} of swap in use",
            human_bytes(m.swap_used_kib * 1024)
        ));
    }
    if let Some(p) = &m.psi
        && p.some.avg10 >= 1.0
    {
        reasons.push(format!(
            "tasks stalled on memory {:.1} % of the last 10 s",
            p.some.avg10
        ));
    }
    if m.mem_total_kib > 0 && m.mem_available_kib * 10 < m.mem_total_kib {
        reasons.push(format!(
            "only {} of {} available",
            human_bytes(m.mem_available_kib * 1024),
            human_bytes(m.mem_total_kib * 1024)
        ));
    }
    if let Some(n) = oom_since_mark.filter(|&n| n > 0) {
        reasons.push(format!("{n} OOM kill(s) since the mark"));
    }
    if reasons.is_empty() {
        return None;
    }
    Some(
        Finding::new(Id::HostMemory, Severity::Warn, reasons.join("; "))
            .with("mem_total_bytes", m.mem_total_kib * 1024)
            .with("mem_available_bytes", m.mem_available_kib * 1024)
            .with("swap_total_bytes", m.swap_total_kib * 1024)
            .with("swap_used_bytes", m.swap_used_kib * 1024)
            .with("pswpin_pages_since_boot", m.pswpin)
            .with("pswpout_pages_since_boot", m.pswpout)
            .with_opt("oom_kills_since_boot", m.oom_kill)
            .with_opt("oom_kills_since_mark", oom_since_mark)
            .with_opt("memory_pressure_some_avg10_pct", m.psi.map(|p| p.some.avg10))
            .with_opt("memory_pressure_full_avg10_pct", m.psi.and_then(|p| p.full).map(|f| f.avg10))
            .predict("pages come back from swap at disk speed inside requests; an OOM kill ends a worker mid-run")
            .remedy("free memory before the run (stop other services, drop the pool's max_children), `swapoff -a` on a benchmark box, rerun after the pressure clears"),
    )
}

/// What a kernel log line is about, when it is one of the lines that falsify a run.
pub fn classify(msg: &str) -> Option<&'static str> {
    let m = msg;
    let table: [(&str, &str); 14] = [
        ("Out of memory", "oom"),
        ("invoked oom-killer", "oom"),
        ("oom-kill:", "oom"),
        ("Possible SYN flooding", "syn-flood"),
        ("nf_conntrack: table full", "conntrack-full"),
        ("TCP: out of memory", "tcp-memory"),
        ("too many orphaned sockets", "tcp-orphans"),
        ("blocked for more than", "hung-task"),
        ("soft lockup", "lockup"),
        ("rcu_sched self-detected stall", "rcu-stall"),
        ("clock throttled", "thermal-throttle"),
        ("perf: interrupt took too long", "perf-throttle"),
        ("segfault at", "segfault"),
        ("I/O error", "io-error"),
    ];
    table.iter().find(|(n, _)| m.contains(n)).map(|(_, k)| *k)
}

/// host.kernel-log: with a mark, every line since it (warn when one is a known trap or an
/// error); without one, only known-trap lines of the recent window.
pub fn kernel_log(k: &KernelLog) -> Option<Finding> {
    let mut kinds: Vec<(&str, u64)> = vec![];
    let mut shown = vec![];
    let mut serious = false;
    for r in &k.records {
        let kind = classify(&r.msg);
        if let Some(kind) = kind {
            match kinds.iter_mut().find(|(n, _)| *n == kind) {
                Some((_, c)) => *c += 1,
                None => kinds.push((kind, 1)),
            }
        }
        if kind.is_some() || r.prio <= 3 {
            serious = true;
        }
        let include = k.mark.is_some() || kind.is_some();
        if include && shown.len() < 12 {
            shown.push(format!("[{:>12.6}] {}", r.ts_us as f64 / 1e6, r.msg));
        }
    }
    let matched: u64 = kinds.iter().map(|(_, c)| c).sum();
    let (since, count) = match &k.mark {
        Some(m) => (
            format!("since the mark (seq {})", m.seq),
            k.records.len() as u64,
        ),
        None => (
            format!("in the last {:.0} s", k.recent_window_s.unwrap_or(0.0)),
            matched,
        ),
    };
    if count == 0 {
        return None;
    }
    let kinds_s = kinds
        .iter()
        .map(|(n, c)| format!("{n} ×{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let severity = if serious {
        Severity::Warn
    } else {
        Severity::Info
    };
    let title = if kinds.is_empty() {
        format!("{count} new kernel log line(s) {since}")
    } else {
        format!("{count} kernel log line(s) {since}: {kinds_s}")
    };
    Some(
        Finding::new(Id::HostKernelLog, severity, title)
            .with("since", since)
            .with("lines", count)
            .with("matched_lines", matched)
            .with("kinds", kinds_s)
            .with("lost_lines", k.lost)
            .with("lines_shown", shown)
            .remedy("read them: `dmesg -T | tail -50`; a run that overlapped an OOM kill, SYN flooding or a full conntrack table measured the kernel, not the server — rerun after fixing the cause"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::host::{
        Busy, CpuTimes, Mark, PsiLine, parse_kmsg_text, read_memory, read_virt, select_records,
    };
    use std::path::Path;

    #[test]
    fn kernel_support_names_what_a_kernel_lacks() {
        let ok = KernelSupport {
            release: "6.1.0-50-amd64".into(),
            btf: true,
            syscall_tracepoints: Some(true),
            fuse_tracepoint: Some(false),
            basis: "/sys/kernel/tracing".into(),
        };
        let f = kernel_support(&ok);
        assert_eq!(f.severity, Severity::Info);
        assert!(
            f.title.contains("fuse tracepoint (Linux 6.13+)"),
            "{}",
            f.title
        );
        assert_eq!(f.evidence["btf"], true);
        assert_eq!(f.evidence["minimum_kernel"], "5.8 (tested from 5.10)");
        // WSL2 before 5.15.74.2 shipped no BTF.
        let wsl_old = KernelSupport {
            release: "5.10.102.1-microsoft-standard-WSL2".into(),
            btf: false,
            ..ok.clone()
        };
        let f = kernel_support(&wsl_old);
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.title.contains("exit 4"), "{}", f.title);
        assert!(f.title.contains("BTF"), "{}", f.title);
        let ancient = KernelSupport {
            release: "5.4.0-150-generic".into(),
            ..ok.clone()
        };
        assert!(
            kernel_support(&ancient)
                .title
                .contains("Linux 5.8 or later")
        );
        let unknown = KernelSupport {
            syscall_tracepoints: None,
            fuse_tracepoint: None,
            basis: String::new(),
            ..ok
        };
        let f = kernel_support(&unknown);
        assert_eq!(f.severity, Severity::Info);
        assert!(f.title.contains("not checked"), "{}", f.title);
    }

    fn fixture(rel: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(rel)
    }

    fn load(one: f64) -> LoadAvg {
        LoadAvg {
            one,
            five: 0.1,
            fifteen: 0.1,
            running: 1,
            total: 100,
        }
    }

    #[test]
    fn noise_from_sample_names_the_busy_process() {
        let s = NoiseSample {
            window_s: 0.25,
            machine: CpuTimes::default(),
            others_cpus: 0.98,
            target_cpus: 0.0,
            top: vec![Busy {
                pid: 4711,
                comm: "yes".into(),
                cpus: 0.96,
            }],
            steal_share: 0.0,
        };
        let f = noise(&load(0.1), 2, Some(&s), None).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.title
                .contains("0.98 CPU over 0.25 s (top: 4711 yes 0.96)"),
            "{}",
            f.title
        );
        assert_eq!(f.evidence["top_others"][0]["pid"], 4711);
        // A quiet sample is silent even with a high load average (the sample is better data).
        let quiet = NoiseSample {
            others_cpus: 0.01,
            top: vec![],
            ..s
        };
        assert!(noise(&load(3.0), 2, Some(&quiet), None).is_none());
        // Without a sample the load average speaks.
        assert!(
            noise(&load(1.5), 2, None, None)
                .unwrap()
                .title
                .contains("load average 1.50")
        );
        let psi = Psi {
            some: PsiLine {
                avg10: 25.0,
                ..Default::default()
            },
            full: None,
        };
        assert!(noise(&load(0.0), 2, None, Some(&psi)).is_some());
    }

    #[test]
    fn tracer_names_pid_and_comm() {
        let traced = vec![
            Traced {
                tid: 100,
                tracer_pid: 555,
            },
            Traced {
                tid: 101,
                tracer_pid: 555,
            },
        ];
        let t = vec![Tracer {
            pid: 555,
            comm: "strace".into(),
            cmdline: "strace -f -p 100".into(),
        }];
        let f = tracer(&traced, &t).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.title,
            "pid 555 (strace) is tracing the target: 2 traced thread(s)"
        );
        assert_eq!(f.evidence["tracer_pid"], 555);
        assert_eq!(
            f.remedy,
            "end the tracer: kill 555 (a left-over strace/gdb session), then rerun"
        );
        assert!(tracer(&[], &t).is_none());
    }

    #[test]
    fn wsl2_warns_vm_informs() {
        let f = virt(&read_virt(&fixture("proc/wsl2"))).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.title.starts_with("running under WSL2"));
        let f = virt(&read_virt(&fixture("sys/kvm-guest"))).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert!(f.title.contains("(QEMU)"));
        assert!(virt(&Virt::default()).is_none());
    }

    #[test]
    fn memory_swap_psi_and_low_available() {
        let m = read_memory(&fixture("proc/swapping"));
        let f = memory(&m, Some(1)).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.title
                .starts_with("1024.0 MiB of swap in use; tasks stalled on memory 12.5 %"),
            "{}",
            f.title
        );
        assert!(
            f.title.contains("only 392.7 MiB of 15.6 GiB available"),
            "{}",
            f.title
        );
        assert!(f.title.ends_with("1 OOM kill(s) since the mark"));
        assert_eq!(f.evidence["swap_used_bytes"], 1_048_572u64 * 1024);
        let healthy = Memory {
            mem_total_kib: 1000,
            mem_available_kib: 900,
            ..Default::default()
        };
        assert!(memory(&healthy, Some(0)).is_none());
    }

    #[test]
    fn kernel_log_since_mark_and_recent() {
        let all = parse_kmsg_text(
            &std::fs::read_to_string(fixture("kmsg/oom-and-synflood.txt")).unwrap(),
        );
        let mark = Mark {
            boot_id: "b".into(),
            seq: 1041,
            oom_kill: None,
            unix_time_s: 0,
        };
        let f = kernel_log(&select_records(&all, Some(&mark), "b", 4000.0, 600.0)).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert_eq!(f.evidence["lines"], 5);
        // io-error, oom (+ the oom_reaper line does not match), syn-flood, conntrack-full.
        assert_eq!(
            f.evidence["kinds"],
            "io-error ×1, oom ×1, syn-flood ×1, conntrack-full ×1"
        );
        assert_eq!(f.evidence["matched_lines"], 4);
        assert_eq!(f.evidence["lines_shown"].as_array().unwrap().len(), 5);
        // No mark: only the matching lines of the last 600 s.
        let f = kernel_log(&select_records(&all, None, "b", 4000.0, 600.0)).unwrap();
        assert_eq!(f.evidence["lines"], 3);
        assert!(f.title.starts_with(
            "3 kernel log line(s) in the last 600 s: oom ×1, syn-flood ×1, conntrack-full ×1"
        ));
        // Nothing since a mark at the end.
        let end = Mark { seq: 1046, ..mark };
        assert!(kernel_log(&select_records(&all, Some(&end), "b", 4000.0, 600.0)).is_none());
    }
}
