//! The one process model: which binary a process runs (path, sha256, build-id, libc), where it
//! runs from, how long it has run and how much memory it has held, who traces it and which CPUs
//! it may use; and its tree (descendants, liveness across pid reuse). `trace` and `run` read a
//! process's identity ([`Depth::Identity`]), `preflight` all of it ([`Depth::Full`]). Parsers
//! are pure (tested on recorded /proc files); `read` does the I/O and records what it was not
//! allowed to read instead of failing.

use std::{
    fs::File,
    io::{self, Read},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
};

use object::{
    Endianness, ReadCache, ReadRef, elf,
    read::elf::{Dyn, FileHeader, NoteIterator, ProgramHeader},
};
use serde::Serialize;

use crate::error::{Error, Result};

/// Fields of /proc/PID/stat that preflight uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stat {
    /// `comm`, raw bytes (between the first `(` and the last `)`).
    pub comm: Vec<u8>,
    /// State letter.
    pub state: char,
    /// Parent pid.
    pub ppid: u32,
    /// User + system CPU time, clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, clock ticks.
    pub start_ticks: u64,
}

/// Parses /proc/PID/stat. `comm` may hold spaces and parentheses, so the fields after it are
/// counted from the last `)`.
pub fn parse_stat(text: &[u8]) -> Option<Stat> {
    let open = text.iter().position(|&b| b == b'(')?;
    let close = text.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let comm = text[open + 1..close].to_vec();
    let rest = std::str::from_utf8(&text[close + 1..]).ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(Stat {
        comm,
        state: f.first()?.chars().next()?,
        ppid: num(4)? as u32,
        // Checked: two values near u64::MAX are a malformed file, not a sum (the proc_files
        // fuzzer's find).
        cpu_ticks: num(14)?.checked_add(num(15)?)?,
        start_ticks: num(22)?,
    })
}

/// Fields of /proc/PID/status that preflight uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// `Name`.
    pub name: String,
    /// `Threads`.
    pub threads: u32,
    /// `TracerPid` (0: not traced).
    pub tracer_pid: u32,
    /// `VmRSS`, KiB (absent for kernel threads and zombies).
    pub vm_rss_kib: Option<u64>,
    /// `VmHWM`, the peak resident set, KiB.
    pub vm_hwm_kib: Option<u64>,
    /// `Cpus_allowed_list` as the kernel prints it.
    pub cpus_allowed_list: String,
    /// Real uid.
    pub uid: Option<u32>,
}

/// Parses /proc/PID/status.
pub fn parse_status(text: &str) -> Status {
    let mut s = Status::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let kib = || v.trim_end_matches("kB").trim().parse::<u64>().ok();
        match k {
            "Name" => s.name = v.to_string(),
            "Threads" => s.threads = v.parse().unwrap_or(0),
            "TracerPid" => s.tracer_pid = v.parse().unwrap_or(0),
            "VmRSS" => s.vm_rss_kib = kib(),
            "VmHWM" => s.vm_hwm_kib = kib(),
            "Cpus_allowed_list" => s.cpus_allowed_list = v.to_string(),
            "Uid" => {
                s.uid = v
                    .split_ascii_whitespace()
                    .next()
                    .and_then(|u| u.parse().ok())
            }
            _ => {}
        }
    }
    s
}

/// `schedstat`: (ns on a CPU, ns waiting on a run queue, timeslices run), the scheduler's own
/// exact account (CONFIG_SCHED_INFO).
pub fn parse_schedstat(text: &str) -> Option<(u64, u64, u64)> {
    let mut f = text.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

/// Parses a kernel CPU list (`0-3,8,10-11`). Returns `None` on anything malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    // Linux allows at most 8,192 CPUs; an id past this is a malformed list, and a range to
    // it would expand to billions of entries (the proc_files fuzzer's find: `2-522523475`).
    const MAX_CPU_ID: u32 = 1 << 16;
    let mut out = vec![];
    let s = s.trim();
    if s.is_empty() {
        return Some(out);
    }
    for part in s.split(',') {
        let part = part.trim();
        // A stride (`0-15:2`) is legal in cpuset syntax; /proc never prints one, but accept it.
        let (range, stride) = match part.split_once(':') {
            Some((r, st)) => (r, st.parse::<u32>().ok().filter(|&x| x > 0)?),
            None => (part, 1),
        };
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b >= MAX_CPU_ID {
                    return None;
                }
                out.extend((a..=b).step_by(stride as usize));
            }
            None => out.push(range.parse().ok().filter(|&c| c < MAX_CPU_ID)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Which C library a binary links against, as far as its headers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Libc {
    /// GNU libc (`ld-linux*`, `libc.so.6`).
    Glibc,
    /// musl (`ld-musl-*`, `libc.musl-*`): its allocator is 3–4× slower on allocation-heavy code.
    Musl,
    /// Bionic (Android linker).
    Bionic,
    /// Statically linked: no interpreter, the libc is inside.
    Static,
    /// Dynamic, but neither interpreter nor DT_NEEDED names a libc we know.
    Unknown,
}

impl Libc {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Libc::Glibc => "glibc",
            Libc::Musl => "musl",
            Libc::Bionic => "bionic",
            Libc::Static => "static",
            Libc::Unknown => "unknown",
        }
    }
}

