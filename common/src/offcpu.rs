//! Off-CPU time of traced threads, by why: the kernel sums, per *reason* (a class of the
//! syscall the thread blocked in, the filesystem or the locked file where that is cheap to
//! know), how long threads stayed off the CPU; plus their run-queue delay and on-CPU time.
//! Aggregated in the kernel; user space reads the sums once a second.

/// Blocked in a path or metadata syscall (stat family, open, access, chdir, readlink...).
/// `dev`: the filesystem the walk starts on (cwd or dirfd); 0 for an absolute path.
pub const CLASS_PATH: u32 = 0;
/// Blocked in I/O on a file descriptor of a regular file or directory (read, write, fstat,
/// close, fsync, getdents...). `dev`: the file's filesystem.
pub const CLASS_FILE_IO: u32 = 1;
/// Blocked taking a file lock (`flock`, `fcntl(F_SETLKW)`). `dev`/`ino`: the locked file.
pub const CLASS_FILE_LOCK: u32 = 2;
/// Blocked in `futex`: a user-space lock or condition variable.
pub const CLASS_FUTEX: u32 = 3;
/// Waiting for work: `accept`, `epoll_wait`, `poll`, `select`, reads on a socket or pipe.
pub const CLASS_WAIT_WORK: u32 = 4;
/// Sleeping on purpose (`nanosleep`, `clock_nanosleep`, `pause`, signal waits).
pub const CLASS_SLEEP: u32 = 5;
/// Blocked in any other syscall (`wait4`, `connect`, `sendto`...).
pub const CLASS_OTHER: u32 = 6;
/// Blocked outside any syscall (a page fault, e.g. code paged in from a slow filesystem).
pub const CLASS_NO_SYSCALL: u32 = 7;
/// Blocked, reason unknown: this kernel cannot tell which syscall (no `bpf_task_pt_regs`,
/// Linux < 5.15, or not x86_64).
pub const CLASS_UNKNOWN: u32 = 8;
/// Number of classes.
pub const NUM_CLASSES: u32 = 9;

/// Stable names of the classes (JSON keys, text labels).
pub const CLASS_NAMES: [&str; NUM_CLASSES as usize] = [
    "path",
    "file_io",
    "file_lock",
    "futex",
    "wait_work",
    "sleep",
    "other",
    "no_syscall",
    "unknown",
];

/// How the blocked syscall's arguments name what it waits on.
pub const ARG_NONE: u8 = 0;
/// The first argument is a file descriptor.
pub const ARG_FD: u8 = 1;
/// The first argument is a directory fd, the second a path (the `*at` calls).
pub const ARG_DIRFD_PATH: u8 = 2;
/// The first argument is a path, relative to the working directory unless absolute.
pub const ARG_PATH: u8 = 3;
/// `fcntl(fd, cmd, ...)`: a lock wait only for `F_SETLKW`/`F_OFD_SETLKW`.
pub const ARG_FCNTL: u8 = 4;

/// `fcntl` commands that wait for a lock.
pub const F_SETLKW: u64 = 7;
/// Open-file-description lock, waiting.
pub const F_OFD_SETLKW: u64 = 38;

/// Class and argument shape of x86_64 syscall `nr` (the numbers of
/// arch/x86/entry/syscalls/syscall_64.tbl; the loader enables classification only on x86_64).
#[inline(always)]
pub fn class_of(nr: u64) -> (u32, u8) {
    match nr {
        // Path and metadata syscalls, path relative to the cwd.
        2 | 4 | 6 | 21 | 59 | 76 | 80 | 82 | 83 | 84 | 85 | 86 | 87 | 88 | 89 | 90 | 92 | 94
        | 132 | 137 | 188 | 189 | 191 | 192 | 194 | 195 | 235 => (CLASS_PATH, ARG_PATH),
        // The *at family: dirfd, then path.
        257 | 258 | 259 | 260 | 261 | 262 | 263 | 264 | 265 | 267 | 268 | 269 | 280 | 316 | 322
        | 332 | 437 | 439 | 452 => (CLASS_PATH, ARG_DIRFD_PATH),
        // No path walked but metadata all the same.
        79 | 266 => (CLASS_PATH, ARG_NONE),
        81 => (CLASS_PATH, ARG_FD),
        // I/O on a descriptor (reads of sockets and pipes are re-classed as waiting for work).
        0 | 1 | 3 | 5 | 8 | 17 | 18 | 19 | 20 | 40 | 74 | 75 | 77 | 78 | 91 | 93 | 193 | 217
        | 221 | 277 | 285 | 295 | 296 | 306 | 326 | 327 | 328 => (CLASS_FILE_IO, ARG_FD),
        73 => (CLASS_FILE_LOCK, ARG_FD),
        72 => (CLASS_FILE_LOCK, ARG_FCNTL),
        202 | 449 | 454 | 455 | 456 => (CLASS_FUTEX, ARG_NONE),
        7 | 23 | 43 | 45 | 47 | 232 | 270 | 271 | 281 | 288 | 299 | 441 => {
            (CLASS_WAIT_WORK, ARG_NONE)
        }
        34 | 35 | 128 | 130 | 230 => (CLASS_SLEEP, ARG_NONE),
        _ => (CLASS_OTHER, ARG_NONE),
    }
}

