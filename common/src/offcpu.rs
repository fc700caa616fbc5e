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
/// Blocked in `futex`: a user-space lock or condition variable, until another thread woke it
/// (a timed wait that ran out its timeout instead is `CLASS_SLEEP`: nobody ended it).
pub const CLASS_FUTEX: u32 = 3;
/// Waiting for work: `accept`, `epoll_wait`, `poll`, `select`, reads on a socket or pipe.
pub const CLASS_WAIT_WORK: u32 = 4;
/// Sleeping on purpose (`nanosleep`, `clock_nanosleep`, `pause`, signal waits), and futex
/// waits that ended by their own timeout (Ruby's `sleep`, Python's `Event.wait(t)`, a
/// condition variable's timed wait nobody signalled): the thread chose how long to wait.
pub const CLASS_SLEEP: u32 = 5;
/// Blocked in any other syscall (`wait4`, `connect`, `sendto`...).
pub const CLASS_OTHER: u32 = 6;
/// Blocked outside any syscall (a page fault, e.g. code paged in from a slow filesystem).
pub const CLASS_NO_SYSCALL: u32 = 7;
/// Blocked, reason unknown: the syscall could not be told (no method on this kernel, or a
/// thread already blocked when tracing began).
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

/// Syscall numbering of the traced host's architecture (a global of the eBPF programs: one
/// object serves both).
pub const ARCH_X86_64: u32 = 0;
/// arm64 (the generic table of include/uapi/asm-generic/unistd.h: no `stat`, `lstat`, `open`,
/// `access`, `readlink`...; their `*at` forms instead).
pub const ARCH_AARCH64: u32 = 1;

/// The architecture trapdetect was built for, as an `ARCH_*` (what the loader passes).
pub const fn host_arch() -> u32 {
    if cfg!(target_arch = "aarch64") {
        ARCH_AARCH64
    } else {
        ARCH_X86_64
    }
}

/// Class and argument shape of syscall `nr` on `arch`.
#[inline(always)]
pub fn class_of(arch: u32, nr: u64) -> (u32, u8) {
    if arch == ARCH_AARCH64 {
        class_of_aarch64(nr)
    } else {
        class_of_x86_64(nr)
    }
}

/// Whether syscall `nr` reads a descriptor (`read`, `readv`, `pread64`, `preadv`, `preadv2`):
/// on a socket or pipe that waits for a peer, for a worker for work.
#[inline(always)]
pub fn is_read(arch: u32, nr: u64) -> bool {
    if arch == ARCH_AARCH64 {
        matches!(nr, 63 | 65 | 67 | 69 | 286)
    } else {
        matches!(nr, 0 | 19 | 17 | 295 | 327)
    }
}

