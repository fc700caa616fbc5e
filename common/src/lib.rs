#![no_std]
#![deny(missing_docs)]
//! Types shared by trapdetect's eBPF programs and its loader.
//!
//! Everything a map key, map value or ring-buffer record is made of is defined here once, as
//! `#[repr(C)]`, so the kernel side and the user side cannot disagree about a layout. The
//! feature `user` adds the `aya::Pod` impls the loader needs to read them.

pub mod counters;
pub mod fuse;
pub mod hist;
mod layout;
pub mod names;
pub mod offcpu;
pub mod paths;
pub mod process;
pub mod records;
pub mod served;
pub mod syscalls;
pub mod tcp;

/// `AT_FDCWD`: a `dfd` argument meaning "relative to the working directory".
pub const AT_FDCWD: i32 = -100;
/// `AT_SYMLINK_NOFOLLOW` in `newfstatat`'s flags: what glibc's `lstat(3)` passes.
pub const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
/// `AT_EMPTY_PATH`: operate on `dfd` itself (glibc's `fstat(3)` is `newfstatat(fd, "", ..)`).
pub const AT_EMPTY_PATH: u64 = 0x1000;

/// `TRACED` flag: the process is traced (path syscalls, accepts, FUSE requests).
pub const TRACED_TARGET: u8 = 1;
/// `TRACED` flag: the process is a watched client (`--watch-client`): its connect() calls are
/// timed. A second bit of the same byte, so one inlined array lookup answers both and forks
/// are followed for both.
pub const TRACED_CLIENT: u8 = 2;
/// `TRACED` flag: the process is part of the benchmark's stack without being traced (it woke
/// the traced set, or another such process, from its system calls, often enough: user space
/// decides and sets it, `run` only): who wakes it is counted too, so a chain of processes
/// that serves the target (a FUSE daemon and its transport, an upstream's database) is the
/// stack, not the host's noise. Forks do not inherit it.
pub const TRACED_STACK: u8 = 4;
/// `TRACED` flag on a thread id (not a process's): a thread the target's runtime runs for
/// itself and names (the JVM's compiler, garbage collector and service threads). Its time on
/// and queued for a CPU counts; its blocked time does not: a JIT compiler thread waiting for
/// methods to compile or a periodic task thread sleeping between ticks waits for the
/// runtime's own events, not for anything a request needs. User space decides, thread by
/// thread (`run` only); the thread's exit clears it and forks do not inherit it.
pub const TRACED_RUNTIME: u8 = 8;
