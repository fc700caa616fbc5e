//! CPU limits a benchmark does not see: the cgroup CPU quota of a process (v1 `cpu.cfs_*` and
//! v2 `cpu.max`, at every level up to the root, with throttling counters), which CPUs are
//! online, SMT, and the frequency governor and turbo state. Reads go through a filesystem root
//! so recorded /proc and /sys trees under `fixtures/` exercise the same code.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::mounts::{MountTable, is_prefix, normalize};
use crate::util::read_trim;

/// cgroup hierarchy version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// cgroup v1 (one hierarchy per controller set).
    V1,
    /// cgroup v2 (unified).
    V2,
}

/// One line of /proc/PID/cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLine {
    /// Hierarchy id (0 for v2).
    pub hierarchy: u32,
    /// Controllers (`cpu`, `cpuacct`; empty for v2; `name=systemd` for named hierarchies).
    pub controllers: Vec<String>,
    /// Path within the hierarchy.
    pub path: String,
}

/// Parses /proc/PID/cgroup.
pub fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let hierarchy = it.next()?.parse().ok()?;
            let ctl = it.next()?;
            let path = it.next()?.to_string();
            Some(CgroupLine {
                hierarchy,
                controllers: ctl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path,
            })
        })
        .collect()
}

/// Where a controller of one process lives in sysfs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CgroupDir {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// The process's cgroup path (as /proc/PID/cgroup prints it).
    pub cgroup: String,
    /// Mount point of the hierarchy.
    pub mount_point: String,
    /// The directory of the process's cgroup (absolute, without the fixture root).
    pub dir: String,
}

/// Finds the directory of `controller` for a process: the v1 hierarchy that carries the
/// controller if one is mounted, else the v2 hierarchy when it has the controller enabled
/// (`cgroup.controllers` at the mount lists it). `root` prefixes every sysfs read.
pub fn cgroup_dir(
    lines: &[CgroupLine],
    mounts: &MountTable,
    controller: &str,
    root: &Path,
) -> Option<CgroupDir> {
    // v1: a `cgroup` mount whose superblock options list the controller.
    if let Some(line) = lines
        .iter()
        .find(|l| l.hierarchy != 0 && l.controllers.iter().any(|c| c == controller))
        && let Some(m) =
            mounts.mounts.iter().rev().find(|m| {
                m.fs_type == "cgroup" && m.super_options.split(',').any(|o| o == controller)
            })
    {
        return Some(CgroupDir {
            version: CgroupVersion::V1,
            cgroup: line.path.clone(),
            mount_point: String::from_utf8_lossy(&m.mount_point).into_owned(),
            dir: join_below_root(&m.mount_point, &m.root, &line.path),
        });
    }
    let line = lines.iter().find(|l| l.hierarchy == 0)?;
    let m = mounts
        .mounts
        .iter()
        .rev()
        .find(|m| m.fs_type == "cgroup2")?;
    let mp = String::from_utf8_lossy(&m.mount_point).into_owned();
    let controllers = std::fs::read_to_string(under(root, &mp).join("cgroup.controllers")).ok()?;
    if !controllers
        .split_ascii_whitespace()
        .any(|c| c == controller)
    {
        return None;
    }
    Some(CgroupDir {
        version: CgroupVersion::V2,
        cgroup: line.path.clone(),
        mount_point: mp,
        dir: join_below_root(&m.mount_point, &m.root, &line.path),
    })
}

