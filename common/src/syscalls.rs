//! The path syscalls trapdetect traces: one `sys_enter_*` program each (a program must not read
//! past the smallest record it is attached to), one shared `sys_exit_*` program.
//!
//! Offsets are those of the x86_64 `syscalls:sys_enter_*` records (nr at 8, arguments as 8-byte
//! slots from 16); the loader checks them against tracefs before attaching.

/// One traced syscall: its index in the per-kind maps and where its arguments sit.
#[derive(Clone, Copy, Debug)]
pub struct SyscallSpec {
    /// Kernel name, as in `sys_enter_<name>`.
    pub name: &'static str,
    /// Index into per-kind maps.
    pub kind: u16,
    /// Offset of the `dfd` argument, 0 when the syscall has none (relative to the cwd).
    pub dfd_off: u16,
    /// Offset of the path argument, 0 when the syscall takes no path.
    pub path_off: u16,
    /// Offset of a flags argument that may hold `AT_SYMLINK_NOFOLLOW`/`AT_EMPTY_PATH`, or 0.
    pub flags_off: u16,
    /// Offset of an `fd` argument the call acts on (fchdir), or 0.
    pub fd_off: u16,
}

macro_rules! kinds {
    ($($konst:ident = $idx:literal, $name:literal, dfd $dfd:literal, path $path:literal, flags $flags:literal, fd $fd:literal;)*) => {
        $(
            #[doc = concat!("Kind index of `", $name, "`.")]
            pub const $konst: u16 = $idx;
        )*
        /// Every traced path syscall, indexed by kind.
        pub const SYSCALLS: &[SyscallSpec] = &[
            $(SyscallSpec { name: $name, kind: $idx, dfd_off: $dfd, path_off: $path, flags_off: $flags, fd_off: $fd },)*
        ];
    };
}

kinds! {
    K_NEWSTAT = 0, "newstat", dfd 0, path 16, flags 0, fd 0;
    K_NEWLSTAT = 1, "newlstat", dfd 0, path 16, flags 0, fd 0;
    K_NEWFSTATAT = 2, "newfstatat", dfd 16, path 24, flags 40, fd 0;
    K_STATX = 3, "statx", dfd 16, path 24, flags 32, fd 0;
    K_CHDIR = 4, "chdir", dfd 0, path 16, flags 0, fd 0;
    K_FCHDIR = 5, "fchdir", dfd 0, path 0, flags 0, fd 16;
    K_GETCWD = 6, "getcwd", dfd 0, path 0, flags 0, fd 0;
    K_ACCESS = 7, "access", dfd 0, path 16, flags 0, fd 0;
    K_FACCESSAT = 8, "faccessat", dfd 16, path 24, flags 0, fd 0;
    K_FACCESSAT2 = 9, "faccessat2", dfd 16, path 24, flags 40, fd 0;
    K_OPEN = 10, "open", dfd 0, path 16, flags 0, fd 0;
    K_OPENAT = 11, "openat", dfd 16, path 24, flags 0, fd 0;
    K_OPENAT2 = 12, "openat2", dfd 16, path 24, flags 0, fd 0;
    K_READLINK = 13, "readlink", dfd 0, path 16, flags 0, fd 0;
    K_READLINKAT = 14, "readlinkat", dfd 16, path 24, flags 0, fd 0;
}

/// Traced path syscalls that only x86_64 has: arm64's generic table has none of them (glibc and
/// musl call `newfstatat`, `faccessat`, `openat`, `readlinkat` there), so the compatibility
/// table does not list them on arm64 at all.
pub const X86_64_ONLY: &[&str] = &["newstat", "newlstat", "access", "open", "readlink"];

/// The traced path syscalls this architecture has (`arch`: an `offcpu::ARCH_*`).
pub fn on_arch(arch: u32) -> impl Iterator<Item = &'static SyscallSpec> {
    SYSCALLS
        .iter()
        .filter(move |s| arch != crate::offcpu::ARCH_AARCH64 || !X86_64_ONLY.contains(&s.name))
}

/// Number of traced syscall kinds.
pub const NUM_KINDS: u32 = 15;

/// `KIND_COUNTS` (per-CPU array, one slot per kind) counts every completed call, including
/// calls whose path key was evicted from `PATH_STATS`: the difference is what went unattributed.
pub const KIND_COUNTS_SLOTS: u32 = NUM_KINDS;
