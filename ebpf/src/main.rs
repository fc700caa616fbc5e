#![no_std]
#![no_main]
//! trapdetect's eBPF programs. Tracepoints only (fentry/fexit/kprobes are unavailable on
//! locked-down kernels). One module per probe family; every program is a thin entry point.

mod connect;
mod fuse;
mod kernel;
mod process;
mod served;
mod syscalls;
mod tcp;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
