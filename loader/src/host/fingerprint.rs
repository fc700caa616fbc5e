//! The environment a run measured in (issue 23): a fingerprint carried by every preflight
//! report (kernel, CPU model and count, governors, turbo, SMT, mitigations, transparent huge
//! pages, NUMA balancing, virtualisation, the server's binary and configuration hashes) so
//! `compare` can say when two runs did not run on the same thing; and a snapshot of the
//! counters that move while a run runs (`preflight --save` / `--since`: CPU frequency,
//! throttle counters, steal, pressure, kernel log position, swap, processes' CPU time).
//! Readers take a filesystem root so recorded trees under `fixtures/` exercise them.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::cpu::under;
use crate::util::read_trim;

/// What a run's numbers depend on; equal fingerprints mean comparable environments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `uname -r`.
    pub kernel: String,
    /// /proc/cpuinfo `model name` of the first CPU (escaped).
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus_online: usize,
    /// Scaling governors in use (unique, sorted); empty without cpufreq.
    pub governors: Vec<String>,
    /// Turbo/boost enabled, when readable.
    pub turbo: Option<bool>,
    /// `smt/control`.
    pub smt: Option<String>,
    /// The kernel's vulnerability mitigations, one entry per file in
    /// /sys/devices/system/cpu/vulnerabilities (`name: first words`).
    pub mitigations: BTreeMap<String, String>,
    /// Transparent huge pages: the selected `enabled` mode (`always`, `madvise`, `never`).
    pub thp: Option<String>,
    /// THP `defrag` mode.
    pub thp_defrag: Option<String>,
    /// kernel.numa_balancing.
    pub numa_balancing: Option<String>,
    /// NUMA nodes online.
    pub numa_nodes: Option<String>,
    /// Virtualisation (vendor, `hypervisor`, `wsl2`, or `none`).
    pub virt: String,
    /// SHA-256 of the server's executable (the running image), with `--pid`.
    pub server_sha256: Option<String>,
    /// SHA-256 of its configuration files, by path (escaped), when preflight read them.
    pub config_sha256: BTreeMap<String, String>,
}

/// The bracketed choice of a sysfs mode file (`always [madvise] never` → `madvise`).
pub fn selected(text: &str) -> Option<String> {
    let a = text.find('[')?;
    let b = text[a..].find(']')? + a;
    Some(text[a + 1..b].to_string())
}

/// Reads the machine's half of a fingerprint under `root` (the server's half is filled by
/// the caller, which has read the process and its configuration).
pub fn read(root: &Path, virt: &super::host::Virt, cpu: &super::cpu::CpuHost) -> Fingerprint {
    let cpuinfo = std::fs::read_to_string(under(root, "/proc/cpuinfo")).unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| crate::escape::text(v.trim()))
        .unwrap_or_default();
    let mut governors: Vec<String> = cpu.freq.iter().filter_map(|f| f.governor.clone()).collect();
    governors.sort();
    governors.dedup();
    let mut mitigations = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(under(root, "/sys/devices/system/cpu/vulnerabilities")) {
        for e in rd.flatten() {
            if let Some(v) = read_trim(&e.path()) {
                let short: String = v.split(';').next().unwrap_or(&v).trim().to_string();
                mitigations.insert(
                    crate::escape::text(&e.file_name().to_string_lossy()),
                    crate::escape::text(&short),
                );
            }
        }
    }
    let thp = |f: &str| {
        read_trim(&under(root, "/sys/kernel/mm/transparent_hugepage").join(f))
            .and_then(|t| selected(&t))
    };
    Fingerprint {
        kernel: crate::util::kernel_release(root),
        cpu_model,
        cpus_online: cpu.online.len(),
        governors,
        turbo: cpu.turbo.as_ref().map(|t| t.enabled),
        smt: cpu.smt_control.clone(),
        mitigations,
        thp: thp("enabled"),
        thp_defrag: thp("defrag"),
        numa_balancing: read_trim(&under(root, "/proc/sys/kernel/numa_balancing")),
        numa_nodes: read_trim(&under(root, "/sys/devices/system/node/online")),
        virt: match (&virt.wsl, &virt.vendor, virt.hypervisor_flag) {
            (Some(w), _, _) => w.to_string(),
            (None, Some(v), _) => v.clone(),
            (None, None, true) => "hypervisor".into(),
            _ => "none".into(),
        },
        server_sha256: None,
        config_sha256: BTreeMap::new(),
    }
}

