//! FUSE requests caused by traced processes, counted where the filesystem sees them
//! (`fuse:fuse_request_send`, kernel ≥ 6.13): a measurement of filesystem operations, not an
//! estimate from path strings. With `fuse:fuse_request_end` each request is also timed, by how
//! many of the traced processes' requests to the same connection were in flight when it was
//! sent: whether the filesystem answers one at a time (latency grows with the requests ahead)
//! or several at once is then measured, not inferred from a flat rate.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_map_lookup_percpu_elem},
    macros::{map, tracepoint},
    maps::{LruHashMap, PerCpuHashMap},
    programs::TracePointContext,
};
use trapdetect_common::fuse::{
    FUSE_AHEAD_MAX, FuseKey, FuseQueueKey, FuseQueueVal, FuseReq, FuseSent, IN_PATH_CALL,
};

use crate::{
    kernel::{tp_u32, tp_u64},
    process::current_traced,
    syscalls::in_path_call,
};

/// (connection dev, opcode) → requests.
#[map]
pub static FUSE_OPS: PerCpuHashMap<FuseKey, u64> = PerCpuHashMap::with_max_entries(1024, 0);

/// Requests of traced processes in flight: (connection, unique) → send time and requests ahead.
/// LRU: a request whose end never comes (a connection aborted) is evicted, not leaked.
#[map]
static FUSE_SENT: LruHashMap<FuseReq, FuseSent> = LruHashMap::with_max_entries(8192, 0);

/// Connection → traced requests in flight, as per-CPU deltas (send adds on its CPU, end
/// subtracts on the daemon's; no 64-bit atomics on this target): their sum is the count.
#[map]
static FUSE_INFLIGHT: PerCpuHashMap<u32, i64> = PerCpuHashMap::with_max_entries(64, 0);

/// (connection, requests ahead) → requests answered and their summed latency.
#[map]
static FUSE_QUEUE: PerCpuHashMap<FuseQueueKey, FuseQueueVal> =
    PerCpuHashMap::with_max_entries(1024, 0);

/// CPUs summed over: lookups past the last possible CPU return null and end the loop earlier.
const MAX_CPUS: u32 = 512;

/// The traced requests in flight on `dev`: the per-CPU deltas summed.
#[inline(always)]
fn in_flight(dev: &u32) -> i64 {
    let map = (&FUSE_INFLIGHT as *const PerCpuHashMap<u32, i64>)
        .cast_mut()
        .cast();
    let mut sum = 0i64;
    for cpu in 0..MAX_CPUS {
        let p =
            unsafe { bpf_map_lookup_percpu_elem(map, (dev as *const u32).cast_mut().cast(), cpu) };
        if p.is_null() {
            break;
        }
        sum += unsafe { *p.cast::<i64>() };
    }
    sum
}

/// Adds `by` to this CPU's delta for `dev`.
#[inline(always)]
fn add_in_flight(dev: &u32, by: i64) {
    match FUSE_INFLIGHT.get_ptr_mut(dev) {
        Some(p) => unsafe { *p += by },
        None => {
            let _ = FUSE_INFLIGHT.insert(dev, &by, 0);
        }
    }
}

/// fuse/fuse_request_send: connection @8 (dev_t), unique @16, opcode @24.
#[tracepoint(category = "fuse", name = "fuse_request_send")]
pub fn fuse_request_send(ctx: TracePointContext) -> u32 {
    let Some((_, tid)) = current_traced() else {
        return 0;
    };
    let dev = tp_u32(&ctx, 8);
    let flag = if in_path_call(tid) { IN_PATH_CALL } else { 0 };
    let key = FuseKey {
        dev,
        opcode: tp_u32(&ctx, 24) | flag,
    };
    match FUSE_OPS.get_ptr_mut(&key) {
        Some(p) => unsafe { *p += 1 },
        None => {
            let _ = FUSE_OPS.insert(&key, &1, 0);
        }
    }
    let ahead = in_flight(&dev).clamp(0, FUSE_AHEAD_MAX as i64) as u32;
    let req = FuseReq {
        dev,
        _pad: 0,
        unique: tp_u64(&ctx, 16),
    };
    let sent = FuseSent {
        ts_ns: unsafe { bpf_ktime_get_ns() },
        ahead,
        _pad: 0,
    };
    if FUSE_SENT.insert(&req, &sent, 0).is_ok() {
        add_in_flight(&dev, 1);
    }
    0
}

/// fuse/fuse_request_end: connection @8, unique @16. Runs in whichever task answered (the
/// daemon's reply, an abort): matched to a traced request by its key, not by the task.
#[tracepoint(category = "fuse", name = "fuse_request_end")]
pub fn fuse_request_end(ctx: TracePointContext) -> u32 {
    let req = FuseReq {
        dev: tp_u32(&ctx, 8),
        _pad: 0,
        unique: tp_u64(&ctx, 16),
    };
    let Some(sent) = (unsafe { FUSE_SENT.get(&req) }).copied() else {
        return 0;
    };
    let _ = FUSE_SENT.remove(&req);
    add_in_flight(&req.dev, -1);
    let now = unsafe { bpf_ktime_get_ns() };
    let key = FuseQueueKey {
        dev: req.dev,
        ahead: sent.ahead,
    };
    let lat = now.saturating_sub(sent.ts_ns);
    match FUSE_QUEUE.get_ptr_mut(&key) {
        Some(p) => unsafe {
            (*p).count += 1;
            (*p).sum_ns += lat;
        },
        None => {
            let _ = FUSE_QUEUE.insert(
                &key,
                &FuseQueueVal {
                    count: 1,
                    sum_ns: lat,
                },
                0,
            );
        }
    }
    0
}
