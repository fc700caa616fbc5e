//! slowfs: a FUSE passthrough that is slow and serialized on purpose, the way WSL2's DrvFs or a
//! single-threaded FUSE daemon behaves under concurrency. Every operation takes one global lock
//! and sleeps `--delay-us` while holding it; entry and attribute TTLs are 0 by default, so the
//! kernel asks again on every path walk (kernel caching would hide the trap). `--ttl-ms` sets
//! them the way most FUSE filesystems do (sshfs: 1 s), and `--delay-us 0` answers at once: the
//! fast, cached case whose walks the kernel serves from its dentry cache.
//!
//!     slowfs --backing DIR --mount MNT [--delay-us 200] [--ttl-ms 0] [--subtype slowfs] [--stats FILE] [--threads N] [--realtime]
//!
//! `--threads N` serves N operations at once (N daemon threads, no global lock): a slow
//! filesystem that is not serialized, as an NFS client with several RPCs in flight.
//!
//! `--realtime` runs the daemon SCHED_FIFO: each operation then takes its delay whatever else
//! this host's CPUs are doing, as a remote filesystem's server does (a SCHED_OTHER daemon that
//! wakes twice per operation waits for a CPU when the host is busy, so its service rate falls
//! with the load that measures it).
//!
//! Unmounts on SIGTERM/SIGINT. `--stats FILE` is rewritten every 100 ms with the operations
//! served so far, as JSON (`{"lookup": n, ...}`), for cross-checking trapdetect's counts.

use std::{
    collections::HashMap,
    ffi::OsStr,
    fs::File,
    os::unix::fs::{FileExt, MetadataExt},
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use fuser::{
    AccessFlags, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, Request,
};

/// Operation counters, in the order they are reported.
const OPS: [&str; 9] = [
    "lookup", "getattr", "readlink", "open", "read", "release", "opendir", "readdir", "access",
];

struct Inodes {
    by_ino: HashMap<u64, PathBuf>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

struct SlowFs {
    delay: Duration,
    /// Entry and attribute TTL handed to the kernel.
    ttl: Duration,
    /// The one operation at a time; None with `--threads N` above 1.
    lock: Option<Mutex<()>>,
    inodes: Mutex<Inodes>,
    files: Mutex<HashMap<u64, File>>,
    next_fh: AtomicU64,
    counts: &'static [AtomicU64; 9],
    access_refused: AtomicBool,
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from(e)
}

fn attr(ino: u64, md: &std::fs::Metadata) -> FileAttr {
    let t = |secs: i64, nsecs: i64| {
        if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
        } else {
            UNIX_EPOCH
        }
    };
    let ft = md.file_type();
    let kind = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino: INodeNo(ino),
        size: md.size(),
        blocks: md.blocks(),
        atime: t(md.atime(), md.atime_nsec()),
        mtime: t(md.mtime(), md.mtime_nsec()),
        ctime: t(md.ctime(), md.ctime_nsec()),
        crtime: SystemTime::UNIX_EPOCH,
        kind,
        perm: (md.mode() & 0o7777) as u16,
        nlink: md.nlink() as u32,
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        flags: 0,
        blksize: md.blksize() as u32,
    }
}

impl SlowFs {
    /// Serializes (unless `--threads`) and delays one operation, counting it.
    fn op(&self, idx: usize) -> Option<std::sync::MutexGuard<'_, ()>> {
        let g = self
            .lock
            .as_ref()
            .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()));
        self.counts[idx].fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(self.delay);
        g
    }

    fn path(&self, ino: INodeNo) -> Option<PathBuf> {
        self.inodes
            .lock()
            .unwrap()
            .by_ino
            .get(&u64::from(ino))
            .cloned()
    }

    fn ino_for(&self, p: &Path) -> u64 {
        let mut t = self.inodes.lock().unwrap();
        if let Some(&i) = t.by_path.get(p) {
            return i;
        }
        let i = t.next;
        t.next += 1;
        t.by_ino.insert(i, p.to_path_buf());
        t.by_path.insert(p.to_path_buf(), i);
        i
    }
}

