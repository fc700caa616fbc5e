//! tracefs: where tracepoints are found and where their record layouts are published.
//!
//! When it is not mounted, trapdetect mounts it in a mount namespace of its own (made private
//! first, so nothing propagates to the host): the mount vanishes with the process, even on
//! SIGKILL, and two tracers never unmount it under each other. Only if that namespace cannot be
//! made does it mount on the host and unmount on drop.

use std::path::{Path, PathBuf};

use nix::{
    mount::{MntFlags, MsFlags, mount, umount2},
    sched::{CloneFlags, unshare},
};

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
    if unshare(CloneFlags::CLONE_NEWNS).is_err() {
        return false;
    }
    // Without this, a mount under a shared mount (systemd's default for /) would
    // propagate back to the host namespace.
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_PRIVATE, NONE).is_ok()
}

/// No source, filesystem type or data for `mount`.
const NONE: Option<&str> = None;

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
        if let Err(e) = mount(
            Some("nodev"),
            TRACEFS,
            Some("tracefs"),
            MsFlags::empty(),
            NONE,
        ) {
            let e = std::io::Error::from(e);
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

    /// The `format` file of `category/name` (None when the event or the file is missing).
    pub fn format(&self, category: &str, name: &str) -> Option<String> {
        std::fs::read_to_string(
            self.root
                .join("events")
                .join(category)
                .join(name)
                .join("format"),
        )
        .ok()
    }

    /// Offset of `field` in the record of `category/name`, from its `format` file.
    pub fn field_offset(&self, category: &str, name: &str, field: &str) -> Option<u32> {
        parse_field_offset(&self.format(category, name)?, field)
    }
}

/// Offset of `group_dead` in a `sched_process_exit` format, 0 when the record has none (the
/// eBPF side then takes the thread group leader's exit as the process leaving). The field is a
/// one-byte bool; any other size is treated as absent rather than misread.
pub fn exit_group_dead_offset(format: &str) -> u32 {
    match (
        parse_field_offset(format, "group_dead"),
        parse_field_size(format, "group_dead"),
    ) {
        (Some(off), Some(1)) => off,
        _ => 0,
    }
}

/// Why a program's fixed-offset read of `f` would misread this format, if it would: the field
/// is missing, moved, or has another size.
pub fn layout_mismatch(
    format: &str,
    f: &trapdetect_common::records::RecordField,
) -> Option<String> {
    match (
        parse_field_offset(format, f.field),
        parse_field_size(format, f.field),
    ) {
        (Some(off), Some(size)) if off == f.offset && size == f.size => None,
        (Some(off), Some(size)) => Some(format!(
            "{} is at offset {off} size {size} on this kernel, the program reads offset {} size {}",
            f.field, f.offset, f.size
        )),
        _ => Some(format!("this kernel's record has no {}", f.field)),
    }
}

/// Size of `field` in a tracepoint format file.
pub fn parse_field_size(format: &str, field: &str) -> Option<u32> {
    parse_field_attr(format, field, "size:")
}

/// Parses `field:<decl> <name>;\toffset:N;` lines of a tracepoint format file.
pub fn parse_field_offset(format: &str, field: &str) -> Option<u32> {
    parse_field_attr(format, field, "offset:")
}

fn parse_field_attr(format: &str, field: &str, attr: &str) -> Option<u32> {
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
        let off = tail.split(';').find_map(|p| p.trim().strip_prefix(attr))?;
        return off.trim().parse().ok();
    }
    None
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us {
            let _ = umount2(self.root.as_path(), MntFlags::MNT_DETACH);
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
        let openat = include_str!("../../fixtures/tracefs/sys_enter_openat.format");
        assert_eq!(parse_field_offset(openat, "filename"), Some(24));
        assert_eq!(parse_field_offset(openat, "dfd"), Some(16));
    }

    /// Every fixed-offset read of the programs matches the record on each recorded kernel, and
    /// a moved field is caught rather than misread.
    #[test]
    fn fixed_offsets_match_the_records_of_6_12_and_6_18() {
        use trapdetect_common::{names::*, records::FIXED_FIELDS};
        let check = |program: &str, format: &str, kernel: &str| {
            let fields: Vec<_> = FIXED_FIELDS
                .iter()
                .filter(|f| f.program == program)
                .collect();
            assert!(!fields.is_empty(), "{program}");
            for f in fields {
                assert_eq!(
                    layout_mismatch(format, f),
                    None,
                    "{kernel} {program} {}",
                    f.field
                );
            }
        };
        for (kernel, format) in [
            (
                "6.12",
                include_str!("../../fixtures/tracefs/fuse_request_send-6.12.format"),
            ),
            (
                "6.18",
                include_str!("../../fixtures/tracefs/fuse_request_send-6.18.format"),
            ),
        ] {
            check(PROG_FUSE_REQUEST_SEND, format, kernel);
        }
        let moved = include_str!("../../fixtures/tracefs/fuse_request_send-6.18.format")
            .replace("opcode;\toffset:24", "opcode;\toffset:28");
        let opcode = FIXED_FIELDS.iter().find(|f| f.field == "opcode").unwrap();
        let why = layout_mismatch(&moved, opcode).expect("a moved field is caught");
        assert!(why.contains("offset 28"), "{why}");
        let unique = FIXED_FIELDS
            .iter()
            .find(|f| f.field == "unique" && f.program == PROG_FUSE_REQUEST_SEND)
            .unwrap();
        let gone = moved.replace("unique", "uniq");
        assert_eq!(
            layout_mismatch(&gone, unique).as_deref(),
            Some("this kernel's record has no unique")
        );
    }

    /// Regression (issue 8): the exit probe read `group_dead` at offset 32 on every kernel;
    /// 5.10, 6.1 and 6.12 end the record at `prio` (28), and the attach failed there.
    #[test]
    fn exit_group_dead_only_where_the_record_has_it() {
        for (kernel, format, want) in [
            (
                "5.10",
                include_str!("../../fixtures/tracefs/sched_process_exit-5.10.format"),
                0,
            ),
            (
                "6.1",
                include_str!("../../fixtures/tracefs/sched_process_exit-6.1.format"),
                0,
            ),
            (
                "6.12",
                include_str!("../../fixtures/tracefs/sched_process_exit-6.12.format"),
                0,
            ),
            (
                "6.18",
                include_str!("../../fixtures/tracefs/sched_process_exit-6.18.format"),
                32,
            ),
        ] {
            assert_eq!(exit_group_dead_offset(format), want, "{kernel}");
            assert_eq!(parse_field_offset(format, "pid"), Some(24), "{kernel}");
            assert_eq!(parse_field_size(format, "pid"), Some(4), "{kernel}");
        }
    }
}
