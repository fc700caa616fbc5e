//! Every file the user points trapdetect at (`--hosts`, `--body @FILE`, `--btf`, `--fpm-config`
//! and its `include=`s, `net-census --baseline`) is read through here: regular files only and
//! never more than a documented cap, because a root tool on a shared host must not be made to
//! read `/dev/zero` until the OOM killer takes the machine, or to block forever on a FIFO.

use std::{io::Read, os::unix::fs::OpenOptionsExt, path::Path};

use crate::error::{Error, Result};

/// `--hosts FILE`: one Host header per line.
pub const HOSTS_CAP: u64 = 16 << 20;
/// `--body @FILE`: one request body, held in memory and sent with every request.
pub const BODY_CAP: u64 = 64 << 20;
/// `--btf FILE`: a kernel's BTF (vmlinux BTF is 5-10 MiB).
pub const BTF_CAP: u64 = 128 << 20;
/// `--fpm-config FILE` and each file it includes.
pub const FPM_CONFIG_CAP: u64 = 4 << 20;
/// A JSON report read back (`net-census --baseline`).
pub const REPORT_CAP: u64 = 64 << 20;

/// Why a file cannot be read as an input, for callers that word their own errors.
pub fn read_capped_io(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error as E, ErrorKind};
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC).bits())
        .open(path)?;
    let m = f.metadata()?;
    if m.is_dir() {
        return Err(E::from(ErrorKind::IsADirectory));
    }
    if !m.is_file() {
        return Err(E::new(
            ErrorKind::InvalidInput,
            "not a regular file (a device, FIFO or socket); give a file",
        ));
    }
    if m.len() > cap {
        return Err(too_big(cap));
    }
    let mut out = Vec::with_capacity(m.len() as usize);
    // A file that grows while read (or a /proc file reporting size 0) still stops at the cap.
    f.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(too_big(cap));
    }
    Ok(out)
}

fn too_big(cap: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("larger than the {} MiB limit for this input", cap >> 20),
    )
}

/// Reads a user-given input file: regular, at most `cap` bytes; otherwise bad input (exit 2)
/// named by `what` (the flag and path).
pub fn read_capped(what: &str, path: &Path, cap: u64) -> Result<Vec<u8>> {
    read_capped_io(path, cap).map_err(|e| Error::input(what, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_directories_and_big_files_are_refused() {
        let e = read_capped("--hosts /dev/zero", Path::new("/dev/zero"), HOSTS_CAP).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = read_capped("--btf /tmp", Path::new("/tmp"), BTF_CAP).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let dir = std::env::temp_dir().join(format!("trapdetect-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Returns at once (the read end opened non-blocking), refused as not regular.
        let e = read_capped_io(&fifo, FPM_CONFIG_CAP).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // A sparse file just past the cap is refused without reading it.
        let big = dir.join("big");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(FPM_CONFIG_CAP + 1).unwrap();
        let e = read_capped_io(&big, FPM_CONFIG_CAP).unwrap_err();
        assert!(e.to_string().contains("4 MiB limit"), "{e}");
        f.set_len(10).unwrap();
        assert_eq!(read_capped_io(&big, FPM_CONFIG_CAP).unwrap(), vec![0u8; 10]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
