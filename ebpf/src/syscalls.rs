//! Path syscalls: counted and timed per path key in the kernel; each key's string is sent to
//! user space once, on first sighting. One `sys_enter_*` program per syscall (each reads only
//! its own record's fields), one `sys_exit_*` program attached to all of their exits.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_probe_read_user_str},
    macros::{map, tracepoint},
    maps::{Array, LruPerCpuHashMap, PerCpuArray, RingBuf},
    programs::TracePointContext,
};
use trapdetect_common::{
    AT_FDCWD, AT_SYMLINK_NOFOLLOW,
    counters::{
        C_ACCEPT_EMFILE, C_ACCEPTS, C_EXIT_WITHOUT_ENTER, C_INFLIGHT_COLLISIONS, C_NEW_KEYS,
        C_PATH_READ_FAILS, C_PATH_STATS_INSERT_FAILS, C_RINGBUF_DROPS,
    },
    hist::bucket_of,
    paths::{
        HASH_SEED, INFLIGHT_SLOTS, Inflight, PATH_CAP, PF_ABSOLUTE, PF_DIRFD, PF_NO_PATH,
        PF_NOFOLLOW, PF_TRUNCATED, PF_UNREADABLE, PathEvent, PathKey, PathStat, mix, user_str_len,
    },
    syscalls::*,
};

use crate::{
    kernel::{add, cwd_dev, fd_dev, tp_u64},
    process::{COUNTERS, current_traced},
};

/// Per path key: count, errors, latency (per CPU, so plain increments are race free).
#[map]
static PATH_STATS: LruPerCpuHashMap<PathKey, PathStat> =
    LruPerCpuHashMap::with_max_entries(16384, 0);

/// Completed calls per kind, whether or not their path key is still in `PATH_STATS`.
#[map]
static KIND_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(KIND_COUNTS_SLOTS, 0);

/// Syscalls between enter and exit, slot `tid % INFLIGHT_SLOTS`.
#[map]
static INFLIGHT: Array<Inflight> = Array::with_max_entries(INFLIGHT_SLOTS, 0);

/// Whether thread `tid` is between the entry and the exit of a traced path syscall.
#[inline(always)]
pub fn in_path_call(tid: u32) -> bool {
    INFLIGHT
        .get(tid & (INFLIGHT_SLOTS - 1))
        .is_some_and(|p| p.tid == tid)
}

/// First sightings of path keys.
#[map]
static PATH_EVENTS: RingBuf = RingBuf::with_byte_size(1 << 20, 0);

/// Scratch space for one path, per CPU (too large for the 512-byte BPF stack).
#[repr(C)]
struct PathBuf {
    words: [u64; PATH_CAP / 8],
}

#[map]
static SCRATCH: PerCpuArray<PathBuf> = PerCpuArray::with_max_entries(1, 0);

/// Zeroed value to insert new keys from (a `PathStat` is too large for the stack).
#[map]
static ZERO_STAT: Array<PathStat> = Array::with_max_entries(1, 0);

/// Reads the path at `uptr` into scratch and hashes it; returns (hash, flags).
#[inline(always)]
fn hash_user_path(uptr: u64) -> (u64, u16) {
    let Some(buf) = SCRATCH.get_ptr_mut(0) else {
        return (0, PF_UNREADABLE);
    };
    let n = unsafe {
        bpf_probe_read_user_str(
            (*buf).words.as_mut_ptr().cast(),
            PATH_CAP as u32,
            uptr as *const _,
        )
    };
    let Some(len) = user_str_len(n) else {
        add(&COUNTERS, C_PATH_READ_FAILS, 1);
        return (0, PF_UNREADABLE);
    };
    let mut flags = 0u16;
    if n as usize >= PATH_CAP {
        flags |= PF_TRUNCATED;
    }
    // Bounded for the verifier.
    let len = len & (PATH_CAP - 1);
    if len == 0 {
        return (0, flags | PF_NO_PATH);
    }
    let first = unsafe { (*buf).words[0] } & 0xff;
    if first == b'/' as u64 {
        flags |= PF_ABSOLUTE;
    }
    let mut h = HASH_SEED;
    let mut i = 0usize;
    while i < PATH_CAP / 8 {
        let start = i * 8;
        if start >= len {
            break;
        }
        let mut w = unsafe { *(*buf).words.get_unchecked(i) };
        let rem = len - start;
        if rem < 8 {
            w &= (1u64 << (rem * 8)) - 1;
        }
        h = mix(h, w);
        i += 1;
    }
    (mix(h, len as u64), flags)
}

