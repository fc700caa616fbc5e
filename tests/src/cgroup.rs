//! A CPU-limited cgroup made for one test: on cgroup v1 (the `cpu` controller's own
//! hierarchy) or on cgroup v2 when the `cpu` controller is already delegated at the root.
//! It never changes host-wide settings: it only creates its own child group, and on drop kills
//! what the test put in it and removes it.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use crate::unique;

/// Which cgroup interface the group uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    V1,
    /// `cpu.max`.
    V2,
}

/// A cgroup with a CPU quota, removed on drop.
pub struct CpuCgroup {
    /// Its directory in sysfs.
    pub dir: PathBuf,
    /// v1 or v2.
    pub version: Version,
}

/// The cgroup mounts of this mount namespace: (filesystem type, mount point, super options),
/// from /proc/self/mountinfo.
fn cgroup_mounts() -> Vec<(String, PathBuf, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            let (fstype, mp) = (*f.get(sep + 1)?, *f.get(4)?);
            let sopts = f.get(sep + 3).copied().unwrap_or("");
            matches!(fstype, "cgroup" | "cgroup2")
                .then(|| (fstype.to_string(), PathBuf::from(mp), sopts.to_string()))
        })
        .collect()
}

/// The mount point of the v1 hierarchy that carries `option` (`cpu`, `name=systemd`).
fn v1_hierarchy(mounts: &[(String, PathBuf, String)], option: &str) -> Option<PathBuf> {
    mounts
        .iter()
        .find(|(fs, _, sopts)| fs == "cgroup" && sopts.split(',').any(|o| o == option))
        .map(|(_, mp, _)| mp.clone())
}

/// The cgroup2 mount.
fn v2_mount(mounts: &[(String, PathBuf, String)]) -> Option<PathBuf> {
    mounts
        .iter()
        .find(|(fs, _, _)| fs == "cgroup2")
        .map(|(_, mp, _)| mp.clone())
}

/// Where the cpu controller can be used: the v1 hierarchy that carries it, else the cgroup2
/// mount if its root already delegates `cpu` to children.
pub fn cpu_controller() -> Option<(PathBuf, Version)> {
    let mounts = cgroup_mounts();
    if let Some(v1) = v1_hierarchy(&mounts, "cpu") {
        return Some((v1, Version::V1));
    }
    let root = v2_mount(&mounts)?;
    let delegated = std::fs::read_to_string(root.join("cgroup.subtree_control")).ok()?;
    delegated
        .split_ascii_whitespace()
        .any(|c| c == "cpu")
        .then_some((root, Version::V2))
}

impl CpuCgroup {
    /// Creates a group limited to `quota_us` per `period_us`; `None` (with the reason on
    /// stderr) when no usable cpu controller is mounted.
    pub fn create(quota_us: u64, period_us: u64) -> Option<CpuCgroup> {
        let Some((root, version)) = cpu_controller() else {
            eprintln!("no cgroup hierarchy with a usable cpu controller is mounted");
            return None;
        };
        let dir = root.join(unique("trapdetect-e2e-"));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let cg = CpuCgroup { dir, version };
        match version {
            Version::V1 => {
                cg.write("cpu.cfs_period_us", &period_us.to_string());
                cg.write("cpu.cfs_quota_us", &quota_us.to_string());
            }
            Version::V2 => cg.write("cpu.max", &format!("{quota_us} {period_us}")),
        }
        Some(cg)
    }

