//! Off-CPU time of every thread of the traced processes, by why, aggregated in the kernel:
//! what a flat throughput ceiling with idle CPUs is waiting on. Three `tp_btf` programs (or
//! their `raw_tp` twins where the kernel cannot load `tp_btf`) keep one slot per thread (on
//! CPU, runnable, or blocked since when and for what); each interval is added to a per-CPU sum
//! when it ends, so the cost is a few map operations per context switch of a traced thread and
//! one inlined array lookup for every other switch.
//!
//! *Why* a thread blocked is the syscall it is in: read from its saved registers at the switch
//! (`bpf_task_pt_regs`, Linux ≥ 5.15), or, where that helper is missing, recorded into its slot
//! by `raw_tp/sys_enter` and cleared by `raw_tp/sys_exit` (one array lookup per syscall of
//! every process, a slot write for traced threads).

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel, bpf_probe_read_user,
    },
    macros::{btf_tracepoint, map, raw_tracepoint},
    maps::{Array, LruPerCpuHashMap, PerCpuArray, PerCpuHashMap},
    programs::{BtfTracePointContext, RawTracePointContext},
};
use trapdetect_common::{
    AT_FDCWD, TRACED_RUNTIME, TRACED_STACK, TRACED_TARGET,
    offcpu::{
        ARG_DIRFD_PATH, ARG_FCNTL, ARG_FD, ARG_PATH, CLASS_FILE_IO, CLASS_FILE_LOCK, CLASS_FUTEX,
        CLASS_NO_SYSCALL, CLASS_OTHER, CLASS_PATH, CLASS_SLEEP, CLASS_UNKNOWN, CLASS_WAIT_WORK,
        ETIMEDOUT, F_OFD_SETLKW, F_SETLKW, FUTEX_TIMED, NUM_SCHED_SLOTS, OffKey, OffVal,
        S_ENTRY_UNSEEN, S_KEY_INSERT_FAILS, S_ONCPU_NS, S_REGS_FAILS, S_RUNQ_COUNT, S_RUNQ_IDLE_NS,
        S_RUNQ_NS, S_RUNQ_SELF_NS, S_SLOT_COLLISIONS, S_SWITCHES, SC_IN, SC_NONE, SC_UNSEEN,
        ST_OFF_CPU, ST_ON_CPU, ST_RUNNABLE, StackKey, THREAD_SLOTS, ThreadSlot, WAKERS_ENTRIES,
        WakerKey, class_of, futex_timed, is_read, waits_for_work,
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
static WAKERS: LruPerCpuHashMap<WakerKey, u64> =
    LruPerCpuHashMap::with_max_entries(WAKERS_ENTRIES, 0);

/// Processes outside the traced set and the stack that woke a stack process (`TRACED_STACK`,
/// set by user space), by (waker, woken) → wakeups: the next link of a chain that serves the
/// target, and the link it serves.
#[map]
static STACK_WAKERS: LruPerCpuHashMap<StackKey, u64> =
    LruPerCpuHashMap::with_max_entries(WAKERS_ENTRIES, 0);

/// Per CPU: 1 while a high-resolution timer's callback runs on it: a thread woken inside one
/// was woken by its timer (its sleep or its wait's timeout ran out), whoever the interrupt
/// landed on.
#[map]
static IN_TIMER: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// On-CPU time, run-queue delay and self-monitoring counters (`S_*`).
#[map]
static SCHED_TOTALS: PerCpuArray<u64> = PerCpuArray::with_max_entries(NUM_SCHED_SLOTS, 0);

#[unsafe(no_mangle)]
pub(crate) static OFF_TASK_PID: u32 = 0;
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
#[unsafe(no_mangle)]
pub(crate) static SYSCALL_ARCH: u32 = 0;
/// `struct pt_regs` offsets of the syscall number and the first two arguments (from BTF:
/// x86_64 `orig_ax`, `di`, `si`; arm64 `syscallno`, `orig_x0`, `regs[1]`).
#[unsafe(no_mangle)]
static REG_NR_OFF: u32 = 0;
#[unsafe(no_mangle)]
static REG_A0_OFF: u32 = 0;
#[unsafe(no_mangle)]
static REG_A1_OFF: u32 = 0;

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

/// Why `prev` (the current task) is leaving the CPU blocked: the syscall it is in, read from
/// its saved user registers (`REGS`, `tp_btf` only: the helper takes a BTF task pointer) or
/// from what `sys_enter` recorded in its slot `s` (`owned`: the slot was already this thread's).
#[inline(always)]
fn why_blocked<const REGS: bool>(prev: u64, s: *mut ThreadSlot, owned: bool) -> OffKey {
    let mut key = OffKey {
        class: CLASS_UNKNOWN,
        dev: 0,
        ino: 0,
    };
    // Known at load time: the verifier prunes the helper call on kernels without it.
    let (nr, regs) = if REGS && global(&HAVE_PT_REGS) != 0 {
        let regs = unsafe { aya_ebpf::helpers::generated::bpf_task_pt_regs(prev as *mut _) as u64 };
        let Some(nr) = read_u32(regs, global(&REG_NR_OFF)) else {
            add(&SCHED_TOTALS, S_REGS_FAILS, 1);
            return key;
        };
        // orig_ax / syscallno: -1 outside a syscall.
        if (nr as i32) < 0 {
            key.class = CLASS_NO_SYSCALL;
            return key;
        }
        (nr as u64, regs)
    } else {
        let sc = if owned {
            unsafe { (*s).sc_state }
        } else {
            SC_UNSEEN
        };
        match sc {
            SC_IN => unsafe { ((*s).sc_nr as u64, (*s).sc_regs) },
            SC_NONE => {
                key.class = CLASS_NO_SYSCALL;
                return key;
            }
            _ => {
                add(&SCHED_TOTALS, S_ENTRY_UNSEEN, 1);
                return key;
            }
        }
    };
    let arch = global(&SYSCALL_ARCH) as u32;
    let (class, arg) = class_of(arch, nr);
    key.class = class;
    let a0 = reg(regs, global(&REG_A0_OFF)).unwrap_or(0);
    match arg {
        ARG_FD | ARG_FCNTL => {
            if arg == ARG_FCNTL {
                let cmd = reg(regs, global(&REG_A1_OFF)).unwrap_or(0);
                if cmd != F_SETLKW && cmd != F_OFD_SETLKW {
                    key.class = CLASS_OTHER;
                    return key;
                }
            }
            if let Some((dev, mode, ino)) = fd_inode(a0) {
                let fmt = mode & S_IFMT;
                if class == CLASS_FILE_IO && (fmt == S_IFSOCK || fmt == S_IFIFO) {
                    // A read on a socket or pipe waits for a peer: for a worker, for work.
                    key.class = if is_read(arch, nr) {
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
                reg(regs, global(&REG_A1_OFF)).unwrap_or(0)
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
        _ if class == CLASS_FUTEX => {
            let op = reg(regs, global(&REG_A1_OFF)).unwrap_or(0);
            if futex_timed(arch, nr, op, crate::syscalls::arg(regs, 3)) {
                key.dev = FUTEX_TIMED;
            }
        }
        _ => {}
    }
    key
}

/// A blocked interval of the thread in slot `s` ended after `ns`: added under its key, or,
/// for a timed futex wait, held in the slot until the call's result names the class; not at
/// all for a thread of the runtime's own (`TRACED_RUNTIME`).
#[inline(always)]
fn blocked_for(s: *mut ThreadSlot, ns: u64) {
    unsafe {
        if crate::process::flags((*s).tid) & TRACED_RUNTIME != 0 {
            return;
        }
        if (*s).key.class == CLASS_FUTEX && (*s).key.dev == FUTEX_TIMED {
            (*s).timed_ns += ns;
        } else {
            credit(&(*s).key, ns);
        }
        if waits_for_work(&(*s).key) {
            (*s).idle_ns += ns;
        }
    }
}

/// The traced thread `tid` returns `ret` from a syscall (from the path dispatch's exit
/// program, for every syscall of a traced thread while the off-CPU programs are attached):
/// the blocked time of the timed futex wait it leaves is a sleep if the wait ran out its
/// timeout (nobody woke it), else a wait on another thread.
#[inline(always)]
pub fn syscall_result(tid: u32, ret: i64) {
    let Some(s) = slot(tid) else {
        return;
    };
    unsafe {
        if (*s).tid != tid || (*s).timed_ns == 0 {
            return;
        }
        let class = if ret == -ETIMEDOUT {
            CLASS_SLEEP
        } else {
            CLASS_FUTEX
        };
        let key = OffKey {
            class,
            dev: 0,
            ino: 0,
        };
        credit(&key, (*s).timed_ns);
        (*s).timed_ns = 0;
    }
}

/// sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next): closes the
/// interval each side was in and opens the next one.
#[inline(always)]
fn on_switch<const REGS: bool>(preempt: u64, prev: u64, next: u64) {
    let now = unsafe { bpf_ktime_get_ns() };
    let prev_tid = traced_tid(prev);
    if let Some(tid) = prev_tid {
        add(&SCHED_TOTALS, S_SWITCHES, 1);
        if let Some(s) = slot(tid) {
            let owned = unsafe { (*s).tid == tid };
            unsafe {
                if owned && (*s).state == ST_ON_CPU {
                    add(&SCHED_TOTALS, S_ONCPU_NS, now.saturating_sub((*s).ts));
                } else if !owned && (*s).tid != 0 {
                    add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
                }
            }
            // `__state` is an unsigned int (a long before 5.14; its low half on x86_64).
            let state = read_u32(prev, global(&OFF_TASK_STATE)).unwrap_or(0);
            let runnable = (preempt & 0xff) != 0 || state == 0;
            let key = if runnable {
                OffKey::default()
            } else {
                why_blocked::<REGS>(prev, s, owned)
            };
            unsafe {
                if !owned {
                    (*s).sc_state = SC_UNSEEN;
                    (*s).timed_ns = 0;
                    (*s).idle_ns = 0;
                }
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
                        // Who it waited behind: the target's own threads, or nobody (the
                        // idle task, pid 0, switches out: the CPU was idle).
                        if prev_tid.is_some() {
                            add(&SCHED_TOTALS, S_RUNQ_SELF_NS, since);
                        } else if read_u32(prev, global(&OFF_TASK_PID)) == Some(0) {
                            add(&SCHED_TOTALS, S_RUNQ_IDLE_NS, since);
                        }
                    }
                    // Woken without a wakeup event seen (before attach): still blocked time.
                    ST_OFF_CPU => blocked_for(s, since),
                    _ => {}
                }
            } else {
                if (*s).tid != 0 {
                    add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
                }
                (*s).sc_state = SC_UNSEEN;
                (*s).timed_ns = 0;
                (*s).idle_ns = 0;
            }
            (*s).tid = tid;
            (*s).state = ST_ON_CPU;
            (*s).ts = now;
        }
    }
}

/// tp_btf/sched_switch: the blocked syscall from the task's registers where the kernel has
/// `bpf_task_pt_regs`, else from its slot.
#[btf_tracepoint(function = "sched_switch")]
pub fn offcpu_sched_switch(ctx: BtfTracePointContext) -> i32 {
    on_switch::<true>(ctx.arg(0), ctx.arg(1), ctx.arg(2));
    0
}

/// raw_tp/sched_switch (no kernel BTF): the blocked syscall from the thread's slot.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn offcpu_sched_switch_raw(ctx: RawTracePointContext) -> i32 {
    on_switch::<false>(ctx.arg(0), ctx.arg(1), ctx.arg(2));
    0
}

/// A blocked thread becomes runnable: its off-CPU interval ends, its run-queue wait begins.
#[inline(always)]
fn on_wakeup<const REGS: bool>(task: u64, new: bool) {
    let Some(tgid) = read_u32(task, global(&OFF_TASK_TGID)) else {
        return;
    };
    let f = match TRACED.get(tgid) {
        Some(f) => *f,
        None => return,
    };
    if f & TRACED_TARGET == 0 {
        if f & TRACED_STACK != 0 && !new {
            let waker = waker::<REGS>(TRACED_TARGET | TRACED_STACK);
            if waker != 0 {
                count(&STACK_WAKERS, &StackKey { waker, wakee: tgid });
            }
        }
        return;
    }
    let Some(tid) = read_u32(task, global(&OFF_TASK_PID)) else {
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
            blocked_for(s, now.saturating_sub((*s).ts));
            let waker = waker::<REGS>(TRACED_TARGET);
            if waker != 0 {
                let on_fs = (*s).key.class == CLASS_PATH || (*s).key.class == CLASS_FILE_IO;
                let dev = if on_fs { (*s).key.dev } else { 0 };
                count(&WAKERS, &WakerKey { tgid: waker, dev });
            }
        } else if (*s).tid != tid {
            if (*s).tid != 0 {
                add(&SCHED_TOTALS, S_SLOT_COLLISIONS, 1);
            }
            (*s).sc_state = SC_UNSEEN;
            (*s).timed_ns = 0;
            (*s).idle_ns = 0;
        }
        (*s).tid = tid;
        (*s).state = ST_RUNNABLE;
        (*s).ts = now;
    }
}

/// The current task's process as a waker (its tgid; 0, the idle task's, for none — a plain
/// integer: the verifier here rejected spilled `Option` payloads): none when its flags have one of `skip` (the traced
/// set; for the stack's wakers, the stack too), it is the idle task (an interrupt on an idle
/// CPU: no process), or it was interrupted in user space (a timer or an interrupt that wakes
/// the server while a CPU hog runs is not the hog's doing: a peer wakes it from a system call,
/// its write or its close).
#[inline(always)]
fn waker<const REGS: bool>(skip: u8) -> u32 {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if tgid == 0 || matches!(TRACED.get(tgid), Some(f) if *f & skip != 0) {
        return 0;
    }
    // A timer's callback (a sleep or a timed wait ran out) interrupts whatever runs on the
    // CPU, often in a system call of its own (`yes > /dev/null`): not that process's doing.
    if IN_TIMER.get(0).is_some_and(|n| *n != 0) {
        return 0;
    }
    // Known at load time, as in `why_blocked`: without the helpers (or in a raw_tp program,
    // where they take no BTF pointer) every waker counts.
    if REGS && global(&HAVE_PT_REGS) != 0 {
        let task = unsafe { aya_ebpf::helpers::generated::bpf_get_current_task_btf() };
        let regs = unsafe { aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as u64 };
        if regs != 0 && read_u32(regs, global(&REG_NR_OFF)).is_some_and(|nr| (nr as i32) < 0) {
            return 0;
        }
    }
    tgid
}

/// raw_tp/hrtimer_expire_entry(struct hrtimer *, ktime_t *now): a timer's callback begins.
/// A flag, not a depth count: callbacks do not nest on a CPU (a soft one interrupted by a hard
/// one ends seen as outside a timer, its waker then counted), and an entry whose exit was
/// never seen (it ran while the exit program was being attached, or that one did not attach)
/// must not leave the CPU "in a timer" for the rest of the run: the next callback there sets
/// and clears it again. A count left at 1 so lost every wakeup on that CPU, and with them the
/// stack (CI: a php-fpm and Node stack behind nginx read as noise).
#[raw_tracepoint(tracepoint = "hrtimer_expire_entry")]
pub fn offcpu_timer_entry(_ctx: RawTracePointContext) -> i32 {
    if let Some(n) = IN_TIMER.get_ptr_mut(0) {
        unsafe { *n = 1 };
    }
    0
}

/// raw_tp/hrtimer_expire_exit(struct hrtimer *): it ended.
#[raw_tracepoint(tracepoint = "hrtimer_expire_exit")]
pub fn offcpu_timer_exit(_ctx: RawTracePointContext) -> i32 {
    if let Some(n) = IN_TIMER.get_ptr_mut(0) {
        unsafe { *n = 0 };
    }
    0
}

/// One more wakeup under `key`.
#[inline(always)]
fn count<K>(wakers: &LruPerCpuHashMap<K, u64>, key: &K) {
    match wakers.get_ptr_mut(key) {
        Some(n) => unsafe { *n += 1 },
        None => {
            let _ = wakers.insert(key, &1, 0);
        }
    }
}

/// tp_btf/sched_waking(struct task_struct *p): in the waker's context (sched_wakeup fires on the
/// woken thread's CPU when the wakeup is queued there, from the idle task).
#[btf_tracepoint(function = "sched_waking")]
pub fn offcpu_sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    on_wakeup::<true>(ctx.arg(0), false);
    0
}

/// tp_btf/sched_wakeup_new(struct task_struct *p).
#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn offcpu_sched_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    on_wakeup::<true>(ctx.arg(0), true);
    0
}

