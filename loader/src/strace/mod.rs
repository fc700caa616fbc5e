//! `trapdetect trace --from-strace FILE`: the tracer's path table, filesystems and fs findings
//! from an `strace -f -tt -T -y` log instead of the eBPF probes. Each path syscall in the log
//! becomes the observation the probes would have made (syscall, path, where its walk starts,
//! the lookups it costs on each mount, its latency), resolved against the target's mount table
//! (live, or `--mountinfo FILE` saved with the log); the same rules judge it. strace slows the
//! server: figures per request hold, rates and ceilings from the log do not.

pub mod names;
pub mod parse;
pub mod run;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use trapdetect_common::hist::{HIST_BUCKETS, bucket_of};

use crate::{
    error::{Error, Result},
    escape,
    host::mounts::{MountTable, normalize, relative_lookups},
    report::{Measurement, Report, Requests, Target},
    trace::aggregate,
    traps::{
        self,
        fs::{Base, CallObs, CwdObs, FsObservation, Work},
        round,
    },
};

/// Largest log read (a minute of a busy server under strace).
pub const STRACE_CAP: u64 = 1 << 30;

/// `AT_FDCWD`.
const AT_FDCWD: i64 = -100;

/// How a path syscall names its path: (trapdetect's syscall name, index of the dirfd argument,
/// index of the path argument).
fn path_call(name: &str) -> Option<(&'static str, Option<usize>, Option<usize>)> {
    Some(match name {
        "stat" | "stat64" | "newstat" => ("newstat", None, Some(0)),
        "lstat" | "lstat64" | "newlstat" => ("newlstat", None, Some(0)),
        "newfstatat" | "fstatat64" => ("newfstatat", Some(0), Some(1)),
        "statx" => ("statx", Some(0), Some(1)),
        "chdir" => ("chdir", None, Some(0)),
        "fchdir" => ("fchdir", None, None),
        "getcwd" => ("getcwd", None, None),
        "access" => ("access", None, Some(0)),
        "faccessat" => ("faccessat", Some(0), Some(1)),
        "faccessat2" => ("faccessat2", Some(0), Some(1)),
        "open" => ("open", None, Some(0)),
        "openat" => ("openat", Some(0), Some(1)),
        "openat2" => ("openat2", Some(0), Some(1)),
        "readlink" => ("readlink", None, Some(0)),
        "readlinkat" => ("readlinkat", Some(0), Some(1)),
        _ => return None,
    })
}

