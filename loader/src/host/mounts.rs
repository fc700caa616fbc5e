//! The mount table of a process (its own mount namespace: /proc/PID/mountinfo), which
//! filesystem a path walks through, and which filesystems are slow or remote.
//!
//! A *lookup* is one path component resolved on a filesystem: component `i` of an absolute
//! path is looked up in the directory made of the components before it, so it counts against
//! the mount holding that directory. `chdir("/mnt/c/a/b")` costs lookups of `mnt` and `c` on
//! the root filesystem and of `a` and `b` on the filesystem mounted at /mnt/c.

use std::{fmt, path::Path};

use serde::Serialize;

use crate::{
    error::{Error, Result},
    escape,
};

/// One line of mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Mount id.
    pub id: u32,
    /// Parent mount id.
    pub parent: u32,
    /// Device major.
    pub major: u32,
    /// Device minor.
    pub minor: u32,
    /// Root of the mount within its filesystem (bytes, unescaped).
    pub root: Vec<u8>,
    /// Mount point, relative to the process's root (bytes, unescaped).
    pub mount_point: Vec<u8>,
    /// Per-mount options.
    pub options: String,
    /// Filesystem type, with its subtype (`fuse.sshfs`).
    pub fs_type: String,
    /// Mount source (`/dev/sda1`, `server:/export`, `C:\`).
    pub source: Vec<u8>,
    /// Superblock options.
    pub super_options: String,
}

/// Why a filesystem is slow for metadata-heavy work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SlowKind {
    /// WSL2 DrvFs: Windows drives over 9p; one shared, serialized resource.
    WslDrvfs,
    /// Another 9p export (QEMU, WSL's own shares): one round trip per lookup.
    NineP,
    /// NFS: remote; attribute and lookup caches hide some of it.
    Nfs,
    /// SMB/CIFS: remote.
    Smb,
    /// FUSE: every uncached operation is a round trip to a user-space daemon.
    Fuse,
    /// virtiofs: host directory shared into a VM.
    Virtiofs,
    /// Hypervisor shared folders (VirtualBox, VMware, Parallels).
    HostShare,
    /// A cluster or network filesystem.
    Network,
}

impl SlowKind {
    /// One-phrase description for titles.
    pub fn describe(self) -> &'static str {
        match self {
            SlowKind::WslDrvfs => "WSL2 DrvFs (a Windows drive over 9p)",
            SlowKind::NineP => "a 9p share",
            SlowKind::Nfs => "NFS",
            SlowKind::Smb => "SMB/CIFS",
            SlowKind::Fuse => "FUSE (a user-space filesystem)",
            SlowKind::Virtiofs => "virtiofs (a host directory shared into the VM)",
            SlowKind::HostShare => "a hypervisor shared folder",
            SlowKind::Network => "a network filesystem",
        }
    }
}

impl Mount {
    /// Mount point as a display string (escaped).
    pub fn mount_point_display(&self) -> String {
        escape::bytes(&self.mount_point)
    }

    /// Kernel `dev_t` encoding (`MKDEV`), as `super_block.s_dev` holds it.
    pub fn kernel_dev(&self) -> u32 {
        (self.major << 20) | (self.minor & 0xfffff)
    }

    /// Whether this is WSL2's DrvFs (`9p` with `aname=drvfs`, or type `drvfs`).
    pub fn is_drvfs(&self) -> bool {
        self.fs_type == "drvfs"
            || (self.fs_type == "9p"
                && (self.super_options.contains("aname=drvfs")
                    || self.options.contains("aname=drvfs")))
    }

    /// Why this filesystem is slow for metadata operations, if it is known to be.
    pub fn slow_kind(&self) -> Option<SlowKind> {
        if self.is_drvfs() {
            return Some(SlowKind::WslDrvfs);
        }
        let t = self.fs_type.as_str();
        let base = t.split('.').next().unwrap_or(t);
        Some(match base {
            "9p" => SlowKind::NineP,
            "nfs" | "nfs4" => SlowKind::Nfs,
            "cifs" | "smb3" | "smbfs" => SlowKind::Smb,
            "fuse" | "fuseblk" => SlowKind::Fuse,
            "virtiofs" => SlowKind::Virtiofs,
            "vboxsf" | "vmhgfs" | "prl_fs" => SlowKind::HostShare,
            "ceph" | "glusterfs" | "lustre" | "gpfs" | "afs" | "beegfs" | "ocfs2" | "gfs2"
            | "davfs" | "coda" | "orangefs" => SlowKind::Network,
            _ => return None,
        })
    }

