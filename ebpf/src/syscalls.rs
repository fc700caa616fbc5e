//! Path syscalls: counted and timed per path key in the kernel; each key's string is sent to
//! user space once, on first sighting. Two raw tracepoint programs, on `sys_enter` and
//! `sys_exit`, dispatch by syscall number (`trapdetect_common::syscalls::kind_of`): the path
//! calls, `accept` (the request denominator) and, for watched clients, `connect`. Every other
//! syscall of the host costs the program's entry and one compare chain (enter) or one inlined
//! array lookup (exit); see `trapdetect_common::syscalls` for why raw tracepoints.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, generated::bpf_probe_read_user_str},
    macros::{map, raw_tracepoint},
    maps::{Array, LruPerCpuHashMap, PerCpuArray, RingBuf},
    programs::RawTracePointContext,
};
use trapdetect_common::{
    AT_FDCWD, AT_SYMLINK_NOFOLLOW, TRACED_CLIENT, TRACED_TARGET,
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
    connect::{connect_enter, connect_exit},
    kernel::{add, cwd_dev, fd_dev, global, read_u64},
    offcpu::SYSCALL_ARCH,
    process::{COUNTERS, current_flags},
};

/// `struct pt_regs` offsets of the first four arguments (x86_64 `di`, `si`, `dx`, `r10`;
/// arm64 `orig_x0`, `regs[1]`, `regs[2]`, `regs[3]`), from BTF. An array indexed by the
/// argument's position: reading one is a load, not a branch per position.
#[unsafe(no_mangle)]
static REG_ARG_OFF: [u32; 4] = [0; 4];
/// A 32-bit (compat) syscall numbers its calls from another table: skipped. The register that
/// tells (x86_64 `cs`, arm64 `pstate`), and the mask and value it has for a compat task
/// (`__USER32_CS`; `PSR_MODE32_BIT`); mask 0 where it cannot be told.
#[unsafe(no_mangle)]
static REG_COMPAT_OFF: u32 = 0;
#[unsafe(no_mangle)]
static COMPAT_MASK: u32 = 0;
#[unsafe(no_mangle)]
static COMPAT_VALUE: u32 = 0;
/// What the dispatch does besides the path calls (`syscalls::F_*`), set by the loader from
/// the probes wanted (`--skip-probe sys_exit_accept`, `--watch-client`).
#[unsafe(no_mangle)]
static SYSCALL_FEATURES: u32 = 0;

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
        .is_some_and(|p| p.tid == tid && (p.key.kind as u32) < NUM_KINDS)
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

/// Reads the path at `uptr` into scratch and hashes it; returns (hash, flags). A string in a
/// page the process has not touched yet cannot be read here (the helper does not fault pages
/// in): `PF_UNREADABLE`, and the exit reads it again once the kernel's own copy faulted it in.
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
    (hash_words(buf, len), flags)
}