impl Filesystem for SlowFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let _g = self.op(0);
        let Some(dir) = self.path(parent) else {
            return reply.error(Errno::ENOENT);
        };
        let p = dir.join(name);
        match std::fs::symlink_metadata(&p) {
            Ok(md) => {
                let ino = self.ino_for(&p);
                reply.entry(&self.ttl, &attr(ino, &md), Generation(0))
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let _g = self.op(1);
        let Some(p) = self.path(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match std::fs::symlink_metadata(&p) {
            Ok(md) => reply.attr(&self.ttl, &attr(u64::from(ino), &md)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let _g = self.op(2);
        let Some(p) = self.path(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match std::fs::read_link(&p) {
            Ok(t) => reply.data(t.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _g = self.op(3);
        let Some(p) = self.path(ino) else {
            return reply.error(Errno::ENOENT);
        };
        match File::open(&p) {
            Ok(f) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.files.lock().unwrap().insert(fh, f);
                reply.opened(FileHandle(fh), FopenFlags::empty())
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let _g = self.op(4);
        let files = self.files.lock().unwrap();
        let Some(f) = files.get(&u64::from(fh)) else {
            return reply.error(Errno::EBADF);
        };
        let mut buf = vec![0u8; size as usize];
        match f.read_at(&mut buf, offset) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let _g = self.op(5);
        self.files.lock().unwrap().remove(&u64::from(fh));
        reply.ok()
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let _g = self.op(6);
        match self.path(ino) {
            Some(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let _g = self.op(7);
        let Some(dir) = self.path(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (u64::from(ino), FileType::Directory, ".".into()),
            (1, FileType::Directory, "..".into()),
        ];
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                for e in rd.flatten() {
                    let p = e.path();
                    let kind = match e.file_type() {
                        Ok(t) if t.is_dir() => FileType::Directory,
                        Ok(t) if t.is_symlink() => FileType::Symlink,
                        _ => FileType::RegularFile,
                    };
                    entries.push((self.ino_for(&p), kind, e.file_name()));
                }
            }
            Err(e) => return reply.error(errno(e)),
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok()
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(0, 0, 0, 0, 0, 4096, 255, 0)
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        let _g = self.op(8);
        // ENOSYS once: the kernel then stops sending ACCESS (otherwise one per chdir).
        self.access_refused.store(true, Ordering::Relaxed);
        reply.error(Errno::ENOSYS)
    }
}

struct Args {
    backing: PathBuf,
    mount: PathBuf,
    delay_us: u64,
    ttl_ms: u64,
    subtype: String,
    stats: Option<PathBuf>,
    realtime: bool,
    threads: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        backing: PathBuf::new(),
        mount: PathBuf::new(),
        delay_us: 200,
        ttl_ms: 0,
        subtype: "slowfs".into(),
        stats: None,
        realtime: false,
        threads: 1,
    };
    let mut it = std::env::args_os().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))
        };
        match flag.to_str() {
            Some("--backing") => a.backing = val()?.into(),
            Some("--mount") => a.mount = val()?.into(),
            Some("--delay-us") => {
                a.delay_us = val()?
                    .to_string_lossy()
                    .parse()
                    .map_err(|_| "--delay-us: not a number".to_string())?
            }
            Some("--ttl-ms") => {
                a.ttl_ms = val()?
                    .to_string_lossy()
                    .parse()
                    .map_err(|_| "--ttl-ms: not a number".to_string())?
            }
            Some("--subtype") => a.subtype = val()?.to_string_lossy().into_owned(),
            Some("--stats") => a.stats = Some(val()?.into()),
            Some("--realtime") => a.realtime = true,
            Some("--threads") => {
                a.threads = val()?
                    .to_string_lossy()
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| "--threads: a count from 1".to_string())?
            }
            _ => return Err(format!("unknown argument {}", flag.to_string_lossy())),
        }
    }
    if a.backing.as_os_str().is_empty() || a.mount.as_os_str().is_empty() {
        return Err("usage: slowfs --backing DIR --mount MNT [--delay-us N] [--ttl-ms N] [--subtype NAME] [--stats FILE] [--threads N] [--realtime]".into());
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("slowfs: {e}");
            std::process::exit(2);
        }
    };
    let backing = match std::fs::canonicalize(&args.backing) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("slowfs: {}: {e}", args.backing.display());
            std::process::exit(2);
        }
    };
    if args.realtime {
        // Threads created from here on (fuser's session, the stats writer) inherit the policy.
        // The system call, not libc's wrapper: musl's sched_setscheduler is a stub that
        // fails with ENOSYS (the tests run the static musl build), and its sched_param has
        // more fields than glibc's.
        let mut p: libc::sched_param = unsafe { std::mem::zeroed() };
        p.sched_priority = 1;
        let set = unsafe {
            libc::syscall(
                libc::SYS_sched_setscheduler,
                0,
                libc::SCHED_FIFO,
                &p as *const libc::sched_param,
            )
        };
        if set != 0 {
            eprintln!(
                "slowfs: --realtime: sched_setscheduler: {}",
                std::io::Error::last_os_error()
            );
            std::process::exit(1);
        }
    }
    // Block the stop signals in every thread; the main thread waits for them with sigwait.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    static COUNTS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];
    let mut inodes = Inodes {
        by_ino: HashMap::new(),
        by_path: HashMap::new(),
        next: 2,
    };
    inodes.by_ino.insert(1, backing.clone());
    inodes.by_path.insert(backing.clone(), 1);
    let fs = SlowFs {
        delay: Duration::from_micros(args.delay_us),
        ttl: Duration::from_millis(args.ttl_ms),
        lock: (args.threads == 1).then(|| Mutex::new(())),
        inodes: Mutex::new(inodes),
        files: Mutex::new(HashMap::new()),
        next_fh: AtomicU64::new(1),
        counts: &COUNTS,
        access_refused: AtomicBool::new(false),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("slowfs".into()),
        // fuser 0.18 drops `Subtype` when it calls mount(2) itself; pass it through.
        MountOption::CUSTOM(format!("subtype={}", args.subtype)),
        MountOption::RO,
    ];
    config.acl = fuser::SessionACL::All;
    config.n_threads = Some(args.threads);
    let session = match fuser::spawn_mount(fs, &args.mount, &config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("slowfs: mount {}: {e}", args.mount.display());
            std::process::exit(1);
        }
    };
    if let Some(stats) = args.stats.clone() {
        std::thread::spawn(move || {
            loop {
                let body: Vec<String> = OPS
                    .iter()
                    .zip(COUNTS.iter())
                    .map(|(n, c)| format!("\"{n}\":{}", c.load(Ordering::Relaxed)))
                    .collect();
                let tmp = stats.with_extension("tmp");
                if std::fs::write(&tmp, format!("{{{}}}\n", body.join(","))).is_ok() {
                    let _ = std::fs::rename(&tmp, &stats);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    let mut sig = 0;
    unsafe { libc::sigwait(&set, &mut sig) };
    drop(session);
}
