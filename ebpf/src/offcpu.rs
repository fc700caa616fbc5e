//! Off-CPU time of every thread of the traced processes, by why, aggregated in the kernel:
//! what a flat throughput ceiling with idle CPUs is waiting on. Three `tp_btf` programs keep
//! one slot per thread (on CPU, runnable, or blocked since when and for what); each interval
//! is added to a per-CPU sum when it ends, so the cost is a few map operations per context
//! switch of a traced thread and one inlined array lookup for every other switch.

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
    },
    macros::{btf_tracepoint, map},
    maps::{Array, LruPerCpuHashMap, PerCpuArray, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use trapdetect_common::{
    AT_FDCWD, TRACED_TARGET,
    offcpu::{
        ARG_DIRFD_PATH, ARG_FCNTL, ARG_FD, ARG_PATH, CLASS_FILE_IO, CLASS_FILE_LOCK,
        CLASS_NO_SYSCALL, CLASS_OTHER, CLASS_UNKNOWN, CLASS_WAIT_WORK, F_OFD_SETLKW, F_SETLKW,
        NUM_SCHED_SLOTS, OffKey, OffVal, S_KEY_INSERT_FAILS, S_ONCPU_NS, S_REGS_FAILS,
        S_RUNQ_COUNT, S_RUNQ_NS, S_SLOT_COLLISIONS, S_SWITCHES, ST_OFF_CPU, ST_ON_CPU, ST_RUNNABLE,
        THREAD_SLOTS, ThreadSlot, WAKERS_ENTRIES, class_of,
    },
};

use crate::{
    kernel::{add, cwd_dev, fd_file, global, read_ptr, read_u32},
    process::TRACED,
};

/// Why threads were off the CPU, summed per CPU.
#[map]
static OFFCPU: PerCpuHashMap<OffKey, OffVal> = PerCpuHashMap::with_max_entries(4096, 0);

/// Where each traced thread is, slot `tid % THREAD_SLOTS`.
#[map]
static THREADS: Array<ThreadSlot> = Array::with_max_entries(THREAD_SLOTS, 0);

/// Processes outside the traced set that woke a blocked traced thread, tgid → wakeups: the
/// server's peers (its front end, its upstreams, the load generator) hand it work and answers;
/// a CPU hog beside it does not (it appears only when an interrupt that wakes the server lands
/// on its CPU, a few times a second).
#[map]
static WAKERS: LruPerCpuHashMap<u32, u64> = LruPerCpuHashMap::with_max_entries(WAKERS_ENTRIES, 0);

/// On-CPU time, run-queue delay and self-monitoring counters (`S_*`).
#[map]
static SCHED_TOTALS: PerCpuArray<u64> = PerCpuArray::with_max_entries(NUM_SCHED_SLOTS, 0);

#[unsafe(no_mangle)]
static OFF_TASK_PID: u32 = 0;
#[unsafe(no_mangle)]
static OFF_TASK_TGID: u32 = 0;
#[unsafe(no_mangle)]
static OFF_TASK_STATE: u32 = 0;
#[unsafe(no_mangle)]
static OFF_INODE_MODE: u32 = 0;
#[unsafe(no_mangle)]
static OFF_INODE_INO: u32 = 0;
#[unsafe(no_mangle)]
static HAVE_PT_REGS: u32 = 0;

/// x86_64 `struct pt_regs` offsets (the ABI's, not a kernel build's).
const REG_R10: usize = 7 * 8;
const REG_DX: usize = 12 * 8;
const REG_SI: usize = 13 * 8;
const REG_DI: usize = 14 * 8;
const REG_ORIG_AX: usize = 15 * 8;

const S_IFMT: u32 = 0o170000;
const S_IFSOCK: u32 = 0o140000;
const S_IFIFO: u32 = 0o010000;

/// Thread id of `task` when its process is traced.
#[inline(always)]
fn traced_tid(task: u64) -> Option<u32> {
    let tgid = read_u32(task, global(&OFF_TASK_TGID))?;
    match TRACED.get(tgid) {
        Some(f) if *f & TRACED_TARGET != 0 => read_u32(task, global(&OFF_TASK_PID)),
        _ => None,
    }
}

#[inline(always)]
fn slot(tid: u32) -> Option<*mut ThreadSlot> {
    THREADS.get_ptr_mut(tid & (THREAD_SLOTS - 1))
}

#[inline(always)]
fn credit(key: &OffKey, ns: u64) {
    match OFFCPU.get_ptr_mut(key) {
        Some(v) => unsafe {
            (*v).ns += ns;
            (*v).count += 1;
        },
        None => {
            if OFFCPU.insert(key, &OffVal { ns, count: 1 }, 0).is_err() {
                add(&SCHED_TOTALS, S_KEY_INSERT_FAILS, 1);
            }
        }
    }
}

#[inline(always)]
fn reg(regs: u64, off: usize) -> Option<u64> {
    unsafe { bpf_probe_read_kernel((regs as usize + off) as *const u64) }.ok()
}

/// Filesystem, mode and inode number of the current task's descriptor `fd`.
#[inline(always)]
fn fd_inode(fd: u64) -> Option<(u32, u32, u64)> {
    let file = fd_file(fd & 0xffff_ffff)?;
    let inode = read_ptr(file, global(&crate::kernel::OFF_FILE_INODE))?;
    let sb = read_ptr(inode, global(&crate::kernel::OFF_INODE_SB))?;
    let dev = read_u32(sb, global(&crate::kernel::OFF_SB_DEV))?;
    let mode = read_u32(inode, global(&OFF_INODE_MODE)).unwrap_or(0) & 0xffff;
    let ino = read_ptr(inode, global(&OFF_INODE_INO)).unwrap_or(0);
    Some((dev, mode, ino))
}

/// Why `prev` (the current task) is leaving the CPU blocked: the syscall it is in, from its
/// saved user registers.
#[inline(always)]
fn why_blocked(prev: u64) -> OffKey {
    let mut key = OffKey {
        class: CLASS_UNKNOWN,
        dev: 0,
        ino: 0,
    };
    // Known at load time: the verifier prunes the helper call on kernels without it.
    if global(&HAVE_PT_REGS) == 0 {
        return key;
    }
    let regs = unsafe { aya_ebpf::helpers::generated::bpf_task_pt_regs(prev as *mut _) as u64 };
    let Some(nr) = (if regs == 0 {
        None
    } else {
        reg(regs, REG_ORIG_AX)
    }) else {
        add(&SCHED_TOTALS, S_REGS_FAILS, 1);
        return key;
    };
    if (nr as i64) < 0 {
        key.class = CLASS_NO_SYSCALL;
        return key;
    }
    let (class, arg) = class_of(nr);
    key.class = class;
    let a0 = reg(regs, REG_DI).unwrap_or(0);
    match arg {
        ARG_FD | ARG_FCNTL => {
            if arg == ARG_FCNTL {
                let cmd = reg(regs, REG_SI).unwrap_or(0);
                if cmd != F_SETLKW && cmd != F_OFD_SETLKW {
                    key.class = CLASS_OTHER;
                    return key;
                }
            }
            if let Some((dev, mode, ino)) = fd_inode(a0) {
                let fmt = mode & S_IFMT;
                if class == CLASS_FILE_IO && (fmt == S_IFSOCK || fmt == S_IFIFO) {
                    // A read on a socket or pipe waits for a peer: for a worker, for work.
                    key.class = if nr == 0 || nr == 19 || nr == 17 || nr == 295 || nr == 327 {
                        CLASS_WAIT_WORK
                    } else {
                        CLASS_OTHER
                    };
                    return key;
                }
                key.dev = dev;
                if key.class == CLASS_FILE_LOCK {
                    key.ino = ino;
                }
            }
        }
        ARG_DIRFD_PATH | ARG_PATH => {
            let path = if arg == ARG_PATH {
                a0
            } else {
                reg(regs, REG_SI).unwrap_or(0)
            };
            let first: u8 = unsafe { bpf_probe_read_user(path as *const u8) }.unwrap_or(0);
            if first == b'/' {
                key.dev = 0;
            } else if arg == ARG_DIRFD_PATH && (a0 as i32) != AT_FDCWD {
                key.dev = fd_inode(a0).map(|(d, _, _)| d).unwrap_or(0);
            } else {
                key.dev = cwd_dev();
            }
        }
        _ => {}
    }
    // Unused registers are kept named for the classes that may need them next.
    let _ = (REG_DX, REG_R10);
    key
}

/// tp_btf/sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next):
/// closes the interval each side was in and opens the next one.
#[btf_tracepoint(function = "sched_switch")]
pub fn offcpu_sched_switch(ctx: BtfTracePointContext) -> i32 {
    let preempt: u64 = ctx.arg(0);
    let prev: u64 = ctx.arg(1);
    let next: u64 = ctx.arg(2);
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(tid) = traced_tid(prev) {
        add(&SCHED_TOTALS, S_SWITCHES, 1);
        if let Some(s) = slot(tid) {
            unsafe {
                if (*s).tid == tid && (*s).state == ST_ON_CPU {
                    add(&SCHED_TOTALS, S_ONCPU_NS, now.saturating_sub((*s).ts));
                } else if (*s).tid != tid && (*s).tid != 0 {
                    add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
                }
            }
            // `__state` is an unsigned int (a long before 5.14; its low half on x86_64).
            let state = read_u32(prev, global(&OFF_TASK_STATE)).unwrap_or(0);
            let runnable = (preempt & 0xff) != 0 || state == 0;
            let key = if runnable {
                OffKey::default()
            } else {
                why_blocked(prev)
            };
            unsafe {
                (*s).tid = tid;
                (*s).state = if runnable { ST_RUNNABLE } else { ST_OFF_CPU };
                (*s).ts = now;
                (*s).key = key;
            }
        }
    }
    if let Some(tid) = traced_tid(next)
        && let Some(s) = slot(tid)
    {
        unsafe {
            if (*s).tid == tid {
                let since = now.saturating_sub((*s).ts);
                match (*s).state {
                    ST_RUNNABLE => {
                        add(&SCHED_TOTALS, S_RUNQ_NS, since);
                        add(&SCHED_TOTALS, S_RUNQ_COUNT, 1);
                    }
                    // Woken without a wakeup event seen (before attach): still blocked time.
                    ST_OFF_CPU => credit(&(*s).key, since),
                    _ => {}
                }
            } else if (*s).tid != 0 {
                add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
            }
            (*s).tid = tid;
            (*s).state = ST_ON_CPU;
            (*s).ts = now;
        }
    }
    0
}

/// A blocked thread becomes runnable: its off-CPU interval ends, its run-queue wait begins.
#[inline(always)]
fn on_wakeup(task: u64, new: bool) {
    let Some(tid) = traced_tid(task) else {
        return;
    };
    let Some(s) = slot(tid) else {
        return;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    unsafe {
        if (*s).tid == tid && !new {
            if (*s).state != ST_OFF_CPU {
                return;
            }
            credit(&(*s).key, now.saturating_sub((*s).ts));
            count_waker();
        } else if (*s).tid != tid && (*s).tid != 0 {
            add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
        }
        (*s).tid = tid;
        (*s).state = ST_RUNNABLE;
        (*s).ts = now;
    }
}

/// Counts the current task's process as a waker of the traced set, unless it is traced or
/// was interrupted in user space (a timer or an interrupt that wakes the server while a CPU hog
/// runs is not the hog's doing: a peer wakes it from a system call, its write or its close).
#[inline(always)]
fn count_waker() {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if matches!(TRACED.get(tgid), Some(f) if *f & TRACED_TARGET != 0) {
        return;
    }
    // Known at load time, as in `why_blocked`: without the helpers every waker counts.
    if global(&HAVE_PT_REGS) != 0 {
        let task = unsafe { aya_ebpf::helpers::generated::bpf_get_current_task_btf() };
        let regs = unsafe { aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as u64 };
        if regs != 0 && reg(regs, REG_ORIG_AX).is_some_and(|nr| (nr as i64) < 0) {
            return;
        }
    }
    match WAKERS.get_ptr_mut(&tgid) {
        Some(n) => unsafe { *n += 1 },
        None => {
            let _ = WAKERS.insert(&tgid, &1, 0);
        }
    }
}

/// tp_btf/sched_wakeup(struct task_struct *p).
#[btf_tracepoint(function = "sched_wakeup")]
pub fn offcpu_sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    on_wakeup(ctx.arg(0), false);
    0
}

/// tp_btf/sched_wakeup_new(struct task_struct *p).
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn offcpu_sched_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    on_wakeup(ctx.arg(0), true);
    0
}