/// What the kernel keys a path call by: (syscall, path, base, nofollow, base mount).
type CallKey = (&'static str, Option<Vec<u8>>, u8, bool, Option<usize>);

/// The log's path calls, aggregated as the kernel aggregates them.
#[derive(Default)]
pub struct Model {
    /// Calls by (syscall, path, base, nofollow, base mount).
    calls: HashMap<CallKey, CallObs>,
    /// Working directory of each pid, where the log told it.
    cwd: HashMap<Option<u32>, Vec<u8>>,
    /// The first working directory the log told for each pid.
    first_cwd: HashMap<Option<u32>, Vec<u8>>,
    /// Relative calls whose starting directory the log never told.
    pub unknown_calls: u64,
    /// Connections accepted.
    pub accepts: u64,
    /// Lines that were calls, and lines that were not understood.
    pub lines: u64,
    /// Call lines.
    pub calls_seen: u64,
    /// First and last instants, s.
    pub span: Option<(f64, f64)>,
    /// Pids seen.
    pub pids: std::collections::BTreeSet<u32>,
    /// The first execve's path and argv, when the log has it.
    pub exe: Option<Vec<u8>>,
    /// When each pid's last accepted connection was handed over, s.
    accepted_at: HashMap<Option<u32>, f64>,
    /// Time workers held a connection (from an accept's return to their next accept), s, and
    /// how many.
    held: (f64, u64),
    /// Every call on its thread's timeline (`run --from-strace` only).
    pub timeline: Option<run::Timeline>,
}

/// Where a call's walk starts, the path it shows, the mount it starts on, and its lookups
/// per mount.
type Walk = (Base, Option<Vec<u8>>, Option<usize>, Vec<(usize, u32)>);

fn base_code(b: Base) -> u8 {
    match b {
        Base::Absolute => 0,
        Base::Cwd => 1,
        Base::Dirfd => 2,
        Base::None => 3,
    }
}

fn join(dir: &[u8], rel: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    p.push(b'/');
    p.extend_from_slice(rel);
    normalize(&p)
}

impl Model {
    /// Reads a log (one file, or one of an `-ff` set with its pid from the file name).
    pub fn feed(&mut self, text: &str, file_pid: Option<u32>, mounts: &MountTable) {
        let mut pending = HashMap::new();
        for l in text.lines() {
            self.lines += 1;
            if let parse::Line::Call(mut c) = parse::line(l, &mut pending) {
                if c.pid.is_none() {
                    c.pid = file_pid;
                }
                self.call(&c, mounts);
            }
        }
    }

    fn call(&mut self, c: &parse::Call, mounts: &MountTable) {
        self.calls_seen += 1;
        self.note_pid_and_time(c);
        let args = parse::split_args(&c.args);
        let ok = c.ret.is_some_and(|r| r >= 0);
        self.note_lifecycle(c, &args, ok);
        let Some((name, dirfd_i, path_i)) = path_call(&c.name) else {
            if let Some(t) = &mut self.timeline {
                t.record(c, &args, None, mounts);
            }
            return;
        };
        // Where relative walks start: AT_FDCWD's `-y` annotation (strace 6), else the cwd
        // the log told (getcwd, chdir, fchdir).
        let dirfd = dirfd_i
            .and_then(|i| args.get(i))
            .and_then(|a| parse::fd_arg(a));
        if let Some((AT_FDCWD, Some(d))) = &dirfd {
            self.set_cwd(c.pid, normalize(d));
        }
        let path = path_i
            .and_then(|i| args.get(i))
            .and_then(|a| parse::string_arg(a));
        let nofollow =
            name == "newlstat" || (dirfd_i.is_some() && c.args.contains("AT_SYMLINK_NOFOLLOW"));
        let (base, shown, target, walk) = if name == "getcwd" || name == "fchdir" {
            let w = self.cwd_call(c, name, ok, &args, mounts);
            if let Some(t) = &mut self.timeline {
                t.record(c, &args, Some((w.2, w.3.as_slice())), mounts);
            }
            w
        } else {
            let w = self.path_walk(c, &path, &dirfd, mounts);
            if let Some(t) = &mut self.timeline {
                let walk = w.as_ref().map(|w| (w.2, w.3.as_slice()));
                t.record(c, &args, walk, mounts);
            }
            let Some(w) = w else {
                return;
            };
            w
        };
        if name == "chdir"
            && ok
            && let Some(p) = &path
        {
            self.note_chdir(c.pid, p);
        }
        let key = (name, shown.clone(), base_code(base), nofollow, target);
        let e = self.calls.entry(key).or_insert_with(|| CallObs {
            syscall: name,
            path: shown,
            base,
            nofollow,
            target,
            walk,
            count: 0,
            errors: 0,
            sum_ns: 0,
            max_ns: 0,
            hist: vec![0; HIST_BUCKETS as usize],
        });
        e.count += 1;
        if !ok {
            e.errors += 1;
        }
        let ns = (c.dur_s.unwrap_or(0.0) * 1e9) as u64;
        e.sum_ns += ns;
        e.max_ns = e.max_ns.max(ns);
        if let Some(b) = e.hist.get_mut(bucket_of(ns) as usize) {
            *b += 1;
        }
    }

    /// Notes the call's process and widens the log's span to its time.
    fn note_pid_and_time(&mut self, c: &parse::Call) {
        if let Some(p) = c.pid {
            self.pids.insert(p);
        }
        if let Some(t) = c.time_s {
            let end = t + c.dur_s.unwrap_or(0.0);
            self.span = Some(match self.span {
                None => (t, end),
                Some((a, b)) => (a.min(t), b.max(end)),
            });
        }
    }

    /// Notes accepts (and how long a worker held the last connection), the first execve, and
    /// where a child starts.
    fn note_lifecycle(&mut self, c: &parse::Call, args: &[&str], ok: bool) {
        if matches!(c.name.as_str(), "accept" | "accept4")
            && let Some(t) = c.time_s
        {
            // A worker that accepts once per request (php-fpm) held the last one until now.
            if let Some(t0) = self.accepted_at.remove(&c.pid)
                && t >= t0
            {
                self.held.0 += t - t0;
                self.held.1 += 1;
            }
            if ok {
                self.accepted_at.insert(c.pid, t + c.dur_s.unwrap_or(0.0));
            }
        }
        match c.name.as_str() {
            "accept" | "accept4" if ok => self.accepts += 1,
            "execve" if self.exe.is_none() => {
                self.exe = args.first().and_then(|a| parse::string_arg(a));
            }
            // A child starts where its parent is.
            "clone" | "clone3" | "fork" | "vfork" if ok => {
                if let (Some(r), Some(d)) = (c.ret, self.cwd.get(&c.pid).cloned())
                    && !self.cwd.contains_key(&Some(r as u32))
                {
                    self.set_cwd(Some(r as u32), d);
                }
            }
            _ => {}
        }
    }

    /// A call that reads or sets the working directory (getcwd, fchdir): no walk.
    fn cwd_call(
        &mut self,
        c: &parse::Call,
        name: &str,
        ok: bool,
        args: &[&str],
        mounts: &MountTable,
    ) -> Walk {
        if name == "getcwd" {
            if ok && let Some(p) = args.first().and_then(|a| parse::string_arg(a)) {
                self.set_cwd(c.pid, normalize(&p));
            }
            (Base::None, None, None, vec![])
        } else {
            let d = args
                .first()
                .and_then(|a| parse::fd_arg(a))
                .and_then(|f| f.1);
            let m = d.as_ref().and_then(|d| mounts.mount_of(&normalize(d)));
            if ok && let Some(d) = d {
                self.set_cwd(c.pid, normalize(&d));
            }
            (Base::Dirfd, None, m, vec![])
        }
    }

    /// Where a path call's walk starts, what it shows and the lookups it costs (`None`: its
    /// starting directory is unknown, or strace could not show its path).
    fn path_walk(
        &mut self,
        c: &parse::Call,
        path: &Option<Vec<u8>>,
        dirfd: &Option<(i64, Option<Vec<u8>>)>,
        mounts: &MountTable,
    ) -> Option<Walk> {
        let empty_path = path.as_ref().is_some_and(|p| p.is_empty());
        Some(match (path, dirfd) {
            (Some(p), _) if p.first() == Some(&b'/') => {
                let n = normalize(p);
                (
                    Base::Absolute,
                    Some(n.clone()),
                    mounts.mount_of(&n),
                    mounts.lookups(&n),
                )
            }
            // fstat as newfstatat(fd, "", AT_EMPTY_PATH): no walk.
            (Some(_), Some((fd, d))) if empty_path => (
                Base::None,
                None,
                d.as_ref()
                    .filter(|_| *fd != AT_FDCWD)
                    .and_then(|d| mounts.mount_of(&normalize(d))),
                vec![],
            ),
            (Some(p), Some((fd, Some(d)))) if *fd != AT_FDCWD => {
                let m = mounts.mount_of(&normalize(d));
                let n = relative_lookups(p);
                (
                    Base::Dirfd,
                    Some(p.clone()),
                    m,
                    m.filter(|_| n > 0)
                        .map(|m| vec![(m, n)])
                        .unwrap_or_default(),
                )
            }
            (Some(p), _) => {
                let Some(dir) = self.cwd.get(&c.pid) else {
                    self.unknown_calls += 1;
                    return None;
                };
                let m = mounts.mount_of(dir);
                let n = relative_lookups(p);
                let walk = m
                    .filter(|_| n > 0)
                    .map(|m| vec![(m, n)])
                    .unwrap_or_default();
                (Base::Cwd, Some(p.clone()), m, walk)
            }
            // A path strace cut short or could not read.
            (None, _) => {
                self.unknown_calls += 1;
                return None;
            }
        })
    }

    /// `pid`'s working directory is now `dir` (the first one told is where it sat: a worker
    /// visits its docroot per request and comes back).
    fn set_cwd(&mut self, pid: Option<u32>, dir: Vec<u8>) {
        self.first_cwd.entry(pid).or_insert_with(|| dir.clone());
        self.cwd.insert(pid, dir);
    }

    /// A successful chdir to `p`: the pid's new working directory, when it can be told.
    fn note_chdir(&mut self, pid: Option<u32>, p: &[u8]) {
        let next = if p.first() == Some(&b'/') {
            Some(normalize(p))
        } else {
            self.cwd.get(&pid).map(|d| join(d, p))
        };
        if let Some(n) = next {
            self.set_cwd(pid, n);
        }
    }

    /// The working directories the log told, by how many pids sat in each when first told
    /// (a log cut while workers were in their docroot mid-request ends with them there).
    fn cwds(&self) -> Vec<CwdObs> {
        let mut by: HashMap<&[u8], usize> = HashMap::new();
        for d in self.first_cwd.values() {
            *by.entry(d.as_slice()).or_default() += 1;
        }
        let mut out: Vec<CwdObs> = by
            .into_iter()
            .map(|(p, n)| CwdObs {
                path: p.to_vec(),
                processes: n,
                visited: false,
            })
            .collect();
        out.sort_by(|a, b| b.processes.cmp(&a.processes).then(a.path.cmp(&b.path)));
        out
    }
}

/// The files of a log: FILE itself, or the `-ff` set FILE.PID (each with its pid).
fn log_files(path: &Path) -> Result<Vec<(PathBuf, Option<u32>)>> {
    if path.is_file() {
        return Ok(vec![(path.to_path_buf(), None)]);
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let stem = path
        .file_name()
        .map(|s| s.as_encoded_bytes().to_vec())
        .unwrap_or_default();
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.as_encoded_bytes();
            if let Some(rest) = name.strip_prefix(stem.as_slice())
                && let Some(pid) = rest.strip_prefix(b".")
                && let Some(pid) = std::str::from_utf8(pid).ok().and_then(|p| p.parse().ok())
            {
                out.push((e.path(), Some(pid)));
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Input {
            what: format!(
                "--from-strace {}",
                escape::text(&path.display().to_string())
            ),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file, and no -ff set FILE.PID beside it",
            ),
        });
    }
    out.sort();
    Ok(out)
}

