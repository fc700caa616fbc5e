//! Process lifecycle: which processes are traced. The target and everything it forks, before
//! or after attach (php-fpm's workers are children of the master).

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{map, tracepoint},
    maps::{Array, PerCpuArray},
    programs::TracePointContext,
};
use trapdetect_common::{
    TRACED_TARGET,
    counters::{C_EXITS, C_FORKS_FOLLOWED, NUM_COUNTERS},
    process::exit_action,
};

use crate::kernel::{add, global};

/// tgid-indexed flags: `TRACED_TARGET` when traced, `TRACED_CLIENT` when a watched client. An
/// array (sized to pid_max by the loader) because array lookups are inlined by the JIT: this
/// check runs on every traced syscall of every process.
#[map]
pub static TRACED: Array<u8> = Array::with_max_entries(4_194_304, 0);

/// Self-monitoring counters, see `trapdetect_common::counters`.
#[map]
pub static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(NUM_COUNTERS, 0);

#[unsafe(no_mangle)]
static FORK_PARENT_OFF: u32 = 12;
#[unsafe(no_mangle)]
static FORK_CHILD_OFF: u32 = 20;

/// `(tgid, tid)` of the current task when its process is traced.
#[inline(always)]
pub fn current_traced() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    match TRACED.get(tgid) {
        Some(v) if *v & TRACED_TARGET != 0 => Some((tgid, pid_tgid as u32)),
        _ => None,
    }
}

#[inline(always)]
fn flags(pid: u32) -> u8 {
    TRACED.get(pid).copied().unwrap_or(0)
}

/// sched/sched_process_fork: a traced parent's child is traced. The record layout changed in
/// 6.x (comm became `__data_loc`), so the loader passes the offsets it read from tracefs.
#[tracepoint(category = "sched", name = "sched_process_fork")]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    // The offsets differ between kernels, so they are not constants: read through
    // bpf_probe_read (the verifier refuses direct ctx loads at computed offsets). Not hot.
    let parent: u32 = unsafe { ctx.read_at(global(&FORK_PARENT_OFF)) }.unwrap_or(0);
    let child: u32 = unsafe { ctx.read_at(global(&FORK_CHILD_OFF)) }.unwrap_or(0);
    if child == 0 {
        return 0;
    }
    // The parent may be a thread of a traced process: check its tgid, not its tid. The child
    // inherits every flag (a watched load generator's worker processes are watched too).
    let parent_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let inherit = flags(parent) | flags(parent_tgid);
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

/// Offset of `group_dead` in the `sched_process_exit` record, 0 where the kernel's record has
/// no such field (it ends at `prio` on 5.10, 6.1 and 6.12): the loader reads it from tracefs.
#[unsafe(no_mangle)]
static EXIT_GROUP_DEAD_OFF: u32 = 0;

/// sched/sched_process_exit: forget exited processes (pid numbers are reused).
#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    let off = global(&EXIT_GROUP_DEAD_OFF);
    // Never read past the record: only where tracefs said the field exists (a computed
    // offset, so through bpf_probe_read like the fork probe). Not hot.
    let group_dead = if off == 0 {
        None
    } else {
        Some(unsafe { ctx.read_at::<u8>(off) }.unwrap_or(0) != 0)
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