/// x86_64 (arch/x86/entry/syscalls/syscall_64.tbl).
#[inline(always)]
pub fn class_of_x86_64(nr: u64) -> (u32, u8) {
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

/// arm64 (include/uapi/asm-generic/unistd.h): the same syscalls as [`class_of_x86_64`] where
/// arm64 has them; the legacy path calls (`open`, `stat`, `access`, `rename`...), `poll`,
/// `select`, `epoll_wait`, `pause` and `getdents` do not exist there.
#[inline(always)]
pub fn class_of_aarch64(nr: u64) -> (u32, u8) {
    match nr {
        // setxattr, lsetxattr, getxattr, lgetxattr, listxattr, llistxattr, statfs, truncate,
        // chdir, execve.
        5 | 6 | 8 | 9 | 11 | 12 | 43 | 45 | 49 | 221 => (CLASS_PATH, ARG_PATH),
        // openat, mkdirat, mknodat, fchownat, newfstatat, unlinkat, renameat, linkat,
        // readlinkat, fchmodat, faccessat, utimensat, renameat2, execveat, statx, openat2,
        // faccessat2, fchmodat2.
        56 | 34 | 33 | 54 | 79 | 35 | 38 | 37 | 78 | 53 | 48 | 88 | 276 | 281 | 291 | 437 | 439
        | 452 => (CLASS_PATH, ARG_DIRFD_PATH),
        // getcwd, symlinkat.
        17 | 36 => (CLASS_PATH, ARG_NONE),
        // fchdir.
        50 => (CLASS_PATH, ARG_FD),
        // read, write, close, fstat, lseek, pread64, pwrite64, readv, writev, sendfile, fsync,
        // fdatasync, ftruncate, fchmod, fchown, fgetxattr, getdents64, fadvise64_64,
        // sync_file_range, fallocate, preadv, pwritev, syncfs, copy_file_range, preadv2,
        // pwritev2.
        63 | 64 | 57 | 80 | 62 | 67 | 68 | 65 | 66 | 71 | 82 | 83 | 46 | 52 | 55 | 10 | 61
        | 223 | 84 | 47 | 69 | 70 | 267 | 285 | 286 | 287 => (CLASS_FILE_IO, ARG_FD),
        32 => (CLASS_FILE_LOCK, ARG_FD),
        25 => (CLASS_FILE_LOCK, ARG_FCNTL),
        98 | 449 | 454 | 455 | 456 => (CLASS_FUTEX, ARG_NONE),
        // pselect6, ppoll, accept, recvfrom, recvmsg, epoll_pwait, accept4, recvmmsg,
        // epoll_pwait2.
        72 | 73 | 202 | 207 | 212 | 22 | 242 | 243 | 441 => (CLASS_WAIT_WORK, ARG_NONE),
        // nanosleep, rt_sigtimedwait, rt_sigsuspend, clock_nanosleep.
        101 | 137 | 133 | 115 => (CLASS_SLEEP, ARG_NONE),
        _ => (CLASS_OTHER, ARG_NONE),
    }
}

/// `OffKey::dev` of a `CLASS_FUTEX` key while the wait is in progress: the wait has a timeout.
/// Its time is held in the thread's slot (`ThreadSlot::timed_ns`) until the syscall returns,
/// then added under `CLASS_SLEEP` if it returned `-ETIMEDOUT`, else under `CLASS_FUTEX`
/// (dev 0). The `OFFCPU` map never holds this key.
pub const FUTEX_TIMED: u32 = 1;

/// `ETIMEDOUT`, the same number on x86_64 and arm64.
pub const ETIMEDOUT: i64 = 110;

/// Whether a blocked `futex` call is a timed wait for a value: `FUTEX_WAIT` or
/// `FUTEX_WAIT_BITSET` (any flags) or `futex_waitv`, with a timeout (`a3`, the fourth
/// argument of both, not NULL). A priority-inheritance lock with a timeout is a lock, not a
/// wait for an event, and is left out; `futex_wait` (Linux 6.7) carries its timeout in the
/// fifth argument, which is not read, and counts as untimed.
#[inline(always)]
pub fn futex_timed(arch: u32, nr: u64, op: u64, a3: u64) -> bool {
    let futex = if arch == ARCH_AARCH64 { 98 } else { 202 };
    a3 != 0 && (nr == 449 || (nr == futex && matches!(op & 0x7f, 0 | 9)))
}

/// How the kernel learns which syscall a blocked thread is in (`CLASS_METHOD`; JSON
/// `run.classes_method`).
/// Not at all: every blocked interval is `unknown`.
pub const METHOD_UNKNOWN: u32 = 0;
/// Read from the blocked thread's saved user registers at the switch (`bpf_task_pt_regs`,
/// Linux ≥ 5.15 on x86_64 and arm64): exact, no cost outside context switches.
pub const METHOD_REGS: u32 = 1;
/// Recorded at syscall entry into the thread's slot (raw tracepoints `sys_enter`/`sys_exit`,
/// any kernel): exact as well, at the cost of a program on every syscall of the host.
pub const METHOD_ENTRY: u32 = 2;
/// Stable names of the methods, `METHOD_*` order.
pub const METHOD_NAMES: [&str; 3] = ["unknown", "exact", "syscall-entry"];

/// `ThreadSlot::sc_state`: no syscall entry seen for this thread since it took the slot.
pub const SC_UNSEEN: u32 = 0;
/// The thread's last syscall returned: a block now is outside any syscall.
pub const SC_NONE: u32 = 1;
/// The thread is in syscall `sc_nr`.
pub const SC_IN: u32 = 2;

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
    /// `SC_*`: whether the thread is in a syscall (method `METHOD_ENTRY`).
    pub sc_state: u32,
    /// The syscall it entered (`SC_IN`).
    pub sc_nr: u32,
    /// Its saved user registers (`struct pt_regs *`, from `sys_enter`): the arguments are
    /// read from there when it blocks.
    pub sc_regs: u64,
    /// Blocked time of the timed futex wait it is in (`FUTEX_TIMED`), ns, not yet added to
    /// `OFFCPU`: the call's result says under which class.
    pub timed_ns: u64,
    /// Blocked time, ns, since the thread took the slot, of the waits that are a thread
    /// waiting for work ([`waits_for_work`]): a thread's share of time at work is read from
    /// it, not from where a once-a-second sample happens to find the thread (a master that
    /// wakes once a second to manage its pool is found awake at every sample when the two
    /// clocks keep step).
    pub idle_ns: u64,
}