/// `mix` over the first `len` bytes of `buf` (1 to `PATH_CAP` - 1), a word at a time, then
/// over the length: `trapdetect_common::paths::hash_path`'s figure. The last word's bytes past
/// the string are cleared in place first, so the loop has one branch (its end), which the
/// verifier walks once per iteration: with the mask inside the loop it walked each iteration
/// on both sides of the mask's test, and `sys_enter_path` took 477,404 verified instructions
/// (0.52 s to load here).
#[inline(always)]
fn hash_words(buf: *mut PathBuf, len: usize) -> u64 {
    // Through the stack, so the compiler keeps the mask the verifier needs to bound the index
    // (it knows `len` is at least 1; the verifier does not).
    let last = unsafe { core::ptr::read_volatile(&((len - 1) / 8)) } & (PATH_CAP / 8 - 1);
    let tail = len - last * 8;
    unsafe {
        if let Some(w) = (*buf).words.get_mut(last)
            && tail < 8
        {
            *w &= (1u64 << (tail * 8)) - 1;
        }
    }
    let words = last + 1;
    let mut h = HASH_SEED;
    let mut i = 0usize;
    while i < PATH_CAP / 8 {
        if i >= words {
            break;
        }
        h = mix(h, unsafe { *(*buf).words.get_unchecked(i) });
        i += 1;
    }
    mix(h, len as u64)
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
    // An unreadable path gets the base a relative one would have: the exit may read it.
    let base_dev = if flags & PF_ABSOLUTE != 0 {
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
    if let Some(p) = take_slot(tid) {
        unsafe {
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

/// The in-flight slot of `tid`, taken: another thread's record still in it is lost (counted;
/// its exit will not find it).
#[inline(always)]
fn take_slot(tid: u32) -> Option<*mut Inflight> {
    let p = INFLIGHT.get_ptr_mut(tid & (INFLIGHT_SLOTS - 1))?;
    unsafe {
        if (*p).tid != 0 && (*p).tid != tid {
            add(&COUNTERS, C_INFLIGHT_COLLISIONS, 1);
        }
        (*p).tid = tid;
    }
    Some(p)
}

/// Argument `i` (0-3) of the syscall whose registers are at `regs`.
#[inline(always)]
pub(crate) fn arg(regs: u64, i: u8) -> u64 {
    let off = unsafe { core::ptr::read_volatile(REG_ARG_OFF.as_ptr().add((i & 3) as usize)) };
    read_u64(regs, off as usize).unwrap_or(0)
}

/// Whether the syscall whose registers are at `regs` is a 32-bit (compat) one.
#[inline(always)]
fn is_compat(regs: u64) -> bool {
    let mask = global(&COMPAT_MASK) as u64;
    mask != 0
        && read_u64(regs, global(&REG_COMPAT_OFF))
            .is_some_and(|v| v & mask == global(&COMPAT_VALUE) as u64)
}

/// raw_tp/sys_enter(struct pt_regs *regs, long id), for every syscall of the host: the
/// dispatched ones of traced processes are recorded in the thread's in-flight slot.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter_path(ctx: RawTracePointContext) -> i32 {
    let id: u64 = ctx.arg(1);
    let Some(kind) = kind_of(global(&SYSCALL_ARCH) as u32, id) else {
        return 0;
    };
    let (flags, _tgid, tid) = current_flags();
    if flags == 0 {
        return 0;
    }
    let regs: u64 = ctx.arg(0);
    if is_compat(regs) {
        return 0;
    }
    let features = global(&SYSCALL_FEATURES) as u32;
    match kind {
        K_ACCEPT => {
            if flags & TRACED_TARGET != 0 && features & F_ACCEPTS != 0 {
                mark(tid, K_ACCEPT);
            }
        }
        K_CONNECT => {
            if flags & TRACED_CLIENT != 0 && features & F_CONNECT != 0 {
                connect_enter(tid, arg(regs, 0) & 0xffff_ffff);
            }
        }
        _ => {
            if flags & TRACED_TARGET != 0 {
                path_enter(tid, kind, regs);
            }
        }
    }
    0
}

/// Marks `tid`'s slot as in a call of `kind` that is not a path call (nothing else kept).
#[inline(always)]
fn mark(tid: u32, kind: u16) {
    if let Some(p) = take_slot(tid) {
        unsafe {
            (*p).key.kind = kind;
            (*p).ts = 0;
            (*p).uptr = 0;
        }
    }
}

/// A path call's arguments, by where the table puts them.
#[inline(always)]
fn path_enter(tid: u32, kind: u16, regs: u64) {
    let Some(s) = SYSCALLS.get(kind as usize) else {
        return;
    };
    let pick = |i: u8| {
        if i == NO_ARG {
            None
        } else {
            Some(arg(regs, i))
        }
    };
    let dfd = pick(s.dfd_arg);
    let path = pick(s.path_arg);
    let flags = pick(s.flags_arg).unwrap_or(0);
    let fd = pick(s.fd_arg).map(|f| f & 0xffff_ffff);
    on_enter(tid, kind, dfd, path, flags, fd);
}

/// raw_tp/sys_exit(struct pt_regs *regs, long ret), for every syscall of the host: a traced
/// thread whose slot holds a call is leaving it.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit_path(ctx: RawTracePointContext) -> i32 {
    let (flags, tgid, tid) = current_flags();
    if flags == 0 {
        return 0;
    }
    let ret: u64 = ctx.arg(1);
    let ret = ret as i64;
    if flags & TRACED_TARGET != 0 {
        target_exit(tgid, tid, ret);
        if global(&SYSCALL_FEATURES) as u32 & F_FUTEX_RESULT != 0 {
            crate::offcpu::syscall_result(tid, ret);
        }
    }
    if flags & TRACED_CLIENT != 0 && global(&SYSCALL_FEATURES) as u32 & F_CONNECT != 0 {
        connect_exit(tid, ret);
    }
    0
}

#[inline(always)]
fn target_exit(tgid: u32, tid: u32, ret: i64) {
    let slot = tid & (INFLIGHT_SLOTS - 1);
    let Some(p) = INFLIGHT.get_ptr_mut(slot) else {
        return;
    };
    // Not this thread's record: a syscall the dispatch does not keep, or one whose record
    // another thread took (counted when it was taken).
    let (key, ts, uptr) = unsafe {
        if (*p).tid != tid {
            return;
        }
        (*p).tid = 0;
        ((*p).key, (*p).ts, (*p).uptr)
    };
    match key.kind {
        K_ACCEPT => {
            if ret >= 0 {
                add(&COUNTERS, C_ACCEPTS, 1);
            } else if ret == -EMFILE || ret == -ENFILE {
                add(&COUNTERS, C_ACCEPT_EMFILE, 1);
            }
        }
        K_IN_FLIGHT_AT_ATTACH => add(&COUNTERS, C_EXIT_WITHOUT_ENTER, 1),
        _ => path_exit(tgid, key, ts, uptr, ret),
    }
}

/// Counts a completed path call under its key.
#[inline(always)]
fn path_exit(tgid: u32, key: PathKey, ts: u64, uptr: u64, ret: i64) {
    let mut key = key;
    if key.flags & PF_UNREADABLE != 0 {
        // Unreadable at entry (its page not yet touched): the kernel's copy of the string
        // faulted the page in, so read it now.
        let (hash, f) = if uptr != 0 {
            hash_user_path(uptr)
        } else {
            (0, PF_UNREADABLE)
        };
        if f & PF_UNREADABLE == 0 {
            key.hash = hash;
            key.flags = (key.flags & !PF_UNREADABLE) | f;
            if f & PF_ABSOLUTE != 0 {
                key.base_dev = 0;
                key.flags &= !PF_DIRFD;
            }
        } else {
            add(&COUNTERS, C_PATH_READ_FAILS, 1);
            key.base_dev = 0;
            key.flags &= !PF_DIRFD;
        }
    }
    let now = unsafe { bpf_ktime_get_ns() };
    let failed = ret < 0;
    let lat = now.saturating_sub(ts);
    let b = bucket_of(lat);
    let kind = key.kind as u32;
    if kind >= NUM_KINDS {
        return;
    }
    add(&KIND_COUNTS, kind, 1);

    let stat = match PATH_STATS.get_ptr_mut(&key) {
        Some(s) => s,
        None => {
            let Some(zero) = ZERO_STAT.get(0) else {
                return;
            };
            if PATH_STATS.insert(&key, zero, 0).is_err() {
                add(&COUNTERS, C_PATH_STATS_INSERT_FAILS, 1);
                return;
            }
            emit_first_sighting(&key, tgid, uptr);
            match PATH_STATS.get_ptr_mut(&key) {
                Some(s) => s,
                None => return,
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
}

const EMFILE: i64 = 24;
const ENFILE: i64 = 23;
