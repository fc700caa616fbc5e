//! The off-CPU probes (`tp_btf` on `sched_switch`, `sched_wakeup`, `sched_wakeup_new`): their
//! rows of the compatibility table, the kernel offsets they need, and reading their sums.

use std::{collections::HashMap, path::Path};

use aya::{
    Ebpf,
    maps::{Array, MapData, PerCpuArray, PerCpuHashMap},
    programs::BtfTracePoint,
};
use trapdetect_common::offcpu::*;

use super::{Entry, Probes, map_err, sum_slot};
use crate::{btf::Btf, error::Result};

/// The category the table uses for `tp_btf` programs (their events live under `sched/`).
pub(super) const TP_BTF: &str = "tp_btf";

/// Rows of the compatibility table.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        Entry {
            program: PROG_OFFCPU_SWITCH.into(),
            attach: vec![(TP_BTF, "sched_switch".into())],
            required: false,
            purpose: "off-CPU time by why (the syscall a thread blocked in, from bpf_task_pt_regs: Linux ≥ 5.15, x86_64), on-CPU time and run-queue delay of the traced threads (tp_btf, Linux ≥ 5.5)",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP.into(),
            attach: vec![(TP_BTF, "sched_wakeup".into())],
            required: false,
            purpose: "a blocked traced thread becomes runnable: its off-CPU interval ends, its run-queue wait begins",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP_NEW.into(),
            attach: vec![(TP_BTF, "sched_wakeup_new".into())],
            required: false,
            purpose: "a new traced thread becomes runnable (run-queue delay of new workers)",
        },
    ]
}

/// Whether this kernel can say which syscall a blocked thread is in: `bpf_task_pt_regs`
/// exists from Linux 5.15, and the register offsets and syscall numbers are x86_64's.
pub fn have_pt_regs(release: &str) -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (major, minor) >= (5, 15)
}

