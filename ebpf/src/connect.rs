//! connect() of watched clients (`--watch-client`, e.g. the load generator): count, latency,
//! and result by errno, on TCP sockets only. Called from the syscall dispatch
//! (`syscalls::sys_enter_path`/`sys_exit_path`) for watched clients only.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::map,
    maps::{Array, PerCpuArray},
};
use trapdetect_common::{
    counters::{C_CONNECT_COLLISIONS, C_CONNECT_EXIT_WITHOUT_ENTER, C_CONNECT_NOT_TCP},
    hist::bucket_of,
    tcp::{
        CONNECT_AT_ATTACH, CONNECT_CLASSES, CONNECT_INFLIGHT_SLOTS, CS_COMPLETED, CS_IN_PROGRESS,
        ConnectInflight, ConnectStat, EINPROGRESS, ERRNO_SLOTS,
    },
};

use crate::{
    kernel::{add, fd_is_tcp},
    process::COUNTERS,
};

/// connect() calls between enter and exit, slot `tid % CONNECT_INFLIGHT_SLOTS`.
#[map]
static CONNECT_INFLIGHT: Array<ConnectInflight> =
    Array::with_max_entries(CONNECT_INFLIGHT_SLOTS, 0);

/// Count and latency by class (`CS_*`).
#[map]
static CONNECT_STATS: PerCpuArray<ConnectStat> = PerCpuArray::with_max_entries(CONNECT_CLASSES, 0);

/// Results: slot 0 successes, slot `e` errno `e`.
#[map]
static CONNECT_ERRNO: PerCpuArray<u64> = PerCpuArray::with_max_entries(ERRNO_SLOTS, 0);

/// A watched client's thread `tid` enters connect(`fd`, ...).
#[inline(always)]
pub fn connect_enter(tid: u32, fd: u64) {
    // Without socket offsets every connect counts (the report says so).
    let tcp = fd_is_tcp(fd).unwrap_or(true);
    if !tcp {
        add(&COUNTERS, C_CONNECT_NOT_TCP, 1);
    }
    if let Some(p) = CONNECT_INFLIGHT.get_ptr_mut(tid & (CONNECT_INFLIGHT_SLOTS - 1)) {
        unsafe {
            // Another thread's connect still in the slot is lost.
            if (*p).tid != 0 && (*p).tid != tid {
                add(&COUNTERS, C_CONNECT_COLLISIONS, 1);
            }
            (*p).tid = tid;
            (*p).tcp = tcp as u32;
            (*p).ts = bpf_ktime_get_ns();
        }
    }
}

/// A watched client's thread `tid` leaves a syscall with `ret`: timed if it is its connect.
#[inline(always)]
pub fn connect_exit(tid: u32, ret: i64) {
    let Some(p) = CONNECT_INFLIGHT.get_ptr_mut(tid & (CONNECT_INFLIGHT_SLOTS - 1)) else {
        return;
    };
    let (tcp, ts) = unsafe {
        if (*p).tid != tid {
            return;
        }
        (*p).tid = 0;
        ((*p).tcp, (*p).ts)
    };
    let now = unsafe { bpf_ktime_get_ns() };
    if tcp == CONNECT_AT_ATTACH {
        add(&COUNTERS, C_CONNECT_EXIT_WITHOUT_ENTER, 1);
        return;
    }
    if tcp == 0 {
        return;
    }
    let errno = if ret < 0 { (-ret) as u64 } else { 0 };
    let class = if errno == EINPROGRESS as u64 {
        CS_IN_PROGRESS
    } else {
        CS_COMPLETED
    };
    let slot = if errno >= ERRNO_SLOTS as u64 {
        ERRNO_SLOTS - 1
    } else {
        errno as u32
    };
    add(&CONNECT_ERRNO, slot, 1);
    let lat = now.saturating_sub(ts);
    let b = bucket_of(lat);
    if let Some(s) = CONNECT_STATS.get_ptr_mut(class) {
        unsafe {
            (*s).count += 1;
            (*s).sum_ns += lat;
            if (*s).max_ns < lat {
                (*s).max_ns = lat;
            }
            if let Some(h) = (*s).hist.get_mut(b as usize) {
                *h += 1;
            }
        }
    }
}
