//! tracefs: where tracepoints are found and where their record layouts are published.
//!
//! When it is not mounted, trapdetect mounts it in a mount namespace of its own (made private
//! first, so nothing propagates to the host): the mount vanishes with the process, even on
//! SIGKILL, and two tracers never unmount it under each other. Only if that namespace cannot be
//! made does it mount on the host and unmount on drop.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const TRACEFS: &str = "/sys/kernel/tracing";
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// The tracefs we use; unmounts it on drop if we mounted it.
pub struct Tracefs {
    /// Root of tracefs.
    pub root: PathBuf,
    mounted_by_us: bool,
}

/// Moves this process into a new mount namespace whose mounts are all private. Works only
/// while the process is single-threaded (threads share the filesystem context), which is why
/// it happens before anything else starts; returns false when it could not.
fn enter_private_mount_namespace() -> bool {
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        // Without this, a mount under a shared mount (systemd's default for /) would
        // propagate back to the host namespace.
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
    }
}

fn populated(p: &Path) -> bool {
    p.join("events").is_dir()
}

impl Tracefs {
    /// Finds tracefs, mounting it at /sys/kernel/tracing if nothing is mounted.
    pub fn ensure() -> Result<Self> {
        for p in [TRACEFS, DEBUGFS_TRACING] {
            if populated(Path::new(p)) {
                return Ok(Tracefs {
                    root: p.into(),
                    mounted_by_us: false,
                });
            }
        }
        let private = enter_private_mount_namespace();
        let target = std::ffi::CString::new(TRACEFS).expect("no NUL");
        let rc = unsafe {
            libc::mount(
                c"nodev".as_ptr(),
                target.as_ptr(),
                c"tracefs".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::Kernel(format!(
                "tracefs is not mounted and mounting it at {TRACEFS} failed ({e}); mount it with \
                 `mount -t tracefs nodev {TRACEFS}` (needs CAP_SYS_ADMIN)"
            )));
        }
        Ok(Tracefs {
            root: TRACEFS.into(),
            // In our own namespace the mount dies with us: nothing to undo.
            mounted_by_us: !private,
        })
    }

    /// Whether `category/name` exists on this kernel.
    pub fn has_event(&self, category: &str, name: &str) -> bool {
        self.root.join("events").join(category).join(name).is_dir()
    }

    /// Offset of `field` in the record of `category/name`, from its `format` file.
    pub fn field_offset(&self, category: &str, name: &str, field: &str) -> Option<u32> {
        let text = std::fs::read_to_string(
            self.root
                .join("events")
                .join(category)
                .join(name)
                .join("format"),
        )
        .ok()?;
        parse_field_offset(&text, field)
    }
}

/// Parses `field:<decl> <name>;\toffset:N;` lines of a tracepoint format file.
pub fn parse_field_offset(format: &str, field: &str) -> Option<u32> {
    for line in format.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let Some((decl, tail)) = rest.split_once(';') else {
            continue;
        };
        let name = decl.split_whitespace().last()?.trim_start_matches('*');
        let name = name.split('[').next().unwrap_or(name);
        if name != field {
            continue;
        }
        let off = tail
            .split(';')
            .find_map(|p| p.trim().strip_prefix("offset:"))?;
        return off.trim().parse().ok();
    }
    None
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            let target =
                std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes()).expect("no NUL");
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_offsets_old_and_new_fork_layouts() {
        let new = include_str!("../../fixtures/tracefs/sched_process_fork-6.18.format");
        assert_eq!(parse_field_offset(new, "parent_pid"), Some(12));
        assert_eq!(parse_field_offset(new, "child_pid"), Some(20));
        let old = include_str!("../../fixtures/tracefs/sched_process_fork-5.15.format");
        assert_eq!(parse_field_offset(old, "parent_pid"), Some(24));
        assert_eq!(parse_field_offset(old, "child_pid"), Some(44));
        assert_eq!(parse_field_offset(old, "parent_comm"), Some(8));
        assert_eq!(parse_field_offset(old, "nope"), None);
        // tcp_probe: the eBPF program's defaults are this kernel's offsets.
        let probe = include_str!("../../fixtures/tracefs/tcp_probe-6.18.format");
        assert_eq!(parse_field_offset(probe, "sport"), Some(64));
        assert_eq!(parse_field_offset(probe, "data_len"), Some(76));
        assert_eq!(parse_field_offset(probe, "snd_nxt"), Some(80));
        assert_eq!(parse_field_offset(probe, "skaddr"), Some(128));
        let openat = include_str!("../../fixtures/tracefs/sys_enter_openat.format");
        assert_eq!(parse_field_offset(openat, "filename"), Some(24));
        assert_eq!(parse_field_offset(openat, "dfd"), Some(16));
    }
}
