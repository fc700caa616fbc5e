//! Static filesystem checks (no tracing): the target's working directory (fs.cwd-slow), each
//! run directory a harness names (fs.dir-slow), and the target's executable and open files
//! (fs.hot-path-slow) on slow or remote filesystems, classified by the shared mount table.

use super::{Finding, Severity, fs::mount_evidence};
use crate::{
    escape,
    host::mounts::{Mount, MountTable, SlowKind},
};

fn slow_mount<'a>(t: &'a MountTable, path: &[u8]) -> Option<(&'a Mount, SlowKind, usize)> {
    let (i, depth) = t.depth_below_mount(path)?;
    let m = &t.mounts[i];
    Some((m, m.slow_kind()?, depth))
}

/// fs.cwd-slow: a working directory on a slow filesystem. Every request of a server that
/// chdirs back (PHP does) walks its components below the mount.
pub fn cwd(t: &MountTable, pid: u32, cwd: &[u8], restart: &str) -> Option<Finding> {
    let (m, kind, depth) = slow_mount(t, cwd)?;
    let f = Finding::new(
        "fs.cwd-slow",
        Severity::Fail,
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
            .predict(format!(
                "a server that returns to its cwd per request (PHP chdirs back after every script) resolves {depth} component(s) on {} each time: throughput ≤ that filesystem's lookup rate ÷ {depth} (WSL2 DrvFs: ~20,000 lookups/s in the seed)",
                m.fs_type
            ))
            .remedy(restart.to_string()),
    )
}

/// fs.dir-slow: a run directory the harness names is on a slow filesystem.
pub fn dir(t: &MountTable, dir: &[u8]) -> Option<Finding> {
    let (m, kind, depth) = slow_mount(t, dir)?;
    let mp = m.mount_point_display();
    let f = Finding::new(
        "fs.dir-slow",
        Severity::Fail,
        format!(
            "--dir {}, {} component(s) below {mp} on {}",
            escape::bytes(dir),
            depth,
            kind.describe()
        ),
    )
    .with("dir", escape::bytes(dir));
    Some(
        mount_evidence(f, m)
            .with("depth_below_mount", depth as u64)
            .predict("everything the server reads, writes or returns to under this directory pays a round trip per path component")
            .remedy(format!(
                "use a run directory on a local filesystem; in the harness: case \"$RUN\" in {}/*) echo \"RUN is on {}\" >&2; exit 1 ;; esac",
                escape::shell(&mp),
                escape::text(&m.fs_type)
            )),
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
                "fs.hot-path-slow",
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
    fn dirs_on_nfs_and_sshfs() {
        let t = table("nfs-sshfs.txt");
        let f = dir(&t, b"/home/alice/src/app/run").unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(f.evidence["fs_type"], "nfs4");
        assert_eq!(f.evidence["depth_below_mount"], 3);
        assert!(
            f.remedy.contains("case \"$RUN\" in /home/alice/*)"),
            "{}",
            f.remedy
        );
        let f = dir(&t, b"/home/alice/remote box/www").unwrap();
        assert_eq!(f.evidence["fs_type"], "fuse.sshfs");
        assert!(
            f.remedy.contains("'/home/alice/remote box'/*)"),
            "{}",
            f.remedy
        );
        assert!(dir(&t, b"/tmp").is_none());
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
}
