//! The path syscalls trapdetect traces, by number: one raw `sys_enter` program and one raw
//! `sys_exit` program serve them all (and `accept`, and `connect` for `--watch-client`). The
//! programs dispatch on the syscall number the kernel hands the raw tracepoint, through the
//! table of the architecture trapdetect was built for, and read the arguments from the saved
//! registers (`struct pt_regs`, offsets from BTF).
//!
//! Why raw tracepoints and not one `syscalls:sys_enter_*` program per call: a perf-event
//! tracepoint takes a grace period to detach (`tracepoint_synchronize_unregister()` under the
//! kernel's `event_mutex`, ~70 ms each here), so 37 of them made every trace 2.6 s longer; a
//! raw tracepoint detaches at once, and the kernel fills no record before the program runs.

/// Argument index meaning "no such argument".
pub const NO_ARG: u8 = 0xff;

/// One traced syscall: its index in the per-kind maps, its numbers, and where its arguments sit.
#[derive(Clone, Copy, Debug)]
pub struct SyscallSpec {
    /// Kernel name, as in `sys_enter_<name>`.
    pub name: &'static str,
    /// Index into per-kind maps.
    pub kind: u16,
    /// Number on x86_64 (arch/x86/entry/syscalls/syscall_64.tbl).
    pub nr_x86_64: u32,
    /// Number on arm64 (include/uapi/asm-generic/unistd.h), `NO_NR` where arm64 lacks it.
    pub nr_aarch64: u32,
    /// Index of the `dfd` argument, `NO_ARG` when the syscall has none (relative to the cwd).
    pub dfd_arg: u8,
    /// Index of the path argument, `NO_ARG` when the syscall takes no path.
    pub path_arg: u8,
    /// Index of a flags argument that may hold `AT_SYMLINK_NOFOLLOW`/`AT_EMPTY_PATH`, or `NO_ARG`.
    pub flags_arg: u8,
    /// Index of an `fd` argument the call acts on (fchdir), or `NO_ARG`.
    pub fd_arg: u8,
}

/// `nr_aarch64` of a syscall arm64 does not have.
pub const NO_NR: u32 = u32::MAX;

macro_rules! kinds {
    ($($konst:ident = $idx:literal, $name:literal, x86_64 $x:expr, aarch64 $a:expr, dfd $dfd:expr, path $path:expr, flags $flags:expr, fd $fd:expr;)*) => {
        $(
            #[doc = concat!("Kind index of `", $name, "`.")]
            pub const $konst: u16 = $idx;
        )*
        /// Every traced path syscall, indexed by kind.
        pub const SYSCALLS: &[SyscallSpec] = &[
            $(SyscallSpec { name: $name, kind: $idx, nr_x86_64: $x, nr_aarch64: $a, dfd_arg: $dfd, path_arg: $path, flags_arg: $flags, fd_arg: $fd },)*
        ];
    };
}

const N: u8 = NO_ARG;

kinds! {
    K_NEWSTAT = 0, "newstat", x86_64 4, aarch64 NO_NR, dfd N, path 0, flags N, fd N;
    K_NEWLSTAT = 1, "newlstat", x86_64 6, aarch64 NO_NR, dfd N, path 0, flags N, fd N;
    K_NEWFSTATAT = 2, "newfstatat", x86_64 262, aarch64 79, dfd 0, path 1, flags 3, fd N;
    K_STATX = 3, "statx", x86_64 332, aarch64 291, dfd 0, path 1, flags 2, fd N;
    K_CHDIR = 4, "chdir", x86_64 80, aarch64 49, dfd N, path 0, flags N, fd N;
    K_FCHDIR = 5, "fchdir", x86_64 81, aarch64 50, dfd N, path N, flags N, fd 0;
    K_GETCWD = 6, "getcwd", x86_64 79, aarch64 17, dfd N, path N, flags N, fd N;
    K_ACCESS = 7, "access", x86_64 21, aarch64 NO_NR, dfd N, path 0, flags N, fd N;
    K_FACCESSAT = 8, "faccessat", x86_64 269, aarch64 48, dfd 0, path 1, flags N, fd N;
    K_FACCESSAT2 = 9, "faccessat2", x86_64 439, aarch64 439, dfd 0, path 1, flags 3, fd N;
    K_OPEN = 10, "open", x86_64 2, aarch64 NO_NR, dfd N, path 0, flags N, fd N;
    K_OPENAT = 11, "openat", x86_64 257, aarch64 56, dfd 0, path 1, flags N, fd N;
    K_OPENAT2 = 12, "openat2", x86_64 437, aarch64 437, dfd 0, path 1, flags N, fd N;
    K_READLINK = 13, "readlink", x86_64 89, aarch64 NO_NR, dfd N, path 0, flags N, fd N;
    K_READLINKAT = 14, "readlinkat", x86_64 267, aarch64 78, dfd 0, path 1, flags N, fd N;
}