/// What the ELF headers of an executable say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ElfInfo {
    /// 32 or 64.
    pub class: u8,
    /// `e_machine`, named when known (`x86_64`, `aarch64`...).
    pub machine: String,
    /// PT_INTERP: the dynamic loader.
    pub interp: Option<String>,
    /// DT_NEEDED entries, in order.
    pub needed: Vec<String>,
    /// NT_GNU_BUILD_ID, hex.
    pub build_id: Option<String>,
    /// Has a PT_DYNAMIC segment.
    pub dynamic: bool,
}

impl ElfInfo {
    /// The C library flavour.
    pub fn libc(&self) -> Libc {
        let interp = self.interp.as_deref().unwrap_or("");
        let needs = |p: &str| self.needed.iter().any(|n| n.starts_with(p));
        if interp.contains("ld-musl") || needs("libc.musl") {
            Libc::Musl
        } else if interp.contains("ld-linux") || interp.contains("/ld64.so") || needs("libc.so.6") {
            Libc::Glibc
        } else if interp.contains("/system/bin/linker") {
            Libc::Bionic
        } else if self.interp.is_none() {
            Libc::Static
        } else {
            Libc::Unknown
        }
    }
}

/// Why an ELF could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// Not an ELF file.
    #[error("not an ELF file")]
    NotElf,
    /// Headers point outside the file or are inconsistent.
    #[error("malformed ELF: {0}")]
    Malformed(&'static str),
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Anything an ELF can be read from (a file, or bytes in a test or the fuzzer).
pub trait ReadAt {
    /// The length, bytes.
    fn size(&self) -> io::Result<u64>;
    /// Reads up to `buf.len()` bytes at `off` (0 at the end) without moving a file offset.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn size(&self) -> io::Result<u64> {
        self.metadata().map(|m| m.len())
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, off)
    }
}

impl ReadAt for [u8] {
    fn size(&self) -> io::Result<u64> {
        Ok(self.len() as u64)
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let rest = usize::try_from(off)
            .ok()
            .and_then(|o| self.get(o..))
            .unwrap_or(&[]);
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

/// Upper bounds so a hostile or corrupt binary cannot make us read much.
const MAX_PHDRS: usize = 512;
const MAX_SEGMENT: u64 = 1 << 20;
/// All bytes read from one file (`object::ReadCache` keeps every read until it is dropped).
const MAX_READ: u64 = 8 << 20;

/// A [`ReadAt`] as the stream `object::ReadCache` reads: positioned reads (a file's own offset
/// does not move, so it can still be hashed from the start), at most `MAX_READ` bytes in all,
/// and the first I/O error kept (`ReadCache` reports only that a read failed).
struct Reader<'a, R: ?Sized> {
    src: &'a R,
    pos: u64,
    budget: u64,
    spent: bool,
    error: Option<io::Error>,
}

impl<R: ReadAt + ?Sized> Reader<'_, R> {
    fn fail(&mut self, e: io::Error) {
        if e.kind() != io::ErrorKind::UnexpectedEof && self.error.is_none() {
            self.error = Some(e);
        }
    }
}

