//! FUSE requests caused by traced processes, counted where the filesystem sees them
//! (`fuse:fuse_request_send`, kernel ≥ 6.13): a measurement of filesystem operations, not an
//! estimate from path strings.

use aya_ebpf::{
    macros::{map, tracepoint},
    maps::PerCpuHashMap,
    programs::TracePointContext,
};
use trapdetect_common::fuse::{FuseKey, IN_PATH_CALL};

use crate::{kernel::tp_u32, process::current_traced, syscalls::in_path_call};

/// (connection dev, opcode) → requests.
#[map]
pub static FUSE_OPS: PerCpuHashMap<FuseKey, u64> = PerCpuHashMap::with_max_entries(1024, 0);

/// fuse/fuse_request_send: connection @8 (dev_t), opcode @24.
#[tracepoint(category = "fuse", name = "fuse_request_send")]
pub fn fuse_request_send(ctx: TracePointContext) -> u32 {
    let Some((_, tid)) = current_traced() else {
        return 0;
    };
    let flag = if in_path_call(tid) { IN_PATH_CALL } else { 0 };
    let key = FuseKey {
        dev: tp_u32(&ctx, 8),
        opcode: tp_u32(&ctx, 24) | flag,
    };
    match FUSE_OPS.get_ptr_mut(&key) {
        Some(p) => unsafe { *p += 1 },
        None => {
            let _ = FUSE_OPS.insert(&key, &1, 0);
        }
    }
    0
}
