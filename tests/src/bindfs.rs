//! A FUSE passthrough from Debian (`bindfs`): a multithreaded daemon that answers at once,
//! each lookup and read a round trip through user space that costs CPU, not waiting.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use crate::{
    TempDir,
    slowfs::{is_mounted, unmount_fuse},
    wait_until,
};

/// A directory on ext4 served again through bindfs.
pub struct Bindfs {
    /// Where it is mounted.
    pub mount: PathBuf,
    /// The directory it serves (on ext4): the twin without the mount.
    pub backing: PathBuf,
    _dir: TempDir,
}

impl Bindfs {
    /// Populates `backing` with `setup`, then mounts it with bindfs's defaults.
    pub fn mount(setup: impl FnOnce(&Path)) -> Bindfs {
        let dir = TempDir::new("bindfs");
        let backing = dir.path().join("back");
        let mount = dir.path().join("mnt");
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mount).unwrap();
        setup(&backing);
        let out = Command::new("bindfs")
            .arg(&backing)
            .arg(&mount)
            .output()
            .expect("bindfs (apt install bindfs: cargo xtask setup)");
        assert!(
            out.status.success(),
            "bindfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let fs = Bindfs {
            mount,
            backing,
            _dir: dir,
        };
        wait_until("bindfs mounted", Duration::from_secs(10), || {
            is_mounted(&fs.mount)
        });
        fs
    }

    /// `rel` under the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount.join(rel)
    }
}

impl Drop for Bindfs {
    fn drop(&mut self) {
        // The daemon exits once unmounted.
        unmount_fuse(&self.mount);
    }
}
