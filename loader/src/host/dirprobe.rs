//! The directory probe: a bounded micro-benchmark on a directory itself (issue 23), so
//! preflight measures what a path lookup, an open and read, a listing and a durable write cost
//! there instead of guessing from the mount's type. Every operation runs relative to an open
//! descriptor of the directory (`fstatat`, `openat`), so only the last component is looked up
//! on the filesystem measured; the same operations run on a private directory on a local
//! reference filesystem in the same run, so the verdict compares like with like on this
//! machine at this moment.
//!
//! Writes happen only where asked (`--dir`), only in one private name created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW` relative to the directory's descriptor (so no symlink, in the
//! name or above it, can send the write elsewhere), and that name is unlinked at once.

use std::{
    os::fd::{AsFd, OwnedFd},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use nix::{
    fcntl::{OFlag, openat},
    sys::stat::{Mode, fstatat},
    unistd::{UnlinkatFlags, fsync, read, unlinkat, write},
};
use serde::Serialize;

/// The operations, in the order they run (cold stats first, before anything warms a cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// `fstatat` of each existing entry, the first time (a lookup the kernel may not have
    /// cached yet).
    StatCold,
    /// `fstatat` of the same entries again and again (what a request's path walk pays once the
    /// entries were seen).
    StatRepeated,
    /// `openat` + one 4 KiB `read` + `close` of an existing regular file.
    OpenReadClose,
    /// Open the directory, read the first batch of entries, close.
    Readdir,
    /// Create a private name (`O_EXCL|O_NOFOLLOW`), write 4 KiB, `fsync`, close, unlink.
    CreateWriteFsyncUnlink,
}

impl Op {
    /// Every operation, in the order they run.
    pub const ALL: [Op; 5] = [
        Op::StatCold,
        Op::StatRepeated,
        Op::OpenReadClose,
        Op::Readdir,
        Op::CreateWriteFsyncUnlink,
    ];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::StatCold => "stat (cold)",
            Op::StatRepeated => "stat (repeated)",
            Op::OpenReadClose => "open+read+close",
            Op::Readdir => "readdir",
            Op::CreateWriteFsyncUnlink => "create+write+fsync+unlink",
        }
    }

    /// How long one side may spend on this operation, and at most how many times it runs.
    /// The slices add up to 40 ms a side, so a directory and its reference take about 80 ms
    /// when each operation is fast enough for its minimum count to fit its slice; a disk whose
    /// fsync takes 10 ms or more stretches the last one (3 samples a side, taken alternately
    /// in the directory and the reference).
    fn budget(self) -> (Duration, usize, usize) {
        match self {
            Op::StatCold => (Duration::from_millis(5), 1, MAX_ENTRIES),
            Op::StatRepeated => (Duration::from_millis(8), MIN_SAMPLES, 400),
            Op::OpenReadClose => (Duration::from_millis(8), MIN_SAMPLES, 200),
            Op::Readdir => (Duration::from_millis(7), MIN_SAMPLES, 100),
            Op::CreateWriteFsyncUnlink => (Duration::from_millis(12), 3, 50),
        }
    }
}

/// Entries of the directory that are statted and opened.
const MAX_ENTRIES: usize = 8;
/// Samples taken even past an operation's time slice (a median needs a few).
const MIN_SAMPLES: usize = 5;
/// The longest the whole probe of one directory may take before it is abandoned (a hung
/// mount): the probe runs on its own thread and the answer is "did not finish".
pub const HARD_LIMIT: Duration = Duration::from_secs(2);
/// Bytes read and written per operation.
const IO_BYTES: usize = 4096;

/// One operation's timings on one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpTimes {
    /// The operation.
    pub op: Op,
    /// Samples taken.
    pub n: usize,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile (nearest rank), µs.
    pub p99_us: f64,
}

/// The operations measured on one directory.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Timings, in [`Op::ALL`] order; an operation that could not run is absent.
    pub ops: Vec<OpTimes>,
    /// Why an operation did not run (`open+read+close: no regular file`), or failed.
    pub notes: Vec<String>,
    /// The probe wrote (and removed) its private file here.
    pub wrote: bool,
}