/// The report of a log: the tracer's tables and fs findings, per accepted connection.
pub fn report(
    path: &Path,
    mountinfo: Option<&Path>,
    pid: Option<u32>,
    top: usize,
) -> Result<Report> {
    let (model, mounts) = read(path, mountinfo, pid, false)?;
    Ok(judge(model, mounts, top))
}

/// Reads a log (one file or an `-ff` set) against the target's mount table.
fn read(
    path: &Path,
    mountinfo: Option<&Path>,
    pid: Option<u32>,
    timeline: bool,
) -> Result<(Model, MountTable)> {
    let mounts = match (mountinfo, pid) {
        (Some(m), _) => MountTable::read(m)?,
        (None, Some(p)) => MountTable::of_pid(p)?,
        (None, None) => MountTable::of_pid(std::process::id())?,
    };
    let mut model = Model {
        timeline: timeline.then(run::Timeline::default),
        ..Default::default()
    };
    for (file, file_pid) in log_files(path)? {
        let bytes = crate::input::read_capped("--from-strace", &file, STRACE_CAP)?;
        model.feed(&String::from_utf8_lossy(&bytes), file_pid, &mounts);
    }
    if model.calls_seen == 0 {
        return Err(Error::usage(format!(
            "--from-strace {}: no system call in it (expected `strace -f -tt -T -y` output)",
            escape::text(&path.display().to_string())
        )));
    }
    Ok((model, mounts))
}