    fn write(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("write {value} to {}/{file}: {e}", self.dir.display()));
    }

    /// The file a shell writes `$$` into to join the group.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Pids in the group.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// `nr_throttled` from the group's cpu.stat.
    pub fn nr_throttled(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("cpu.stat"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("nr_throttled "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Total time the group was throttled, µs (cpu.stat: v1 `throttled_time` in ns, v2
    /// `throttled_usec`).
    pub fn throttled_us(&self) -> u64 {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        field("throttled_usec ")
            .or_else(|| field("throttled_time ").map(|ns| ns / 1_000))
            .unwrap_or(0)
    }

    /// The directory as preflight reports it.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        // Only what this test put here lives here.
        for pid in self.pids() {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // No panics here: this may run while a failed test unwinds.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() {
            if std::time::Instant::now() > deadline {
                eprintln!("could not remove {}", self.dir.display());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The most cores a group limited to `quota_cpus` (over periods of `period_us`) can be seen
/// using: the kernel hands the quota to each CPU in slices (kernel.sched_cfs_bandwidth_slice_us),
/// so a group can run up to a slice per CPU past it in a period.
pub fn most_cores(quota_cpus: f64, period_us: f64) -> f64 {
    let slice_us: f64 = std::fs::read_to_string("/proc/sys/kernel/sched_cfs_bandwidth_slice_us")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ncpu = std::thread::available_parallelism().unwrap().get() as f64;
    quota_cpus + ncpu * slice_us / period_us
}

/// A cgroup at the name a container runtime or systemd gives its own
/// (`system.slice/docker-ID.scope`, `system.slice/NAME.service`), made for one test in the
/// hierarchy systemd keeps (cgroup v1's `name=systemd`, else the cgroup2 mount): processes
/// moved into it are what `--container`, `--unit` and `--cgroup` find, as they would find the
/// runtime's. It creates only its own directories; on drop what is still in it goes back to
/// the hierarchy's root and the directories are removed.
pub struct NamedCgroup {
    /// The hierarchy's mount point.
    pub root: PathBuf,
    /// The path below it, as /proc/PID/cgroup shows it (`/system.slice/docker-ID.scope`).
    pub path: String,
    created: Vec<PathBuf>,
}

/// The mount point of the hierarchy systemd would use here.
fn systemd_hierarchy() -> Option<PathBuf> {
    let mounts = cgroup_mounts();
    v1_hierarchy(&mounts, "name=systemd").or_else(|| v2_mount(&mounts))
}

/// A container id as runtimes make them: 64 hex digits, unique to this call.
pub fn container_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let seed = unique("id");
    (0..4)
        .map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write(seed.as_bytes());
            h.write_u32(i);
            format!("{:016x}", h.finish())
        })
        .collect()
}

impl NamedCgroup {
    /// Creates `rel` (e.g. `system.slice/docker-ID.scope`) and any missing parent.
    pub fn create(rel: &str) -> NamedCgroup {
        let root = systemd_hierarchy().expect("a cgroup hierarchy (name=systemd or cgroup2)");
        let mut created = vec![];
        let mut dir = root.clone();
        for part in rel.split('/') {
            dir = dir.join(part);
            if !dir.exists() {
                std::fs::create_dir(&dir)
                    .unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                created.push(dir.clone());
            }
        }
        NamedCgroup {
            root,
            path: format!("/{rel}"),
            created,
        }
    }

    /// Its directory.
    pub fn dir(&self) -> PathBuf {
        self.root.join(self.path.trim_start_matches('/'))
    }

    /// Moves `pid` and its descendants in; returns how many moved.
    pub fn add_tree(&self, pid: u32) -> usize {
        let tree = crate::servers::tree_of(pid);
        for p in &tree {
            std::fs::write(self.dir().join("cgroup.procs"), p.to_string())
                .unwrap_or_else(|e| panic!("move {p} into {}: {e}", self.path));
        }
        tree.len()
    }
}

impl Drop for NamedCgroup {
    fn drop(&mut self) {
        // No panics here: this may run while a failed test unwinds.
        let procs = std::fs::read_to_string(self.dir().join("cgroup.procs")).unwrap_or_default();
        for p in procs.split_ascii_whitespace() {
            let _ = std::fs::write(self.root.join("cgroup.procs"), p);
        }
        for d in self.created.iter().rev() {
            if let Err(e) = std::fs::remove_dir(d) {
                eprintln!("could not remove {}: {e}", d.display());
            }
        }
    }
}
