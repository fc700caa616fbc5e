//! The target's cgroup CPU quota during `trapdetect run`: which level binds (v1
//! `cpu.cfs_quota_us`/`cpu.cfs_period_us`, v2 `cpu.max`) and, once a second, how many periods
//! that level was throttled in and for how long (`cpu.stat`: v1 `nr_throttled` /
//! `throttled_time` ns, v2 `nr_throttled` / `throttled_usec`). Joined with the run-queue delay
//! of the traced threads it tells a quota from CPU saturation.

use std::path::{Path, PathBuf};

use crate::host::{
    cpu::{self, CgroupVersion, QuotaLevel},
    mounts::MountTable,
};

/// `cpu.stat` counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrottleCounters {
    /// Periods elapsed with the group runnable.
    pub nr_periods: u64,
    /// Periods in which the group used up its quota.
    pub nr_throttled: u64,
    /// Time its threads were held back, µs.
    pub throttled_us: u64,
}

impl ThrottleCounters {
    /// Parses `cpu.stat` of either version (v1's `throttled_time` is ns).
    pub fn parse(text: &str) -> ThrottleCounters {
        let (p, t, us) = cpu::parse_cpu_stat(text);
        ThrottleCounters {
            nr_periods: p.unwrap_or(0),
            nr_throttled: t.unwrap_or(0),
            throttled_us: us.unwrap_or(0),
        }
    }

    /// Counts between an earlier reading and this one (a counter that went back, a group
    /// recreated, counts as zero).
    pub fn since(&self, before: &ThrottleCounters) -> ThrottleCounters {
        ThrottleCounters {
            nr_periods: self.nr_periods.saturating_sub(before.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(before.nr_throttled),
            throttled_us: self.throttled_us.saturating_sub(before.throttled_us),
        }
    }
}

/// The binding quota of a process and where its counters are read.
#[derive(Clone, Debug)]
pub struct QuotaWatch {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// The level whose quota binds (fewest CPUs).
    pub level: QuotaLevel,
    root: PathBuf,
    last: Option<ThrottleCounters>,
}

impl QuotaWatch {
    /// The binding quota of `pid` (`None`: no quota on its path, or no cpu controller).
    pub fn of_pid(pid: u32) -> Option<QuotaWatch> {
        let mounts = MountTable::of_pid(std::process::id()).ok()?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        Self::from_proc_cgroup(&text, &mounts, Path::new("/"))
    }

    /// As [`QuotaWatch::of_pid`], from /proc/PID/cgroup's text, a mount table and a sysfs root
    /// (a recorded tree in tests).
    pub fn from_proc_cgroup(text: &str, mounts: &MountTable, root: &Path) -> Option<QuotaWatch> {
        let lines = cpu::parse_proc_cgroup(text);
        let at = cpu::cgroup_dir(&lines, mounts, "cpu", root)?;
        let version = at.version;
        let cg = cpu::read_cpu_cgroup(at, root);
        let level = cg.binding()?.clone();
        Some(QuotaWatch {
            version,
            level,
            root: root.to_path_buf(),
            last: None,
        })
    }

    /// Reads the binding level's counters now.
    pub fn read(&self) -> Option<ThrottleCounters> {
        let p = cpu::under(&self.root, &self.level.dir).join("cpu.stat");
        std::fs::read_to_string(p)
            .ok()
            .map(|t| ThrottleCounters::parse(&t))
    }

    /// Counters since the previous call (`None` on the first, the baseline).
    pub fn tick(&mut self) -> Option<ThrottleCounters> {
        let now = self.read()?;
        let d = self.last.map(|b| now.since(&b));
        self.last = Some(now);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/cgroup")
            .join(name)
    }

    fn watch(name: &str) -> Option<QuotaWatch> {
        let root = fixture(name);
        let mounts = MountTable::read(&root.join("proc-pid-mountinfo")).unwrap();
        let cg = std::fs::read_to_string(root.join("proc-pid-cgroup")).unwrap();
        QuotaWatch::from_proc_cgroup(&cg, &mounts, &root)
    }

    #[test]
    fn v1_cpu_stat_counts_throttled_time_in_ns() {
        let a =
            ThrottleCounters::parse("nr_periods 100\nnr_throttled 40\nthrottled_time 2500000000\n");
        assert_eq!(a.throttled_us, 2_500_000);
        let b =
            ThrottleCounters::parse("nr_periods 110\nnr_throttled 49\nthrottled_time 3220000000\n");
        assert_eq!(
            b.since(&a),
            ThrottleCounters {
                nr_periods: 10,
                nr_throttled: 9,
                throttled_us: 720_000
            }
        );
        // A group recreated between readings counts nothing, not a wrapped u64.
        assert_eq!(a.since(&b), ThrottleCounters::default());
    }

    #[test]
    fn v2_cpu_stat_counts_throttled_usec() {
        let t = ThrottleCounters::parse(
            "usage_usec 8000\nuser_usec 5000\nsystem_usec 3000\nnr_periods 20\nnr_throttled 7\nthrottled_usec 350000\nnr_bursts 0\nburst_usec 0\n",
        );
        assert_eq!(
            (t.nr_periods, t.nr_throttled, t.throttled_us),
            (20, 7, 350_000)
        );
    }

    #[test]
    fn recorded_hierarchies_give_the_binding_level_and_its_counters() {
        // v1 (docker --cpus 1.5): the container's own level binds.
        let w = watch("v1-docker").expect("docker sets a quota");
        assert_eq!(w.version, CgroupVersion::V1);
        assert_eq!(w.level.dir, "/sys/fs/cgroup/cpu,cpuacct/docker/4f1c");
        assert_eq!(w.level.file, "cpu.cfs_quota_us");
        assert_eq!((w.level.quota_us, w.level.period_us), (150_000, 100_000));
        assert_eq!(
            w.read(),
            Some(ThrottleCounters {
                nr_periods: 52_110,
                nr_throttled: 8_391,
                throttled_us: 912_345_678
            })
        );
        // v2 (systemd): the slice's 0.5 CPU binds, not the service's 2; its counters are read.
        let mut w = watch("v2-systemd").expect("the slice has cpu.max");
        assert_eq!(w.version, CgroupVersion::V2);
        assert_eq!(w.level.dir, "/sys/fs/cgroup/bench.slice");
        assert_eq!((w.level.quota_us, w.level.period_us), (50_000, 100_000));
        assert_eq!(w.tick(), None, "the first reading is the baseline");
        assert_eq!(w.tick(), Some(ThrottleCounters::default()));
        assert_eq!(
            w.read().map(|c| (c.nr_throttled, c.throttled_us)),
            Some((1_200, 60_000_000))
        );
        // This VM's root group has no quota.
        assert!(watch("v1-this-vm").is_none());
    }
}