impl<R: ReadAt + ?Sized> object::ReadCacheOps for Reader<'_, R> {
    fn len(&mut self) -> Result<u64, ()> {
        self.src.size().map_err(|e| self.fail(e))
    }

    fn seek(&mut self, pos: u64) -> Result<u64, ()> {
        self.pos = pos;
        Ok(pos)
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        if buf.len() as u64 > self.budget {
            self.spent = true;
            return Err(());
        }
        loop {
            match self.src.read_at(buf, self.pos) {
                Ok(n) => {
                    self.pos = self.pos.saturating_add(n as u64);
                    self.budget -= n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(e);
                    return Err(());
                }
            }
        }
    }

    fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<(), ()> {
        while !buf.is_empty() {
            match self.read(buf)? {
                0 => return Err(()),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }
}

fn machine_name(m: u16) -> String {
    match m {
        elf::EM_386 => "i386".into(),
        elf::EM_ARM => "arm".into(),
        elf::EM_X86_64 => "x86_64".into(),
        elf::EM_AARCH64 => "aarch64".into(),
        elf::EM_RISCV => "riscv".into(),
        elf::EM_MIPS => "mips".into(),
        elf::EM_PPC => "ppc".into(),
        elf::EM_PPC64 => "ppc64".into(),
        elf::EM_S390 => "s390".into(),
        elf::EM_LOONGARCH => "loongarch".into(),
        other => format!("e_machine {other}"),
    }
}

/// Reads PT_INTERP, PT_NOTE (the GNU build-id) and PT_DYNAMIC (DT_NEEDED) from ELF headers with
/// the `object` crate, through a `ReadCache` that reads only the ranges asked for: the header,
/// the program headers, those segments (each at most 1 MiB) and the dynamic string table.
pub fn parse_elf<R: ReadAt + ?Sized>(r: &R) -> Result<ElfInfo, ElfError> {
    let cache = ReadCache::new(Reader {
        src: r,
        pos: 0,
        budget: MAX_READ,
        spent: false,
        error: None,
    });
    let info = parse_headers(&cache);
    let reader = cache.into_inner();
    match (info, reader.error) {
        (Err(_), Some(e)) => Err(ElfError::Io(e)),
        (Err(_), None) if reader.spent => Err(ElfError::Malformed("headers larger than 8 MiB")),
        (info, _) => info,
    }
}

fn parse_headers<'d, D: ReadRef<'d>>(data: D) -> Result<ElfInfo, ElfError> {
    // e_ident: magic, class, data encoding, version.
    let ident = data.read_bytes_at(0, 16).map_err(|_| ElfError::NotElf)?;
    if ident[..4] != elf::ELFMAG {
        return Err(ElfError::NotElf);
    }
    let class = match ident[4] {
        elf::ELFCLASS32 => 32,
        elf::ELFCLASS64 => 64,
        _ => return Err(ElfError::Malformed("bad class")),
    };
    if ident[5] != elf::ELFDATA2LSB && ident[5] != elf::ELFDATA2MSB {
        return Err(ElfError::Malformed("bad data encoding"));
    }
    if ident[6] != elf::EV_CURRENT {
        return Err(ElfError::Malformed("bad version"));
    }
    if class == 32 {
        segments::<elf::FileHeader32<Endianness>, D>(data, class)
    } else {
        segments::<elf::FileHeader64<Endianness>, D>(data, class)
    }
}

fn segments<'d, H, D>(data: D, class: u8) -> Result<ElfInfo, ElfError>
where
    H: FileHeader<Endian = Endianness>,
    D: ReadRef<'d>,
{
    let h = H::parse(data).map_err(|_| ElfError::Malformed("short header"))?;
    let endian = h
        .endian()
        .map_err(|_| ElfError::Malformed("bad data encoding"))?;
    let bad_table = |_| ElfError::Malformed("bad program header table");
    let phnum = h.phnum(endian, data).map_err(bad_table)?;
    if phnum > MAX_PHDRS {
        return Err(ElfError::Malformed("bad program header table"));
    }
    let phdrs = h.program_headers(endian, data).map_err(bad_table)?;
    let bytes = |off: u64, len: u64| {
        if len > MAX_SEGMENT {
            return Err(ElfError::Malformed("segment larger than 1 MiB"));
        }
        data.read_bytes_at(off, len)
            .map_err(|_| ElfError::Malformed("segment outside the file"))
    };
    let segment =
        |p: &H::ProgramHeader| bytes(p.p_offset(endian).into(), p.p_filesz(endian).into());
    let mut info = ElfInfo {
        class,
        machine: machine_name(h.e_machine(endian)),
        ..Default::default()
    };
    for p in phdrs {
        match p.p_type(endian) {
            elf::PT_INTERP => {
                let b = segment(p)?;
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                info.interp = Some(String::from_utf8_lossy(&b[..end]).into_owned());
            }
            elf::PT_NOTE if info.build_id.is_none() => {
                info.build_id = build_id::<H>(endian, p.p_align(endian), segment(p)?);
            }
            _ => {}
        }
    }
    if let Some(dynp) = phdrs.iter().find(|p| p.p_type(endian) == elf::PT_DYNAMIC) {
        info.dynamic = true;
        let b = segment(dynp)?;
        // A partial entry at the end is ignored.
        let (dyns, _) = object::pod::slice_from_bytes::<H::Dyn>(b, b.len() / size_of::<H::Dyn>())
            .map_err(|_| ElfError::Malformed("misaligned dynamic segment"))?;
        let (mut strtab, mut strsz, mut needed) = (None, None, vec![]);
        for d in dyns {
            let val: u64 = d.d_val(endian).into();
            match d.d_tag(endian).into() {
                elf::DT_NULL => break,
                elf::DT_NEEDED => needed.push(val),
                elf::DT_STRTAB => strtab = Some(val),
                elf::DT_STRSZ => strsz = Some(val),
                _ => {}
            }
        }
        if let (Some(va), Some(sz)) = (strtab, strsz) {
            // DT_STRTAB is a virtual address: map it through the PT_LOAD that holds it.
            let off = phdrs
                .iter()
                .filter(|p| p.p_type(endian) == elf::PT_LOAD)
                .find_map(|p| {
                    va.checked_sub(p.p_vaddr(endian).into())
                        .filter(|&d| d < p.p_filesz(endian).into())
                        .and_then(|d| d.checked_add(p.p_offset(endian).into()))
                });
            if let Some(off) = off {
                let strs = bytes(off, sz)?;
                for n in needed {
                    let Some(s) = usize::try_from(n).ok().and_then(|n| strs.get(n..)) else {
                        continue;
                    };
                    let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                    info.needed
                        .push(String::from_utf8_lossy(&s[..end]).into_owned());
                }
            }
        }
    }
    Ok(info)
}

/// Finds NT_GNU_BUILD_ID (name "GNU") in a note segment; `None` when the notes are malformed.
fn build_id<H: FileHeader<Endian = Endianness>>(
    endian: Endianness,
    align: H::Word,
    b: &[u8],
) -> Option<String> {
    let mut notes = NoteIterator::<H>::new(endian, align, b).ok()?;
    while let Ok(Some(n)) = notes.next() {
        if n.n_type(endian) == elf::NT_GNU_BUILD_ID && n.name() == elf::ELF_NOTE_GNU {
            return Some(n.desc().iter().map(|x| format!("{x:02x}")).collect());
        }
    }
    None
}

/// The SHA-256 of a file, streamed.
pub fn sha256_file(f: &mut File) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The executable a process runs.
#[derive(Clone, Debug, Serialize)]
pub struct Exe {
    /// /proc/PID/exe target without the ` (deleted)` suffix (raw bytes).
    #[serde(skip)]
    pub path: Vec<u8>,
    /// The file was replaced or removed on disk after the process started it.
    pub deleted: bool,
    /// SHA-256 of the running image (read through /proc/PID/exe, so it is the binary that
    /// runs even when the path now holds another).
    pub sha256: Option<String>,
    /// Size, bytes.
    pub size_bytes: Option<u64>,
    /// ELF facts.
    pub elf: Option<ElfInfo>,
    /// Why the ELF could not be read.
    pub elf_error: Option<String>,
}

impl Exe {
    /// From /proc/PID/exe's link, before anything is read through it.
    pub fn from_link(link: &[u8]) -> Exe {
        let (path, deleted) = split_deleted(link);
        Exe {
            path,
            deleted,
            sha256: None,
            size_bytes: None,
            elf: None,
            elf_error: None,
        }
    }

    /// The link as the kernel shows it: the path, then ` (deleted)` when it was replaced.
    pub fn link(&self) -> Vec<u8> {
        let mut l = self.path.clone();
        if self.deleted {
            l.extend_from_slice(DELETED);
        }
        l
    }
}

const DELETED: &[u8] = b" (deleted)";

/// Splits a readlink result into the path and whether the kernel marked it ` (deleted)`.
pub fn split_deleted(link: &[u8]) -> (Vec<u8>, bool) {
    match link.strip_suffix(DELETED) {
        Some(p) => (p.to_vec(), true),
        None => (link.to_vec(), false),
    }
}

/// A part of a process that could not be read, and why (usually: no ptrace access).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The /proc entry.
    pub what: &'static str,
    /// The error.
    pub reason: String,
}

