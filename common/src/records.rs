//! Tracepoint record fields the eBPF programs read at fixed offsets (aligned constant reads:
//! the verifier rejects computed ones on the hot paths). Record layouts change between kernels
//! (`sched_process_exit` gained `group_dead`, `sched_process_fork` turned its comm into a
//! `__data_loc`), so the loader checks each of these against the running kernel's tracefs
//! format before it attaches the program, and refuses to attach one that would misread.

/// One field a program reads: in `category/event` (an empty event: every tracepoint the
/// program attaches to), `field` at `offset`, `size` bytes.
#[derive(Clone, Copy, Debug)]
pub struct RecordField {
    /// Program name (see [`crate::names`]).
    pub program: &'static str,
    /// Tracepoint category.
    pub category: &'static str,
    /// Tracepoint name, or "" for each one the program attaches to.
    pub event: &'static str,
    /// Field name in the format file.
    pub field: &'static str,
    /// Offset the program reads at.
    pub offset: u32,
    /// Size the program assumes.
    pub size: u32,
}

const fn f(
    program: &'static str,
    category: &'static str,
    event: &'static str,
    field: &'static str,
    offset: u32,
    size: u32,
) -> RecordField {
    RecordField {
        program,
        category,
        event,
        field,
        offset,
        size,
    }
}

use crate::names::*;

/// Every fixed-offset read of a tracepoint record (the syscall dispatch and the TCP state
/// program read none: as raw tracepoints they are handed the kernel's own arguments).
pub const FIXED_FIELDS: &[RecordField] = &[
    f(PROG_FUSE_REQUEST_SEND, "fuse", "", "connection", 8, 4),
    f(PROG_FUSE_REQUEST_SEND, "fuse", "", "opcode", 24, 4),
    f(PROG_FUSE_REQUEST_SEND, "fuse", "", "unique", 16, 8),
    f(PROG_FUSE_REQUEST_END, "fuse", "", "connection", 8, 4),
    f(PROG_FUSE_REQUEST_END, "fuse", "", "unique", 16, 8),
];
