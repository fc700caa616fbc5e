//! Static filesystem checks (no tracing): the target's working directory (fs.cwd-slow) and its
//! executable and open files (fs.hot-path-slow) on slow or remote filesystems, classified by the
//! shared mount table. Run directories (fs.dir-slow) are measured instead (`dir_probe`).

use super::{Finding, Id, Severity, fs::mount_evidence};
use crate::{
    escape,
    host::mounts::{Mount, MountTable, SlowKind},
};

/// Severity of a slow-kind mount when its cost cannot be measured (preflight: no tracing), and
/// why. Whether a walk pays a round trip depends on the kernel's cache (FUSE entry TTLs, NFS
/// attribute caching, 9p cache modes), so a mount's type alone is a warning; it fails only for
/// kinds no cache rescues:
/// - WSL2 DrvFs: the seed measured one shared, serialized resource (~20,000 lookups/s for the
///   whole machine) whatever the mount options.
/// - 9p without a metadata cache (`cache=none`, the default, or `mmap`/`readahead`, which
///   cache file data only): the kernel sends every lookup to the server.
pub fn static_severity(m: &Mount) -> (Severity, String) {
    if m.is_drvfs() {
        return (
            Severity::Fail,
            "WSL2 DrvFs is one shared, serialized resource whatever the cache (the seed measured ~20,000 lookups/s for the whole machine)".into(),
        );
    }
    if m.slow_kind() == Some(SlowKind::NineP) && !nine_p_caches_metadata(m) {
        return (
            Severity::Fail,
            "9p without a metadata cache (cache=none, the default): the kernel sends every lookup to the server".into(),
        );
    }
    (
        Severity::Warn,
        "whether each lookup is a round trip depends on the kernel's cache (FUSE entry/attribute TTLs, NFS attribute caching, 9p cache modes); trace the running server (trapdetect --pid N) to measure what it costs per request".into(),
    )
}

/// Whether a 9p mount caches lookups: `cache=loose`/`fscache` (older kernels print the mode
/// bare), or a newer kernel's hex mode with the metadata (0x2) or loose (0x8) bit.
fn nine_p_caches_metadata(m: &Mount) -> bool {
    m.options
        .split(',')
        .chain(m.super_options.split([',', ';']))
        .any(|o| {
            let v = o.strip_prefix("cache=").unwrap_or(o);
            match v {
                "loose" | "fscache" => true,
                _ => v
                    .strip_prefix("0x")
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .is_some_and(|bits| bits & 0xa != 0),
            }
        })
}

fn slow_mount<'a>(t: &'a MountTable, path: &[u8]) -> Option<(&'a Mount, SlowKind, usize)> {
    let (i, depth) = t.depth_below_mount(path)?;
    let m = &t.mounts[i];
    Some((m, m.slow_kind()?, depth))
}

/// fs.cwd-slow: a working directory on a slow filesystem. Every request of a server that
/// chdirs back (PHP does) walks its components below the mount.
pub fn cwd(t: &MountTable, pid: u32, cwd: &[u8], restart: &str) -> Option<Finding> {
    let (m, kind, depth) = slow_mount(t, cwd)?;
    let (severity, why) = static_severity(m);
    let f = Finding::new(
        Id::FsCwdSlow,
        severity,
        format!(
            "pid {pid} runs from {}, {} component(s) below {} on {}",
            escape::bytes(cwd),
            depth,
            m.mount_point_display(),
            kind.describe()
        ),
    )
    .with("pid", pid as u64)
    .with("cwd", escape::bytes(cwd));
    Some(
        mount_evidence(f, m)
            .with("cwd_depth_below_mount", depth as u64)
            .with("severity_because", why)
            .predict(format!(
                "a server that returns to its cwd per request (PHP chdirs back after every script) resolves {depth} component(s) on {} each time: throughput ≤ that filesystem's lookup rate ÷ {depth} (WSL2 DrvFs: ~20,000 lookups/s in the seed)",
                m.fs_type
            ))
            .remedy(restart.to_string()),
    )
}

