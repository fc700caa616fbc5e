//! What preflight reads of the target and the host, once, before any rule runs.

use std::{
    os::unix::ffi::OsStrExt,
    path::{Path, PathBuf},
};

use super::Dir;
use crate::{
    error::Result,
    escape,
    host::{
        cpu::{self, CpuHost},
        dirprobe::{self, DirProbe},
        host::{self as hostinfo},
        mounts::MountTable,
        process::{self, ProcEntry, Process},
        runtime,
    },
};

/// Everything preflight observed; rules run on this.
pub(super) struct Observed {
    pub(super) target: Option<Process>,
    pub(super) scan: Vec<ProcEntry>,
    pub(super) cpu_host: CpuHost,
    pub(super) load: Option<hostinfo::LoadAvg>,
    pub(super) cpu_psi: Option<hostinfo::Psi>,
    pub(super) memory: hostinfo::Memory,
    pub(super) virt: hostinfo::Virt,
    pub(super) kernel: hostinfo::KernelSupport,
    pub(super) self_mounts: Option<MountTable>,
    pub(super) target_mounts: Option<MountTable>,
    /// The directory probe of each --dir, in order.
    pub(super) dir_probes: Vec<DirProbe>,
    /// The read-only probe of the target's working directory, when it is on a slow kind of
    /// mount.
    pub(super) cwd_probe: Option<DirProbe>,
    /// The target's runtime mode (maps, environment, build info).
    pub(super) runtime: Option<runtime::Runtime>,
    /// Read-only probes of the directories of the target's open files on slow kinds of
    /// mounts (at most [`OPEN_DIRS_PROBED`]), with the mount point each is on.
    pub(super) open_dir_probes: Vec<(String, DirProbe)>,
}

/// Directories of a target's open files probed, at most.
const OPEN_DIRS_PROBED: usize = 3;

impl Observed {
    /// Reads the target and the host, once.
    pub(super) fn gather(pid: Option<u32>, dirs: &[Dir]) -> Result<Observed> {
        let root = Path::new("/");
        let target = match pid {
            Some(pid) => Some(process::read(
                pid,
                process::ReadOptions {
                    hash_exe: true,
                    ..Default::default()
                },
            )?),
            None => None,
        };
        let self_mounts = MountTable::read(Path::new("/proc/self/mountinfo")).ok();
        let dir_probes = dirs
            .iter()
            .map(|d| {
                dirprobe::probe(dirprobe::ProbeRequest {
                    open: PathBuf::from(std::ffi::OsStr::from_bytes(&d.real)),
                    shown: escape::bytes(&d.real),
                    write: true,
                    reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                })
            })
            .collect();
        let target_mounts = pid.and_then(|p| MountTable::of_pid(p).ok());
        // The working directory through /proc/PID/cwd (its own mount namespace), read-only.
        let cwd_probe = match (&target, &target_mounts) {
            (Some(t), Some(tm)) => t
                .cwd
                .as_ref()
                .filter(|c| {
                    tm.mount_of(c)
                        .is_some_and(|i| tm.mounts[i].slow_kind().is_some())
                })
                .map(|c| {
                    dirprobe::probe(dirprobe::ProbeRequest {
                        open: PathBuf::from(format!("/proc/{}/cwd", t.pid)),
                        shown: escape::bytes(c),
                        write: false,
                        reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                    })
                }),
            _ => None,
        };
        // The directories the target's open files live in, on slow kinds of mounts, through
        // its own root (/proc/PID/root), read-only.
        let mut open_dir_probes = vec![];
        if let (Some(t), Some(tm)) = (&target, &target_mounts) {
            let mut dirs: Vec<(Vec<u8>, String)> = vec![];
            for p in &t.open_paths {
                let Some(i) = tm.mount_of(p) else { continue };
                if tm.mounts[i].slow_kind().is_none() {
                    continue;
                }
                let d = match p.iter().rposition(|&c| c == b'/') {
                    Some(0) => b"/".to_vec(),
                    Some(k) => p[..k].to_vec(),
                    None => continue,
                };
                if !dirs.iter().any(|(x, _)| *x == d) && dirs.len() < OPEN_DIRS_PROBED {
                    dirs.push((d, tm.mounts[i].mount_point_display()));
                }
            }
            for (d, mp) in dirs {
                let mut open = PathBuf::from(format!("/proc/{}/root", t.pid));
                open.push(std::ffi::OsStr::from_bytes(
                    d.strip_prefix(b"/").unwrap_or(&d),
                ));
                open_dir_probes.push((
                    mp,
                    dirprobe::probe(dirprobe::ProbeRequest {
                        open,
                        shown: escape::bytes(&d),
                        write: false,
                        reference_parents: dirprobe::local_parents(self_mounts.as_ref()),
                    }),
                ));
            }
        }
        Ok(Observed {
            open_dir_probes,
            runtime: pid.map(runtime::read),
            dir_probes,
            cwd_probe,
            target_mounts,
            scan: process::scan(),
            cpu_host: cpu::read_cpu_host(root),
            load: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| hostinfo::parse_loadavg(&t)),
            cpu_psi: hostinfo::read_psi(root, "cpu"),
            memory: hostinfo::read_memory(root),
            virt: hostinfo::read_virt(root),
            kernel: hostinfo::read_kernel_support(root),
            self_mounts,
            target,
        })
    }
}
