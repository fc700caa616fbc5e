//! The off-CPU probes (`tp_btf` on `sched_switch`, `sched_waking`, `sched_wakeup_new`, their
//! `raw_tp` twins where `tp_btf` cannot load, and `raw_tp` on `sys_enter`/`sys_exit` where the
//! blocked syscall cannot be read from registers): their rows of the compatibility table, the
//! kernel offsets they need, which method names the blocked syscall, and reading their sums.

use std::{collections::HashMap, path::Path};

use aya::{
    Ebpf,
    maps::{Array, MapData, PerCpuArray, PerCpuHashMap},
    programs::{
        BtfTracePoint, RawTracePoint, raw_trace_point::RawTracePointLink, tp_btf::BtfTracePointLink,
    },
};
use trapdetect_common::offcpu::*;

use super::{Entry, Probes, map_err, sum_slot};
use crate::{btf::Btf, error::Result};

/// The category the table uses for `tp_btf` programs (their events live under `sched/`).
pub(super) const TP_BTF: &str = "tp_btf";
/// The category the table uses for raw tracepoints (`sched/*`, `raw_syscalls/*` and
/// `tcp/tcp_probe`).
pub(super) const RAW_TP: &str = "raw_tp";

/// Rows of the compatibility table.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        Entry {
            program: PROG_OFFCPU_SWITCH.into(),
            attach: vec![(TP_BTF, "sched_switch".into())],
            required: false,
            purpose: "off-CPU time by why (the syscall a thread blocked in: from bpf_task_pt_regs on Linux ≥ 5.15, else from raw_tp/sys_enter), on-CPU time and run-queue delay of the traced threads (tp_btf, Linux ≥ 5.5 with kernel BTF)",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP.into(),
            attach: vec![(TP_BTF, "sched_waking".into())],
            required: false,
            purpose: "a blocked traced thread is woken: its off-CPU interval ends, its run-queue wait begins; sched_waking runs in the waker's context (sched_wakeup runs on the woken thread's CPU when the wakeup is queued there, where the waker is the idle task), so the process that woke it is counted",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP_NEW.into(),
            attach: vec![(TP_BTF, "sched_wakeup_new".into())],
            required: false,
            purpose: "a new traced thread becomes runnable (run-queue delay of new workers)",
        },
        Entry {
            program: PROG_OFFCPU_SWITCH_RAW.into(),
            attach: vec![(RAW_TP, "sched_switch".into())],
            required: false,
            purpose: "the switch program as a raw tracepoint, where tp_btf cannot load (no kernel BTF, Linux < 5.5); the blocked syscall from raw_tp/sys_enter",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP_RAW.into(),
            attach: vec![(RAW_TP, "sched_waking".into())],
            required: false,
            purpose: "the wakeup program as a raw tracepoint, where tp_btf cannot load",
        },
        Entry {
            program: PROG_OFFCPU_WAKEUP_NEW_RAW.into(),
            attach: vec![(RAW_TP, "sched_wakeup_new".into())],
            required: false,
            purpose: "the new-thread wakeup program as a raw tracepoint, where tp_btf cannot load",
        },
        Entry {
            program: PROG_OFFCPU_SYS_ENTER.into(),
            attach: vec![(RAW_TP, "sys_enter".into())],
            required: false,
            purpose: "the syscall a traced thread enters, kept in its slot for the switch program, where the kernel cannot read it from the blocked thread's registers (bpf_task_pt_regs: Linux ≥ 5.15; raw tracepoint, Linux ≥ 4.17): a program on every syscall of the host",
        },
        Entry {
            program: PROG_OFFCPU_SYS_EXIT.into(),
            attach: vec![(RAW_TP, "sys_exit".into())],
            required: false,
            purpose: "a traced thread left its syscall: a block after it is outside any syscall",
        },
        Entry {
            program: PROG_OFFCPU_TIMER_ENTRY.into(),
            attach: vec![(RAW_TP, "hrtimer_expire_entry".into())],
            required: false,
            purpose: "a high-resolution timer's callback begins on a CPU: a thread it wakes (its sleep or its wait's timeout ran out) was woken by the timer, not by the process the interrupt landed on (raw tracepoint; runs for every timer expiry of the host, an increment)",
        },
        Entry {
            program: PROG_OFFCPU_TIMER_EXIT.into(),
            attach: vec![(RAW_TP, "hrtimer_expire_exit".into())],
            required: false,
            purpose: "that timer callback ended",
        },
    ]
}

