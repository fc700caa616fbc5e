//! Process lifecycle: which processes are traced. The target and everything it forks, before
//! or after attach (php-fpm's workers are children of the master).

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{map, raw_tracepoint},
    maps::{Array, PerCpuArray},
    programs::RawTracePointContext,
};
use trapdetect_common::{
    TRACED_RUNTIME, TRACED_STACK, TRACED_TARGET,
    counters::{C_EXITS, C_FORKS_FOLLOWED, NUM_COUNTERS},
    process::exit_action,
};

use crate::{
    kernel::{add, global, read_u32},
    offcpu::OFF_TASK_PID,
};

/// tgid-indexed flags: `TRACED_TARGET` when traced, `TRACED_CLIENT` when a watched client. An
/// array (sized to pid_max by the loader) because array lookups are inlined by the JIT: this
/// check runs on every traced syscall of every process.
#[map]
pub static TRACED: Array<u8> = Array::with_max_entries(4_194_304, 0);

/// Self-monitoring counters, see `trapdetect_common::counters`.
#[map]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(NUM_COUNTERS, 0);

/// The traced flags (`TRACED_*`) of the current process, with its tgid and tid.
#[inline(always)]
pub fn current_flags() -> (u8, u32, u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    (flags(tgid), tgid, pid_tgid as u32)
}

/// `(tgid, tid)` of the current task when its process is traced.
#[inline(always)]
pub fn current_traced() -> Option<(u32, u32)> {
    match current_flags() {
        (f, tgid, tid) if f & TRACED_TARGET != 0 => Some((tgid, tid)),
        _ => None,
    }
}

#[inline(always)]
pub fn flags(pid: u32) -> u8 {
    TRACED.get(pid).copied().unwrap_or(0)
}

/// raw_tp/sched_process_fork(struct task_struct *parent, struct task_struct *child): a traced
/// parent's child is traced. A raw tracepoint: the kernel fills no record (both comms) for
/// every fork of the host, and it detaches without a grace period; the two tasks' `pid`s (the
/// record's parent_pid and child_pid: thread ids) are read at the BTF offset.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn sched_process_fork(ctx: RawTracePointContext) -> i32 {
    let parent_task: u64 = ctx.arg(0);
    let child_task: u64 = ctx.arg(1);
    let parent = read_u32(parent_task, global(&OFF_TASK_PID)).unwrap_or(0);
    let child = read_u32(child_task, global(&OFF_TASK_PID)).unwrap_or(0);
    if child == 0 {
        return 0;
    }
    // The parent may be a thread of a traced process: check its tgid, not its tid. The child
    // inherits every flag (a watched load generator's worker processes are watched too) but
    // the stack's and the runtime's own threads', which user space decides.
    let parent_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let inherit = (flags(parent) | flags(parent_tgid)) & !(TRACED_STACK | TRACED_RUNTIME);
    if inherit == 0 {
        return 0;
    }
    let had = flags(child);
    if had | inherit != had {
        if let Some(p) = TRACED.get_ptr_mut(child) {
            unsafe { *p = had | inherit };
            if had & TRACED_TARGET == 0 && inherit & TRACED_TARGET != 0 {
                add(&COUNTERS, C_FORKS_FOLLOWED, 1);
            }
        }
    }
    0
}

/// 1 where the tracepoint has `group_dead` (its second argument; the record's field, which
/// tracefs shows on 6.18 and not on 5.10, 6.1 or 6.12): the loader reads that from tracefs.
/// When 0 the verifier prunes the read, so the program never touches an argument the
/// tracepoint does not have (an attach would refuse it).
#[unsafe(no_mangle)]
static EXIT_HAS_GROUP_DEAD: u32 = 0;

/// raw_tp/sched_process_exit(struct task_struct *p[, bool group_dead]), in the exiting task:
/// forget exited processes (pid numbers are reused).
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn sched_process_exit(ctx: RawTracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    let group_dead = if global(&EXIT_HAS_GROUP_DEAD) == 0 {
        None
    } else {
        let dead: u64 = ctx.arg(1);
        Some(dead & 0xff != 0)
    };
    let act = exit_action(tgid, tid, group_dead);
    if act.forget_thread {
        if let Some(p) = TRACED.get_ptr_mut(tid) {
            unsafe { *p = 0 };
        }
    }
    if act.forget_process {
        let f = flags(tgid);
        if f != 0 {
            if let Some(p) = TRACED.get_ptr_mut(tgid) {
                unsafe { *p = 0 };
            }
            if f & TRACED_TARGET != 0 {
                add(&COUNTERS, C_EXITS, 1);
            }
        }
    }
    0
}
