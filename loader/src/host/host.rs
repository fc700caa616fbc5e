//! The machine around the benchmark: virtualisation (WSL2, hypervisor, DMI), load average,
//! other processes' CPU over a short sample, steal time, memory (swap, PSI, OOM kills) and the
//! kernel log since a mark. Parsers are pure; readers take a filesystem root so recorded
//! trees under `fixtures/` exercise them.

use std::{
    collections::{BTreeMap, HashMap},
    io,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize};

use super::{
    cpu::under,
    process::{self, ProcEntry},
};
use crate::util::read_trim;

/// What the machine runs on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Virt {
    /// /proc/version.
    pub kernel_version: String,
    /// WSL flavour from /proc/version: `wsl2` (`microsoft-standard-WSL2`) or `wsl1`
    /// (`Microsoft`).
    #[serde(deserialize_with = "crate::util::de::opt_static_str")]
    pub wsl: Option<crate::util::de::Name>,
    /// `hypervisor` flag in /proc/cpuinfo (set by every mainstream hypervisor).
    pub hypervisor_flag: bool,
    /// /sys/hypervisor/type (Xen).
    pub hypervisor_type: Option<String>,
    /// /sys/class/dmi/id/{sys_vendor,product_name,bios_vendor,board_vendor}, when present.
    pub dmi: BTreeMap<String, String>,
    /// Vendor named by DMI or the kernel (`KVM`, `QEMU`, `VMware`, `Microsoft Hyper-V`...).
    pub vendor: Option<String>,
}

/// Classifies /proc/version.
pub fn wsl_flavour(version: &str) -> Option<&'static str> {
    let v = version.to_ascii_lowercase();
    if v.contains("microsoft-standard-wsl2") || (v.contains("microsoft") && v.contains("wsl2")) {
        Some("wsl2")
    } else if version.contains("-Microsoft") {
        Some("wsl1")
    } else if v.contains("microsoft") {
        Some("wsl2")
    } else {
        None
    }
}

/// Names the virtualisation vendor from DMI strings.
pub fn dmi_vendor(dmi: &BTreeMap<String, String>) -> Option<String> {
    let all: String = dmi.values().cloned().collect::<Vec<_>>().join(" ");
    let table = [
        ("KVM", "KVM"),
        ("QEMU", "QEMU"),
        ("VMware", "VMware"),
        ("VirtualBox", "VirtualBox"),
        ("innotek", "VirtualBox"),
        ("Xen", "Xen"),
        ("Amazon EC2", "Amazon EC2"),
        ("Google Compute Engine", "Google Compute Engine"),
        ("Parallels", "Parallels"),
        ("BHYVE", "bhyve"),
        ("Bochs", "Bochs"),
        ("OpenStack", "OpenStack"),
        ("Cloud Hypervisor", "Cloud Hypervisor"),
    ];
    for (needle, name) in table {
        if all.contains(needle) {
            return Some(name.to_string());
        }
    }
    // Hyper-V (and Azure) report Microsoft with a "Virtual Machine" product.
    if all.contains("Microsoft Corporation") && all.contains("Virtual Machine") {
        return Some("Microsoft Hyper-V".into());
    }
    None
}

/// Reads virtualisation facts under `root`.
pub fn read_virt(root: &Path) -> Virt {
    let kernel_version = read_trim(&under(root, "/proc/version")).unwrap_or_default();
    let cpuinfo = std::fs::read_to_string(under(root, "/proc/cpuinfo")).unwrap_or_default();
    let hypervisor_flag = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_ascii_whitespace().any(|f| f == "hypervisor"));
    let mut dmi = BTreeMap::new();
    for f in ["sys_vendor", "product_name", "bios_vendor", "board_vendor"] {
        if let Some(v) = read_trim(&under(root, "/sys/class/dmi/id").join(f))
            && !v.is_empty()
        {
            dmi.insert(f.to_string(), crate::escape::text(&v));
        }
    }
    let hypervisor_type = read_trim(&under(root, "/sys/hypervisor/type"));
    let vendor = dmi_vendor(&dmi).or_else(|| hypervisor_type.clone());
    Virt {
        wsl: wsl_flavour(&kernel_version),
        kernel_version: crate::escape::text(&kernel_version),
        hypervisor_flag,
        hypervisor_type,
        dmi,
        vendor,
    }
}