/// raw_tp/sched_waking(struct task_struct *p).
#[raw_tracepoint(tracepoint = "sched_waking")]
pub fn offcpu_sched_wakeup_raw(ctx: RawTracePointContext) -> i32 {
    on_wakeup::<false>(ctx.arg(0), false);
    0
}

/// raw_tp/sched_wakeup_new(struct task_struct *p).
#[raw_tracepoint(tracepoint = "sched_wakeup_new")]
pub fn offcpu_sched_wakeup_new_raw(ctx: RawTracePointContext) -> i32 {
    on_wakeup::<false>(ctx.arg(0), true);
    0
}

/// The current task's slot when its process is traced and the slot is its own, or free (a
/// thread on a CPU since before the probes attached takes it here).
#[inline(always)]
fn current_slot() -> Option<*mut ThreadSlot> {
    let pid_tgid = bpf_get_current_pid_tgid();
    match TRACED.get((pid_tgid >> 32) as u32) {
        Some(f) if *f & TRACED_TARGET != 0 => {}
        _ => return None,
    }
    let tid = pid_tgid as u32;
    let s = slot(tid)?;
    unsafe {
        if (*s).tid != tid {
            if (*s).tid != 0 {
                return None;
            }
            (*s).tid = tid;
            (*s).state = ST_ON_CPU;
            (*s).ts = bpf_ktime_get_ns();
            (*s).timed_ns = 0;
            (*s).idle_ns = 0;
        }
    }
    Some(s)
}

/// raw_tp/sys_enter(struct pt_regs *regs, long id): a traced thread enters syscall `id`;
/// kept in its slot until it returns, for the switch program should it block.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn offcpu_sys_enter(ctx: RawTracePointContext) -> i32 {
    if let Some(s) = current_slot() {
        let regs: u64 = ctx.arg(0);
        let id: u64 = ctx.arg(1);
        unsafe {
            (*s).sc_nr = id as u32;
            (*s).sc_regs = regs;
            (*s).sc_state = SC_IN;
        }
    }
    0
}

/// raw_tp/sys_exit(struct pt_regs *regs, long ret): the thread left its syscall.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn offcpu_sys_exit(_ctx: RawTracePointContext) -> i32 {
    if let Some(s) = current_slot() {
        unsafe { (*s).sc_state = SC_NONE };
    }
    0
}