/// Whether a thread blocked for `key` waits for work: in a wait-for-work syscall, or parked
/// on a futex without a timeout (an idle pool thread waits on a condition variable: Go's
/// parked Ms, Node's libuv pool, a gthread worker waiting for its queue). A futex wait with a
/// timeout is a deadline the thread set itself (Ruby's `sleep`, Python's `Event.wait(t)`
/// inside a request) and is work, as a `nanosleep` is.
#[inline(always)]
pub fn waits_for_work(key: &OffKey) -> bool {
    key.class == CLASS_WAIT_WORK || (key.class == CLASS_FUTEX && key.dev != FUTEX_TIMED)
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
/// Blocks whose syscall entry was not seen (the thread was in it when tracing began).
pub const S_ENTRY_UNSEEN: u32 = 7;
/// Of the run-queue delay, the waits that ended with the CPU leaving its idle task: the thread
/// waited for an idle CPU to wake (an interrupt through the host on a virtual machine), not
/// behind another thread, ns.
pub const S_RUNQ_IDLE_NS: u32 = 8;
/// Of the run-queue delay, the waits that ended with another traced thread switching out: the
/// thread queued behind the target's own threads, ns.
pub const S_RUNQ_SELF_NS: u32 = 9;
/// Number of slots.
pub const NUM_SCHED_SLOTS: u32 = 10;

/// Key of the `WAKERS` map: a process that woke a traced thread, and the filesystem the thread
/// was waiting on (`s_dev` when it was blocked in a path or file I/O syscall there, else 0): a
/// FUSE daemon's answers end waits on its mount.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WakerKey {
    /// The waker's tgid.
    pub tgid: u32,
    /// The filesystem the woken thread waited on, 0 when none.
    pub dev: u32,
}

