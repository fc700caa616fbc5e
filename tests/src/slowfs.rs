//! The slow FUSE filesystem fixture: mounts `slowfs` over a backing directory, waits until the
//! mount is visible, and unmounts and stops the daemon on drop (also when a test panics; and
//! the daemon gets SIGTERM if this process dies, through PR_SET_PDEATHSIG).

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{TempDir, target_file, wait_until};

/// A mounted slowfs.
pub struct SlowFs {
    child: Option<Child>,
    /// Where it is mounted.
    pub mount: PathBuf,
    /// The directory it passes through to (on ext4).
    pub backing: PathBuf,
    /// Operation counts file (JSON, rewritten every 100 ms).
    pub stats: PathBuf,
    _dir: TempDir,
}

/// Whether `path` is a mount point in this process's mount namespace.
pub fn is_mounted(path: &Path) -> bool {
    let want = path.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| {
            t.lines()
                .any(|l| l.split(' ').nth(4) == Some(want.as_str()))
        })
        .unwrap_or(false)
}

/// Unmounts the FUSE mount at `mount` if it is one (its daemon exits with it), lazily when a
/// process still inside keeps it busy.
pub fn unmount_fuse(mount: &Path) {
    if is_mounted(mount) {
        let _ = Command::new("fusermount3").arg("-u").arg(mount).status();
        if is_mounted(mount) {
            let _ = Command::new("umount").arg("-l").arg(mount).status();
        }
    }
}

impl SlowFs {
    /// Mounts a slowfs with `delay_us` per operation and no kernel caching. `setup` populates
    /// the backing directory before the mount (through ext4, so it costs nothing).
    pub fn mount(delay_us: u64, setup: impl FnOnce(&Path)) -> SlowFs {
        SlowFs::mount_with(delay_us, 0, setup)
    }

    /// Mounts a slowfs with `delay_us` per operation whose entries and attributes the kernel
    /// may cache for `ttl_ms` (0: it asks again on every walk).
    pub fn mount_with(delay_us: u64, ttl_ms: u64, setup: impl FnOnce(&Path)) -> SlowFs {
        SlowFs::spawn(delay_us, ttl_ms, false, 1, setup)
    }

    /// Mounts a slowfs with `delay_us` per operation whose service time does not depend on
    /// this host's CPU load (the daemon runs SCHED_FIFO), as a remote filesystem's server's
    /// does not: for tests that hold a ceiling measured under one load to a capacity measured
    /// under another (a SCHED_OTHER daemon wakes twice per operation and waits for a CPU on a
    /// busy host: 660 µs per 200 µs operation was read once under a run, 362 µs under wrk).
    pub fn mount_remote(delay_us: u64, setup: impl FnOnce(&Path)) -> SlowFs {
        SlowFs::spawn(delay_us, 0, true, 1, setup)
    }

    /// As [`SlowFs::mount_remote`], answering `threads` operations at once (no global lock):
    /// slow, but not serialized, as an NFS client with several RPCs in flight.
    pub fn mount_parallel(delay_us: u64, threads: u32, setup: impl FnOnce(&Path)) -> SlowFs {
        SlowFs::spawn(delay_us, 0, true, threads, setup)
    }

    fn spawn(
        delay_us: u64,
        ttl_ms: u64,
        realtime: bool,
        threads: u32,
        setup: impl FnOnce(&Path),
    ) -> SlowFs {
        let dir = TempDir::new("slowfs");
        let backing = dir.path().join("backing");
        let mount = dir.path().join("mnt");
        std::fs::create_dir_all(&backing).expect("backing dir");
        std::fs::create_dir_all(&mount).expect("mount dir");
        setup(&backing);
        let stats = dir.path().join("stats.json");
        let mut cmd = Command::new(target_file("slowfs"));
        cmd.arg("--backing")
            .arg(&backing)
            .arg("--mount")
            .arg(&mount)
            .arg("--delay-us")
            .arg(delay_us.to_string())
            .arg("--ttl-ms")
            .arg(ttl_ms.to_string())
            .arg("--stats")
            .arg(&stats)
            .stdin(Stdio::null());
        if realtime {
            cmd.arg("--realtime");
        }
        cmd.arg("--threads").arg(threads.to_string());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn slowfs");
        let mut fs = SlowFs {
            child: Some(child),
            mount,
            backing,
            stats,
            _dir: dir,
        };
        let m = fs.mount.clone();
        let mut exited = None;
        wait_until("slowfs to mount", Duration::from_secs(10), || {
            if let Some(c) = fs.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                exited = Some(st);
                return true;
            }
            is_mounted(&m)
        });
        if let Some(st) = exited {
            fs.child = None;
            panic!("slowfs exited before mounting: {st}");
        }
        fs
    }

    /// Operation counts served so far (`lookup`, `getattr`, ...).
    pub fn stats(&self) -> serde_json::Value {
        std::thread::sleep(Duration::from_millis(150));
        let t = std::fs::read_to_string(&self.stats).unwrap_or_default();
        serde_json::from_str(&t).unwrap_or(serde_json::Value::Null)
    }

    /// Creates `depth` nested directories `d1/d2/...` below the mount's backing directory and
    /// returns the path of the deepest one as seen through the mount.
    pub fn deep_dir(backing: &Path, mount: &Path, depth: usize) -> PathBuf {
        let mut rel = PathBuf::new();
        for i in 1..=depth {
            rel.push(format!("d{i}"));
        }
        std::fs::create_dir_all(backing.join(&rel)).expect("deep dir");
        mount.join(rel)
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if is_mounted(&self.mount) {
                // A process still inside the mount keeps it busy: detach it lazily.
                let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