/// `run --from-strace FILE`: the trace's tables and fs findings, then `run`'s time split,
/// rules and verdict from every thread's calls.
pub fn run_report(
    path: &Path,
    mountinfo: Option<&Path>,
    pid: Option<u32>,
    top: usize,
) -> Result<Report> {
    let (mut model, mounts) = read(path, mountinfo, pid, true)?;
    let timeline = model.timeline.take().unwrap_or_default();
    let start_cwd = model.cwds().first().map(|c| c.path.clone());
    let untimed = timeline.untimed;
    let mut report = judge(model, mounts.clone(), top);
    report.command = "run";
    let cx = run::Context {
        mounts: &mounts,
        rows: &report.filesystems,
        start_cwd: start_cwd.as_deref(),
        exe: report
            .target
            .as_ref()
            .map(|t| t.exe.clone())
            .unwrap_or_default(),
    };
    let Some((obs, stops)) = run::observe(&timeline, &cx) else {
        return Err(Error::usage(format!(
            "--from-strace {}: no call with a time and a duration: run needs `strace -f -tt -T -y`",
            escape::text(&path.display().to_string())
        )));
    };
    let m = &mut report.measurement;
    m.notes.push(RUN_NOTE.into());
    m.notes.push(format!(
        "strace's own stops are taken out of the threads' time: {:.0} µs for each gap between two calls of a thread ({}) and {:.0} µs for each call ({}): {:.3} thread-seconds",
        stops.per_gap_us,
        if stops.measured.0 {
            "the mean gap between two instant calls in this log: getpid, rt_sigaction and the like"
        } else {
            "the shortest gap in this log: too few instant calls to measure it by"
        },
        stops.per_call_us,
        if stops.measured.1 {
            "the instant calls' mean duration"
        } else {
            "none: too few instant calls to measure it by"
        },
        stops.total_s
    ));
    m.counters.insert(
        "strace_stop_ns".into(),
        ((stops.per_gap_us * 1e3).round() as u64).into(),
    );
    m.counters.insert(
        "strace_call_stop_ns".into(),
        ((stops.per_call_us * 1e3).round() as u64).into(),
    );
    if untimed > 0 {
        m.notes.push(format!(
            "{untimed} calls without a time or a duration (strace -tt -T) are not in the time split"
        ));
    }
    report.findings.extend(traps::run::rules(&obs));
    let inputs = traps::run::VerdictInputs {
        delivered_basis: DELIVERED_BASIS.into(),
        timeouts: 0,
    };
    crate::trace::run::driver::record_verdict(&mut report, &obs, &inputs, "log");
    report.add(&crate::trace::run::section::RunSection::of(
        &obs,
        0,
        &traps::run::LOAD_COLUMNS,
        DELIVERED_BASIS,
        crate::trace::run::section::METHOD_STRACE,
    ));
    Ok(report)
}