/// /proc/loadavg.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadAvg {
    /// 1-minute load average.
    pub one: f64,
    /// 5-minute.
    pub five: f64,
    /// 15-minute.
    pub fifteen: f64,
    /// Runnable scheduling entities now.
    pub running: u32,
    /// Scheduling entities that exist.
    pub total: u32,
}

/// Parses /proc/loadavg.
pub fn parse_loadavg(text: &str) -> Option<LoadAvg> {
    let f: Vec<&str> = text.split_ascii_whitespace().collect();
    let (running, total) = f.get(3)?.split_once('/')?;
    Some(LoadAvg {
        one: f.first()?.parse().ok()?,
        five: f.get(1)?.parse().ok()?,
        fifteen: f.get(2)?.parse().ok()?,
        running: running.parse().ok()?,
        total: total.parse().ok()?,
    })
}

/// The aggregate `cpu` line of /proc/stat, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq.
    pub system: u64,
    /// idle.
    pub idle: u64,
    /// iowait.
    pub iowait: u64,
    /// Time the hypervisor ran something else while this guest wanted the CPU.
    pub steal: u64,
}

impl CpuTimes {
    /// All ticks.
    pub fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.iowait + self.steal
    }

    /// `self - earlier`, saturating.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// Parses the first line of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_ascii_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    // Checked: counters that sum past u64 are a malformed file (the proc_files fuzzer's find).
    Some(CpuTimes {
        user: g(0).checked_add(g(1))?,
        system: g(2).checked_add(g(5))?.checked_add(g(6))?,
        idle: g(3),
        iowait: g(4),
        steal: g(7),
    })
}

/// One CPU's ticks in /proc/stat: busy (not idle, not iowait; steal included: the CPU was
/// not this machine's to use), all, and steal (the hypervisor ran something else).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub busy: u64,
    pub total: u64,
    pub steal: u64,
}

/// Per-CPU ticks now, by CPU id ([`parse_per_cpu`] of /proc/stat; empty when it cannot be
/// read).
pub fn per_cpu_ticks() -> HashMap<u32, CpuTicks> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_per_cpu(&t).into_iter().collect())
        .unwrap_or_default()
}

/// Of `cpus`, the ones read in both [`per_cpu_ticks`] samples: `of` their ticks between
/// them as a share of all their ticks, summed (cores), and how many were read.
fn share_between(
    before: &HashMap<u32, CpuTicks>,
    after: &HashMap<u32, CpuTicks>,
    cpus: &[u32],
    of: impl Fn(&CpuTicks) -> u64,
) -> (f64, usize) {
    cpus.iter()
        .filter_map(|c| {
            let (a, b) = (after.get(c)?, before.get(c)?);
            (a.total > b.total)
                .then(|| of(a).saturating_sub(of(b)) as f64 / (a.total - b.total) as f64)
        })
        .fold((0.0, 0), |(sum, n), x| (sum + x, n + 1))
}

/// Of `cpus`, the ones read in both [`per_cpu_ticks`] samples: the CPUs busy between them,
/// summed, and how many were read.
pub fn busy_between(
    before: &HashMap<u32, CpuTicks>,
    after: &HashMap<u32, CpuTicks>,
    cpus: &[u32],
) -> (f64, usize) {
    share_between(before, after, cpus, |t| t.busy)
}

/// Of `cpus`, the cores the hypervisor took between the two samples (steal time).
pub fn steal_between(
    before: &HashMap<u32, CpuTicks>,
    after: &HashMap<u32, CpuTicks>,
    cpus: &[u32],
) -> f64 {
    share_between(before, after, cpus, |t| t.steal).0
}