/// Number of traced path syscall kinds.
pub const NUM_KINDS: u32 = 15;

/// Not a path syscall, dispatched by the same programs: `accept`/`accept4` of a traced process
/// (the request denominator), marked in its in-flight slot at entry.
pub const K_ACCEPT: u16 = 15;
/// `connect` of a watched client (`--watch-client`).
pub const K_CONNECT: u16 = 16;
/// An in-flight slot marked from user space at attach: the thread was already in a path call
/// (its exit is counted as not timed).
pub const K_IN_FLIGHT_AT_ATTACH: u16 = 17;

/// The kind of syscall `nr` on `arch` (an `offcpu::ARCH_*`), if the programs dispatch it: a
/// path kind, `K_ACCEPT` or `K_CONNECT`. A chain of compares the compiler turns into a few
/// branches: the cost every syscall of the host pays.
#[inline(always)]
pub fn kind_of(arch: u32, nr: u64) -> Option<u16> {
    if arch == crate::offcpu::ARCH_AARCH64 {
        match nr {
            79 => Some(K_NEWFSTATAT),
            291 => Some(K_STATX),
            49 => Some(K_CHDIR),
            50 => Some(K_FCHDIR),
            17 => Some(K_GETCWD),
            48 => Some(K_FACCESSAT),
            439 => Some(K_FACCESSAT2),
            56 => Some(K_OPENAT),
            437 => Some(K_OPENAT2),
            78 => Some(K_READLINKAT),
            202 | 242 => Some(K_ACCEPT),
            203 => Some(K_CONNECT),
            _ => None,
        }
    } else {
        match nr {
            4 => Some(K_NEWSTAT),
            6 => Some(K_NEWLSTAT),
            262 => Some(K_NEWFSTATAT),
            332 => Some(K_STATX),
            80 => Some(K_CHDIR),
            81 => Some(K_FCHDIR),
            79 => Some(K_GETCWD),
            21 => Some(K_ACCESS),
            269 => Some(K_FACCESSAT),
            439 => Some(K_FACCESSAT2),
            2 => Some(K_OPEN),
            257 => Some(K_OPENAT),
            437 => Some(K_OPENAT2),
            89 => Some(K_READLINK),
            267 => Some(K_READLINKAT),
            43 | 288 => Some(K_ACCEPT),
            42 => Some(K_CONNECT),
            _ => None,
        }
    }
}

/// `SYSCALL_FEATURES` bit: count the accepts of traced processes (`sys_exit_accept`).
pub const F_ACCEPTS: u32 = 1;
/// `SYSCALL_FEATURES` bit: time the connects of watched clients (`--watch-client`).
pub const F_CONNECT: u32 = 2;
/// `SYSCALL_FEATURES` bit: the off-CPU programs are attached (`run`): a traced thread's exit
/// from a timed futex wait adds its blocked time under the class its result names.
pub const F_FUTEX_RESULT: u32 = 4;

