//! Every file trapdetect writes (`--json-out`, `--html`, `--samples-out`, the kmsg mark, and any
//! future output flag) goes through here, because trapdetect runs as root in shared directories.
//!
//! The rules: the final component is never followed if it is a symlink (refused, the link and
//! what it points to stay untouched); anything but a regular file there is refused (a root
//! `rename` over `/dev/null` would replace the device); the bytes go to a temporary file with an
//! unpredictable name created `O_EXCL|O_NOFOLLOW` in the target directory, are flushed and
//! fsynced (a full disk shows up here, not as a 0-byte report), and only then renamed over the
//! path, which never follows a symlink either. A failed or abandoned write removes its temporary
//! file. [`check`] runs the same steps without the rename, so commands can refuse an unusable
//! path before they attach anything.

use std::{
    fs::{File, OpenOptions},
    hash::{BuildHasher, Hasher},
    io::{self, Write},
    os::unix::fs::{FileTypeExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use crate::error::{Error, Result};

/// A report being written to `path`; [`OutputFile::commit`] puts it in place.
#[derive(Debug)]
pub struct OutputFile {
    flag: String,
    path: PathBuf,
    tmp: PathBuf,
    file: Option<io::BufWriter<File>>,
}

/// Refuses what must not be written through: a symlink, a directory, a device, a FIFO.
fn check_final(flag: &str, path: &Path) -> Result<()> {
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(Error::usage(format!("{flag}: an empty path")));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            let what = if t.is_symlink() {
                "is a symbolic link; refusing to follow it (remove it or pick another path)"
            } else if t.is_dir() {
                "is a directory (give a file name)"
            } else if t.is_file() {
                return Ok(());
            } else if t.is_fifo() || t.is_socket() || t.is_char_device() || t.is_block_device() {
                "is not a regular file; refusing to replace it"
            } else {
                "is not a regular file"
            };
            Err(Error::usage(format!("{flag} {shown}: {what}")))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::output(format!("{flag} {shown}"), e)),
    }
}

/// The directory a path lives in (`.` for a bare file name).
fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// 64 unpredictable bits: std's `RandomState` is keyed from the OS random source.
pub(crate) fn random_suffix() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

impl OutputFile {
    /// Starts writing `path` (named `flag` in errors): the checks above, then a fresh
    /// temporary file next to it.
    pub fn create(flag: &str, path: &Path) -> Result<Self> {
        check_final(flag, path)?;
        let dir = dir_of(path);
        let name = path
            .file_name()
            .ok_or_else(|| Error::usage(format!("{flag} {}: not a file name", path.display())))?;
        let mut last = None;
        for _ in 0..8 {
            let mut tmp_name = std::ffi::OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".{:016x}.tmp", random_suffix()));
            let tmp = dir.join(tmp_name);
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC).bits())
                .open(&tmp)
            {
                Ok(f) => {
                    return Ok(OutputFile {
                        flag: flag.to_string(),
                        path: path.to_path_buf(),
                        tmp,
                        file: Some(io::BufWriter::with_capacity(1 << 16, f)),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(Error::output(
                        format!("{flag} {}", path.display()),
                        with_dir_hint(e, dir),
                    ));
                }
            }
        }
        Err(Error::output(
            format!("{flag} {}", path.display()),
            last.unwrap_or_else(|| io::Error::other("no free temporary name")),
        ))
    }

    /// Flushes, fsyncs and renames the file into place.
    pub fn commit(mut self) -> Result<()> {
        let what = format!("{} {}", self.flag, self.path.display());
        let mut w = self.file.take().expect("committed once");
        w.flush().map_err(|e| Error::output(&what, e))?;
        let f = w
            .into_inner()
            .map_err(|e| Error::output(&what, e.into_error()))?;
        f.sync_all().map_err(|e| Error::output(&what, e))?;
        drop(f);
        // A symlink planted since `create` is refused too; rename itself would replace the link,
        // not its target, so nothing outside the path is touched either way.
        check_final(&self.flag, &self.path)?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::output(&what, e))?;
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.as_mut().expect("not committed").write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().expect("not committed").flush()
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            self.file = None;
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn with_dir_hint(e: io::Error, dir: &Path) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound {
        io::Error::new(
            e.kind(),
            format!("directory {} does not exist", dir.display()),
        )
    } else {
        e
    }
}