    /// Interesting options for evidence (the 9p/NFS ones that explain the cost).
    pub fn options_summary(&self) -> String {
        let mut opts: Vec<&str> = vec![];
        for o in self
            .options
            .split(',')
            .chain(self.super_options.split([',', ';']))
        {
            let key = o.split('=').next().unwrap_or(o);
            if matches!(
                key,
                "aname"
                    | "trans"
                    | "cache"
                    | "msize"
                    | "vers"
                    | "proto"
                    | "actimeo"
                    | "ac"
                    | "noac"
                    | "hard"
                    | "soft"
                    | "lookupcache"
                    | "ro"
                    | "sync"
                    | "dirsync"
                    | "noatime"
            ) && !opts.contains(&o)
            {
                opts.push(o);
            }
        }
        opts.join(",")
    }
}

/// A parse error in mountinfo, with its line number.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What was wrong.
    pub what: &'static str,
}

/// The mount table of one mount namespace, in mountinfo order (later mounts on top).
#[derive(Clone, Debug, Default)]
pub struct MountTable {
    /// Mounts, in file order.
    pub mounts: Vec<Mount>,
}

/// Decodes mountinfo's octal escapes (`\040` for space, `\134` for backslash).
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

impl MountTable {
    /// Parses the text of a mountinfo file.
    pub fn parse(text: &str) -> std::result::Result<Self, ParseError> {
        let mut mounts = vec![];
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let err = |what| ParseError { line: n + 1, what };
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields
                .iter()
                .position(|f| *f == "-")
                .ok_or(err("no ' - ' separator"))?;
            if sep < 6 || fields.len() < sep + 3 {
                return Err(err("too few fields"));
            }
            let (major, minor) = fields[2].split_once(':').ok_or(err("bad major:minor"))?;
            mounts.push(Mount {
                id: fields[0].parse().map_err(|_| err("bad mount id"))?,
                parent: fields[1].parse().map_err(|_| err("bad parent id"))?,
                major: major.parse().map_err(|_| err("bad major"))?,
                minor: minor.parse().map_err(|_| err("bad minor"))?,
                root: unescape(fields[3]),
                mount_point: unescape(fields[4]),
                options: fields[5].to_string(),
                fs_type: fields[sep + 1].to_string(),
                source: unescape(fields[sep + 2]),
                super_options: fields
                    .get(sep + 3)
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
            });
        }
        if mounts.is_empty() {
            return Err(ParseError {
                line: 0,
                what: "no mounts",
            });
        }
        Ok(MountTable { mounts })
    }

    /// Reads `/proc/<pid>/mountinfo` (the process's own mount namespace).
    pub fn of_pid(pid: u32) -> Result<Self> {
        Self::read(&Path::new("/proc").join(pid.to_string()).join("mountinfo")).map_err(|e| {
            // A zombie has no mount namespace left (EINVAL): say what the process is.
            if super::process::is_zombie(pid) {
                Error::usage(format!(
                    "pid {pid} is a zombie (it exited and its parent has not reaped it): nothing to inspect"
                ))
            } else {
                e
            }
        })
    }

    /// Reads a mountinfo file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(path.display().to_string(), e))?;
        Self::parse(&text).map_err(|e| Error::usage(format!("{}: {e}", path.display())))
    }

    /// The mount that holds `path` (absolute, normalized): the longest mount point that is a
    /// component-wise prefix; of several mounts on one point, the last (topmost).
    pub fn mount_of(&self, path: &[u8]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (i, m) in self.mounts.iter().enumerate() {
            if is_prefix(&m.mount_point, path) {
                let len = m.mount_point.len();
                if best.is_none_or(|(_, l)| len >= l) {
                    best = Some((i, len));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// Mounts of the filesystem with kernel `dev_t` `dev`; the one whose mount point is an
    /// ancestor of `hint` first (a dev can be mounted at several places).
    pub fn by_dev(&self, dev: u32, hints: &[Vec<u8>]) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.mounts.len())
            .filter(|&i| self.mounts[i].kernel_dev() == dev)
            .collect();
        for h in hints {
            if let Some(&i) = candidates
                .iter()
                .rev()
                .find(|&&i| is_prefix(&self.mounts[i].mount_point, h))
            {
                return Some(i);
            }
        }
        candidates.last().copied()
    }

    /// Lookups an absolute path costs, per mount index, in walk order.
    pub fn lookups(&self, path: &[u8]) -> Vec<(usize, u32)> {
        let comps = components(path);
        let mut out: Vec<(usize, u32)> = vec![];
        let mut dir: Vec<u8> = b"/".to_vec();
        for c in &comps {
            if let Some(m) = self.mount_of(&dir) {
                match out.last_mut() {
                    Some((last, n)) if *last == m => *n += 1,
                    _ => out.push((m, 1)),
                }
            }
            if dir.len() > 1 {
                dir.push(b'/');
            }
            dir.extend_from_slice(c);
        }
        out
    }

    /// Components of `path` below the mount point of the mount holding it.
    pub fn depth_below_mount(&self, path: &[u8]) -> Option<(usize, usize)> {
        let m = self.mount_of(path)?;
        let depth = components(path).len() - components(&self.mounts[m].mount_point).len();
        Some((m, depth))
    }
}

/// Whether `prefix` is `path` or a component-wise ancestor of it (both absolute, normalized).
pub fn is_prefix(prefix: &[u8], path: &[u8]) -> bool {
    if prefix == b"/" {
        return path.first() == Some(&b'/');
    }
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

/// Lexical components of a path: empty and `.` dropped, `..` pops (absolute paths cannot rise
/// above `/`).
pub fn components(path: &[u8]) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = vec![];
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Lexically normalized absolute path (`/a/./b/../c` → `/a/c`).
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let comps = components(path);
    if comps.is_empty() {
        return b"/".to_vec();
    }
    let mut out = vec![];
    for c in comps {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    out
}

/// Lookups a relative path costs: one per component that names something (`..` and `.` are
/// resolved in the dcache without asking the filesystem).
pub fn relative_lookups(path: &[u8]) -> u32 {
    path.split(|&b| b == b'/')
        .filter(|c| !matches!(*c, b"" | b"." | b".."))
        .count() as u32
}

impl fmt::Display for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            self.mount_point_display(),
            escape::text(&self.fs_type)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(name: &str) -> MountTable {
        let text = match name {
            "wsl2" => include_str!("../../fixtures/mountinfo/wsl2.txt"),
            "nfs" => include_str!("../../fixtures/mountinfo/nfs-sshfs.txt"),
            "container" => include_str!("../../fixtures/mountinfo/container-overlay.txt"),
            "vm" => include_str!("../../fixtures/mountinfo/this-vm.txt"),
            _ => unreachable!(),
        };
        MountTable::parse(text).unwrap()
    }

    fn mp(t: &MountTable, path: &str) -> String {
        t.mounts[t.mount_of(path.as_bytes()).unwrap()].mount_point_display()
    }

    #[test]
    fn wsl2_drvfs_is_recognised_both_spellings() {
        let t = table("wsl2");
        let c = &t.mounts[t.mount_of(b"/mnt/c/Users/luther/bench").unwrap()];
        assert_eq!(c.fs_type, "9p");
        assert!(c.is_drvfs());
        assert_eq!(c.slow_kind(), Some(SlowKind::WslDrvfs));
        assert_eq!(c.source, b"C:\\");
        let d = &t.mounts[t.mount_of(b"/mnt/d/x").unwrap()];
        assert_eq!(d.slow_kind(), Some(SlowKind::WslDrvfs));
        // /mnt itself is ext4, and so is /mnt/cx (not below /mnt/c).
        assert_eq!(mp(&t, "/mnt"), "/");
        assert_eq!(mp(&t, "/mnt/cx"), "/");
        assert_eq!(
            t.mounts[t.mount_of(b"/mnt/wsl/x").unwrap()].slow_kind(),
            None
        );
        assert_eq!(
            t.mounts[t.mount_of(b"/usr/lib/wsl/lib/libcuda.so").unwrap()].fs_type,
            "overlay"
        );
    }

    #[test]
    fn seed_walk_costs_lookups_per_mount() {
        // The seed's 4-level harness directory: 2 lookups on / (mnt, c), 4 on DrvFs.
        let t = table("wsl2");
        let path = b"/mnt/c/Users/luther/multitenant-scalebench/run";
        let l = t.lookups(path);
        let named: Vec<(String, u32)> = l
            .iter()
            .map(|(m, n)| (t.mounts[*m].mount_point_display(), *n))
            .collect();
        assert_eq!(named, vec![("/".to_string(), 2), ("/mnt/c".to_string(), 4)]);
        let (m, depth) = t.depth_below_mount(path).unwrap();
        assert_eq!(t.mounts[m].mount_point, b"/mnt/c");
        assert_eq!(depth, 4);
        // The mount point itself: looking up "c" happens in /mnt, on ext4.
        assert_eq!(
            t.lookups(b"/mnt/c").iter().map(|x| x.1).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(t.lookups(b"/"), vec![]);
    }

    #[test]
    fn nfs_sshfs_cifs_and_escaped_mount_points() {
        let t = table("nfs");
        let home = &t.mounts[t.mount_of(b"/home/alice/src/app").unwrap()];
        assert_eq!(home.fs_type, "nfs4");
        assert_eq!(home.slow_kind(), Some(SlowKind::Nfs));
        assert!(home.options_summary().contains("vers=4.2"));
        // "\040" is a space in mountinfo.
        let box_ = &t.mounts[t.mount_of(b"/home/alice/remote box/www").unwrap()];
        assert_eq!(box_.mount_point, b"/home/alice/remote box");
        assert_eq!(box_.fs_type, "fuse.sshfs");
        assert_eq!(box_.slow_kind(), Some(SlowKind::Fuse));
        let l = t.lookups(b"/home/alice/remote box/www/index.php");
        let per: Vec<(&str, u32)> = l
            .iter()
            .map(|(m, n)| (t.mounts[*m].fs_type.as_str(), *n))
            .collect();
        assert_eq!(per, vec![("ext4", 2), ("nfs4", 1), ("fuse.sshfs", 2)]);
        assert_eq!(
            t.mounts[t.mount_of(b"/srv/share/a").unwrap()].slow_kind(),
            Some(SlowKind::Smb)
        );
        // Two mounts on /data: the later one is on top.
        assert_eq!(t.mounts[t.mount_of(b"/data/x").unwrap()].fs_type, "tmpfs");
    }

    #[test]
    fn container_overlay_and_virtiofs() {
        let t = table("container");
        assert_eq!(t.mounts[t.mount_of(b"/app").unwrap()].fs_type, "overlay");
        assert_eq!(t.mounts[t.mount_of(b"/app").unwrap()].slow_kind(), None);
        let www = &t.mounts[t.mount_of(b"/var/www/index.php").unwrap()];
        assert_eq!(www.fs_type, "ext4");
        assert_eq!(www.root, b"/var/lib/docker/volumes/app/_data");
        let up = &t.mounts[t.mount_of(b"/var/www/uploads/a.jpg").unwrap()];
        assert_eq!(up.slow_kind(), Some(SlowKind::Virtiofs));
        let l = t.lookups(b"/var/www/uploads/2024/a.jpg");
        let per: Vec<(&str, u32)> = l
            .iter()
            .map(|(m, n)| (t.mounts[*m].fs_type.as_str(), *n))
            .collect();
        assert_eq!(per, vec![("overlay", 2), ("ext4", 1), ("virtiofs", 2)]);
    }

    #[test]
    fn dev_lookup_prefers_hinted_mount() {
        let t = table("container");
        let dev = (254 << 20) | 1;
        let m = t.by_dev(dev, &[b"/var/www/html".to_vec()]).unwrap();
        assert_eq!(t.mounts[m].mount_point, b"/var/www");
        let m = t.by_dev(dev, &[]).unwrap();
        assert_eq!(t.mounts[m].mount_point, b"/etc/resolv.conf");
        assert_eq!(t.by_dev(12345, &[]), None);
    }

    #[test]
    fn this_vm_table_parses() {
        let t = table("vm");
        assert_eq!(mp(&t, "/tmp/x"), "/");
        assert_eq!(
            t.mounts[t.mount_of(b"/sys/kernel/tracing/events").unwrap()].fs_type,
            "tracefs"
        );
    }

    #[test]
    fn lexical_paths() {
        assert_eq!(normalize(b"/a/./b/../c//d/"), b"/a/c/d");
        assert_eq!(normalize(b"/../.."), b"/");
        assert_eq!(relative_lookups(b"index.php"), 1);
        assert_eq!(relative_lookups(b"./a/../b/c"), 3);
        assert!(is_prefix(b"/mnt/c", b"/mnt/c/x"));
        assert!(!is_prefix(b"/mnt/c", b"/mnt/cx"));
        assert!(is_prefix(b"/", b"/anything"));
    }

    #[test]
    fn malformed_mountinfo_points_at_the_line() {
        let e =
            MountTable::parse("27 1 254:0 / / rw - ext4 /dev/vda rw\ngarbage line\n").unwrap_err();
        assert_eq!(e.line, 2);
    }
}