/// A thread being traced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Traced {
    /// Thread (or child process) id.
    pub tid: u32,
    /// TracerPid.
    pub tracer_pid: u32,
}

/// A process snapshot. At [`Depth::Identity`] only `pid`, `stat`, `status`, `cmdline`,
/// `age_s`, `exe` (its path, not its contents) and `cwd` are read; the rest stays empty.
#[derive(Clone, Debug)]
pub struct Process {
    /// Pid.
    pub pid: u32,
    /// Parsed stat.
    pub stat: Stat,
    /// Parsed status.
    pub status: Status,
    /// argv (raw bytes; may be rewritten by the process, as php-fpm does).
    pub cmdline: Vec<Vec<u8>>,
    /// Seconds since the process started.
    pub age_s: f64,
    /// The executable (None when /proc/PID/exe could not be read).
    pub exe: Option<Exe>,
    /// Working directory (raw bytes, as seen from the process's root).
    pub cwd: Option<Vec<u8>>,
    /// Open file descriptors.
    pub fd_count: Option<u64>,
    /// Paths of open regular files and directories (not sockets, pipes, /dev, /proc).
    pub open_paths: Vec<Vec<u8>>,
    /// Threads of this process and its direct children that are being traced.
    pub traced: Vec<Traced>,
    /// Direct children (pid, cwd when readable).
    pub children: Vec<(u32, Option<Vec<u8>>)>,
    /// What could not be read.
    pub denied: Vec<Denied>,
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> f64 {
    let t = crate::util::sysconf(nix::unistd::SysconfVar::CLK_TCK);
    if t > 0 { t as f64 } else { 100.0 }
}

/// Seconds since boot (/proc/uptime).
pub fn uptime_s() -> Option<f64> {
    std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

fn proc_path(pid: u32, entry: &str) -> PathBuf {
    Path::new("/proc").join(pid.to_string()).join(entry)
}

/// Splits /proc/PID/cmdline into arguments.
pub fn split_cmdline(b: &[u8]) -> Vec<Vec<u8>> {
    let b = b.strip_suffix(&[0]).unwrap_or(b);
    if b.is_empty() {
        return vec![];
    }
    b.split(|&c| c == 0).map(<[u8]>::to_vec).collect()
}

fn readlink(p: &Path) -> io::Result<Vec<u8>> {
    use std::os::unix::ffi::OsStringExt;
    std::fs::read_link(p).map(|t| t.into_os_string().into_vec())
}

/// Reads /proc/PID/stat and status; the process must exist (exit 2 otherwise).
pub fn read_basic(pid: u32) -> Result<(Stat, Status)> {
    let stat_text = std::fs::read(proc_path(pid, "stat")).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::usage(format!("no process with pid {pid}"))
        } else {
            Error::input(format!("/proc/{pid}/stat"), e)
        }
    })?;
    let stat = parse_stat(&stat_text)
        .ok_or_else(|| Error::usage(format!("/proc/{pid}/stat: unexpected format")))?;
    let status = std::fs::read_to_string(proc_path(pid, "status"))
        .map(|t| parse_status(&t))
        .map_err(|e| Error::input(format!("/proc/{pid}/status"), e))?;
    Ok((stat, status))
}

