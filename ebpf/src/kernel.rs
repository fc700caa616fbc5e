//! Kernel structure walks and tracepoint-record reads shared by the probe families.
//!
//! aya's Rust eBPF side has no CO-RE relocations, so every struct offset is a `.rodata` global
//! the loader fills in from /sys/kernel/btf/vmlinux before load.

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_current_task, bpf_probe_read_kernel},
    maps::PerCpuArray,
    programs::TracePointContext,
};

macro_rules! global {
    ($($name:ident),*) => {
        $(
            #[unsafe(no_mangle)]
            pub static $name: u32 = 0;
        )*
    };
}
global!(
    OFF_TASK_FS,
    OFF_TASK_FILES,
    OFF_FS_PWD_DENTRY,
    OFF_DENTRY_SB,
    OFF_SB_DEV,
    OFF_FILES_FDT,
    OFF_FDT_MAX_FDS,
    OFF_FDT_FD,
    OFF_FILE_INODE,
    OFF_INODE_SB,
    OFF_FILE_PRIVATE,
    OFF_SOCKET_SK,
    OFF_SK_PROTOCOL,
    OFF_SK_NET,
    OFF_NET_INUM
);

/// Reads a `.rodata` global the loader overrode (volatile: the compiler must not fold the 0).
#[inline(always)]
pub fn global(g: &'static u32) -> usize {
    unsafe { core::ptr::read_volatile(g) as usize }
}

/// Aligned read at a constant offset of a tracepoint record. Unaligned reads compile to byte
/// loads through a derived pointer, which the verifier rejects.
#[inline(always)]
pub fn tp_u64(ctx: &TracePointContext, off: usize) -> u64 {
    unsafe { core::ptr::read_volatile(ctx.as_ptr().cast::<u8>().add(off).cast::<u64>()) }
}

/// Aligned 32-bit read of a tracepoint record.
#[inline(always)]
pub fn tp_u32(ctx: &TracePointContext, off: usize) -> u32 {
    unsafe { core::ptr::read_volatile(ctx.as_ptr().cast::<u8>().add(off).cast::<u32>()) }
}

#[inline(always)]
pub fn read_ptr(base: u64, off: usize) -> Option<u64> {
    if base == 0 {
        return None;
    }
    let v = unsafe { bpf_probe_read_kernel((base as usize + off) as *const u64) }.ok()?;
    if v == 0 { None } else { Some(v) }
}

/// A 64-bit kernel value, zero included (`read_ptr` takes 0 for "none").
#[inline(always)]
pub fn read_u64(base: u64, off: usize) -> Option<u64> {
    if base == 0 {
        return None;
    }
    unsafe { bpf_probe_read_kernel((base as usize + off) as *const u64) }.ok()
}

#[inline(always)]
pub fn read_u32(base: u64, off: usize) -> Option<u32> {
    if base == 0 {
        return None;
    }
    unsafe { bpf_probe_read_kernel((base as usize + off) as *const u32) }.ok()
}

#[inline(always)]
pub fn read_u16(base: u64, off: usize) -> Option<u16> {
    if base == 0 {
        return None;
    }
    unsafe { bpf_probe_read_kernel((base as usize + off) as *const u16) }.ok()
}

#[inline(always)]
pub fn read_u8(base: u64, off: usize) -> Option<u8> {
    if base == 0 {
        return None;
    }
    unsafe { bpf_probe_read_kernel((base as usize + off) as *const u8) }.ok()
}

/// `s_dev` of the superblock of `dentry`.
#[inline(always)]
fn dentry_dev(dentry: u64) -> Option<u32> {
    let sb = read_ptr(dentry, global(&OFF_DENTRY_SB))?;
    read_u32(sb, global(&OFF_SB_DEV))
}

/// `s_dev` of the current task's working directory (0 if it cannot be read).
#[inline(always)]
pub fn cwd_dev() -> u32 {
    let task = unsafe { bpf_get_current_task() };
    let dev = (|| {
        let fs = read_ptr(task, global(&OFF_TASK_FS))?;
        let dentry = read_ptr(fs, global(&OFF_FS_PWD_DENTRY))?;
        dentry_dev(dentry)
    })();
    dev.unwrap_or(0)
}

/// The `struct file` behind the current task's file descriptor `fd`.
#[inline(always)]
pub fn fd_file(fd: u64) -> Option<u64> {
    let task = unsafe { bpf_get_current_task() };
    let files = read_ptr(task, global(&OFF_TASK_FILES))?;
    let fdt = read_ptr(files, global(&OFF_FILES_FDT))?;
    let max = read_u32(fdt, global(&OFF_FDT_MAX_FDS))? as u64;
    if fd >= max {
        return None;
    }
    let arr = read_ptr(fdt, global(&OFF_FDT_FD))?;
    read_ptr(arr, (fd as usize) * 8)
}

/// `s_dev` of the filesystem behind the current task's file descriptor `fd` (0 if unknown).
#[inline(always)]
pub fn fd_dev(fd: u64) -> u32 {
    let dev = (|| {
        let file = fd_file(fd)?;
        let inode = read_ptr(file, global(&OFF_FILE_INODE))?;
        let sb = read_ptr(inode, global(&OFF_INODE_SB))?;
        read_u32(sb, global(&OFF_SB_DEV))
    })();
    dev.unwrap_or(0)
}

/// Whether the current task's descriptor `fd` is a TCP socket (`sk_protocol`). `None` when it
/// cannot be told (no socket offsets from BTF, or a read failed). Only called for watched
/// clients, never on a hot path.
#[inline(always)]
pub fn fd_is_tcp(fd: u64) -> Option<bool> {
    if global(&OFF_SOCKET_SK) == 0 {
        return None;
    }
    let file = fd_file(fd)?;
    let socket = read_ptr(file, global(&OFF_FILE_PRIVATE))?;
    let sk = read_ptr(socket, global(&OFF_SOCKET_SK))?;
    let proto = read_u32(sk, global(&OFF_SK_PROTOCOL))? & 0xffff;
    Some(proto == trapdetect_common::tcp::IPPROTO_TCP)
}

/// Inode number of the network namespace of socket `sk` (what /proc/PID/ns/net shows).
#[inline(always)]
pub fn sock_netns(sk: u64) -> Option<u32> {
    let net = read_ptr(sk, global(&OFF_SK_NET))?;
    read_u32(net, global(&OFF_NET_INUM))
}

/// Adds `by` to slot `idx` of a per-CPU counter array (per-CPU: no atomics needed, and the
/// BPF target has no 64-bit atomic add in aya-ebpf 0.2).
#[inline(always)]
pub fn add(map: &PerCpuArray<u64>, idx: u32, by: u64) {
    if let Some(p) = map.get_ptr_mut(idx) {
        unsafe { *p += by };
    }
}
