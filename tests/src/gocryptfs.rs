//! An encrypted FUSE filesystem from Debian (`gocryptfs`): a multithreaded daemon that
//! encrypts and decrypts each read and write in user space, and lets the kernel cache its
//! entries and attributes for a second (its defaults), as most FUSE filesystems users mount do.

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

/// A gocryptfs mount (its cipher directory on ext4).
pub struct Gocryptfs {
    /// Where the plain view is mounted.
    pub mount: PathBuf,
    _dir: TempDir,
}

impl Gocryptfs {
    /// Creates and mounts an empty gocryptfs, then populates it through the mount with
    /// `setup`.
    pub fn mount(setup: impl FnOnce(&Path)) -> Gocryptfs {
        let dir = TempDir::new("gocryptfs");
        let cipher = dir.path().join("cipher");
        let mount = dir.path().join("plain");
        std::fs::create_dir_all(&cipher).unwrap();
        std::fs::create_dir_all(&mount).unwrap();
        // A cheap key derivation (-scryptn 10): the test measures the mount, not the login.
        let pass = ["-q", "-extpass", "echo trapdetect-e2e"];
        let run = |args: &[&str], dirs: &[&Path]| {
            let out = Command::new("gocryptfs")
                .args(args)
                .args(pass)
                .args(dirs)
                .output()
                .expect("gocryptfs (apt install gocryptfs: cargo xtask setup)");
            assert!(
                out.status.success(),
                "gocryptfs {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&["-init", "-scryptn", "10"], &[&cipher]);
        // The daemon forks to the background once the mount is up.
        run(&[], &[&cipher, &mount]);
        let fs = Gocryptfs { mount, _dir: dir };
        wait_until("gocryptfs mounted", Duration::from_secs(10), || {
            is_mounted(&fs.mount)
        });
        setup(&fs.mount);
        fs
    }
}

impl Drop for Gocryptfs {
    fn drop(&mut self) {
        // The daemon exits once unmounted.
        unmount_fuse(&self.mount);
    }
}