/// How much of a process [`read`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Depth {
    /// Who it is: stat, status, argv, the executable's path, the working directory (what a
    /// trace names its target by; no file is opened).
    Identity,
    /// Everything: also the executable's ELF facts, open files, tracers and children.
    #[default]
    Full,
}

/// Options for [`read`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ReadOptions {
    /// How much to read.
    pub depth: Depth,
    /// Hash the executable (reads the whole file; [`Depth::Full`] only).
    pub hash_exe: bool,
}

impl ReadOptions {
    /// [`Depth::Identity`].
    pub fn identity() -> ReadOptions {
        ReadOptions {
            depth: Depth::Identity,
            hash_exe: false,
        }
    }
}

/// Snapshots a process. Missing privileges are recorded in `denied`, not raised.
pub fn read(pid: u32, opts: ReadOptions) -> Result<Process> {
    let (stat, status) = read_basic(pid)?;
    let mut denied = vec![];
    let mut deny = |what: &'static str, e: &io::Error| {
        denied.push(Denied {
            what,
            reason: e.to_string(),
        })
    };
    let cmdline = std::fs::read(proc_path(pid, "cmdline"))
        .map(|b| split_cmdline(&b))
        .unwrap_or_default();
    let age_s = uptime_s()
        .map(|up| (up - stat.start_ticks as f64 / clock_ticks()).max(0.0))
        .unwrap_or(0.0);
    let exe = match readlink(&proc_path(pid, "exe")) {
        Ok(link) => {
            let mut exe = Exe::from_link(&link);
            // Open through /proc: this is the image that runs, even when the path was replaced.
            match (opts.depth == Depth::Full).then(|| File::open(proc_path(pid, "exe"))) {
                None => {}
                Some(Ok(mut f)) => {
                    exe.size_bytes = f.metadata().ok().map(|m| m.len());
                    match parse_elf(&f) {
                        Ok(e) => exe.elf = Some(e),
                        Err(e) => exe.elf_error = Some(e.to_string()),
                    }
                    if opts.hash_exe {
                        exe.sha256 = sha256_file(&mut f).ok();
                    }
                }
                Some(Err(e)) => deny("exe (contents)", &e),
            }
            Some(exe)
        }
        Err(e) => {
            deny("exe", &e);
            None
        }
    };
    let cwd = match readlink(&proc_path(pid, "cwd")) {
        Ok(c) => Some(c),
        Err(e) => {
            deny("cwd", &e);
            None
        }
    };
    let mut p = Process {
        pid,
        stat,
        status,
        cmdline,
        age_s,
        exe,
        cwd,
        fd_count: None,
        open_paths: vec![],
        traced: vec![],
        children: vec![],
        denied,
    };
    if opts.depth == Depth::Full {
        read_details(&mut p);
    }
    Ok(p)
}

/// The [`Depth::Full`] part of [`read`]: open files, tracers, children.
fn read_details(p: &mut Process) {
    let pid = p.pid;
    let mut deny = |what: &'static str, e: &io::Error| {
        p.denied.push(Denied {
            what,
            reason: e.to_string(),
        })
    };
    let (mut fd_count, mut open_paths) = (None, vec![]);
    match std::fs::read_dir(proc_path(pid, "fd")) {
        Ok(rd) => {
            let mut n = 0u64;
            for ent in rd.flatten() {
                n += 1;
                if let Ok(t) = readlink(&ent.path())
                    && t.first() == Some(&b'/')
                    && !t.starts_with(b"/dev/")
                    && !t.starts_with(b"/proc/")
                    && !t.starts_with(b"/sys/")
                {
                    let (p, _) = split_deleted(&t);
                    if !open_paths.contains(&p) {
                        open_paths.push(p);
                    }
                }
            }
            fd_count = Some(n);
        }
        Err(e) => deny("fd", &e),
    }
    let mut traced = vec![];
    if let Ok(rd) = std::fs::read_dir(proc_path(pid, "task")) {
        for ent in rd.flatten() {
            let Some(tid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(t) = std::fs::read_to_string(ent.path().join("status")) {
                let st = parse_status(&t);
                if st.tracer_pid != 0 {
                    traced.push(Traced {
                        tid,
                        tracer_pid: st.tracer_pid,
                    });
                }
            }
        }
    }
    let mut children = vec![];
    for child in children_of(pid) {
        if let Ok(t) = std::fs::read_to_string(proc_path(child, "status")) {
            let st = parse_status(&t);
            if st.tracer_pid != 0 && !traced.iter().any(|x| x.tid == child) {
                traced.push(Traced {
                    tid: child,
                    tracer_pid: st.tracer_pid,
                });
            }
        }
        children.push((child, readlink(&proc_path(child, "cwd")).ok()));
    }
    traced.sort_by_key(|t| t.tid);
    p.fd_count = fd_count;
    p.open_paths = open_paths;
    p.traced = traced;
    p.children = children;
}