/// The sysfs directory of cgroup `path` in a hierarchy mounted at `mount_point` whose mount
/// shows the hierarchy from `mount_root` (a container sees its own cgroup as `/`).
fn join_below_root(mount_point: &[u8], mount_root: &[u8], path: &str) -> String {
    let p = normalize(path.as_bytes());
    let rel: &[u8] = if is_prefix(mount_root, &p) && mount_root != b"/" {
        &p[mount_root.len()..]
    } else if mount_root == b"/" {
        &p
    } else {
        // Outside the mount's view (a cgroup namespace shows `/..`): the mount itself.
        b""
    };
    let mut out = mount_point.to_vec();
    for c in rel.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        if out.last() != Some(&b'/') {
            out.push(b'/');
        }
        out.extend_from_slice(c);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` (absolute) below `root` (`/` in production, a fixture tree in tests).
pub fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The CPU quota set at one level of the hierarchy.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuotaLevel {
    /// Directory (absolute).
    pub dir: String,
    /// The file the quota came from (`cpu.max` or `cpu.cfs_quota_us`).
    pub file: String,
    /// Quota per period, µs.
    pub quota_us: u64,
    /// Period, µs.
    pub period_us: u64,
    /// `cpu.stat` at this level: periods elapsed.
    pub nr_periods: Option<u64>,
    /// Periods in which the group was throttled.
    pub nr_throttled: Option<u64>,
    /// Total time throttled, µs.
    pub throttled_us: Option<u64>,
}

impl QuotaLevel {
    /// CPUs' worth of time per period.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us.max(1) as f64
    }
}

/// CPU bandwidth control for one process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuCgroup {
    /// Where its cpu controller lives.
    pub at: CgroupDir,
    /// Levels with a quota set, leaf first.
    pub quotas: Vec<QuotaLevel>,
    /// Throttling counters of the process's own cgroup (even without a quota there).
    pub leaf_nr_throttled: Option<u64>,
}

impl CpuCgroup {
    /// The level whose quota binds (fewest CPUs).
    pub fn binding(&self) -> Option<&QuotaLevel> {
        self.quotas
            .iter()
            .min_by(|a, b| a.cpus().total_cmp(&b.cpus()))
    }
}

/// Parses `cpu.stat` (v1 `throttled_time` is ns; v2 `throttled_usec` is µs).
pub fn parse_cpu_stat(text: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let (mut periods, mut throttled, mut us) = (None, None, None);
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "nr_periods" => periods = Some(v),
            "nr_throttled" => throttled = Some(v),
            "throttled_usec" => us = Some(v),
            "throttled_time" => us = Some(v / 1000),
            _ => {}
        }
    }
    (periods, throttled, us)
}

/// Parses v2 `cpu.max` (`max 100000` or `50000 100000`): `Some((quota, period))` when limited.
pub fn parse_cpu_max(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_ascii_whitespace();
    let q = it.next()?;
    let p = it.next().and_then(|p| p.parse().ok()).unwrap_or(100_000);
    if q == "max" {
        return None;
    }
    Some((q.parse().ok()?, p))
}

/// Reads the quota at every level from the process's cgroup up to the hierarchy's root.
pub fn read_cpu_cgroup(at: CgroupDir, root: &Path) -> CpuCgroup {
    let mut quotas = vec![];
    let mut dir = at.dir.clone();
    let mut leaf_nr_throttled = None;
    loop {
        let d = under(root, &dir);
        let stat = read_trim(&d.join("cpu.stat"))
            .map(|t| parse_cpu_stat(&t))
            .unwrap_or_default();
        if dir == at.dir {
            leaf_nr_throttled = stat.1;
        }
        let limit = match at.version {
            CgroupVersion::V2 => read_trim(&d.join("cpu.max"))
                .and_then(|t| parse_cpu_max(&t))
                .map(|(q, p)| (q, p, "cpu.max")),
            CgroupVersion::V1 => {
                let q: Option<i64> =
                    read_trim(&d.join("cpu.cfs_quota_us")).and_then(|t| t.parse().ok());
                let p: Option<u64> =
                    read_trim(&d.join("cpu.cfs_period_us")).and_then(|t| t.parse().ok());
                match (q, p) {
                    (Some(q), Some(p)) if q > 0 => Some((q as u64, p, "cpu.cfs_quota_us")),
                    _ => None,
                }
            }
        };
        if let Some((quota_us, period_us, file)) = limit {
            quotas.push(QuotaLevel {
                dir: dir.clone(),
                file: file.to_string(),
                quota_us,
                period_us,
                nr_periods: stat.0,
                nr_throttled: stat.1,
                throttled_us: stat.2,
            });
        }
        if dir == at.mount_point || !dir.starts_with(&at.mount_point) {
            break;
        }
        match dir.rfind('/') {
            Some(i) if i >= at.mount_point.len() => dir.truncate(i),
            _ => break,
        }
    }
    CpuCgroup {
        at,
        quotas,
        leaf_nr_throttled,
    }
}

/// Memory limit of a process's memory cgroup (v1 `memory.limit_in_bytes`, v2 `memory.max`),
/// the smallest along the path to the root; `None` when unlimited.
pub fn read_memory_limit(at: &CgroupDir, root: &Path) -> Option<(u64, String)> {
    let mut best: Option<(u64, String)> = None;
    let mut dir = at.dir.clone();
    loop {
        let d = under(root, &dir);
        let v = match at.version {
            CgroupVersion::V2 => read_trim(&d.join("memory.max")),
            CgroupVersion::V1 => read_trim(&d.join("memory.limit_in_bytes")),
        };
        // v1 prints "unlimited" as the largest page-aligned i64.
        if let Some(n) = v.and_then(|v| v.parse::<u64>().ok())
            && n < (1u64 << 62)
            && best.as_ref().is_none_or(|(b, _)| n < *b)
        {
            best = Some((n, dir.clone()));
        }
        if dir == at.mount_point || !dir.starts_with(&at.mount_point) {
            break;
        }
        match dir.rfind('/') {
            Some(i) if i >= at.mount_point.len() => dir.truncate(i),
            _ => break,
        }
    }
    best
}

/// Frequency scaling of one CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CpuFreq {
    /// CPU number.
    pub cpu: u32,
    /// `scaling_governor`.
    pub governor: Option<String>,
    /// `scaling_driver`.
    pub driver: Option<String>,
    /// `scaling_min_freq`, kHz.
    pub min_khz: Option<u64>,
    /// `scaling_max_freq`, kHz.
    pub max_khz: Option<u64>,
    /// `cpuinfo_max_freq`, kHz (hardware maximum).
    pub hw_max_khz: Option<u64>,
}

/// Turbo / boost state and where it was read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Turbo {
    /// Whether turbo/boost is enabled.
    pub enabled: bool,
    /// The file (`intel_pstate/no_turbo`, `cpufreq/boost`).
    pub source: String,
}

/// CPU topology and frequency facts of the machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuHost {
    /// Online CPUs.
    pub online: Vec<u32>,
    /// `online` as the kernel prints it.
    pub online_list: String,
    /// `isolated` (isolcpus=).
    pub isolated: String,
    /// `nohz_full`.
    pub nohz_full: String,
    /// `smt/control` (`on`, `off`, `forceoff`, `notsupported`, `notimplemented`).
    pub smt_control: Option<String>,
    /// `smt/active`.
    pub smt_active: Option<bool>,
    /// Per-CPU frequency scaling (empty when the kernel exposes none, as in most VMs).
    pub freq: Vec<CpuFreq>,
    /// Turbo.
    pub turbo: Option<Turbo>,
    /// `intel_pstate/status` when that driver is loaded.
    pub pstate_status: Option<String>,
}

/// Reads CPU topology and frequency from `<root>/sys/devices/system/cpu`.
pub fn read_cpu_host(root: &Path) -> CpuHost {
    let base = under(root, "/sys/devices/system/cpu");
    let online_list = read_trim(&base.join("online")).unwrap_or_default();
    let online = super::process::parse_cpu_list(&online_list).unwrap_or_default();
    let mut freq = vec![];
    for &cpu in &online {
        let d = base.join(format!("cpu{cpu}")).join("cpufreq");
        if !d.is_dir() {
            continue;
        }
        let num = |f: &str| read_trim(&d.join(f)).and_then(|v| v.parse().ok());
        freq.push(CpuFreq {
            cpu,
            governor: read_trim(&d.join("scaling_governor")),
            driver: read_trim(&d.join("scaling_driver")),
            min_khz: num("scaling_min_freq"),
            max_khz: num("scaling_max_freq"),
            hw_max_khz: num("cpuinfo_max_freq"),
        });
    }
    let turbo = if let Some(v) = read_trim(&base.join("intel_pstate/no_turbo")) {
        Some(Turbo {
            enabled: v == "0",
            source: "/sys/devices/system/cpu/intel_pstate/no_turbo".into(),
        })
    } else {
        read_trim(&base.join("cpufreq/boost")).map(|v| Turbo {
            enabled: v == "1",
            source: "/sys/devices/system/cpu/cpufreq/boost".into(),
        })
    };
    CpuHost {
        online,
        online_list,
        isolated: read_trim(&base.join("isolated")).unwrap_or_default(),
        nohz_full: read_trim(&base.join("nohz_full")).unwrap_or_default(),
        smt_control: read_trim(&base.join("smt/control")),
        smt_active: read_trim(&base.join("smt/active")).map(|v| v == "1"),
        freq,
        turbo,
        pstate_status: read_trim(&base.join("intel_pstate/status")),
    }
}

/// The cgroup CPU bandwidth of `pid`, read through our own mount table: /proc/PID/cgroup
/// prints paths relative to the reader's cgroup namespace.
pub fn cpu_cgroup_of(pid: u32, mounts: Option<&MountTable>) -> Result<Option<CpuCgroup>, String> {
    let mounts = mounts.ok_or("/proc/self/mountinfo unreadable")?;
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map_err(|e| format!("/proc/{pid}/cgroup: {e}"))?;
    let lines = parse_proc_cgroup(&text);
    Ok(cgroup_dir(&lines, mounts, "cpu", Path::new("/"))
        .map(|at| read_cpu_cgroup(at, Path::new("/"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(rel)
    }

    fn tree(name: &str) -> (Vec<CgroupLine>, MountTable, PathBuf) {
        let root = fixture(&format!("cgroup/{name}"));
        let lines =
            parse_proc_cgroup(&std::fs::read_to_string(root.join("proc-pid-cgroup")).unwrap());
        let mounts = MountTable::read(&root.join("proc-pid-mountinfo")).unwrap();
        (lines, mounts, root)
    }

    #[test]
    fn v1_docker_quota_with_throttling() {
        // cgroup v1, cpu,cpuacct co-mounted, container limited to 1.5 CPUs.
        let (lines, mounts, root) = tree("v1-docker");
        let at = cgroup_dir(&lines, &mounts, "cpu", &root).unwrap();
        assert_eq!(at.version, CgroupVersion::V1);
        assert_eq!(at.mount_point, "/sys/fs/cgroup/cpu,cpuacct");
        assert_eq!(at.dir, "/sys/fs/cgroup/cpu,cpuacct/docker/4f1c");
        let cg = read_cpu_cgroup(at, &root);
        assert_eq!(cg.quotas.len(), 1);
        let q = cg.binding().unwrap();
        assert_eq!((q.quota_us, q.period_us), (150_000, 100_000));
        assert_eq!(q.cpus(), 1.5);
        assert_eq!(q.file, "cpu.cfs_quota_us");
        assert_eq!(q.nr_periods, Some(52_110));
        assert_eq!(q.nr_throttled, Some(8_391));
        // v1 reports throttled_time in ns.
        assert_eq!(q.throttled_us, Some(912_345_678));
    }

    #[test]
    fn v2_nested_quota_binds_at_the_parent() {
        // cgroup v2: the service has 2 CPUs, its parent slice 0.5.
        let (lines, mounts, root) = tree("v2-systemd");
        let at = cgroup_dir(&lines, &mounts, "cpu", &root).unwrap();
        assert_eq!(at.version, CgroupVersion::V2);
        assert_eq!(at.dir, "/sys/fs/cgroup/bench.slice/php-fpm.service");
        let cg = read_cpu_cgroup(at, &root);
        assert_eq!(cg.quotas.len(), 2);
        assert_eq!(
            cg.quotas[0].dir,
            "/sys/fs/cgroup/bench.slice/php-fpm.service"
        );
        let b = cg.binding().unwrap();
        assert_eq!(b.dir, "/sys/fs/cgroup/bench.slice");
        assert_eq!((b.quota_us, b.period_us), (50_000, 100_000));
        assert_eq!(b.nr_throttled, Some(1_200));
        assert_eq!(b.throttled_us, Some(60_000_000));
        assert_eq!(cg.leaf_nr_throttled, Some(0));
        let mem = read_memory_limit(&cg.at, &root).unwrap();
        assert_eq!(
            mem,
            (2_147_483_648, "/sys/fs/cgroup/bench.slice".to_string())
        );
    }

    #[test]
    fn container_with_cgroup_namespace_sees_its_cgroup_as_root() {
        let (lines, mounts, root) = tree("v2-container");
        let at = cgroup_dir(&lines, &mounts, "cpu", &root).unwrap();
        assert_eq!(at.dir, "/sys/fs/cgroup");
        let cg = read_cpu_cgroup(at, &root);
        let b = cg.binding().unwrap();
        assert_eq!((b.quota_us, b.period_us), (100_000, 100_000));
    }

    #[test]
    fn hybrid_without_cpu_in_v2_and_unlimited_v1() {
        // This VM: cgroup v1 cpu at /sys/fs/cgroup/cpu, cgroup2 at /sys/fs/cgroup/unified
        // without controllers. Recorded as-is.
        let (lines, mounts, root) = tree("v1-this-vm");
        let at = cgroup_dir(&lines, &mounts, "cpu", &root).unwrap();
        assert_eq!(at.version, CgroupVersion::V1);
        assert_eq!(at.dir, "/sys/fs/cgroup/cpu");
        let cg = read_cpu_cgroup(at, &root);
        assert!(cg.quotas.is_empty());
        assert_eq!(cg.leaf_nr_throttled, Some(0));
    }

    #[test]
    fn cpu_max_and_stat_parsing() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("50000 100000"), Some((50_000, 100_000)));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(
            parse_cpu_stat("nr_periods 10\nnr_throttled 3\nthrottled_time 5000\n"),
            (Some(10), Some(3), Some(5))
        );
    }

    #[test]
    fn governors_turbo_smt_from_a_recorded_laptop() {
        let h = read_cpu_host(&fixture("sys/laptop-powersave"));
        assert_eq!(h.online, vec![0, 1, 2, 3]);
        assert_eq!(h.freq.len(), 4);
        assert_eq!(h.freq[0].governor.as_deref(), Some("powersave"));
        assert_eq!(h.freq[3].governor.as_deref(), Some("performance"));
        assert_eq!(h.freq[0].driver.as_deref(), Some("intel_pstate"));
        assert_eq!(h.freq[0].hw_max_khz, Some(4_700_000));
        assert_eq!(
            h.turbo,
            Some(Turbo {
                enabled: true,
                source: "/sys/devices/system/cpu/intel_pstate/no_turbo".into()
            })
        );
        assert_eq!(h.smt_active, Some(true));
        assert_eq!(h.smt_control.as_deref(), Some("on"));
    }

    #[test]
    fn vm_without_cpufreq() {
        let h = read_cpu_host(&fixture("sys/this-vm"));
        assert_eq!(h.online, vec![0, 1]);
        assert!(h.freq.is_empty());
        assert_eq!(h.turbo, None);
        assert_eq!(h.smt_control.as_deref(), Some("notsupported"));
    }
}