/// Per-CPU lines of /proc/stat (`cpuN ...`): (CPU id, busy ticks, all ticks). Busy excludes
/// idle and iowait, as [`CpuTimes`] does for the machine; malformed lines are skipped.
pub fn parse_per_cpu(text: &str) -> Vec<(u32, CpuTicks)> {
    let mut out = vec![];
    for line in text.lines() {
        // `cpuN`, not the aggregate `cpu ` line.
        let Some(rest) = line
            .strip_prefix("cpu")
            .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        else {
            continue;
        };
        let mut f = rest.split_ascii_whitespace();
        let Some(id) = f.next().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let v: Vec<u64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            continue;
        }
        let Some(total) = v.iter().try_fold(0u64, |a, x| a.checked_add(*x)) else {
            continue;
        };
        out.push((
            id,
            CpuTicks {
                busy: total - v[3] - v[4],
                total,
                steal: v.get(7).copied().unwrap_or(0),
            },
        ));
    }
    out
}

/// A process that used CPU during the sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Busy {
    /// Pid.
    pub pid: u32,
    /// comm (escaped).
    pub comm: String,
    /// CPUs' worth of time during the sample (1.0 = one CPU busy throughout).
    pub cpus: f64,
}

/// Other processes' CPU over a short window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NoiseSample {
    /// Window length, s.
    pub window_s: f64,
    /// Machine-wide CPU time split over the window.
    pub machine: CpuTimes,
    /// CPUs' worth used by processes outside the target (and outside trapdetect).
    pub others_cpus: f64,
    /// CPUs' worth used by the target and its descendants.
    pub target_cpus: f64,
    /// The busiest other processes, busiest first.
    pub top: Vec<Busy>,
    /// Steal as a share of all CPU time in the window.
    pub steal_share: f64,
}

/// Computes a noise sample from two scans and the /proc/stat lines around them. `exclude`
/// holds pids whose time is the target's (or ours). Pure, so it is tested on recorded scans.
pub fn noise_from(
    (before, stat_before): (&[ProcEntry], CpuTimes),
    (after, stat_after): (&[ProcEntry], CpuTimes),
    window_s: f64,
    ticks_per_s: f64,
    target: &[u32],
    exclude: &[u32],
) -> NoiseSample {
    let mut others = 0u64;
    let mut mine = 0u64;
    let mut busy = vec![];
    for a in after {
        // A process that started during the window: all its time is in the window.
        let prev = before
            .iter()
            .find(|b| b.pid == a.pid && b.stat.start_ticks == a.stat.start_ticks)
            .map(|b| b.stat.cpu_ticks)
            .unwrap_or(0);
        let d = a.stat.cpu_ticks.saturating_sub(prev);
        if d == 0 || exclude.contains(&a.pid) {
            continue;
        }
        if target.contains(&a.pid) {
            mine += d;
            continue;
        }
        others += d;
        busy.push(Busy {
            pid: a.pid,
            comm: crate::escape::bytes(&a.stat.comm),
            cpus: crate::figures::round(d as f64 / ticks_per_s / window_s, 3),
        });
    }
    busy.sort_by(|a, b| b.cpus.total_cmp(&a.cpus).then(a.pid.cmp(&b.pid)));
    busy.truncate(10);
    let machine = stat_after.since(&stat_before);
    let total = machine.total().max(1) as f64;
    NoiseSample {
        window_s: crate::figures::round(window_s, 3),
        machine,
        others_cpus: crate::figures::round(others as f64 / ticks_per_s / window_s, 3),
        target_cpus: crate::figures::round(mine as f64 / ticks_per_s / window_s, 3),
        top: busy,
        steal_share: crate::figures::round(machine.steal as f64 / total, 4),
    }
}

/// Samples every process's CPU over `window`.
pub fn sample_noise(window: Duration, target: &[u32]) -> NoiseSample {
    let stat = || {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_proc_stat(&t))
            .unwrap_or_default()
    };
    let s0 = stat();
    let t0 = Instant::now();
    let before = process::scan();
    std::thread::sleep(window);
    let after = process::scan();
    let s1 = stat();
    let window_s = t0.elapsed().as_secs_f64();
    // The target tree as it is at the end (workers forked during the window count as target).
    let mut tree = vec![];
    for &p in target {
        tree.extend(process::descendants(&after, p));
    }
    noise_from(
        (&before, s0),
        (&after, s1),
        window_s,
        process::clock_ticks(),
        &tree,
        &[std::process::id()],
    )
}