/// Global (`[u32; 4]`): `struct pt_regs` offsets of the first four arguments (x86_64 `di`,
/// `si`, `dx`, `r10`; arm64 `orig_x0`, `regs[1..4]`).
pub const GLOBAL_REG_ARG_OFF: &str = "REG_ARG_OFF";
/// Global: `struct pt_regs` offset of the register that tells a 32-bit (compat) syscall
/// (x86_64 `cs`, arm64 `pstate`).
pub const GLOBAL_REG_COMPAT_OFF: &str = "REG_COMPAT_OFF";
/// Global: the mask applied to that register (0: not told).
pub const GLOBAL_COMPAT_MASK: &str = "COMPAT_MASK";
/// Global: the masked value of a compat task (`__USER32_CS`, `PSR_MODE32_BIT`).
pub const GLOBAL_COMPAT_VALUE: &str = "COMPAT_VALUE";
/// Global: `F_*` bits, which parts of the dispatch run.
pub const GLOBAL_SYSCALL_FEATURES: &str = "SYSCALL_FEATURES";

/// Traced path syscalls that only x86_64 has: arm64's generic table has none of them (glibc and
/// musl call `newfstatat`, `faccessat`, `openat`, `readlinkat` there).
pub const X86_64_ONLY: &[&str] = &["newstat", "newlstat", "access", "open", "readlink"];

/// The traced path syscalls this architecture has (`arch`: an `offcpu::ARCH_*`).
pub fn on_arch(arch: u32) -> impl Iterator<Item = &'static SyscallSpec> {
    SYSCALLS
        .iter()
        .filter(move |s| arch != crate::offcpu::ARCH_AARCH64 || s.nr_aarch64 != NO_NR)
}

/// `KIND_COUNTS` (per-CPU array, one slot per kind) counts every completed call, including
/// calls whose path key was evicted from `PATH_STATS`: the difference is what went unattributed.
pub const KIND_COUNTS_SLOTS: u32 = NUM_KINDS;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offcpu::{ARCH_AARCH64, ARCH_X86_64};

    /// The dispatch by number and the table agree, on both architectures, and the numbers are
    /// the path calls' in the class table `run` uses.
    #[test]
    fn dispatch_matches_the_table_on_both_architectures() {
        for s in SYSCALLS {
            for (arch, nr, class_of) in [
                (
                    ARCH_X86_64,
                    s.nr_x86_64,
                    crate::offcpu::class_of_x86_64 as fn(u64) -> _,
                ),
                (ARCH_AARCH64, s.nr_aarch64, crate::offcpu::class_of_aarch64),
            ] {
                if nr == NO_NR {
                    assert!(X86_64_ONLY.contains(&s.name), "{}", s.name);
                    continue;
                }
                assert_eq!(kind_of(arch, nr as u64), Some(s.kind), "{} {arch}", s.name);
                let class = class_of(nr as u64).0;
                assert_eq!(class, crate::offcpu::CLASS_PATH, "{} {arch}", s.name);
            }
        }
        // accept, accept4 and connect, from each architecture's table.
        for (arch, accepts, connect) in [
            (ARCH_X86_64, [43, 288], 42),
            (ARCH_AARCH64, [202, 242], 203),
        ] {
            for nr in accepts {
                assert_eq!(kind_of(arch, nr), Some(K_ACCEPT));
            }
            assert_eq!(kind_of(arch, connect), Some(K_CONNECT));
        }
        // Every other number of either table is not dispatched.
        let dispatched = (0..512u64)
            .filter(|n| kind_of(ARCH_X86_64, *n).is_some())
            .count();
        assert_eq!(dispatched, SYSCALLS.len() + 3);
        let arm = (0..512u64)
            .filter(|n| kind_of(ARCH_AARCH64, *n).is_some())
            .count();
        assert_eq!(arm, SYSCALLS.len() - X86_64_ONLY.len() + 3);
        assert_eq!(
            on_arch(ARCH_AARCH64).count(),
            SYSCALLS.len() - X86_64_ONLY.len()
        );
        assert_eq!(NUM_KINDS as usize, SYSCALLS.len());
    }
}