/// The whole fingerprint for a report that did not read the host itself (trace, run): the
/// machine's half, and the server's executable hashed through /proc/PID/exe (the running
/// image; nothing when it has exited or cannot be read).
pub fn gather(pid: Option<u32>) -> Fingerprint {
    let root = Path::new("/");
    let mut f = read(
        root,
        &super::host::read_virt(root),
        &super::cpu::read_cpu_host(root),
    );
    f.server_sha256 = pid.and_then(|p| {
        let mut exe = std::fs::File::open(format!("/proc/{p}/exe")).ok()?;
        super::process::sha256_file(&mut exe).ok()
    });
    f
}

/// The SHA-256 of a configuration file (at most 16 MiB read), `None` when unreadable.
pub fn file_sha256(p: &Path) -> Option<String> {
    let mut f = std::fs::File::open(p).ok()?;
    if f.metadata().ok()?.len() > 16 << 20 {
        return None;
    }
    super::process::sha256_file(&mut f).ok()
}

/// Fields of two fingerprints that differ: `(field, a, b)`, as strings.
pub fn differences(a: &serde_json::Value, b: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut out = vec![];
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return out;
    };
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let show = |v: Option<&serde_json::Value>| match v {
        None | Some(serde_json::Value::Null) => "-".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        if x == y {
            continue;
        }
        // Maps (mitigations, configuration hashes) are compared entry by entry.
        if let (Some(serde_json::Value::Object(mx)), Some(serde_json::Value::Object(my))) = (x, y) {
            let mut sub: Vec<&String> = mx.keys().chain(my.keys()).collect();
            sub.sort();
            sub.dedup();
            for s in sub {
                if mx.get(s) != my.get(s) {
                    out.push((format!("{k}.{s}"), show(mx.get(s)), show(my.get(s))));
                }
            }
            continue;
        }
        out.push((k.clone(), show(x), show(y)));
    }
    out
}

/// The counters that move while a run runs, saved before it (`preflight --save FILE`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// `trapdetect.snapshot/1`.
    pub schema: String,
    /// Seconds since the Unix epoch when taken.
    pub unix_time_s: f64,
    /// /proc/sys/kernel/random/boot_id.
    pub boot_id: String,
    /// The environment's fingerprint.
    pub fingerprint: Fingerprint,
    /// scaling_cur_freq per CPU, kHz (empty without cpufreq).
    pub cur_freq_khz: BTreeMap<u32, u64>,
    /// thermal_throttle core + package counts, summed per CPU.
    pub throttle_count: BTreeMap<u32, u64>,
    /// /proc/stat's aggregate line.
    pub cpu_ticks: super::host::CpuTimes,
    /// PSI `some` totals, µs, by resource (cpu, memory, io).
    pub psi_some_total_us: BTreeMap<String, u64>,
    /// The last kernel log sequence number (None: /dev/kmsg unreadable).
    pub kmsg_seq: Option<u64>,
    /// Swap used, KiB, and pages swapped in and out since boot.
    pub swap_used_kib: u64,
    /// pswpin.
    pub pswpin: u64,
    /// pswpout.
    pub pswpout: u64,
    /// CPU ticks of every process, by pid, with its start time (pid reuse) and comm.
    pub processes: Vec<ProcTicks>,
}

/// One process's CPU time at a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcTicks {
    /// Pid.
    pub pid: u32,
    /// Start time, clock ticks after boot.
    pub start_ticks: u64,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// comm (escaped).
    pub comm: String,
}

/// Schema of a saved snapshot.
pub const SNAPSHOT_SCHEMA: &str = "trapdetect.snapshot/1";