/// What a run from a log delivered: the connections its threads accepted.
const DELIVERED_BASIS: &str = "accepted-connections";

/// How a run from a log splits the threads' time, said in every such report.
const RUN_NOTE: &str = "run from an strace log: a thread's time inside a call is in the call's class less strace's own stops (a call the kernel ran without blocking counts too), its time between calls is on-CPU less strace's own stops (strace cannot tell a thread waiting for a CPU: run_queue is 0); no generator, so no offered rate: whether the load found a ceiling is judged from the threads (workers busy, a resource queued); strace slows the server, so shares and figures per request hold and rates do not; context switches are not in a log (0)";

/// The rules and tables from a model.
pub fn judge(model: Model, mounts: MountTable, top: usize) -> Report {
    let mut report = Report::new("trace");
    let window_s = model.span.map(|(a, b)| (b - a).max(1e-3)).unwrap_or(0.0);
    let requests = (model.accepts > 0).then_some(model.accepts);
    let mut cwds = model.cwds();
    let calls: Vec<CallObs> = {
        let mut v: Vec<CallObs> = model.calls.values().cloned().collect();
        v.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.syscall.cmp(b.syscall))
                .then_with(|| a.path.cmp(&b.path))
        });
        v
    };
    // A directory requests chdir into (PHP's docroot) is visited, not where the server sits.
    let start = cwds.first().map(|c| c.path.clone());
    for c in &mut cwds {
        c.visited = start.as_deref() != Some(c.path.as_slice())
            && calls.iter().any(|k| {
                k.syscall == "chdir"
                    && k.base == Base::Absolute
                    && k.path.as_deref() == Some(c.path.as_slice())
            });
    }
    let fs = FsObservation {
        mounts: mounts.clone(),
        calls,
        cwds,
        requests,
        window_s,
        fuse: vec![],
        fuse_measured: false,
        cmdline: vec![],
        exe: model.exe.clone(),
        work: Work {
            cpu_ns: None,
            threads: model.pids.len().max(1),
            cpus: crate::util::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN).max(1) as usize,
            // strace times each request too: a worker's time from an accept to its next.
            request_ms: (model.held.1 > 0).then(|| model.held.0 / model.held.1 as f64 * 1e3),
        },
    };
    report.target = Some(Target {
        pid: model.pids.iter().next().copied().unwrap_or(0),
        comm: String::new(),
        exe: model.exe.as_deref().map(escape::bytes).unwrap_or_default(),
        cwd: fs
            .cwds
            .first()
            .map(|c| escape::bytes(&c.path))
            .unwrap_or_default(),
        processes: model.pids.len().max(1),
        exited_after_s: None,
        selected_by: None,
    });
    report.window_s = Some(round(window_s, 3));
    report.requests = Some(Requests {
        count: requests,
        basis: if requests.is_some() {
            "accepted-connections"
        } else {
            "none"
        },
        rate_per_s: requests.map(|r| round(r as f64 / window_s.max(1e-9), 2)),
        note: Some(
            "from an strace log: strace slows the server, so figures per request hold and rates do not".into(),
        ),
        served: None,
    });
    report.findings.extend(traps::fs::rules(&fs));
    report.syscalls = aggregate::syscall_rows(&fs.calls, &mounts, requests, window_s);
    report.filesystems = aggregate::fs_rows(
        &fs.calls,
        &fs.fuse,
        &std::collections::HashMap::new(),
        &mounts,
        requests,
        window_s,
    );
    report.paths = aggregate::path_rows(&fs.calls, &mounts, requests, top);
    measurement(&mut report.measurement, &model, fs.work.request_ms);
    report
}