impl Side {
    /// The timings of `op`, if it ran.
    pub fn get(&self, op: Op) -> Option<&OpTimes> {
        self.ops.iter().find(|o| o.op == op)
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn summary(op: Op, mut us: Vec<f64>) -> OpTimes {
    us.sort_by(f64::total_cmp);
    OpTimes {
        op,
        n: us.len(),
        p50_us: crate::figures::round(percentile(&us, 0.5), 1),
        p99_us: crate::figures::round(percentile(&us, 0.99), 1),
    }
}

/// Runs `f` under `op`'s budget; stops at the first error (noted).
fn timed(op: Op, side: &mut Side, mut f: impl FnMut(usize) -> nix::Result<()>) {
    let (slice, min_n, max_n) = op.budget();
    let start = Instant::now();
    let mut us = vec![];
    while us.len() < max_n
        && (us.len() < min_n || start.elapsed() < slice)
        && start.elapsed() < slice * 4
    {
        let t = Instant::now();
        if let Err(e) = f(us.len()) {
            side.notes.push(format!("{}: {e}", op.name()));
            break;
        }
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    if !us.is_empty() {
        side.ops.push(summary(op, us));
    }
}

/// An entry found by listing the directory.
struct Entry {
    name: std::ffi::CString,
    regular: bool,
}

fn list(dir: &OwnedFd, max: usize) -> nix::Result<Vec<Entry>> {
    let fd = openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut d = nix::dir::Dir::from_fd(fd)?;
    let mut out = vec![];
    for e in d.iter() {
        let e = e?;
        let name = e.file_name();
        let b = name.to_bytes();
        if b == b"." || b == b".." || b.starts_with(PROBE_PREFIX.as_bytes()) {
            continue;
        }
        out.push(Entry {
            name: name.to_owned(),
            regular: e.file_type() == Some(nix::dir::Type::File),
        });
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

/// The prefix of the probe's private names (skipped when listing).
pub const PROBE_PREFIX: &str = ".trapdetect-probe-";

/// Measures the read-only operations on `dir` (an open directory descriptor).
fn measure(dir: &OwnedFd) -> Side {
    let mut side = Side::default();
    let entries = match list(dir, MAX_ENTRIES) {
        Ok(e) => e,
        Err(e) => {
            side.notes.push(format!("listing: {e}"));
            vec![]
        }
    };
    let stat_names: Vec<&std::ffi::CStr> = if entries.is_empty() {
        side.notes
            .push("no entries: the directory itself is statted (\".\")".into());
        vec![c"."]
    } else {
        entries.iter().map(|e| e.name.as_c_str()).collect()
    };
    let nofollow = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
    // Cold: each entry once, the first time anything looks it up.
    let mut cold = vec![];
    for name in &stat_names {
        let t = Instant::now();
        match fstatat(dir, *name, nofollow) {
            Ok(_) => cold.push(t.elapsed().as_secs_f64() * 1e6),
            Err(e) => side.notes.push(format!("{}: {e}", Op::StatCold.name())),
        }
    }
    if !cold.is_empty() {
        side.ops.push(summary(Op::StatCold, cold));
    }
    timed(Op::StatRepeated, &mut side, |i| {
        fstatat(dir, stat_names[i % stat_names.len()], nofollow).map(drop)
    });
    let files: Vec<&std::ffi::CStr> = entries
        .iter()
        .filter(|e| e.regular)
        .map(|e| e.name.as_c_str())
        .collect();
    let mut buf = vec![0u8; IO_BYTES];
    if files.is_empty() {
        side.notes
            .push("open+read+close: no regular file among the entries listed".into());
    } else {
        timed(Op::OpenReadClose, &mut side, |i| {
            let fd = openat(
                dir,
                files[i % files.len()],
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
                Mode::empty(),
            )?;
            read(&fd, &mut buf)?;
            drop(fd);
            Ok(())
        });
    }
    timed(Op::Readdir, &mut side, |_| {
        let fd = openat(
            dir,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut d = nix::dir::Dir::from_fd(fd)?;
        // The first batch only: a directory of a million entries costs the same as a small one.
        for e in d.iter().take(64) {
            e?;
        }
        Ok(())
    });
    side
}

/// One durable write in `dir`: create the private `name` (`O_CREAT|O_EXCL|O_NOFOLLOW`, relative
/// to the descriptor), write 4 KiB, fsync, close, unlink.
fn write_once(dir: &OwnedFd, name: &std::ffi::CStr, payload: &[u8]) -> nix::Result<()> {
    let fd = openat(
        dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    // From here on the name is ours: remove it whatever happens next.
    let r = write(&fd, payload).and_then(|_| fsync(&fd));
    drop(fd);
    let u = unlinkat(dir, name, UnlinkatFlags::NoRemoveDir);
    r.and(u)
}

/// The durable writes, alternating between the directory and the reference, one sample each
/// per round: a disk's fsync varies tenfold from one moment to the next on a shared machine,
/// and two runs taken one after the other would measure two moments, not two directories.
fn write_interleaved(dir: &OwnedFd, reference: &OwnedFd, out: &mut DirProbe) {
    let name = std::ffi::CString::new(format!(
        "{PROBE_PREFIX}{}-{:016x}",
        std::process::id(),
        crate::output::random_suffix()
    ))
    .expect("no NUL in a formatted name");
    let payload = vec![0x5au8; IO_BYTES];
    let op = Op::CreateWriteFsyncUnlink;
    let (slice, min_n, max_n) = op.budget();
    // Both sides share the slice: each gets as many samples as the other.
    let (slice, start) = (slice * 2, Instant::now());
    let (mut a, mut b) = (vec![], vec![]);
    let mut failed: Option<(bool, nix::Error)> = None;
    'rounds: while a.len() < max_n
        && (a.len() < min_n || start.elapsed() < slice)
        && start.elapsed() < slice * 4
    {
        for (measured, fd) in [(true, dir), (false, reference)] {
            let t = Instant::now();
            match write_once(fd, &name, &payload) {
                Ok(()) => {
                    let us = t.elapsed().as_secs_f64() * 1e6;
                    if measured { a.push(us) } else { b.push(us) }
                }
                Err(e) => {
                    failed = Some((measured, e));
                    break 'rounds;
                }
            }
        }
    }
    if let Some((measured, e)) = failed {
        let side = if measured {
            &mut out.measured
        } else {
            &mut out.reference
        };
        side.notes.push(format!("{}: {e}", op.name()));
    }
    finish_writes(a, b, out)
}

fn finish_writes(a: Vec<f64>, b: Vec<f64>, out: &mut DirProbe) {
    let op = Op::CreateWriteFsyncUnlink;
    let n = a.len().min(b.len());
    if n == 0 {
        return;
    }
    out.measured.ops.push(summary(op, a[..n].to_vec()));
    out.reference.ops.push(summary(op, b[..n].to_vec()));
    out.measured.wrote = true;
    out.reference.wrote = true;
}

/// Whether a write probe may run in a directory: it is writable by us (`faccessat W_OK`, which
/// is what the create would be checked against) and not mounted read-only.
fn writable(dir: &OwnedFd) -> bool {
    nix::unistd::faccessat(
        dir.as_fd(),
        ".",
        nix::unistd::AccessFlags::W_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    )
    .is_ok()
}

/// A private reference directory on a local filesystem, with `MAX_ENTRIES` small files;
/// removed (files, then the directory) on drop.
struct Reference {
    path: PathBuf,
    fd: OwnedFd,
    names: Vec<std::ffi::CString>,
}

impl Reference {
    fn create(parent: &Path) -> std::io::Result<Reference> {
        use std::os::unix::fs::DirBuilderExt;
        let path = parent.join(format!(
            "trapdetect-ref-{}-{:016x}",
            std::process::id(),
            crate::output::random_suffix()
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let mut r = Reference {
            path,
            fd,
            names: vec![],
        };
        let payload = vec![0x5au8; IO_BYTES];
        for i in 0..MAX_ENTRIES {
            let name = std::ffi::CString::new(format!("f{i}")).expect("no NUL");
            let f = openat(
                &r.fd,
                name.as_c_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
            .map_err(std::io::Error::from)?;
            r.names.push(name);
            write(&f, &payload).map_err(std::io::Error::from)?;
        }
        Ok(r)
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = unlinkat(&self.fd, n.as_c_str(), UnlinkatFlags::NoRemoveDir);
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// The probe of one directory beside the reference.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DirProbe {
    /// What was measured (escaped).
    pub dir: String,
    /// The directory measured.
    pub measured: Side,
    /// The same operations on the local reference.
    pub reference: Side,
    /// Where the reference directory was made (escaped), or why there is none.
    pub reference_dir: Option<String>,
    /// Wall time of the whole probe (both sides), ms.
    pub elapsed_ms: f64,
    /// The probe did not finish within [`HARD_LIMIT`] (a hung mount), or could not open the
    /// directory: the reason.
    pub error: Option<String>,
}

/// How a directory is probed.
#[derive(Clone, Debug)]
pub struct ProbeRequest {
    /// The path opened (may be a /proc magic link such as /proc/PID/cwd).
    pub open: PathBuf,
    /// The path shown.
    pub shown: String,
    /// May the probe write its private file there?
    pub write: bool,
    /// Candidate parents for the reference directory, first usable wins.
    pub reference_parents: Vec<PathBuf>,
}

/// Where a local reference directory can be made: /var/tmp and /tmp (the root filesystem's
/// disk, whose fsync is a real one, on most machines), then /dev/shm; any of them on a slow or
/// remote mount is left out.
pub fn local_parents(mounts: Option<&super::mounts::MountTable>) -> Vec<PathBuf> {
    ["/var/tmp", "/tmp", "/dev/shm"]
        .into_iter()
        .filter(|p| {
            mounts.is_none_or(|t| {
                t.mount_of(p.as_bytes())
                    .is_none_or(|i| t.mounts[i].slow_kind().is_none())
            })
        })
        .map(PathBuf::from)
        .collect()
}

fn probe_now(req: &ProbeRequest) -> DirProbe {
    let started = Instant::now();
    let mut out = DirProbe {
        dir: req.shown.clone(),
        ..Default::default()
    };
    let fd = match nix::fcntl::open(
        &req.open,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) => {
            out.error = Some(format!("open {}: {e}", req.shown));
            return out;
        }
    };
    let write_ok = req.write && writable(&fd);
    out.measured = measure(&fd);
    if req.write && !write_ok {
        out.measured
            .notes
            .push("create+write+fsync+unlink: not writable here (nothing written)".into());
    }
    let mut why = vec![];
    for parent in &req.reference_parents {
        match Reference::create(parent) {
            Ok(r) => {
                out.reference = measure(&r.fd);
                out.reference_dir =
                    Some(crate::escape::bytes(parent.as_os_str().as_encoded_bytes()));
                if write_ok {
                    write_interleaved(&fd, &r.fd, &mut out);
                }
                break;
            }
            Err(e) => why.push(format!("{}: {e}", parent.display())),
        }
    }
    if out.reference_dir.is_none() {
        out.error = Some(format!("no local reference directory ({})", why.join("; ")));
    }
    out.elapsed_ms = crate::figures::round(started.elapsed().as_secs_f64() * 1e3, 1);
    out
}

/// Probes `req` on a thread of its own; a directory whose operations do not finish within
/// [`HARD_LIMIT`] is reported as such (the thread is left blocked in the kernel).
pub fn probe(req: ProbeRequest) -> DirProbe {
    let shown = req.shown.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("dir-probe".into())
        .spawn(move || {
            let _ = tx.send(probe_now(&req));
        });
    if let Err(e) = spawned {
        return DirProbe {
            dir: shown,
            error: Some(format!("cannot start the probe thread: {e}")),
            ..Default::default()
        };
    }
    match rx.recv_timeout(HARD_LIMIT) {
        Ok(p) => p,
        Err(_) => DirProbe {
            dir: shown.clone(),
            elapsed_ms: HARD_LIMIT.as_secs_f64() * 1e3,
            error: Some(format!(
                "{shown} did not answer within {} s (a hung or very slow mount)",
                HARD_LIMIT.as_secs()
            )),
            ..Default::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn probes_a_local_directory_and_leaves_nothing_behind() {
        let base = std::env::temp_dir().join(format!("td-dirprobe-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join("a.txt"), b"hello").unwrap();
        std::fs::create_dir_all(base.join("sub")).unwrap();
        // A symlink out of the directory: never written through.
        let outside = std::env::temp_dir().join(format!("td-dirprobe-out-{}", std::process::id()));
        std::fs::write(&outside, b"untouched").unwrap();
        std::os::unix::fs::symlink(&outside, base.join("link")).unwrap();
        let p = probe(ProbeRequest {
            open: base.clone(),
            shown: base.display().to_string(),
            write: true,
            reference_parents: vec![std::env::temp_dir()],
        });
        assert_eq!(p.error, None, "{p:#?}");
        for op in Op::ALL {
            let m = p
                .measured
                .get(op)
                .unwrap_or_else(|| panic!("{op:?}: {p:#?}"));
            let r = p.reference.get(op).unwrap();
            assert!(m.n >= 1 && r.n >= 1, "{op:?}");
            assert!(m.p50_us <= m.p99_us);
        }
        // Cold stats: one per entry listed (3 entries).
        assert_eq!(p.measured.get(Op::StatCold).unwrap().n, 3);
        assert!(p.measured.wrote && p.reference.wrote);
        let mut left: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["a.txt", "link", "sub"]);
        assert_eq!(std::fs::read(&outside).unwrap(), b"untouched");
        // The reference directory is gone.
        assert!(!std::fs::read_dir(std::env::temp_dir()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("trapdetect-ref-{}-", std::process::id()))
        }));
        // Read-only request: nothing is written.
        let p = probe(ProbeRequest {
            open: base.clone(),
            shown: "x".into(),
            write: false,
            reference_parents: vec![std::env::temp_dir()],
        });
        assert!(p.measured.get(Op::CreateWriteFsyncUnlink).is_none());
        assert!(!p.measured.wrote && !p.reference.wrote);
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::remove_file(&outside).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_panic() {
        let p = probe(ProbeRequest {
            open: "/nonexistent/td".into(),
            shown: "/nonexistent/td".into(),
            write: true,
            reference_parents: vec![std::env::temp_dir()],
        });
        assert!(p.error.unwrap().contains("No such file"));
    }
}