/// The raw tracepoint twin of a `tp_btf` program (attached only when that one cannot be).
pub(super) fn raw_twin_of(program: &str) -> Option<&'static str> {
    match program {
        PROG_OFFCPU_SWITCH_RAW => Some(PROG_OFFCPU_SWITCH),
        PROG_OFFCPU_WAKEUP_RAW => Some(PROG_OFFCPU_WAKEUP),
        PROG_OFFCPU_WAKEUP_NEW_RAW => Some(PROG_OFFCPU_WAKEUP_NEW),
        _ => None,
    }
}

/// Whether a program is one of the off-CPU family (attached only for `run`).
pub(super) fn is_offcpu_program(program: &str) -> bool {
    entries().iter().any(|e| e.program == program)
}

/// Whether a program is one of the syscall-entry pair.
pub(super) fn is_entry_program(program: &str) -> bool {
    program == PROG_OFFCPU_SYS_ENTER || program == PROG_OFFCPU_SYS_EXIT
}

/// Whether this kernel can read which syscall a blocked thread is in from its registers:
/// `bpf_task_pt_regs` exists from Linux 5.15 (x86_64 and arm64 alike; the register offsets
/// come from BTF).
pub fn have_pt_regs(release: &str) -> bool {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (major, minor) >= (5, 15)
}

/// How a finished trace knew the blocked syscall (`METHOD_*`), from its probe rows: the
/// syscall-entry pair attached beside a switch program, or the `tp_btf` switch program reading
/// registers (the entry pair then not attached, and its note says so).
pub fn classes_method_of(rows: &[super::ProbeRow]) -> u32 {
    let attached = |p: &str| rows.iter().any(|r| r.program == p && r.attached);
    let switch = attached(PROG_OFFCPU_SWITCH) || attached(PROG_OFFCPU_SWITCH_RAW);
    if switch && attached(PROG_OFFCPU_SYS_ENTER) && attached(PROG_OFFCPU_SYS_EXIT) {
        METHOD_ENTRY
    } else if attached(PROG_OFFCPU_SWITCH)
        && rows
            .iter()
            .any(|r| r.program == PROG_OFFCPU_SYS_ENTER && r.note == REGS_NOTE)
    {
        METHOD_REGS
    } else {
        METHOD_UNKNOWN
    }
}

/// The entry pair's note where registers are read instead.
pub(super) const REGS_NOTE: &str =
    "not attached: the blocked syscall is read from the thread's registers (bpf_task_pt_regs)";

/// The method asked for with `TRAPDETECT_CLASSES_METHOD` (`exact` or `syscall-entry`), to
/// compare the two on one kernel (`cargo xtask bench offcpu`, the e2e tests); by default
/// `exact` where the kernel has it.
pub fn method_override() -> Option<u32> {
    match std::env::var("TRAPDETECT_CLASSES_METHOD").ok()?.as_str() {
        "exact" => Some(METHOD_REGS),
        "syscall-entry" => Some(METHOD_ENTRY),
        _ => None,
    }
}