/// fs.hot-path-slow: the executable and open files of the target, grouped by slow mount.
pub fn hot_paths(t: &MountTable, pid: u32, exe: Option<&[u8]>, open: &[Vec<u8>]) -> Vec<Finding> {
    let mut by_mount: Vec<(usize, Vec<(String, &'static str)>)> = vec![];
    let all = exe
        .map(|e| (e, "exe"))
        .into_iter()
        .chain(open.iter().map(|p| (p.as_slice(), "open")));
    for (path, what) in all {
        let Some(i) = t.mount_of(path) else {
            continue;
        };
        if t.mounts[i].slow_kind().is_none() {
            continue;
        }
        let entry = match by_mount.iter_mut().find(|(m, _)| *m == i) {
            Some(e) => e,
            None => {
                by_mount.push((i, vec![]));
                by_mount.last_mut().expect("just pushed")
            }
        };
        entry.1.push((escape::bytes(path), what));
    }
    by_mount
        .into_iter()
        .map(|(i, paths)| {
            let m = &t.mounts[i];
            let kind = m.slow_kind().expect("filtered above");
            let exe_on = paths.iter().any(|(_, w)| *w == "exe");
            let files = paths.iter().filter(|(_, w)| *w == "open").count();
            let what = match (exe_on, files) {
                (true, 0) => "its executable".to_string(),
                (true, n) => format!("its executable and {n} open file(s)"),
                (false, n) => format!("{n} open file(s)"),
            };
            let f = Finding::new(
                Id::FsHotPathSlow,
                Severity::Warn,
                format!(
                    "pid {pid} has {what} on {} ({})",
                    kind.describe(),
                    m.mount_point_display()
                ),
            )
            .with("pid", pid as u64)
            .with("files", files as u64)
            .with("exe_on_mount", exe_on)
            .with(
                "paths",
                paths.iter().take(8).map(|(p, _)| p.clone()).collect::<Vec<_>>(),
            );
            mount_evidence(f, m)
                .predict("reads, stats and page faults on these files pay a round trip each; trace the run (`trapdetect --pid`) to see how many per request")
                .remedy("copy the executable, docroot, databases and logs to a local filesystem and point the server there")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traps::fs::restart_command;

    fn table(name: &str) -> MountTable {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/mountinfo")
            .join(name);
        MountTable::read(&p).unwrap()
    }

    #[test]
    fn seed_harness_cwd_on_drvfs_fails_with_depth() {
        let t = table("wsl2.txt");
        let restart = restart_command(
            Some("/root/run"),
            Some(b"/root/bin/ephpm"),
            &[
                b"/root/bin/ephpm".to_vec(),
                b"serve".to_vec(),
                b"--config".to_vec(),
                b"/root/run/cfg.toml".to_vec(),
            ],
        );
        let f = cwd(
            &t,
            4242,
            b"/mnt/c/Users/luther/multitenant-scalebench",
            &restart,
        )
        .unwrap();
        assert_eq!(f.id, "fs.cwd-slow");
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["fs_type"], "9p");
        assert_eq!(f.evidence["mount_point"], "/mnt/c");
        assert_eq!(f.evidence["cwd_depth_below_mount"], 3);
        assert_eq!(f.evidence["mount_source"], "C:\\\\");
        assert_eq!(f.evidence["slow_because"], "wsl-drvfs");
        assert!(
            f.evidence["severity_because"]
                .as_str()
                .unwrap()
                .contains("whatever the cache")
        );
        assert_eq!(f.evidence["drvfs"], true);
        assert!(
            f.evidence["mount_options"]
                .as_str()
                .unwrap()
                .contains("aname=drvfs")
        );
        assert_eq!(
            f.remedy,
            "( cd /root/run && exec /root/bin/ephpm serve --config /root/run/cfg.toml )"
        );
        assert!(cwd(&t, 1, b"/root/run", &restart).is_none());
    }

    #[test]
    fn restart_command_for_a_retitled_process() {
        assert_eq!(
            restart_command(
                None,
                Some(b"/usr/sbin/php-fpm8.2"),
                &[b"php-fpm: master process (/etc/x.conf)".to_vec()]
            ),
            "( cd <native dir> && exec /usr/sbin/php-fpm8.2 <its arguments> )"
        );
        assert_eq!(
            restart_command(
                Some("/tmp/it's"),
                Some(b"/bin/srv"),
                &[b"srv".to_vec(), b"a b".to_vec()]
            ),
            "( cd '/tmp/it'\\''s' && exec /bin/srv 'a b' )"
        );
    }

    #[test]
    fn hot_paths_grouped_per_mount() {
        let t = table("nfs-sshfs.txt");
        let open = vec![
            b"/home/alice/src/app/db.sqlite".to_vec(),
            b"/home/alice/src/app/log/error.log".to_vec(),
            b"/var/log/syslog".to_vec(),
            b"/home/alice/remote box/www/index.php".to_vec(),
        ];
        let fs = hot_paths(&t, 9, Some(b"/home/alice/src/app/bin/srv"), &open);
        assert_eq!(fs.len(), 2);
        assert_eq!(fs[0].evidence["fs_type"], "nfs4");
        assert_eq!(fs[0].evidence["files"], 2);
        assert_eq!(fs[0].evidence["exe_on_mount"], true);
        assert!(
            fs[0]
                .title
                .contains("its executable and 2 open file(s) on NFS")
        );
        assert_eq!(fs[1].evidence["fs_type"], "fuse.sshfs");
        assert_eq!(fs[1].severity, Severity::Warn);
    }

    #[test]
    fn nine_p_fails_statically_only_without_a_metadata_cache() {
        let line = |opts: &str| {
            format!(
                "22 1 0:21 / / rw - ext4 /dev/vda1 rw\n90 22 0:60 / /srv rw - 9p share rw,{opts}trans=virtio\n"
            )
        };
        let sev = |opts: &str| {
            let t = MountTable::parse(&line(opts)).unwrap();
            static_severity(&t.mounts[t.mount_of(b"/srv/x").unwrap()]).0
        };
        assert_eq!(sev(""), Severity::Fail);
        assert_eq!(sev("mmap,"), Severity::Fail);
        assert_eq!(sev("cache=loose,"), Severity::Warn);
        assert_eq!(sev("loose,"), Severity::Warn);
        assert_eq!(sev("cache=0x1,"), Severity::Fail);
        assert_eq!(sev("cache=0xf,"), Severity::Warn);
    }
}