/// Key of the `STACK_WAKERS` map: who woke which process of the stack.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackKey {
    /// The waker's tgid.
    pub waker: u32,
    /// The woken stack process's tgid.
    pub wakee: u32,
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for WakerKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for StackKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for OffKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for OffVal {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for ThreadSlot {}

/// Program: `tp_btf/sched_switch`, closes and opens intervals.
pub const PROG_OFFCPU_SWITCH: &str = "offcpu_sched_switch";
/// Program: `tp_btf/sched_waking`, a blocked thread is woken (in the waker's context).
pub const PROG_OFFCPU_WAKEUP: &str = "offcpu_sched_wakeup";
/// Program: `tp_btf/sched_wakeup_new`, a new thread becomes runnable.
pub const PROG_OFFCPU_WAKEUP_NEW: &str = "offcpu_sched_wakeup_new";
/// Program: `raw_tp/sched_switch`, where `tp_btf` cannot load (no kernel BTF, Linux < 5.5).
pub const PROG_OFFCPU_SWITCH_RAW: &str = "offcpu_sched_switch_raw";
/// Program: `raw_tp/sched_waking`.
pub const PROG_OFFCPU_WAKEUP_RAW: &str = "offcpu_sched_wakeup_raw";
/// Program: `raw_tp/sched_wakeup_new`.
pub const PROG_OFFCPU_WAKEUP_NEW_RAW: &str = "offcpu_sched_wakeup_new_raw";
/// Program: `raw_tp/sys_enter`, records the syscall a traced thread enters (`METHOD_ENTRY`).
pub const PROG_OFFCPU_SYS_ENTER: &str = "offcpu_sys_enter";
/// Program: `raw_tp/sys_exit`, the traced thread left its syscall.
pub const PROG_OFFCPU_SYS_EXIT: &str = "offcpu_sys_exit";
/// Program: `raw_tp/hrtimer_expire_entry`, a high-resolution timer's callback begins on this
/// CPU: the wakeups it makes are the timer's, not the interrupted process's.
pub const PROG_OFFCPU_TIMER_ENTRY: &str = "offcpu_timer_entry";
/// Program: `raw_tp/hrtimer_expire_exit`, that callback ended.
pub const PROG_OFFCPU_TIMER_EXIT: &str = "offcpu_timer_exit";
/// Map: off-CPU time by [`OffKey`] (per-CPU hash).
pub const MAP_OFFCPU: &str = "OFFCPU";
/// Map: where each traced thread is ([`ThreadSlot`] array).
pub const MAP_THREADS: &str = "THREADS";
/// Map: `S_*` totals (per-CPU array).
pub const MAP_SCHED_TOTALS: &str = "SCHED_TOTALS";
/// Map: processes outside the traced set that woke traced threads ([`WakerKey`] → wakeups).
pub const MAP_WAKERS: &str = "WAKERS";
/// Map: processes outside the traced set and the stack that woke a stack process
/// (`TRACED_STACK`) from a system call ([`StackKey`] → wakeups).
pub const MAP_STACK_WAKERS: &str = "STACK_WAKERS";
/// Entries of `WAKERS` and of `STACK_WAKERS` (LRUs: the busiest wakers stay).
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
/// Global: 1 when the blocked syscall is read from the task's registers (`METHOD_REGS`:
/// `bpf_task_pt_regs`, Linux ≥ 5.15). The verifier prunes the helper call when it is 0, so
/// the program still loads on 5.10.
pub const GLOBAL_HAVE_PT_REGS: &str = "HAVE_PT_REGS";
/// Global: `ARCH_*`, which syscall table the numbers are.
pub const GLOBAL_SYSCALL_ARCH: &str = "SYSCALL_ARCH";
/// Global: offset in `struct pt_regs` of the syscall number (x86_64 `orig_ax`, arm64
/// `syscallno`), from BTF.
pub const GLOBAL_REG_NR_OFF: &str = "REG_NR_OFF";
/// Global: offset in `struct pt_regs` of the first argument (x86_64 `di`, arm64 `orig_x0`).
pub const GLOBAL_REG_A0_OFF: &str = "REG_A0_OFF";
/// Global: offset in `struct pt_regs` of the second argument (x86_64 `si`, arm64 `regs[1]`).
pub const GLOBAL_REG_A1_OFF: &str = "REG_A1_OFF";

#[cfg(test)]
mod tests {
    use super::*;

    /// What glibc, Ruby and Python issue: `pthread_cond_timedwait` and `sem_clockwait` are
    /// `FUTEX_WAIT_BITSET_PRIVATE` (9 | 128) with a timeout, `pthread_cond_wait` the same with
    /// NULL, a contended `pthread_mutex_lock` `FUTEX_WAIT_PRIVATE` (0 | 128) with NULL.
    #[test]
    fn a_futex_wait_is_timed_only_with_a_timeout_and_a_wait_op() {
        let x = ARCH_X86_64;
        assert!(futex_timed(x, 202, 9 | 128, 0x7ffd_0000));
        assert!(
            futex_timed(x, 202, 9 | 128 | 256, 0x7ffd_0000),
            "FUTEX_CLOCK_REALTIME"
        );
        assert!(futex_timed(x, 202, 0, 0x7ffd_0000));
        assert!(!futex_timed(x, 202, 9 | 128, 0), "no timeout");
        assert!(
            !futex_timed(x, 202, 6 | 128, 0x7ffd_0000),
            "FUTEX_LOCK_PI: a lock"
        );
        assert!(
            !futex_timed(x, 98, 9, 0x7ffd_0000),
            "arm64's number on x86_64: not futex"
        );
        assert!(futex_timed(x, 449, 0, 0x7ffd_0000), "futex_waitv");
        assert!(
            !futex_timed(x, 455, 0, 0x7ffd_0000),
            "futex_wait: timeout not read"
        );
        assert!(futex_timed(ARCH_AARCH64, 98, 9 | 128, 0xffff_0000));
        assert!(
            !futex_timed(ARCH_AARCH64, 202, 9 | 128, 0xffff_0000),
            "arm64 202: accept"
        );
    }
}