/// The running kernel's release string.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Globals the off-CPU programs need. A missing offset leaves them unattached (the caller
/// records why) rather than failing the whole trace.
pub(super) fn globals(btf: &Btf) -> (Vec<(&'static str, u32)>, Option<String>) {
    let state = btf
        .offset("task_struct", "__state")
        .or_else(|_| btf.offset("task_struct", "state"));
    let want = [
        (GLOBAL_OFF_TASK_PID, btf.offset("task_struct", "pid")),
        (GLOBAL_OFF_TASK_TGID, btf.offset("task_struct", "tgid")),
        (GLOBAL_OFF_TASK_STATE, state),
        (GLOBAL_OFF_INODE_MODE, btf.offset("inode", "i_mode")),
        (GLOBAL_OFF_INODE_INO, btf.offset("inode", "i_ino")),
    ];
    let mut out = vec![];
    let mut missing = None;
    for (g, r) in want {
        match r {
            Ok(v) => out.push((g, v)),
            Err(e) => {
                out.push((g, 0));
                missing.get_or_insert(e.to_string());
            }
        }
    }
    let regs = have_pt_regs(&kernel_release()) as u32;
    out.push((GLOBAL_HAVE_PT_REGS, regs));
    (out, missing)
}

/// Loads and attaches one `tp_btf` program.
pub(super) fn attach(
    ebpf: &mut Ebpf,
    program: &str,
    tracepoint: &str,
    btf_path: &Path,
) -> std::result::Result<(), String> {
    let btf = aya::Btf::parse_file(btf_path, aya::Endianness::default())
        .map_err(|e| format!("BTF {}: {e}", btf_path.display()))?;
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| format!("program {program} not in the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    prog.load(tracepoint, &btf)
        .map_err(|e| format!("load: {e:#}"))?;
    prog.attach()
        .map_err(|e| format!("attach tp_btf/{tracepoint}: {e:#}"))?;
    Ok(())
}

/// The off-CPU sums at one instant.
#[derive(Clone, Debug, Default)]
pub struct OffcpuReading {
    /// When read, CLOCK_MONOTONIC ns (the clock of `bpf_ktime_get_ns`).
    pub at_ns: u64,
    /// Completed off-CPU intervals by why, summed over CPUs.
    pub keys: HashMap<OffKey, OffVal>,
    /// `S_*` totals, summed over CPUs.
    pub totals: Vec<u64>,
}

impl Probes {
    /// Whether the off-CPU probes are attached (the switch program is the one that matters).
    pub fn offcpu_attached(&self) -> bool {
        self.is_attached(PROG_OFFCPU_SWITCH)
    }

    /// Reads the off-CPU sums.
    pub fn offcpu_read(&self) -> Result<OffcpuReading> {
        let at_ns = crate::util::mono_ns();
        let mut r = OffcpuReading {
            at_ns,
            ..Default::default()
        };
        let m = self
            .ebpf
            .map(MAP_OFFCPU)
            .ok_or_else(|| map_err(MAP_OFFCPU, "missing"))?;
        let h: PerCpuHashMap<&MapData, OffKey, OffVal> =
            PerCpuHashMap::try_from(m).map_err(|e| map_err(MAP_OFFCPU, e))?;
        for kv in h.iter() {
            let (k, per_cpu) = kv.map_err(|e| map_err(MAP_OFFCPU, e))?;
            let e = r.keys.entry(k).or_default();
            for v in per_cpu.iter() {
                e.ns += v.ns;
                e.count += v.count;
            }
        }
        let t: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(
            self.ebpf
                .map(MAP_SCHED_TOTALS)
                .ok_or_else(|| map_err(MAP_SCHED_TOTALS, "missing"))?,
        )
        .map_err(|e| map_err(MAP_SCHED_TOTALS, e))?;
        r.totals = (0..NUM_SCHED_SLOTS)
            .map(|i| sum_slot(&t, MAP_SCHED_TOTALS, i))
            .collect::<Result<_>>()?;
        Ok(r)
    }

    /// The slots of `tids` that these threads own (a slot another thread took is skipped).
    pub fn thread_slots(&self, tids: &[u32]) -> Result<Vec<ThreadSlot>> {
        let a: Array<&MapData, ThreadSlot> = Array::try_from(
            self.ebpf
                .map(MAP_THREADS)
                .ok_or_else(|| map_err(MAP_THREADS, "missing"))?,
        )
        .map_err(|e| map_err(MAP_THREADS, e))?;
        Ok(tids
            .iter()
            .filter_map(|&t| a.get(&(t & (THREAD_SLOTS - 1)), 0).ok())
            .filter(|s| tids.contains(&s.tid) && s.state != ST_EMPTY)
            .collect())
    }

    /// Processes outside the traced set that woke traced threads so far: tgid → wakeups.
    pub fn wakers(&self) -> HashMap<u32, u64> {
        let mut out = HashMap::new();
        let Some(m) = self.ebpf.map(MAP_WAKERS) else {
            return out;
        };
        let Ok(h) = PerCpuHashMap::<&MapData, u32, u64>::try_from(m) else {
            return out;
        };
        for (k, v) in h.iter().flatten() {
            *out.entry(k).or_default() += v.iter().sum::<u64>();
        }
        out
    }

    /// FUSE requests so far by connection device (all opcodes), for the per-second series.
    pub fn fuse_by_dev(&self) -> HashMap<u32, u64> {
        let mut out = HashMap::new();
        let Some(m) = self.ebpf.map(trapdetect_common::names::MAP_FUSE_OPS) else {
            return out;
        };
        let Ok(h) = PerCpuHashMap::<&MapData, trapdetect_common::fuse::FuseKey, u64>::try_from(m)
        else {
            return out;
        };
        for (k, v) in h.iter().flatten() {
            *out.entry(k.dev).or_default() += v.iter().sum::<u64>();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pt_regs_from_5_15_on_x86_64() {
        let x86 = cfg!(target_arch = "x86_64");
        assert_eq!(have_pt_regs("6.18.44-fc"), x86);
        assert_eq!(have_pt_regs("5.15.74.2-microsoft-standard-WSL2"), x86);
        assert!(!have_pt_regs("5.10.0-32-amd64"));
        assert!(!have_pt_regs("4.19.0"));
        assert!(!have_pt_regs(""));
    }

    #[test]
    fn syscall_classes() {
        assert_eq!(class_of(262), (CLASS_PATH, ARG_DIRFD_PATH)); // newfstatat
        assert_eq!(class_of(80), (CLASS_PATH, ARG_PATH)); // chdir
        assert_eq!(class_of(0), (CLASS_FILE_IO, ARG_FD)); // read
        assert_eq!(class_of(73), (CLASS_FILE_LOCK, ARG_FD)); // flock
        assert_eq!(class_of(72), (CLASS_FILE_LOCK, ARG_FCNTL)); // fcntl
        assert_eq!(class_of(202).0, CLASS_FUTEX);
        assert_eq!(class_of(43).0, CLASS_WAIT_WORK); // accept
        assert_eq!(class_of(232).0, CLASS_WAIT_WORK); // epoll_wait
        assert_eq!(class_of(230).0, CLASS_SLEEP); // clock_nanosleep
        assert_eq!(class_of(61).0, CLASS_OTHER); // wait4
        assert_eq!(CLASS_NAMES.len(), NUM_CLASSES as usize);
    }
}