/// Direct children of `pid`, from /proc/PID/task/*/children (needs no privilege).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(proc_path(pid, "task")) {
        for ent in rd.flatten() {
            if let Ok(t) = std::fs::read_to_string(ent.path().join("children")) {
                out.extend(
                    t.split_ascii_whitespace()
                        .filter_map(|s| s.parse::<u32>().ok()),
                );
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// One row of a /proc scan.
#[derive(Clone, Debug)]
pub struct ProcEntry {
    /// Pid.
    pub pid: u32,
    /// Parsed /proc/PID/stat.
    pub stat: Stat,
}

/// Every process in /proc (threads are not listed; their time is in their process's stat).
pub fn scan() -> Vec<ProcEntry> {
    let mut out = vec![];
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for ent in rd.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(b) = std::fs::read(ent.path().join("stat"))
            && let Some(stat) = parse_stat(&b)
        {
            out.push(ProcEntry { pid, stat });
        }
    }
    out.sort_by_key(|e| e.pid);
    out
}

/// `pid` and its descendants by /proc/PID/task/*/children, without a scan of /proc (at most
/// `cap` processes).
pub fn subtree(pid: u32, cap: usize) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && out.len() < cap {
        for c in children_of(out[i]) {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        i += 1;
    }
    out.truncate(cap);
    out
}

/// `pid` and all its descendants, from a scan.
pub fn descendants(scan: &[ProcEntry], pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(scan.iter().filter(|e| e.stat.ppid == p).map(|e| e.pid));
        i += 1;
    }
    out
}

/// `root` and all its descendants now (one scan of /proc).
pub fn tree_now(root: u32) -> Vec<u32> {
    descendants(&scan(), root)
}