/// One line of /proc/pressure/*.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PsiLine {
    /// Share of the last 10 s in which some task stalled, percent.
    pub avg10: f64,
    /// Over 60 s.
    pub avg60: f64,
    /// Over 300 s.
    pub avg300: f64,
    /// Total stall time, µs.
    pub total_us: u64,
}

/// Pressure stall information of one resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    /// Some tasks stalled.
    pub some: PsiLine,
    /// All non-idle tasks stalled at once (not reported for cpu before 5.13).
    pub full: Option<PsiLine>,
}

/// Parses a /proc/pressure file.
pub fn parse_psi(text: &str) -> Option<Psi> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let kind = it.next()?;
        let mut l = PsiLine::default();
        for kv in it {
            let (k, v) = kv.split_once('=')?;
            match k {
                "avg10" => l.avg10 = v.parse().ok()?,
                "avg60" => l.avg60 = v.parse().ok()?,
                "avg300" => l.avg300 = v.parse().ok()?,
                "total" => l.total_us = v.parse().ok()?,
                _ => {}
            }
        }
        match kind {
            "some" => some = Some(l),
            "full" => full = Some(l),
            _ => {}
        }
    }
    Some(Psi { some: some?, full })
}

/// Memory state of the machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// MemTotal, KiB.
    pub mem_total_kib: u64,
    /// MemAvailable, KiB (what can be allocated without swapping, by the kernel's estimate).
    pub mem_available_kib: u64,
    /// SwapTotal, KiB.
    pub swap_total_kib: u64,
    /// SwapTotal − SwapFree, KiB.
    pub swap_used_kib: u64,
    /// /proc/vmstat pswpin (pages swapped in since boot).
    pub pswpin: u64,
    /// pswpout.
    pub pswpout: u64,
    /// /proc/vmstat oom_kill (OOM kills since boot).
    pub oom_kill: Option<u64>,
    /// /proc/pressure/memory.
    pub psi: Option<Psi>,
}

/// Parses /proc/meminfo and /proc/vmstat.
pub fn parse_memory(meminfo: &str, vmstat: &str) -> Memory {
    let mut m = Memory::default();
    let (mut swap_free, mut swap_total) = (0, 0);
    for line in meminfo.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v: u64 = v.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        match k {
            "MemTotal" => m.mem_total_kib = v,
            "MemAvailable" => m.mem_available_kib = v,
            "SwapTotal" => swap_total = v,
            "SwapFree" => swap_free = v,
            _ => {}
        }
    }
    m.swap_total_kib = swap_total;
    m.swap_used_kib = swap_total.saturating_sub(swap_free);
    for line in vmstat.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "pswpin" => m.pswpin = v,
            "pswpout" => m.pswpout = v,
            "oom_kill" => m.oom_kill = Some(v),
            _ => {}
        }
    }
    m
}

/// Reads memory facts under `root`.
pub fn read_memory(root: &Path) -> Memory {
    let mut m = parse_memory(
        &std::fs::read_to_string(under(root, "/proc/meminfo")).unwrap_or_default(),
        &std::fs::read_to_string(under(root, "/proc/vmstat")).unwrap_or_default(),
    );
    m.psi = read_psi(root, "memory");
    m
}

/// Reads /proc/pressure/<resource> under `root`.
pub fn read_psi(root: &Path, resource: &str) -> Option<Psi> {
    parse_psi(&std::fs::read_to_string(under(root, "/proc/pressure").join(resource)).ok()?)
}

/// One /dev/kmsg record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KmsgRecord {
    /// Syslog priority (0 emerg … 7 debug).
    pub prio: u8,
    /// Sequence number (monotonic per boot; gaps mean records were overwritten).
    pub seq: u64,
    /// Microseconds since boot.
    pub ts_us: u64,
    /// The message (escaped).
    pub msg: String,
}