/// What limits a log's figures: how much of it there was, and what could not be counted.
fn measurement(m: &mut Measurement, model: &Model, request_ms: Option<f64>) {
    m.trusted = true;
    m.notes.push(format!(
        "from an strace log: {} lines, {} calls, {} processes or threads; no eBPF",
        model.lines,
        model.calls_seen,
        model.pids.len()
    ));
    m.counters
        .insert("strace_calls".into(), model.calls_seen.into());
    m.counters
        .insert("unknown_path_calls".into(), model.unknown_calls.into());
    if model.unknown_calls > 0 {
        m.notes.push(format!(
            "{} relative path calls came before the log told their process's working directory (a getcwd, chdir or AT_FDCWD</dir> with strace -y): not counted",
            model.unknown_calls
        ));
    }
    if let Some(ms) = request_ms {
        m.notes.push(format!(
            "request time from the log: a worker's time from one accept to its next, {} times, {:.3} ms on average (under strace, which slows it)",
            model.held.1, ms
        ));
    }
    if model.span.is_none() {
        m.notes
            .push("the log has no timestamps (strace -tt): no rates".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS: &str = "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n36 25 0:44 / /mnt/slow rw - fuse.slowfs slowfs rw,user_id=0\n";

    #[test]
    fn a_php_request_walks_its_cwd_on_the_slow_mount() {
        let mounts = MountTable::parse(MOUNTS).unwrap();
        let mut m = Model::default();
        // Two requests of Debian's NTS php-fpm: getcwd, chdir to the docroot, open the script,
        // chdir back (walks every component of the cwd), as `strace -f -tt -T -y` writes them,
        // with a resumed accept in between.
        let log = r#"100 12:00:00.000000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC <unfinished ...>
101 12:00:00.000100 getcwd("/mnt/slow/a/b/c", 4096) = 16 <0.000010>
100 12:00:00.001000 <... accept4 resumed>) = 8<socket:[2]> <0.001000>
100 12:00:00.001100 getcwd("/mnt/slow/a/b/c", 4096) = 16 <0.000010>
100 12:00:00.001200 chdir("/srv/www") = 0 <0.000020>
100 12:00:00.001300 openat(AT_FDCWD</srv/www>, "index.php", O_RDONLY) = 9</srv/www/index.php> <0.000030>
100 12:00:00.001400 newfstatat(9</srv/www/index.php>, "", {st_mode=S_IFREG|0644, st_size=20, ...}, AT_EMPTY_PATH) = 0 <0.000004>
100 12:00:00.001500 chdir("/mnt/slow/a/b/c") = 0 <0.000800>
100 12:00:00.001600 --- SIGCHLD {si_signo=SIGCHLD} ---
100 12:00:00.002000 accept4(7<socket:[1]>, NULL, NULL, SOCK_CLOEXEC) = 8<socket:[3]> <0.000400>
100 12:00:00.002100 chdir("/srv/www") = 0 <0.000020>
100 12:00:00.002200 stat("conf.ini", 0x7ffc) = -1 ENOENT (No such file or directory) <0.000010>
100 12:00:00.002300 chdir("/mnt/slow/a/b/c") = 0 <0.000800>
"#;
        m.feed(log, None, &mounts);
        assert_eq!(m.accepts, 2);
        assert_eq!(m.unknown_calls, 0);
        let r = judge(m, mounts, 12);
        assert_eq!(r.requests.as_ref().unwrap().count, Some(2));
        let slow = r
            .filesystems
            .iter()
            .find(|f| f.mount_point == "/mnt/slow")
            .unwrap();
        // chdir back: /mnt/slow/a/b/c is 3 lookups on the mount (a, b, c), twice per request.
        assert_eq!(slow.lookups, 6);
        assert_eq!(slow.lookups_per_request, Some(3.0));
        let back = r
            .paths
            .iter()
            .find(|p| p.syscall == "chdir" && p.path == "/mnt/slow/a/b/c")
            .unwrap();
        assert_eq!(back.count, 2);
        // The relative stat walked from the docroot, on ext4, and failed.
        assert!(
            r.paths
                .iter()
                .any(|p| p.path == "conf.ini" && p.errors == 1)
        );
    }

    #[test]
    fn an_ff_set_is_read_with_each_file_s_pid_and_a_missing_log_is_bad_input() {
        let dir = std::env::temp_dir().join(format!("trapdetect-strace-ff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mountinfo"), MOUNTS).unwrap();
        // `strace -ff -tt -T -y -o fpm.strace`: one file per process, no pid column. Each
        // process's cwd is its own: the second one's relative open walks ext4, not the mount.
        std::fs::write(
            dir.join("fpm.strace.100"),
            "12:00:00.000000 getcwd(\"/mnt/slow/a\", 4096) = 12 <0.000005>\n12:00:00.000100 openat(AT_FDCWD, \"b/c.php\", O_RDONLY) = 3</mnt/slow/a/b/c.php> <0.000400>\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("fpm.strace.101"),
            "12:00:00.000050 chdir(\"/srv\") = 0 <0.000005>\n12:00:01.000000 openat(AT_FDCWD, \"b/c.php\", O_RDONLY) = 3</srv/b/c.php> <0.000010>\n",
        )
        .unwrap();
        let r = report(
            &dir.join("fpm.strace"),
            Some(&dir.join("mountinfo")),
            None,
            12,
        )
        .unwrap();
        assert_eq!(r.target.as_ref().unwrap().processes, 2);
        let lookups = |mount: &str| {
            r.filesystems
                .iter()
                .find(|f| f.mount_point == mount)
                .map(|f| f.lookups)
        };
        assert_eq!(lookups("/mnt/slow"), Some(2));
        assert_eq!(lookups("/"), Some(3));
        assert_eq!(r.window_s, Some(1.0));
        let e = report(&dir.join("nothing"), Some(&dir.join("mountinfo")), None, 12).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