/// Whether the process that started at `start_ticks` is still alive (not exited, not a
/// reused pid). A zombie still has its stat: exited for our purposes.
pub fn alive(pid: u32, start_ticks: u64) -> bool {
    std::fs::read(proc_path(pid, "stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .is_some_and(|st| st.start_ticks == start_ticks && st.state != 'Z')
}

/// The process is in state Z: it exited and its parent has not reaped it.
pub fn is_zombie(pid: u32) -> bool {
    std::fs::read(proc_path(pid, "stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .is_some_and(|st| st.state == 'Z')
}

/// `comm` of a process, escaped; `?` when it is gone.
pub fn comm_of(pid: u32) -> String {
    std::fs::read(proc_path(pid, "comm"))
        .map(|b| crate::escape::bytes(b.strip_suffix(b"\n").unwrap_or(&b)))
        .unwrap_or_else(|_| "?".into())
}

/// Command line of a process, escaped and joined with spaces; empty when unreadable.
pub fn cmdline_of(pid: u32) -> String {
    std::fs::read(proc_path(pid, "cmdline"))
        .map(|b| {
            split_cmdline(&b)
                .iter()
                .map(|a| crate::escape::bytes(a))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The process of `root`'s tree allowed the fewest CPUs: (pid, comm, Cpus_allowed_list).
pub fn binding_affinity(scan: &[ProcEntry], root: u32) -> Option<(u32, Vec<u8>, String)> {
    descendants(scan, root)
        .into_iter()
        .filter_map(|p| {
            let st = parse_status(&std::fs::read_to_string(format!("/proc/{p}/status")).ok()?);
            let n = parse_cpu_list(&st.cpus_allowed_list)?.len();
            let comm = scan
                .iter()
                .find(|e| e.pid == p)
                .map(|e| e.stat.comm.clone())?;
            Some((n, p, comm, st.cpus_allowed_list))
        })
        // Fewest CPUs first; among equals the root (the pid given) first.
        .min_by_key(|(n, p, ..)| (*n, *p != root))
        .map(|(_, p, comm, list)| (p, comm, list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_fields() {
        assert_eq!(
            parse_schedstat("123456789 2345 17\n"),
            Some((123456789, 2345, 17))
        );
        assert_eq!(parse_schedstat("1 2"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn descendants_walk_the_scan() {
        let scan: Vec<ProcEntry> = [(1, 0), (10, 1), (11, 10), (12, 10), (13, 12), (20, 1)]
            .into_iter()
            .map(|(pid, ppid)| ProcEntry {
                pid,
                stat: Stat {
                    ppid,
                    ..Default::default()
                },
            })
            .collect();
        let mut d = descendants(&scan, 10);
        d.sort();
        assert_eq!(d, vec![10, 11, 12, 13]);
        assert_eq!(descendants(&scan, 99), vec![99]);
    }

    #[test]
    fn subtree_finds_a_child_by_its_children_file() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let t = subtree(std::process::id(), 4096);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(t[0], std::process::id());
        assert!(t.contains(&child.id()), "{t:?}");
        assert_eq!(subtree(std::process::id(), 1), vec![std::process::id()]);
    }

    const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/proc");

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(FIX).join(name)).unwrap()
    }

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let s = parse_stat(&fixture("stat-odd-comm.txt")).unwrap();
        assert_eq!(s.comm, b"php-fpm: pool (www) x");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 4242);
        assert_eq!(s.cpu_ticks, 1234 + 567);
        assert_eq!(s.start_ticks, 98765);
        // utime + stime past u64::MAX: malformed, not a panic or a wrapped sum.
        let huge = format!(
            "1 (x) S 1 1 1 0 -1 0 0 0 0 0 {} {} 0 0 20 0 1 0 5 0 0",
            u64::MAX,
            2
        );
        assert!(parse_stat(huge.as_bytes()).is_none());
        let max = format!(
            "1 (x) S 1 1 1 0 -1 0 0 0 0 0 {} {} 0 0 20 0 1 0 5 0 0",
            u64::MAX - 2,
            2
        );
        assert_eq!(parse_stat(max.as_bytes()).unwrap().cpu_ticks, u64::MAX);
    }

    #[test]
    fn status_of_a_traced_fpm_worker() {
        let s = parse_status(&String::from_utf8(fixture("status-traced.txt")).unwrap());
        assert_eq!(s.name, "php-fpm8.2");
        assert_eq!(s.tracer_pid, 31337);
        assert_eq!(s.vm_rss_kib, Some(107_400));
        assert_eq!(s.vm_hwm_kib, Some(205_312));
        assert_eq!(s.threads, 1);
        assert_eq!(s.cpus_allowed_list, "0-3,8");
        assert_eq!(s.uid, Some(33));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpu_list("0-7:2").unwrap(), vec![0, 2, 4, 6]);
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("a").is_none());
        // Past any real CPU id: malformed, not a range of half a billion entries.
        assert!(parse_cpu_list("0,2-522523475").is_none());
        assert!(parse_cpu_list("65536").is_none());
        assert_eq!(parse_cpu_list("65535").unwrap(), vec![65535]);
    }

    #[test]
    fn deleted_exe_is_recognised() {
        assert_eq!(
            split_deleted(b"/usr/sbin/php-fpm8.2 (deleted)"),
            (b"/usr/sbin/php-fpm8.2".to_vec(), true)
        );
        assert_eq!(split_deleted(b"/bin/x"), (b"/bin/x".to_vec(), false));
        let exe = Exe::from_link(b"/usr/sbin/php-fpm8.2 (deleted)");
        assert_eq!(
            (exe.path.as_slice(), exe.deleted),
            (&b"/usr/sbin/php-fpm8.2"[..], true)
        );
        assert_eq!(exe.link(), b"/usr/sbin/php-fpm8.2 (deleted)");
    }

    #[test]
    fn this_process_at_each_depth() {
        let me = std::process::id();
        let id = read(me, ReadOptions::identity()).unwrap();
        let cwd = std::env::current_dir()
            .unwrap()
            .into_os_string()
            .into_encoded_bytes();
        assert_eq!(id.pid, me);
        assert_eq!(id.cwd.as_deref(), Some(cwd.as_slice()));
        assert_eq!(
            id.exe.as_ref().unwrap().path,
            std::env::current_exe()
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        );
        // Identity opens no file: no ELF facts, no descriptors, no children.
        assert!(id.exe.as_ref().unwrap().elf.is_none());
        assert_eq!((id.fd_count, id.open_paths.len()), (None, 0));
        let full = read(me, ReadOptions::default()).unwrap();
        assert!(full.exe.as_ref().unwrap().elf.is_some());
        assert!(full.fd_count.unwrap() >= 3);
        assert_eq!(full.stat.start_ticks, id.stat.start_ticks);
        assert!(alive(me, id.stat.start_ticks));
        assert!(!alive(me, id.stat.start_ticks + 1));
        assert!(!is_zombie(me));
        assert!(tree_now(me).starts_with(&[me]));
        let gone = read(u32::MAX - 1, ReadOptions::identity()).unwrap_err();
        assert!(matches!(gone, Error::Usage(_)));
        assert_eq!(
            gone.to_string(),
            format!("no process with pid {}", u32::MAX - 1)
        );
    }

    #[test]
    fn musl_binary_interpreter_needed_and_build_id() {
        // A real dynamically linked musl executable (built with musl-gcc; see fixtures/preflight.md).
        let b = fixture("musl-hello.elf");
        let e = parse_elf(&b[..]).unwrap();
        assert_eq!(e.class, 64);
        assert_eq!(e.machine, "x86_64");
        assert_eq!(e.interp.as_deref(), Some("/lib/ld-musl-x86_64.so.1"));
        assert_eq!(e.needed, vec!["libc.so".to_string()]);
        assert_eq!(e.libc(), Libc::Musl);
        assert_eq!(
            e.build_id.as_deref(),
            Some(
                std::str::from_utf8(&fixture("musl-hello.build-id"))
                    .unwrap()
                    .trim()
            )
        );
    }

    #[test]
    fn this_test_binary_is_read_as_the_build_made_it() {
        let f = File::open(std::env::current_exe().unwrap()).unwrap();
        let e = parse_elf(&f).unwrap();
        if cfg!(target_env = "musl") {
            // `cargo xtask test` builds for x86_64-unknown-linux-musl: static, no interpreter.
            assert_eq!(e.libc(), Libc::Static);
            assert_eq!(e.interp, None);
            assert!(e.needed.is_empty(), "{e:?}");
        } else {
            assert_eq!(e.libc(), Libc::Glibc);
            assert!(e.needed.iter().any(|n| n == "libc.so.6"), "{e:?}");
        }
    }

    #[test]
    fn garbage_is_not_elf_and_truncation_is_caught() {
        assert!(matches!(
            parse_elf(&b"#!/bin/sh\necho hi\n"[..]),
            Err(ElfError::NotElf)
        ));
        let b = fixture("musl-hello.elf");
        assert!(parse_elf(&b[..200]).is_err());
    }

    #[test]
    fn truncated_or_corrupt_elf_is_an_error_not_a_panic() {
        let b = fixture("musl-hello.elf");
        // The fixture's PT_DYNAMIC ends at 0x2fd0: every shorter prefix points outside the file.
        for n in 0..0x2fd0 {
            assert!(parse_elf(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        assert!(parse_elf(&b[..0x2fd0]).is_ok());
        let patched = |at: usize, v: &[u8]| {
            let mut c = b.clone();
            c[at..at + v.len()].copy_from_slice(v);
            parse_elf(&c[..])
        };
        let msg = |r: Result<ElfInfo, ElfError>| r.unwrap_err().to_string();
        // e_phnum (offset 56) over the cap.
        assert_eq!(
            msg(patched(56, &600u16.to_le_bytes())),
            "malformed ELF: bad program header table"
        );
        // PT_INTERP (program header 1, at 64 + 56) with p_filesz (its offset 32) of 2 MiB.
        assert_eq!(
            msg(patched(64 + 56 + 32, &(2u64 << 20).to_le_bytes())),
            "malformed ELF: segment larger than 1 MiB"
        );
        // ... and with p_offset (its offset 8) past the end.
        assert_eq!(
            msg(patched(64 + 56 + 8, &u64::MAX.to_le_bytes())),
            "malformed ELF: segment outside the file"
        );
        assert_eq!(msg(patched(4, &[3])), "malformed ELF: bad class");
        // A build-id note whose n_descsz (at PT_NOTE's 0x28c + 4) runs past the segment: no
        // build-id, the rest still read.
        let e = patched(0x28c + 4, &u32::MAX.to_le_bytes()).unwrap();
        assert_eq!((e.libc(), e.build_id), (Libc::Musl, None));
        // Pseudo-random bytes after a valid e_ident, and random bytes over the real headers.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut c = b[..0x2fd0].to_vec();
            for _ in 0..1 + next() % 8 {
                let at = 16 + (next() % 0x2c0) as usize;
                c[at] = next() as u8;
            }
            let _ = parse_elf(&c[..]);
            let g: Vec<u8> = b[..16]
                .iter()
                .copied()
                .chain((0..next() % 4096).map(|_| next() as u8))
                .collect();
            let _ = parse_elf(&g[..]);
        }
    }

    #[test]
    fn reads_are_capped_in_all() {
        // 20 PT_INTERP segments of 1 MiB at distinct offsets of a 2 MiB file: each one is
        // allowed, together they are more than the read cache may hold.
        let mut b = vec![0u8; 2 << 20];
        b[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        let put = |b: &mut [u8], at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(&mut b, 18, &62u16.to_le_bytes());
        put(&mut b, 32, &64u64.to_le_bytes());
        put(&mut b, 54, &56u16.to_le_bytes());
        put(&mut b, 56, &20u16.to_le_bytes());
        for i in 0..20 {
            let p = 64 + 56 * i;
            put(&mut b, p, &3u32.to_le_bytes());
            put(&mut b, p + 8, &(4096 + i as u64).to_le_bytes());
            put(&mut b, p + 32, &(1u64 << 20).to_le_bytes());
        }
        assert_eq!(
            parse_elf(&b[..]).unwrap_err().to_string(),
            "malformed ELF: headers larger than 8 MiB"
        );
        put(&mut b, 56, &2u16.to_le_bytes());
        assert_eq!(parse_elf(&b[..]).unwrap().interp.as_deref(), Some(""));
    }

    #[test]
    fn reading_a_file_leaves_its_offset_for_the_hash() {
        use std::io::Seek;
        let mut f = File::open(std::env::current_exe().unwrap()).unwrap();
        parse_elf(&f).unwrap();
        assert_eq!(f.stream_position().unwrap(), 0);
    }

    #[test]
    fn cmdline_split() {
        assert_eq!(
            split_cmdline(b"php-fpm8.2\0-F\0-y\0/x y.conf\0"),
            vec![
                b"php-fpm8.2".to_vec(),
                b"-F".to_vec(),
                b"-y".to_vec(),
                b"/x y.conf".to_vec()
            ]
        );
        // php-fpm rewrites its title into one string without NULs.
        assert_eq!(
            split_cmdline(b"php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)"),
            vec![b"php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)".to_vec()]
        );
    }
}