/// The `struct pt_regs` fields holding the syscall number and its first two arguments on
/// this architecture: `(field, extra bytes)`.
fn reg_fields() -> [(&'static str, u32); 3] {
    if cfg!(target_arch = "aarch64") {
        [("syscallno", 0), ("orig_x0", 0), ("regs", 8)]
    } else {
        [("orig_ax", 0), ("di", 0), ("si", 0)]
    }
}

/// Globals the off-CPU programs need, and whether the registers can be read (`METHOD_REGS`
/// possible). A missing struct offset leaves them unattached (the caller records why) rather
/// than failing the whole trace; missing register offsets only rule out reading registers.
pub(super) fn globals(btf: &Btf) -> (Vec<(&'static str, u32)>, Option<String>, bool) {
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
    let mut regs_ok = true;
    for (g, (field, extra)) in [GLOBAL_REG_NR_OFF, GLOBAL_REG_A0_OFF, GLOBAL_REG_A1_OFF]
        .into_iter()
        .zip(reg_fields())
    {
        match btf.offset("pt_regs", field) {
            Ok(v) => out.push((g, v + extra)),
            Err(e) => {
                out.push((g, 0));
                regs_ok = false;
                missing.get_or_insert(e.to_string());
            }
        }
    }
    out.push((GLOBAL_SYSCALL_ARCH, host_arch()));
    let regs = regs_ok
        && have_pt_regs(&crate::util::kernel_release(Path::new("/")))
        && method_override() != Some(METHOD_ENTRY);
    out.push((GLOBAL_HAVE_PT_REGS, regs as u32));
    (out, missing, regs)
}

/// Loads and attaches one `tp_btf` program; the link is the caller's (it detaches when
/// dropped).
pub(super) fn attach(
    ebpf: &mut Ebpf,
    program: &str,
    tracepoint: &str,
    btf: &aya::Btf,
) -> std::result::Result<BtfTracePointLink, String> {
    let prog: &mut BtfTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| format!("program {program} not in the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    prog.load(tracepoint, btf)
        .map_err(|e| format!("load: {e:#}"))?;
    let id = prog
        .attach()
        .map_err(|e| format!("attach tp_btf/{tracepoint}: {e:#}"))?;
    prog.take_link(id).map_err(|e| format!("{e}"))
}

/// Loads and attaches one raw tracepoint program; the link is the caller's (it detaches when
/// dropped).
pub(super) fn attach_raw(
    ebpf: &mut Ebpf,
    program: &str,
    tracepoint: &str,
) -> std::result::Result<RawTracePointLink, String> {
    let prog: &mut RawTracePoint = ebpf
        .program_mut(program)
        .ok_or_else(|| format!("program {program} not in the object"))?
        .try_into()
        .map_err(|e| format!("{e}"))?;
    prog.load().map_err(|e| format!("load: {e:#}"))?;
    let id = prog
        .attach(tracepoint)
        .map_err(|e| format!("attach raw_tp/{tracepoint}: {e:#}"))?;
    prog.take_link(id).map_err(|e| format!("{e}"))
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
        self.is_attached(PROG_OFFCPU_SWITCH) || self.is_attached(PROG_OFFCPU_SWITCH_RAW)
    }

    /// How the blocked syscall is known (`METHOD_*`).
    pub fn classes_method(&self) -> u32 {
        classes_method_of(&self.rows)
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

    /// The wakeups counted so far: of traced threads by (waker, filesystem waited on), of the
    /// stack's processes by (waker, woken).
    pub fn wakeups(&self) -> Wakeups {
        Wakeups {
            of_target: self.pairs::<WakerKey>(MAP_WAKERS, |k| (k.tgid, k.dev)),
            of_stack: self.pairs::<StackKey>(MAP_STACK_WAKERS, |k| (k.waker, k.wakee)),
        }
    }

    /// Makes `pids` part of the benchmark's stack (`TRACED_STACK`): their wakers are counted
    /// from now on.
    pub fn mark_stack(&self, pids: &[u32]) -> Result<()> {
        self.flag_shared(pids, trapdetect_common::TRACED_STACK)
    }

    /// Sets `TRACED_RUNTIME` on threads `tids`: threads the runtime runs for itself, whose
    /// blocked time is not counted from now on.
    pub fn mark_runtime(&self, tids: &[u32]) -> Result<()> {
        self.flag_shared(tids, trapdetect_common::TRACED_RUNTIME)
    }

    /// Adds `flag` to `ids` in the flags map, through a second handle on it, so the sampler
    /// can do it with the probes shared.
    fn flag_shared(&self, ids: &[u32], flag: u8) -> Result<()> {
        use std::os::fd::AsFd;
        use trapdetect_common::names::MAP_TRACED;
        let Some(aya::maps::Map::Array(m)) = self.ebpf.map(MAP_TRACED) else {
            return Err(map_err(MAP_TRACED, "missing"));
        };
        let fd = m
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| map_err(MAP_TRACED, e))?;
        let map = MapData::from_fd(fd)
            .and_then(aya::maps::Map::from_map_data)
            .map_err(|e| map_err(MAP_TRACED, e))?;
        let mut traced: aya::maps::Array<MapData, u8> =
            aya::maps::Array::try_from(map).map_err(|e| map_err(MAP_TRACED, e))?;
        super::add_flag(&mut traced, ids, flag)
    }

    fn pairs<K: aya::Pod>(
        &self,
        name: &str,
        f: impl Fn(K) -> (u32, u32),
    ) -> HashMap<(u32, u32), u64> {
        let mut out = HashMap::new();
        let Some(m) = self.ebpf.map(name) else {
            return out;
        };
        let Ok(h) = PerCpuHashMap::<&MapData, K, u64>::try_from(m) else {
            return out;
        };
        for (k, v) in h.iter().flatten() {
            *out.entry(f(k)).or_default() += v.iter().sum::<u64>();
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

/// `(waker, _) → n` summed by waker.
fn by_waker(pairs: &HashMap<(u32, u32), u64>) -> HashMap<u32, u64> {
    let mut out = HashMap::new();
    for ((w, _), n) in pairs {
        *out.entry(*w).or_default() += n;
    }
    out
}

/// The wakeups the kernel counted so far: of the traced threads by (waker, the filesystem
/// the woken thread waited on or 0), of the stack's processes by (waker, woken).
#[derive(Clone, Debug, Default)]
pub struct Wakeups {
    /// (waker tgid, `s_dev` or 0) → wakeups of traced threads.
    pub of_target: HashMap<(u32, u32), u64>,
    /// (waker tgid, woken stack tgid) → wakeups.
    pub of_stack: HashMap<(u32, u32), u64>,
}

impl Wakeups {
    /// Wakeups of the traced threads by waker.
    pub fn target_by_waker(&self) -> HashMap<u32, u64> {
        by_waker(&self.of_target)
    }

    /// Wakeups of the stack's processes by waker.
    pub fn stack_by_waker(&self) -> HashMap<u32, u64> {
        by_waker(&self.of_stack)
    }

    /// Every wakeup counted.
    pub fn total(&self) -> u64 {
        self.of_target.values().chain(self.of_stack.values()).sum()
    }

    /// The process `waker` woke most among the stack's.
    pub fn woke_most(&self, waker: u32) -> Option<u32> {
        self.of_stack
            .iter()
            .filter(|((w, _), _)| *w == waker)
            .max_by_key(|((_, wakee), n)| (**n, std::cmp::Reverse(*wakee)))
            .map(|((_, wakee), _)| *wakee)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pt_regs_from_5_15() {
        assert!(have_pt_regs("6.18.44-fc"));
        assert!(have_pt_regs("6.1.0-50-arm64"));
        assert!(have_pt_regs("5.15.74.2-microsoft-standard-WSL2"));
        assert!(!have_pt_regs("5.10.0-32-amd64"));
        assert!(!have_pt_regs("4.19.0"));
        assert!(!have_pt_regs(""));
    }

    #[test]
    fn syscall_classes() {
        let x = |nr| class_of(ARCH_X86_64, nr);
        assert_eq!(x(262), (CLASS_PATH, ARG_DIRFD_PATH)); // newfstatat
        assert_eq!(x(80), (CLASS_PATH, ARG_PATH)); // chdir
        assert_eq!(x(0), (CLASS_FILE_IO, ARG_FD)); // read
        assert_eq!(x(73), (CLASS_FILE_LOCK, ARG_FD)); // flock
        assert_eq!(x(72), (CLASS_FILE_LOCK, ARG_FCNTL)); // fcntl
        assert_eq!(x(202).0, CLASS_FUTEX);
        assert_eq!(x(43).0, CLASS_WAIT_WORK); // accept
        assert_eq!(x(232).0, CLASS_WAIT_WORK); // epoll_wait
        assert_eq!(x(230).0, CLASS_SLEEP); // clock_nanosleep
        assert_eq!(x(61).0, CLASS_OTHER); // wait4
        let a = |nr| class_of(ARCH_AARCH64, nr);
        assert_eq!(a(79), (CLASS_PATH, ARG_DIRFD_PATH)); // newfstatat
        assert_eq!(a(49), (CLASS_PATH, ARG_PATH)); // chdir
        assert_eq!(a(63), (CLASS_FILE_IO, ARG_FD)); // read
        assert_eq!(a(32), (CLASS_FILE_LOCK, ARG_FD)); // flock
        assert_eq!(a(25), (CLASS_FILE_LOCK, ARG_FCNTL)); // fcntl
        assert_eq!(a(98).0, CLASS_FUTEX);
        assert_eq!(a(202).0, CLASS_WAIT_WORK); // accept
        assert_eq!(a(22).0, CLASS_WAIT_WORK); // epoll_pwait
        assert_eq!(a(115).0, CLASS_SLEEP); // clock_nanosleep
        assert_eq!(a(260).0, CLASS_OTHER); // wait4
        assert!(is_read(ARCH_AARCH64, 63) && !is_read(ARCH_AARCH64, 0));
        assert!(is_read(ARCH_X86_64, 0) && !is_read(ARCH_X86_64, 63));
        assert_eq!(CLASS_NAMES.len(), NUM_CLASSES as usize);
    }

    /// Every syscall the tables class, by name, the same on both architectures: each table is
    /// read back through the architecture's own header (linux-libc-dev's asm/unistd_64.h and
    /// asm-generic/unistd.h), so a number typed wrong names another syscall and fails here.
    #[test]
    fn both_tables_class_the_same_syscalls_by_name() {
        let parse = |path: &str| -> HashMap<u64, String> {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    (w.next()? == "#define").then_some(())?;
                    let name = w.next()?;
                    let name = name
                        .strip_prefix("__NR3264_")
                        .or_else(|| name.strip_prefix("__NR_"))?;
                    Some((w.next()?.parse().ok()?, name.to_string()))
                })
                .collect()
        };
        let x86 = parse("/usr/include/x86_64-linux-gnu/asm/unistd_64.h");
        let generic = parse("/usr/include/asm-generic/unistd.h");
        if x86.is_empty() || generic.is_empty() {
            assert!(
                std::env::var_os("CI").is_none(),
                "linux-libc-dev's headers are missing (cargo xtask setup installs them)"
            );
            eprintln!("SKIP: no syscall headers");
            return;
        }
        // The generic table names some calls differently.
        let alias = |n: &str| match n {
            "fstatat" => "newfstatat".to_string(),
            "fadvise64_64" => "fadvise64".to_string(),
            n => n.to_string(),
        };
        let classed = |table: &HashMap<u64, String>, arch: u32| -> HashMap<String, (u32, u8)> {
            table
                .iter()
                .filter(|(nr, _)| **nr < 440)
                .map(|(nr, n)| (alias(n), class_of(arch, *nr)))
                .filter(|(_, c)| c.0 != CLASS_OTHER)
                .collect()
        };
        let on_x86 = classed(&x86, ARCH_X86_64);
        let on_arm = classed(&generic, ARCH_AARCH64);
        for (name, c) in &on_arm {
            assert_eq!(on_x86.get(name), Some(c), "{name} on arm64");
        }
        let generic_names: Vec<String> = generic.values().map(|n| alias(n)).collect();
        for (name, c) in &on_x86 {
            if generic_names.contains(name) {
                assert_eq!(on_arm.get(name), Some(c), "{name} on x86_64");
            }
        }
        // The read calls, by name.
        for (table, arch) in [(&x86, ARCH_X86_64), (&generic, ARCH_AARCH64)] {
            let reads: Vec<&str> = table
                .iter()
                .filter(|(nr, _)| is_read(arch, **nr))
                .map(|(_, n)| n.as_str())
                .collect();
            let mut reads = reads;
            reads.sort();
            assert_eq!(reads, ["pread64", "preadv", "preadv2", "read", "readv"]);
        }
    }
}