/// Common entry logic. `dfd`: `Some(raw dfd)` for *at syscalls; `fd`: the fd a call acts on.
#[inline(always)]
fn on_enter(
    tid: u32,
    kind: u16,
    dfd: Option<u64>,
    path: Option<u64>,
    at_flags: u64,
    fd: Option<u64>,
) {
    let (hash, mut flags, uptr) = match path {
        Some(p) => {
            let (h, f) = hash_user_path(p);
            (h, f, p)
        }
        None => (0, PF_NO_PATH, 0),
    };
    if at_flags & AT_SYMLINK_NOFOLLOW != 0 {
        flags |= PF_NOFOLLOW;
    }
    let base_dev = if flags & PF_ABSOLUTE != 0 || flags & PF_UNREADABLE != 0 {
        0
    } else if let Some(fd) = fd {
        fd_dev(fd)
    } else {
        match dfd {
            Some(d) if (d as i32) != AT_FDCWD => {
                flags |= PF_DIRFD;
                fd_dev(d & 0xffff_ffff)
            }
            _ => cwd_dev(),
        }
    };
    let slot = tid & (INFLIGHT_SLOTS - 1);
    if let Some(p) = INFLIGHT.get_ptr_mut(slot) {
        unsafe {
            (*p).tid = tid;
            (*p).ts = bpf_ktime_get_ns();
            (*p).uptr = uptr;
            (*p).key = PathKey {
                hash,
                base_dev,
                kind,
                flags,
            };
        }
    }
}

/// Sends the string of a newly seen key (read again from the caller's memory, still valid).
#[inline(always)]
fn emit_first_sighting(key: &PathKey, tgid: u32, uptr: u64) {
    add(&COUNTERS, C_NEW_KEYS, 1);
    match PATH_EVENTS.reserve::<PathEvent>(0) {
        Some(mut entry) => {
            let e = entry.as_mut_ptr();
            unsafe {
                (*e).key = *key;
                (*e).tgid = tgid;
                (*e).len = if uptr != 0 && key.flags & PF_NO_PATH == 0 {
                    bpf_probe_read_user_str(
                        (*e).path.as_mut_ptr().cast(),
                        PATH_CAP as u32,
                        uptr as *const _,
                    ) as i32
                } else {
                    0
                };
            }
            entry.submit(0);
        }
        None => add(&COUNTERS, C_RINGBUF_DROPS, 1),
    }
}

/// Attached to the `sys_exit_*` of every traced path syscall: record `ret @16`.
#[tracepoint]
pub fn sys_exit_path(ctx: TracePointContext) -> u32 {
    let Some((tgid, tid)) = current_traced() else {
        return 0;
    };
    let now = unsafe { bpf_ktime_get_ns() };
    let slot = tid & (INFLIGHT_SLOTS - 1);
    let Some(p) = INFLIGHT.get_ptr_mut(slot) else {
        return 0;
    };
    let (key, ts, uptr) = unsafe {
        if (*p).tid != tid {
            let c = if (*p).tid == 0 {
                C_EXIT_WITHOUT_ENTER
            } else {
                C_INFLIGHT_COLLISIONS
            };
            add(&COUNTERS, c, 1);
            return 0;
        }
        (*p).tid = 0;
        ((*p).key, (*p).ts, (*p).uptr)
    };
    let ret = tp_u64(&ctx, 16) as i64;
    let failed = ret < 0;
    let lat = now.saturating_sub(ts);
    let b = bucket_of(lat);
    let kind = key.kind as u32;
    if kind >= NUM_KINDS {
        return 0;
    }
    add(&KIND_COUNTS, kind, 1);

    let stat = match PATH_STATS.get_ptr_mut(&key) {
        Some(s) => s,
        None => {
            let Some(zero) = ZERO_STAT.get(0) else {
                return 0;
            };
            if PATH_STATS.insert(&key, zero, 0).is_err() {
                add(&COUNTERS, C_PATH_STATS_INSERT_FAILS, 1);
                return 0;
            }
            emit_first_sighting(&key, tgid, uptr);
            match PATH_STATS.get_ptr_mut(&key) {
                Some(s) => s,
                None => return 0,
            }
        }
    };
    unsafe {
        (*stat).count += 1;
        if failed {
            (*stat).errors += 1;
        }
        (*stat).sum_ns += lat;
        if (*stat).max_ns < lat {
            (*stat).max_ns = lat;
        }
        if let Some(h) = (*stat).hist.get_mut(b as usize) {
            *h += 1;
        }
    }
    0
}

