//! A remote filesystem on this host: Debian's sshfs mounting a directory over ssh from a private
//! OpenSSH server on a loopback port (its own host key, an authorized key of its own, Debian's
//! sftp-server as the subsystem). Every operation the kernel hands sshfs goes through ssh,
//! sshd and sftp-server, which do real work on this host's CPUs, as a remote filesystem's
//! client does on its own. Unmounted and stopped on drop (also when a test panics).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use crate::{
    TempDir, free_port,
    servers::Proc,
    slowfs::{is_mounted, unmount_fuse},
    wait_until,
};

/// A mounted sshfs and the sshd it talks to.
pub struct Sshfs {
    /// Stopped on drop, after the unmount (fields drop after `Drop::drop`).
    _sshd: Proc,
    /// Where it is mounted.
    pub mount: PathBuf,
    /// The directory it serves (on ext4).
    pub backing: PathBuf,
    _dir: TempDir,
}

fn run(what: &str, c: &mut Command) {
    let out = c.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Sshfs {
    /// Starts sshd on a free loopback port and mounts `backing` (populated by `setup` first,
    /// through ext4) with sshfs's defaults.
    pub fn mount(setup: impl FnOnce(&Path)) -> Sshfs {
        let dir = TempDir::new("sshfs");
        let backing = dir.path().join("back");
        let mount = dir.path().join("mnt");
        std::fs::create_dir_all(&backing).unwrap();
        std::fs::create_dir_all(&mount).unwrap();
        setup(&backing);
        let key = |name: &str| {
            let p = dir.path().join(name);
            run(
                "ssh-keygen",
                Command::new("ssh-keygen")
                    .args(["-q", "-t", "ed25519", "-N", ""])
                    .arg("-f")
                    .arg(&p),
            );
            p
        };
        let host_key = key("host_key");
        let user_key = key("user_key");
        let authorized = dir.path().join("authorized_keys");
        std::fs::copy(user_key.with_extension("pub"), &authorized).unwrap();
        // sshd's privilege separation directory (the package's unit creates it at boot).
        std::fs::create_dir_all("/run/sshd").unwrap();
        let port = free_port();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\n\
                 StrictModes no\nPidFile none\nSubsystem sftp /usr/lib/openssh/sftp-server\n",
                host_key.display(),
                authorized.display()
            ),
        )
        .unwrap();
        let sshd = Proc::spawn(
            "/usr/sbin/sshd (openssh-server)",
            Command::new("/usr/sbin/sshd")
                .args(["-D", "-e", "-f"])
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let fs = Sshfs {
            _sshd: sshd,
            mount,
            backing,
            _dir: dir,
        };
        wait_until("sshd listening", Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        run(
            "sshfs",
            Command::new("sshfs")
                .arg("-o")
                .arg(format!(
                    "port={port},IdentityFile={},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR",
                    user_key.display()
                ))
                .arg(format!("root@127.0.0.1:{}", fs.backing.display()))
                .arg(&fs.mount),
        );
        wait_until("sshfs mounted", Duration::from_secs(10), || {
            is_mounted(&fs.mount)
        });
        fs
    }

    /// `rel` under the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount.join(rel)
    }
}

impl Drop for Sshfs {
    fn drop(&mut self) {
        // sshfs exits once unmounted, ssh with it, and sshd's session process after.
        unmount_fuse(&self.mount);
    }
}