/// Parses one /dev/kmsg record: `prio,seq,ts,flags[,...];message\n[ KEY=VALUE\n...]`.
pub fn parse_kmsg_record(b: &[u8]) -> Option<KmsgRecord> {
    let semi = b.iter().position(|&c| c == b';')?;
    let head = std::str::from_utf8(&b[..semi]).ok()?;
    let mut f = head.split(',');
    // The first field is facility << 3 | level.
    let prio = (f.next()?.parse::<u32>().ok()? & 7) as u8;
    let seq = f.next()?.parse().ok()?;
    let ts_us = f.next()?.parse().ok()?;
    let body = &b[semi + 1..];
    let end = body.iter().position(|&c| c == b'\n').unwrap_or(body.len());
    Some(KmsgRecord {
        prio,
        seq,
        ts_us,
        msg: crate::escape::bytes(&body[..end]),
    })
}

/// Parses recorded kmsg text (one record per line, as `cat /dev/kmsg` prints it).
pub fn parse_kmsg_text(text: &str) -> Vec<KmsgRecord> {
    text.lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| parse_kmsg_record(l.as_bytes()))
        .collect()
}

/// Reads every record /dev/kmsg still holds. `Err` with `PermissionDenied` when the caller
/// lacks CAP_SYSLOG under `kernel.dmesg_restrict = 1`.
pub fn read_kmsg() -> io::Result<Vec<KmsgRecord>> {
    use std::{io::Read, os::unix::fs::OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open("/dev/kmsg")?;
    let mut out = vec![];
    // Records are at most 8 KiB (CONSOLE_EXT_LOG_MAX); each read returns exactly one.
    let mut buf = vec![0u8; 16 * 1024];
    // A bound so a flood of new records cannot keep us here.
    for _ in 0..200_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(r) = parse_kmsg_record(&buf[..n]) {
                    out.push(r);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            // EPIPE: the record we were about to read was overwritten; the next read goes on.
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EPIPE as i32) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// A point in the kernel log (and the OOM-kill counter) that later runs report from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// /proc/sys/kernel/random/boot_id: a mark from another boot means nothing.
    pub boot_id: String,
    /// The last kmsg sequence number seen when the mark was set.
    pub seq: u64,
    /// /proc/vmstat oom_kill at the mark.
    pub oom_kill: Option<u64>,
    /// When it was set, seconds since the Unix epoch.
    pub unix_time_s: u64,
}

/// The current boot id.
pub fn boot_id() -> String {
    read_trim(Path::new("/proc/sys/kernel/random/boot_id")).unwrap_or_default()
}

/// Default location of the mark: `$XDG_RUNTIME_DIR/trapdetect/kmsg.mark`, else
/// `/run/trapdetect/kmsg.mark` for root, else `$HOME/.cache/trapdetect/kmsg.mark`.
pub fn default_mark_path() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("trapdetect/kmsg.mark"));
    }
    if nix::unistd::geteuid().is_root() {
        return Some(PathBuf::from("/run/trapdetect/kmsg.mark"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/trapdetect/kmsg.mark"))
}

/// Reads a mark; `Ok(None)` when there is none.
pub fn read_mark(path: &Path) -> io::Result<Option<Mark>> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a mark atomically through [`crate::output`] (unpredictable temporary name, no
/// symlink followed, renamed into place, so a concurrent reader never sees half).
pub fn write_mark(path: &Path, mark: &Mark) -> crate::error::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            crate::error::Error::output(format!("--mark-file {}", path.display()), e)
        })?;
    }
    crate::output::write(
        "--mark-file",
        path,
        serde_json::to_string(mark).unwrap_or_default().as_bytes(),
    )
}