/// Reads the moving counters (the fingerprint and the kernel log position come from the
/// caller, which has read them already).
pub fn snapshot(root: &Path, fingerprint: Fingerprint, kmsg_seq: Option<u64>) -> Snapshot {
    let cpu_base = under(root, "/sys/devices/system/cpu");
    let mut cur_freq_khz = BTreeMap::new();
    let mut throttle_count = BTreeMap::new();
    let online = read_trim(&cpu_base.join("online"))
        .and_then(|l| super::process::parse_cpu_list(&l))
        .unwrap_or_default();
    for cpu in online {
        let d = cpu_base.join(format!("cpu{cpu}"));
        if let Some(f) = read_trim(&d.join("cpufreq/scaling_cur_freq")).and_then(|v| v.parse().ok())
        {
            cur_freq_khz.insert(cpu, f);
        }
        let n: Option<u64> = ["core_throttle_count", "package_throttle_count"]
            .iter()
            .filter_map(|f| {
                read_trim(&d.join("thermal_throttle").join(f)).and_then(|v| v.parse().ok())
            })
            .reduce(|a: u64, b| a + b);
        if let Some(n) = n {
            throttle_count.insert(cpu, n);
        }
    }
    let mut psi = BTreeMap::new();
    for r in ["cpu", "memory", "io"] {
        if let Some(p) = super::host::read_psi(root, r) {
            psi.insert(r.to_string(), p.some.total_us);
        }
    }
    let mem = super::host::read_memory(root);
    let processes = super::process::scan()
        .into_iter()
        .map(|e| ProcTicks {
            pid: e.pid,
            start_ticks: e.stat.start_ticks,
            cpu_ticks: e.stat.cpu_ticks,
            comm: crate::escape::bytes(&e.stat.comm),
        })
        .collect();
    Snapshot {
        schema: SNAPSHOT_SCHEMA.into(),
        unix_time_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        boot_id: super::host::boot_id(),
        fingerprint,
        cur_freq_khz,
        throttle_count,
        cpu_ticks: std::fs::read_to_string(under(root, "/proc/stat"))
            .ok()
            .and_then(|t| super::host::parse_proc_stat(&t))
            .unwrap_or_default(),
        psi_some_total_us: psi,
        kmsg_seq,
        swap_used_kib: mem.swap_used_kib,
        pswpin: mem.pswpin,
        pswpout: mem.pswpout,
        processes,
    }
}

/// Where a path of the fingerprint's configuration lives, for display.
pub fn config_key(p: &Path) -> String {
    crate::escape::bytes(PathBuf::from(p).as_os_str().as_encoded_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selected_mode() {
        assert_eq!(
            selected("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            selected("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(selected("0"), None);
    }

    #[test]
    fn differences_name_the_fields_and_map_entries() {
        let a = json!({"kernel": "6.1", "thp": "madvise", "mitigations": {"mds": "Mitigation: Clear CPU buffers", "l1tf": "Not affected"}, "server_sha256": null});
        let b = json!({"kernel": "6.18", "thp": "madvise", "mitigations": {"mds": "Vulnerable", "l1tf": "Not affected"}, "server_sha256": "ab"});
        assert_eq!(
            differences(&a, &b),
            vec![
                ("kernel".to_string(), "6.1".to_string(), "6.18".to_string()),
                (
                    "mitigations.mds".into(),
                    "Mitigation: Clear CPU buffers".into(),
                    "Vulnerable".into()
                ),
                ("server_sha256".into(), "-".into(), "ab".into()),
            ]
        );
        assert!(differences(&a, &a).is_empty());
    }

    #[test]
    fn reads_this_machine() {
        let root = Path::new("/");
        let f = read(
            root,
            &super::super::host::read_virt(root),
            &super::super::cpu::read_cpu_host(root),
        );
        assert!(!f.kernel.is_empty());
        assert!(f.cpus_online >= 1);
        let s = snapshot(root, f, None);
        assert!(s.processes.iter().any(|p| p.pid == std::process::id()));
        assert!(s.cpu_ticks.total() > 0);
    }
}