/// Key of the `OFFCPU` map: why a thread was off the CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffKey {
    /// `CLASS_*`.
    pub class: u32,
    /// `s_dev` of the filesystem involved, 0 when unknown or not applicable.
    pub dev: u32,
    /// Inode number of the locked file (`CLASS_FILE_LOCK`), 0 otherwise.
    pub ino: u64,
}

/// Value of the `OFFCPU` map (one per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffVal {
    /// Summed off-CPU time, ns.
    pub ns: u64,
    /// Off-CPU intervals (blocking episodes).
    pub count: u64,
}

/// Thread state in a `THREADS` slot.
pub const ST_EMPTY: u32 = 0;
/// Running since `ts`.
pub const ST_ON_CPU: u32 = 1;
/// Blocked since `ts`, for `key`.
pub const ST_OFF_CPU: u32 = 2;
/// Runnable (woken or preempted) since `ts`, waiting for a CPU.
pub const ST_RUNNABLE: u32 = 3;

/// Slots of the `THREADS` array (slot `tid % THREAD_SLOTS`; a power of two).
pub const THREAD_SLOTS: u32 = 65536;

/// Where one traced thread is now. User space reads the slots of the threads it knows to
/// split intervals still in progress at a second's boundary.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSlot {
    /// Thread id owning the slot.
    pub tid: u32,
    /// `ST_*`.
    pub state: u32,
    /// Since when, ns (`bpf_ktime_get_ns`, CLOCK_MONOTONIC).
    pub ts: u64,
    /// Why, when off the CPU.
    pub key: OffKey,
}

/// Slots of the `SCHED_TOTALS` per-CPU array.
/// On-CPU time of traced threads, ns.
pub const S_ONCPU_NS: u32 = 0;
/// Run-queue delay of traced threads (woken or preempted until switched in), ns.
pub const S_RUNQ_NS: u32 = 1;
/// Run-queue waits.
pub const S_RUNQ_COUNT: u32 = 2;
/// Switch-outs of traced threads.
pub const S_SWITCHES: u32 = 3;
/// Thread slots taken over by another thread (tid collision): an interval was lost.
pub const S_SLOT_COLLISIONS: u32 = 4;
/// Off-CPU intervals not recorded because the `OFFCPU` map was full.
pub const S_KEY_INSERT_FAILS: u32 = 5;
/// Switch-outs whose syscall could not be read from the task's registers.
pub const S_REGS_FAILS: u32 = 6;
/// Number of slots.
pub const NUM_SCHED_SLOTS: u32 = 7;

#[cfg(feature = "user")]
unsafe impl aya::Pod for OffKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for OffVal {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for ThreadSlot {}

/// Program: `tp_btf/sched_switch`, closes and opens intervals.
pub const PROG_OFFCPU_SWITCH: &str = "offcpu_sched_switch";
/// Program: `tp_btf/sched_wakeup`, a blocked thread becomes runnable.
pub const PROG_OFFCPU_WAKEUP: &str = "offcpu_sched_wakeup";
/// Program: `tp_btf/sched_wakeup_new`, a new thread becomes runnable.
pub const PROG_OFFCPU_WAKEUP_NEW: &str = "offcpu_sched_wakeup_new";
/// Map: off-CPU time by [`OffKey`] (per-CPU hash).
pub const MAP_OFFCPU: &str = "OFFCPU";
/// Map: where each traced thread is ([`ThreadSlot`] array).
pub const MAP_THREADS: &str = "THREADS";
/// Map: `S_*` totals (per-CPU array).
pub const MAP_SCHED_TOTALS: &str = "SCHED_TOTALS";
/// Map: processes outside the traced set that woke traced threads (tgid → wakeups).
pub const MAP_WAKERS: &str = "WAKERS";
/// Entries of `WAKERS` (an LRU: the busiest wakers stay).
pub const WAKERS_ENTRIES: u32 = 256;
/// Global: `offsetof(struct task_struct, pid)`.
pub const GLOBAL_OFF_TASK_PID: &str = "OFF_TASK_PID";
/// Global: `offsetof(struct task_struct, tgid)`.
pub const GLOBAL_OFF_TASK_TGID: &str = "OFF_TASK_TGID";
/// Global: `offsetof(struct task_struct, __state)` (`state` before 5.14).
pub const GLOBAL_OFF_TASK_STATE: &str = "OFF_TASK_STATE";
/// Global: `offsetof(struct inode, i_mode)`.
pub const GLOBAL_OFF_INODE_MODE: &str = "OFF_INODE_MODE";
/// Global: `offsetof(struct inode, i_ino)`.
pub const GLOBAL_OFF_INODE_INO: &str = "OFF_INODE_INO";
/// Global: 1 when the blocked syscall can be read (`bpf_task_pt_regs`, x86_64, Linux ≥ 5.15).
/// The verifier prunes the helper call when it is 0, so the program still loads on 5.10.
pub const GLOBAL_HAVE_PT_REGS: &str = "HAVE_PT_REGS";