macro_rules! enter_prog {
    ($fn:ident, $tp:literal, $kind:expr, dfd $dfd:literal, path $path:literal, flags $flags:literal, fd $fd:literal) => {
        #[doc = concat!("syscalls/", $tp)]
        #[tracepoint(category = "syscalls", name = $tp)]
        pub fn $fn(ctx: TracePointContext) -> u32 {
            // Most calls come from processes we do not trace: decide that before reading
            // anything else.
            let Some((_tgid, tid)) = current_traced() else {
                return 0;
            };
            let dfd = if $dfd == 0 {
                None
            } else {
                Some(tp_u64(&ctx, $dfd))
            };
            let path = if $path == 0 {
                None
            } else {
                Some(tp_u64(&ctx, $path))
            };
            let flags = if $flags == 0 { 0 } else { tp_u64(&ctx, $flags) };
            let fd = if $fd == 0 {
                None
            } else {
                Some(tp_u64(&ctx, $fd) & 0xffff_ffff)
            };
            on_enter(tid, $kind, dfd, path, flags, fd);
            0
        }
    };
}

// Offsets must match `trapdetect_common::syscalls::SYSCALLS` (the loader checks both against
// tracefs; a unit test checks this list against that table).
enter_prog!(sys_enter_newstat, "sys_enter_newstat", K_NEWSTAT, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_newlstat, "sys_enter_newlstat", K_NEWLSTAT, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_newfstatat, "sys_enter_newfstatat", K_NEWFSTATAT, dfd 16, path 24, flags 40, fd 0);
enter_prog!(sys_enter_statx, "sys_enter_statx", K_STATX, dfd 16, path 24, flags 32, fd 0);
enter_prog!(sys_enter_chdir, "sys_enter_chdir", K_CHDIR, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_fchdir, "sys_enter_fchdir", K_FCHDIR, dfd 0, path 0, flags 0, fd 16);
enter_prog!(sys_enter_getcwd, "sys_enter_getcwd", K_GETCWD, dfd 0, path 0, flags 0, fd 0);
enter_prog!(sys_enter_access, "sys_enter_access", K_ACCESS, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_faccessat, "sys_enter_faccessat", K_FACCESSAT, dfd 16, path 24, flags 0, fd 0);
enter_prog!(sys_enter_faccessat2, "sys_enter_faccessat2", K_FACCESSAT2, dfd 16, path 24, flags 40, fd 0);
enter_prog!(sys_enter_open, "sys_enter_open", K_OPEN, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_openat, "sys_enter_openat", K_OPENAT, dfd 16, path 24, flags 0, fd 0);
enter_prog!(sys_enter_openat2, "sys_enter_openat2", K_OPENAT2, dfd 16, path 24, flags 0, fd 0);
enter_prog!(sys_enter_readlink, "sys_enter_readlink", K_READLINK, dfd 0, path 16, flags 0, fd 0);
enter_prog!(sys_enter_readlinkat, "sys_enter_readlinkat", K_READLINKAT, dfd 16, path 24, flags 0, fd 0);

/// Attached to `sys_exit_accept` and `sys_exit_accept4`: connections accepted by traced
/// processes, the request denominator when trapdetect drives no load itself; and accepts that
/// failed for want of a descriptor (EMFILE: the process's limit; ENFILE: the system's).
#[tracepoint]
pub fn sys_exit_accept(ctx: TracePointContext) -> u32 {
    if current_traced().is_none() {
        return 0;
    }
    let ret = tp_u64(&ctx, 16) as i64;
    if ret >= 0 {
        add(&COUNTERS, C_ACCEPTS, 1);
    } else if ret == -EMFILE || ret == -ENFILE {
        add(&COUNTERS, C_ACCEPT_EMFILE, 1);
    }
    0
}

const EMFILE: i64 = 24;
const ENFILE: i64 = 23;