/// Refuses an output path now (exit 2), before any measurement: the same checks and a trial
/// temporary file, removed again.
pub fn check(flag: &str, path: &Path) -> Result<()> {
    OutputFile::create(flag, path).map(drop)
}

/// Only the final-component checks (for a path whose directory may not exist yet).
pub fn check_target(flag: &str, path: &Path) -> Result<()> {
    check_final(flag, path)
}

/// Checks several optional output paths, each with its flag name.
pub fn check_all(paths: &[(&str, Option<&Path>)]) -> Result<()> {
    for (flag, p) in paths {
        if let Some(p) = p {
            check(flag, p)?;
        }
    }
    Ok(())
}

/// Writes a whole file safely.
pub fn write(flag: &str, path: &Path, body: &[u8]) -> Result<()> {
    let mut f = OutputFile::create(flag, path)?;
    f.write_all(body)
        .map_err(|e| Error::output(format!("{flag} {}", path.display()), e))?;
    f.commit()
}

/// Writes to stdout. A closed pipe (`trapdetect ... | head`) ends the program quietly; any
/// other error (a full disk behind `>report.txt`) is a lost report and is returned.
pub fn stdout(s: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(Error::output("the report on stdout", e)),
    }
}

/// Prints the report, then writes each requested file; failures are returned (all of them, in
/// one line) only after everything else was attempted, so a measurement is never lost to one
/// bad path.
pub fn emit(stdout_text: &str, files: &[(&str, Option<&Path>, &[u8])]) -> Result<()> {
    let mut lost: Vec<String> = stdout(stdout_text)
        .err()
        .map(|e| e.to_string())
        .into_iter()
        .collect();
    for (flag, path, body) in files {
        if let Some(p) = path
            && let Err(e) = write(flag, p, body)
        {
            lost.push(e.to_string());
        }
    }
    if lost.is_empty() {
        Ok(())
    } else {
        Err(Error::ReportLost(lost.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "trapdetect-output-{tag}-{}-{:x}",
            std::process::id(),
            random_suffix()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_symlink_at_the_final_component_is_refused_and_its_target_untouched() {
        let d = tmpdir("link");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = d.join("report.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write("--json-out", &link, b"{}").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        // A dangling link (the planted-before-creation case) is refused too.
        let dangling = d.join("new.json");
        std::os::unix::fs::symlink(d.join("nonexistent"), &dangling).unwrap();
        assert!(check("--html", &dangling).is_err());
        assert!(!d.join("nonexistent").exists());
        assert_eq!(entries(&d), ["new.json", "report.json", "victim"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_planted_after_create_is_replaced_never_followed() {
        let d = tmpdir("race");
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let path = d.join("out.json");
        let mut f = OutputFile::create("--json-out", &path).unwrap();
        f.write_all(b"report").unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(f.commit().is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // No temporary file left behind.
        assert_eq!(entries(&d), ["out.json", "victim"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn writes_replace_atomically_and_leave_no_litter() {
        let d = tmpdir("ok");
        let p = d.join("r.json");
        write("--json-out", &p, b"one").unwrap();
        write("--json-out", &p, b"two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        let abandoned = OutputFile::create("--samples-out", &d.join("s.jsonl")).unwrap();
        drop(abandoned);
        assert_eq!(entries(&d), ["r.json"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn directories_devices_and_missing_directories_are_refused_up_front() {
        let d = tmpdir("bad");
        let e = check("--json-out", &d).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = check("--html", Path::new("/dev/null")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = check("--json-out", &d.join("no/such/dir/r.json")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(entries(&d).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn temporary_names_are_unpredictable() {
        assert_ne!(random_suffix(), random_suffix());
    }
}