/// Kernel log records that preflight shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelLog {
    /// The mark the records are counted from, if one was found for this boot.
    pub mark: Option<Mark>,
    /// A mark existed but belongs to another boot (ignored).
    pub stale_mark: bool,
    /// Records after the mark (all of them) or, without a mark, the records of the last
    /// `recent_window_s` seconds.
    pub records: Vec<KmsgRecord>,
    /// Records lost between the mark and now (sequence gap: the ring buffer wrapped).
    pub lost: u64,
    /// Highest sequence number now.
    pub last_seq: u64,
    /// Without a mark: how far back records were taken, s.
    pub recent_window_s: Option<f64>,
    /// Seconds since boot when read.
    pub uptime_s: f64,
}

/// Selects the records preflight reports: after `mark` when there is one for this boot, else
/// those of the last `recent` seconds. Pure.
pub fn select_records(
    all: &[KmsgRecord],
    mark: Option<&Mark>,
    boot: &str,
    uptime_s: f64,
    recent: f64,
) -> KernelLog {
    let last_seq = all.iter().map(|r| r.seq).max().unwrap_or(0);
    let valid = mark.filter(|m| m.boot_id == boot);
    let mut out = KernelLog {
        mark: valid.cloned(),
        stale_mark: mark.is_some() && valid.is_none(),
        last_seq,
        uptime_s,
        ..Default::default()
    };
    match valid {
        Some(m) => {
            out.records = all.iter().filter(|r| r.seq > m.seq).cloned().collect();
            let first = all.iter().map(|r| r.seq).min().unwrap_or(m.seq + 1);
            out.lost = first.saturating_sub(m.seq + 1);
        }
        None => {
            let since_us = ((uptime_s - recent).max(0.0) * 1e6) as u64;
            out.records = all
                .iter()
                .filter(|r| r.ts_us >= since_us)
                .cloned()
                .collect();
            out.recent_window_s = Some(recent);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(rel)
    }

    #[test]
    fn per_cpu_lines_give_busy_and_total_per_id() {
        let text = "cpu  200 0 100 1000 50 0 0 0 0 0\ncpu0 100 0 50 400 25 5 5 0 0 0\ncpu1 100 0 50 600 25 0 0 30\ncpux 1 2 3\nintr 5\n";
        // cpu0: total 585, idle 400 + iowait 25 -> busy 160; cpu1 stolen 30 (its 8th field).
        let t = |busy, total, steal| CpuTicks { busy, total, steal };
        assert_eq!(
            parse_per_cpu(text),
            vec![(0, t(160, 585, 0)), (1, t(180, 805, 30))]
        );
        assert!(parse_per_cpu("cpu3 1 2\n").is_empty());
    }

    #[test]
    fn busy_between_two_samples_counts_the_cpus_read_in_both() {
        let t = |busy, total, steal| CpuTicks { busy, total, steal };
        let before = HashMap::from([
            (0, t(100, 1000, 0)),
            (1, t(100, 1000, 10)),
            (2, t(0, 1000, 0)),
        ]);
        // cpu0 busy 50 of 100 ticks, cpu1 90 of 100 (30 of them stolen), cpu2 missing from
        // the second sample, cpu3 from the first.
        let after = HashMap::from([
            (0, t(150, 1100, 0)),
            (1, t(190, 1100, 40)),
            (3, t(5, 10, 0)),
        ]);
        let (busy, read) = busy_between(&before, &after, &[0, 1, 2, 3]);
        assert_eq!(read, 2);
        assert!((busy - 1.4).abs() < 1e-9, "{busy}");
        let stolen = steal_between(&before, &after, &[0, 1, 2, 3]);
        assert!((stolen - 0.3).abs() < 1e-9, "{stolen}");
        assert_eq!(busy_between(&before, &after, &[2]), (0.0, 0));
        // No tick passed: not read.
        assert_eq!(busy_between(&before, &before, &[0]), (0.0, 0));
    }

    #[test]
    fn wsl2_and_wsl1_and_plain_kernels() {
        let v = read_virt(&fixture("proc/wsl2"));
        assert_eq!(v.wsl, Some("wsl2"));
        assert!(
            v.kernel_version
                .contains("6.18.33.2-microsoft-standard-WSL2")
        );
        assert!(v.hypervisor_flag);
        assert_eq!(
            wsl_flavour("Linux version 4.4.0-19041-Microsoft (Microsoft@Microsoft.com)"),
            Some("wsl1")
        );
        let here = read_virt(&fixture("proc/this-vm"));
        assert_eq!(here.wsl, None);
        assert!(here.hypervisor_flag);
        assert!(here.dmi.is_empty());
        assert_eq!(here.vendor, None);
    }

    #[test]
    fn dmi_names_the_hypervisor() {
        let v = read_virt(&fixture("sys/kvm-guest"));
        assert_eq!(v.vendor.as_deref(), Some("QEMU"));
        assert_eq!(v.dmi["sys_vendor"], "QEMU");
        let mut d = BTreeMap::new();
        d.insert("sys_vendor".into(), "Microsoft Corporation".into());
        d.insert("product_name".into(), "Virtual Machine".into());
        assert_eq!(dmi_vendor(&d).as_deref(), Some("Microsoft Hyper-V"));
        d.clear();
        d.insert("sys_vendor".into(), "Dell Inc.".into());
        assert_eq!(dmi_vendor(&d), None);
    }

    #[test]
    fn loadavg_stat_psi_meminfo() {
        let l = parse_loadavg("0.52 0.33 0.27 3/412 99871\n").unwrap();
        assert_eq!((l.one, l.running, l.total), (0.52, 3, 412));
        // Counters that sum past u64: malformed, not a panic or a wrapped sum.
        let huge = format!("cpu  {} 1 20 300 4 5 6 7 0 0\n", u64::MAX);
        assert!(parse_proc_stat(&huge).is_none());
        let s = parse_proc_stat("cpu  10 1 20 300 4 5 6 7 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            s,
            CpuTimes {
                user: 11,
                system: 31,
                idle: 300,
                iowait: 4,
                steal: 7
            }
        );
        let p = parse_psi(
            "some avg10=1.50 avg60=0.20 avg300=0.00 total=123456\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=6543\n",
        )
        .unwrap();
        assert_eq!(p.some.avg10, 1.5);
        assert_eq!(p.full.unwrap().total_us, 6543);
        let m = read_memory(&fixture("proc/swapping"));
        assert_eq!(m.mem_total_kib, 16_315_240);
        assert_eq!(m.mem_available_kib, 402_112);
        assert_eq!(m.swap_used_kib, 2_097_148 - 1_048_576);
        assert_eq!((m.pswpin, m.pswpout), (81_234, 190_442));
        assert_eq!(m.oom_kill, Some(2));
        assert_eq!(m.psi.unwrap().some.avg10, 12.5);
    }

    #[test]
    fn noise_excludes_the_target_and_counts_new_processes() {
        let e = |pid, ticks, start| ProcEntry {
            pid,
            stat: process::Stat {
                comm: format!("p{pid}").into_bytes(),
                state: 'R',
                ppid: 1,
                cpu_ticks: ticks,
                start_ticks: start,
            },
        };
        let before = vec![e(10, 100, 5), e(20, 50, 5), e(30, 0, 5), e(99, 7, 5)];
        // 10 used 25 ticks (target), 20 used 50 (noise), 40 is new with 10, 30 idle, 99 is us.
        let after = vec![
            e(10, 125, 5),
            e(20, 100, 5),
            e(30, 0, 5),
            e(40, 10, 900),
            e(99, 9, 5),
        ];
        let t0 = CpuTimes::default();
        let t1 = CpuTimes {
            user: 80,
            system: 10,
            idle: 100,
            iowait: 0,
            steal: 10,
        };
        let n = noise_from((&before, t0), (&after, t1), 0.5, 100.0, &[10], &[99]);
        assert_eq!(n.target_cpus, 0.5);
        assert_eq!(n.others_cpus, 1.2);
        assert_eq!(n.top.len(), 2);
        assert_eq!((n.top[0].pid, n.top[0].cpus), (20, 1.0));
        assert_eq!((n.top[1].pid, n.top[1].cpus), (40, 0.2));
        assert_eq!(n.steal_share, 0.05);
    }

    #[test]
    fn kmsg_records_since_a_mark_and_recent_without_one() {
        let all = parse_kmsg_text(
            &std::fs::read_to_string(fixture("kmsg/oom-and-synflood.txt")).unwrap(),
        );
        assert_eq!(all.len(), 7);
        assert_eq!(all[0].seq, 1040);
        assert_eq!(all[2].prio, 3);
        assert!(
            all[3]
                .msg
                .starts_with("Out of memory: Killed process 4242 (php-fpm8.2)")
        );
        let mark = Mark {
            boot_id: "b".into(),
            seq: 1041,
            oom_kill: Some(0),
            unix_time_s: 0,
        };
        let k = select_records(&all, Some(&mark), "b", 4000.0, 600.0);
        assert_eq!(k.records.len(), 5);
        assert_eq!(k.records[0].seq, 1042);
        assert_eq!(k.lost, 0);
        // A mark from another boot is ignored and said so.
        let k = select_records(&all, Some(&mark), "other", 4000.0, 600.0);
        assert!(k.stale_mark && k.mark.is_none());
        // No mark: the last 600 s of a 4000 s uptime (records from 3400 s on).
        assert_eq!(k.records.len(), 4);
        // The ring wrapped past the mark: 1000 → first record 1040 means 39 lost.
        let old = Mark { seq: 1000, ..mark };
        let k = select_records(&all, Some(&old), "b", 4000.0, 600.0);
        assert_eq!(k.lost, 39);
        assert_eq!(k.records.len(), 7);
    }

    #[test]
    fn kmsg_record_with_continuation_and_control_bytes() {
        let r = parse_kmsg_record(
            b"12,77,5000,-,caller=T1;php-fpm8.2[4242]: segfault at 0 ip \x1b[31m\n SUBSYSTEM=x\n",
        )
        .unwrap();
        assert_eq!((r.prio, r.seq, r.ts_us), (4, 77, 5000));
        assert_eq!(r.msg, "php-fpm8.2[4242]: segfault at 0 ip \\x1b[31m");
    }
}

/// What this kernel offers `trapdetect --pid`: BTF for struct offsets, syscall tracepoints for
/// the path probes, and the optional tracepoints whose absence degrades a probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelSupport {
    /// `uname -r`.
    pub release: String,
    /// /sys/kernel/btf/vmlinux exists.
    pub btf: bool,
    /// `raw_syscalls/sys_enter` exists (what the syscall dispatch attaches to); `None` when
    /// neither tracefs nor the kernel config could be read.
    pub syscall_tracepoints: Option<bool>,
    /// `fuse/fuse_request_send` exists (upstream since 6.13); `None` when not knowable.
    pub fuse_tracepoint: Option<bool>,
    /// Where the tracepoint answers come from (`tracefs`, `/boot/config-…`, or nothing).
    pub basis: String,
}

/// Reads what the kernel offers the tracer: tracefs when it is mounted and readable, else the
/// kernel's config file (which cannot tell optional tracepoints apart).
pub fn read_kernel_support(root: &Path) -> KernelSupport {
    let release = crate::util::kernel_release(root);
    let btf = under(root, "/sys/kernel/btf/vmlinux").exists();
    for t in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        let events = under(root, t).join("events");
        if events.join("sched").is_dir() {
            return KernelSupport {
                release,
                btf,
                syscall_tracepoints: Some(events.join("raw_syscalls/sys_enter").is_dir()),
                fuse_tracepoint: Some(events.join("fuse/fuse_request_send").is_dir()),
                basis: t.into(),
            };
        }
    }
    let config = format!("/boot/config-{release}");
    let (syscall_tracepoints, basis) = match std::fs::read_to_string(under(root, &config)) {
        Ok(text) => (
            Some(
                text.lines()
                    .any(|l| l.trim() == "CONFIG_HAVE_SYSCALL_TRACEPOINTS=y"),
            ),
            config,
        ),
        Err(_) => (None, String::new()),
    };
    KernelSupport {
        release,
        btf,
        syscall_tracepoints,
        fuse_tracepoint: None,
        basis,
    }
}
