//! The sampler of the /proc backend: a thread that, at a bounded rate, reads every thread of
//! the target's tree (`stat`'s state, `schedstat`, and for a blocked thread `syscall`, the
//! descriptor or path it names and, outside a syscall, `wchan`) and keeps the same cumulative
//! sums the eBPF off-CPU probes keep: off-CPU time by [`OffKey`], on-CPU and run-queue time.
//! On-CPU and run-queue time are the scheduler's exact account (`schedstat`); the off-CPU
//! time of each interval between two samples is exact too (wall minus both), only its class
//! is sampled: the class the thread was seen blocked in at either end of the interval.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fs::File,
    os::unix::fs::FileExt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use trapdetect_common::offcpu::{
    ARG_DIRFD_PATH, ARG_FCNTL, ARG_FD, ARG_PATH, CLASS_FILE_IO, CLASS_FILE_LOCK, CLASS_FUTEX,
    CLASS_NO_SYSCALL, CLASS_OTHER, CLASS_PATH, CLASS_SLEEP, CLASS_UNKNOWN, CLASS_WAIT_WORK,
    F_OFD_SETLKW, F_SETLKW, FUTEX_TIMED, NUM_CLASSES, NUM_SCHED_SLOTS, OffKey, OffVal, S_ONCPU_NS,
    S_RUNQ_NS, S_SWITCHES, ST_OFF_CPU, ST_ON_CPU, ThreadSlot, class_of, futex_timed, host_arch,
    is_read, waits_for_work,
};

use super::procfs::{self, Syscall};
use crate::{
    error::Result,
    host::{
        mounts::{MountTable, normalize},
        process,
    },
    probe::offcpu::OffcpuReading,
    trace::seconds::KernelSource,
    util::mono_ns,
};

/// `AT_FDCWD` as the registers hold it.
const AT_FDCWD: i32 = -100;

/// What the sampler saw, beside the sums: the samples behind each figure.
#[derive(Clone, Debug, Default)]
pub struct SampleStats {
    /// Rounds asked for per second.
    pub hz: u32,
    /// Rounds taken.
    pub rounds: u64,
    /// Rounds that started more than one period late (the sampler starved of CPU).
    pub late: u64,
    /// Threads read, over all rounds.
    pub thread_samples: u64,
    /// Of those, threads seen blocked, by class.
    pub by_class: [u64; NUM_CLASSES as usize],
    /// Threads seen blocked on a path or file I/O, by filesystem (kernel dev).
    pub by_dev: HashMap<u32, u64>,
    /// Threads whose `syscall` file could not be read (another user's process without
    /// CAP_SYS_PTRACE): their blocked time is `unknown`.
    pub unreadable: u64,
    /// Paths blocked path syscalls were walking, as resolved (absolute), with their samples.
    pub paths: HashMap<Vec<u8>, u64>,
    /// `wchan` of threads blocked outside a syscall, where readable.
    pub wchan: BTreeMap<String, u64>,
    /// The sampler thread's own CPU time, ns.
    pub self_cpu_ns: u64,
    /// Wall time sampled, ns.
    pub window_ns: u64,
}

/// The sums, as the eBPF maps keep them.
#[derive(Default)]
struct Sums {
    at_ns: u64,
    keys: HashMap<OffKey, OffVal>,
    on_ns: u64,
    runq_ns: u64,
    switches: u64,
    slots: HashMap<u32, ThreadSlot>,
    /// The runtime's own threads (`KernelSource::mark_runtime`): their blocked time is not
    /// added, as the kernel adds none of theirs under `TRACED_RUNTIME`.
    runtime: std::collections::HashSet<u32>,
    stats: SampleStats,
    lock_names: HashMap<(u32, u64), Vec<u8>>,
}

/// One thread's last sample.
#[derive(Clone, Copy)]
struct Seen {
    at: u64,
    on: u64,
    runq: u64,
    slices: u64,
    key: Option<OffKey>,
    /// Its blocked time waiting for work so far ([`ThreadSlot::idle_ns`]).
    idle_ns: u64,
    /// Whether it ran since it was first sampled.
    ran: bool,
    /// Since when it is in the timed futex wait it was found in (`None`: in none).
    timed_since: Option<u64>,
}

struct Thread {
    pid: u32,
    stat: Option<File>,
    schedstat: Option<File>,
    syscall: Option<File>,
    last: Option<Seen>,
}

fn open(path: String) -> Option<File> {
    File::open(path).ok()
}

fn read_at0(f: &File, buf: &mut [u8]) -> Option<usize> {
    f.read_at(buf, 0).ok().filter(|n| *n > 0)
}

/// The /proc sampling backend, running: a [`KernelSource`] for `trace::seconds::Sampler`.
pub struct ProcSource {
    sums: Arc<Mutex<Sums>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ProcSource {
    /// Starts sampling `root`'s tree `hz` times a second, resolving filesystems in `mounts`.
    pub fn start(root: u32, hz: u32, mounts: MountTable) -> ProcSource {
        let sums = Arc::new(Mutex::new(Sums::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (sums.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("trapdetect-sample".into())
            .spawn(move || Walker::new(root, hz, mounts).run(&s, &st))
            .ok();
        ProcSource { sums, stop, handle }
    }

    /// Stops the sampler and returns what it saw and the lock files it named.
    pub fn stop(&mut self) -> (SampleStats, HashMap<(u32, u64), Vec<u8>>) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let s = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        (s.stats.clone(), s.lock_names.clone())
    }
}

impl Drop for ProcSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl KernelSource for ProcSource {
    fn offcpu_attached(&self) -> bool {
        true
    }
    fn offcpu_read(&self) -> Result<OffcpuReading> {
        let s = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        let mut totals = vec![0u64; NUM_SCHED_SLOTS as usize];
        totals[S_ONCPU_NS as usize] = s.on_ns;
        totals[S_RUNQ_NS as usize] = s.runq_ns;
        totals[S_SWITCHES as usize] = s.switches;
        Ok(OffcpuReading {
            at_ns: s.at_ns,
            keys: s.keys.clone(),
            totals,
        })
    }
    fn thread_slots(&self, tids: &[u32]) -> Result<Vec<ThreadSlot>> {
        let s = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        Ok(tids
            .iter()
            .filter_map(|t| s.slots.get(t).copied())
            // Everything up to the last round is in the sums already: nothing to split.
            .map(|mut slot| {
                slot.ts = s.at_ns;
                slot
            })
            .collect())
    }
    fn fuse_by_dev(&self) -> HashMap<u32, u64> {
        HashMap::new()
    }
    fn path_calls(&self) -> u64 {
        0
    }
    fn served_now(&self) -> (u64, u64) {
        (0, 0)
    }
    fn accept_emfile(&self) -> u64 {
        0
    }
    fn mark_runtime(&self, tids: &[u32]) -> bool {
        let mut s = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        s.runtime.extend(tids);
        true
    }
}

/// The sampler thread's state.
struct Walker {
    root: u32,
    hz: u32,
    mounts: MountTable,
    by_id: HashMap<u32, usize>,
    threads: HashMap<u32, Thread>,
    mems: HashMap<u32, Option<File>>,
}

impl Walker {
    fn new(root: u32, hz: u32, mounts: MountTable) -> Walker {
        let by_id = mounts
            .mounts
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id, i))
            .collect();
        Walker {
            root,
            hz: hz.max(1),
            mounts,
            by_id,
            threads: HashMap::new(),
            mems: HashMap::new(),
        }
    }

    fn run(mut self, sums: &Mutex<Sums>, stop: &AtomicBool) {
        let period = 1_000_000_000 / self.hz as u64;
        let cpu0 = self_cpu_ns();
        let start = mono_ns();
        let mut next = start;
        let mut last_scan = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let now = mono_ns();
            if now < next {
                std::thread::sleep(Duration::from_nanos((next - now).min(50_000_000)));
                continue;
            }
            let late = now > next + period;
            next = if late { now + period } else { next + period };
            if now.saturating_sub(last_scan) >= 500_000_000 {
                last_scan = now;
                self.rescan();
            }
            let mut s = sums.lock().unwrap_or_else(|e| e.into_inner());
            s.stats.hz = self.hz;
            s.stats.rounds += 1;
            s.stats.late += late as u64;
            self.round(&mut s);
            s.at_ns = mono_ns();
            s.stats.window_ns = s.at_ns - start;
            s.stats.self_cpu_ns = self_cpu_ns().saturating_sub(cpu0);
        }
    }

    /// The tree's threads now: new ones opened, gone ones dropped.
    fn rescan(&mut self) {
        let pids = process::tree_now(self.root);
        let mut alive = HashSet::new();
        for &p in &pids {
            let Ok(rd) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            for e in rd.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                alive.insert(tid);
                self.threads.entry(tid).or_insert_with(|| {
                    let base = format!("/proc/{p}/task/{tid}");
                    Thread {
                        pid: p,
                        stat: open(format!("{base}/stat")),
                        schedstat: open(format!("{base}/schedstat")),
                        syscall: open(format!("{base}/syscall")),
                        last: None,
                    }
                });
            }
        }
        self.threads.retain(|t, _| alive.contains(t));
        self.mems.retain(|p, _| pids.contains(p));
    }

    fn round(&mut self, s: &mut Sums) {
        let mut buf = [0u8; 512];
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            let Some(r) = self
                .threads
                .get(&tid)
                .and_then(|t| read_thread(t, &mut buf))
            else {
                continue;
            };
            s.stats.thread_samples += 1;
            if r.blocked && r.sc.is_none() {
                s.stats.unreadable += 1;
            }
            let key = self.wait_key(r.pid, tid, r.blocked, r.sc, s);
            if let Some(k) = key {
                count_key(s, k);
            }
            // A futex wait `classify` counted a sleep: one with a deadline.
            let timed = key.is_some_and(|k| k.class == CLASS_SLEEP)
                && matches!(r.sc, Some(Syscall::In { nr, .. })
                    if class_of(host_arch(), nr).0 == CLASS_FUTEX);
            if let Some(t) = self.threads.get_mut(&tid) {
                note(t, tid, &r, key, timed, s);
            }
        }
        s.slots.retain(|t, _| self.threads.contains_key(t));
    }

    /// What a thread in state `blocked` (not running) at syscall `sc` waits for: `None` when
    /// it runs (or ran between the two reads).
    fn wait_key(
        &mut self,
        pid: u32,
        tid: u32,
        blocked: bool,
        sc: Option<Syscall>,
        s: &mut Sums,
    ) -> Option<OffKey> {
        match sc {
            // Raced: it ran between the two reads.
            Some(Syscall::Running) => None,
            Some(Syscall::Outside) => {
                if let Some(w) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/wchan"))
                    .ok()
                    .filter(|w| !w.is_empty() && w != "0")
                {
                    *s.stats.wchan.entry(w).or_default() += 1;
                }
                Some(OffKey {
                    class: CLASS_NO_SYSCALL,
                    ..Default::default()
                })
            }
            Some(Syscall::In { nr, args }) => Some(self.classify(pid, nr, &args, s)),
            None if blocked => Some(OffKey {
                class: CLASS_UNKNOWN,
                ..Default::default()
            }),
            None => None,
        }
    }

    /// Why a thread blocked in syscall `nr` waits: the class of the syscall, and the
    /// filesystem (or the locked file) its descriptor or path names, read as the eBPF probes
    /// read them: a read on a socket or pipe waits for work, `fcntl` waits for a lock only
    /// with `F_SETLKW`.
    fn classify(&mut self, pid: u32, nr: u64, args: &[u64; 6], s: &mut Sums) -> OffKey {
        let arch = host_arch();
        let (class, arg) = class_of(arch, nr);
        let mut key = OffKey {
            class,
            ..Default::default()
        };
        match arg {
            ARG_FD | ARG_FCNTL => {
                if arg == ARG_FCNTL && args[1] != F_SETLKW && args[1] != F_OFD_SETLKW {
                    key.class = CLASS_OTHER;
                    return key;
                }
                let fd = args[0] as i32;
                let Ok(link) = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")) else {
                    return key;
                };
                let link = link.as_os_str().as_encoded_bytes().to_vec();
                if procfs::is_socket_or_pipe(&link) {
                    if class == CLASS_FILE_IO {
                        key.class = if is_read(arch, nr) {
                            CLASS_WAIT_WORK
                        } else {
                            CLASS_OTHER
                        };
                    }
                    return key;
                }
                // fdinfo names the mount without asking the filesystem (a stat of a file on
                // a slow FUSE mount would be one more request for it).
                let Some((mnt, ino)) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"))
                    .ok()
                    .and_then(|t| procfs::parse_fdinfo(&t))
                else {
                    return key;
                };
                key.dev = self.dev_of_mount_id(mnt).unwrap_or(0);
                if key.class == CLASS_FILE_LOCK {
                    key.ino = ino;
                    s.lock_names.entry((key.dev, ino)).or_insert(link);
                }
            }
            ARG_PATH | ARG_DIRFD_PATH => {
                let (dirfd, ptr) = if arg == ARG_PATH {
                    (AT_FDCWD, args[0])
                } else {
                    (args[0] as i32, args[1])
                };
                if let Some(path) = self.walked(pid, dirfd, ptr) {
                    if let Some(m) = self.mounts.mount_of(&path) {
                        key.dev = self.mounts.mounts[m].kernel_dev();
                    }
                    if s.stats.paths.len() < 4096 || s.stats.paths.contains_key(&path) {
                        *s.stats.paths.entry(path).or_default() += 1;
                    }
                }
            }
            // A timed wait: a deadline the thread set itself (Java's `Thread.sleep`, Ruby's
            // `sleep`, Python's `Event.wait(t)`), which a sample cannot see end. The eBPF
            // backend counts it a sleep when it runs out and a futex wait when another thread
            // ends it; a sample counts it a sleep, as a `nanosleep` is.
            _ if class == CLASS_FUTEX && futex_timed(arch, nr, args[1], args[3]) => {
                key.class = CLASS_SLEEP;
            }
            _ => {}
        }
        key
    }

    fn dev_of_mount_id(&self, id: u32) -> Option<u32> {
        self.by_id
            .get(&id)
            .map(|&i| self.mounts.mounts[i].kernel_dev())
    }

    /// The absolute path a path syscall walks: its string read from the process's memory,
    /// joined to the directory it starts from (its cwd or its dirfd).
    fn walked(&mut self, pid: u32, dirfd: i32, ptr: u64) -> Option<Vec<u8>> {
        let mem = self
            .mems
            .entry(pid)
            .or_insert_with(|| File::open(format!("/proc/{pid}/mem")).ok())
            .as_ref()?;
        let path = read_cstr(mem, ptr)?;
        if path.first() == Some(&b'/') {
            return Some(normalize(&path));
        }
        let base = if dirfd == AT_FDCWD {
            std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?
        } else {
            std::fs::read_link(format!("/proc/{pid}/fd/{dirfd}")).ok()?
        };
        let mut full = base.as_os_str().as_encoded_bytes().to_vec();
        full.push(b'/');
        full.extend_from_slice(&path);
        Some(normalize(&full))
    }
}

/// Counts a sample of a thread waiting at `k`, by class and by device.
fn count_key(s: &mut Sums, k: OffKey) {
    if let Some(c) = s.stats.by_class.get_mut(k.class as usize) {
        *c += 1;
    }
    if (k.class == CLASS_PATH || k.class == CLASS_FILE_IO) && k.dev != 0 {
        *s.stats.by_dev.entry(k.dev).or_default() += 1;
    }
}

/// One thread read at one sample: its state, its schedstat and, when it does not run, the
/// syscall it is in.
struct Read {
    pid: u32,
    now: u64,
    blocked: bool,
    sc: Option<Syscall>,
    sched: (u64, u64, u64),
}

/// `None` when the thread's stat cannot be read (it has exited).
fn read_thread(t: &Thread, buf: &mut [u8; 512]) -> Option<Read> {
    let state = t
        .stat
        .as_ref()
        .and_then(|f| read_at0(f, buf))
        .and_then(|n| procfs::parse_state(&buf[..n]))?;
    let sched = t
        .schedstat
        .as_ref()
        .and_then(|f| read_at0(f, buf))
        .and_then(|n| procfs::parse_schedstat(std::str::from_utf8(&buf[..n]).ok()?));
    let now = mono_ns();
    let blocked = !matches!(state, b'R');
    let sc = if blocked {
        t.syscall
            .as_ref()
            .and_then(|f| read_at0(f, buf))
            .and_then(|n| {
                std::str::from_utf8(&buf[..n])
                    .ok()
                    .and_then(procfs::parse_syscall)
            })
    } else {
        None
    };
    Some(Read {
        pid: t.pid,
        now,
        blocked,
        sc,
        sched: sched.unwrap_or((0, 0, 0)),
    })
}

/// Adds a thread's sample to the sums and its slot (`key`: what it waits for, `None` when it
/// runs; `timed`: a futex wait with a deadline).
fn note(t: &mut Thread, tid: u32, r: &Read, key: Option<OffKey>, timed: bool, s: &mut Sums) {
    let (now, (on, runq, slices)) = (r.now, r.sched);
    let ran = key.is_none() || t.last.is_some_and(|p| p.ran || slices > p.slices);
    // The same timed wait as at the last sample while the thread has not run since; a new
    // one began after that sample; one found at the first sample began before it (when,
    // unknown: 0).
    let timed_since = timed.then(|| match t.last {
        Some(p) if slices == p.slices => p.timed_since.unwrap_or(p.at),
        Some(p) => p.at,
        None => 0,
    });
    // Parked on a futex since before it was first sampled and never woken since (a JVM
    // launcher's threads joining the main one for the process's life): neither a worker nor
    // a lock's waiter, and not in the figures, as under eBPF, where such a thread never
    // switches.
    let parked = !ran && key.is_some_and(|k| k.class == CLASS_FUTEX);
    let waits = !s.runtime.contains(&tid);
    let idle_ns = match t.last {
        Some(prev) if !parked => {
            prev.idle_ns + add_since(s, &prev, now, (on, runq, slices), key, waits)
        }
        _ => 0,
    };
    t.last = Some(Seen {
        at: now,
        on,
        runq,
        slices,
        key,
        idle_ns,
        ran,
        timed_since,
    });
    if parked {
        s.slots.remove(&tid);
        return;
    }
    // A timed wait is shown as the kernel's slot shows one in progress (its time so far in
    // `timed_ns`): whether it is work is known only when it ends, so it is left out of the
    // thread's worker time (its time is a sleep in the sums already).
    let (key, timed_ns) = match timed_since {
        Some(since) => (
            Some(OffKey {
                class: CLASS_FUTEX,
                dev: FUTEX_TIMED,
                ino: 0,
            }),
            now.saturating_sub(since),
        ),
        None => (key, 0),
    };
    s.slots.insert(
        tid,
        ThreadSlot {
            tid,
            state: if key.is_some() { ST_OFF_CPU } else { ST_ON_CPU },
            ts: now,
            key: key.unwrap_or_default(),
            idle_ns,
            timed_ns,
            ..Default::default()
        },
    );
}

/// Adds a thread's time since its last sample `prev` to the sums: on CPU and in the run queue
/// from its schedstat (`sched`), the rest off CPU at its wait `key` (else the last one's), and
/// a wait episode when the wait is new or the thread ran since.
fn add_since(
    s: &mut Sums,
    prev: &Seen,
    now: u64,
    sched: (u64, u64, u64),
    key: Option<OffKey>,
    waits: bool,
) -> u64 {
    let (on, runq, slices) = sched;
    let don = on.saturating_sub(prev.on);
    let drq = runq.saturating_sub(prev.runq);
    let off = now.saturating_sub(prev.at).saturating_sub(don + drq);
    s.on_ns += don;
    s.runq_ns += drq;
    s.switches += slices.saturating_sub(prev.slices);
    let mut idle = 0;
    if !waits {
        // A thread of the runtime's own: its time on and queued for a CPU only.
        return idle;
    }
    if off > 0 {
        let k = key.or(prev.key).unwrap_or(OffKey {
            class: CLASS_UNKNOWN,
            ..Default::default()
        });
        s.keys.entry(k).or_default().ns += off;
        if waits_for_work(&k) {
            idle = off;
        }
    }
    // A wait seen for the first time, or the thread ran since: another episode
    // (a lower bound: several short waits between two samples count once).
    if let Some(k) = key
        && (prev.key != Some(k) || slices > prev.slices)
    {
        s.keys.entry(k).or_default().count += 1;
    }
    idle
}

/// A NUL-terminated string at `addr` in a process's memory (at most 4 KiB, PATH_MAX).
fn read_cstr(mem: &File, addr: u64) -> Option<Vec<u8>> {
    if addr == 0 {
        return None;
    }
    let mut buf = vec![0u8; 256];
    let n = mem.read_at(&mut buf, addr).ok()?;
    if let Some(z) = buf[..n].iter().position(|&b| b == 0) {
        buf.truncate(z);
        return Some(buf);
    }
    let mut buf = vec![0u8; 4096];
    let n = mem.read_at(&mut buf, addr).ok()?;
    let z = buf[..n].iter().position(|&b| b == 0)?;
    buf.truncate(z);
    Some(buf)
}

/// This thread's CPU time, ns (`/proc/thread-self/schedstat`).
fn self_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| procfs::parse_schedstat(&t))
        .map(|(on, _, _)| on)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's second: schedstat's on-CPU and run-queue time, the rest off CPU at its
    /// wait, one episode for a new wait and none for the same wait without running.
    #[test]
    fn add_since_splits_the_time_and_counts_episodes() {
        let wait = OffKey {
            class: CLASS_PATH,
            ..Default::default()
        };
        let prev = Seen {
            at: 1_000,
            on: 100,
            runq: 50,
            slices: 3,
            key: None,
            idle_ns: 0,
            ran: true,
            timed_since: None,
        };
        let mut s = Sums::default();
        // A path lookup is work: no time waiting for work.
        assert_eq!(
            add_since(&mut s, &prev, 2_000, (400, 150, 4), Some(wait), true),
            0
        );
        assert_eq!((s.on_ns, s.runq_ns, s.switches), (300, 100, 1));
        assert_eq!(s.keys[&wait].ns, 600);
        assert_eq!(s.keys[&wait].count, 1);
        let prev = Seen {
            at: 2_000,
            on: 400,
            runq: 150,
            slices: 4,
            key: Some(wait),
            idle_ns: 0,
            ran: true,
            timed_since: None,
        };
        // Still blocked at the same wait, never ran: more time, the same episode.
        assert_eq!(
            add_since(&mut s, &prev, 3_000, (400, 150, 4), None, true),
            0
        );
        assert_eq!(s.keys[&wait].ns, 1_600);
        assert_eq!(s.keys[&wait].count, 1);
        // Then in accept for 700 ns of the next 1,000 (it ran 200, waited for a CPU 100):
        // those 700 are its time waiting for work.
        let accept = OffKey {
            class: CLASS_WAIT_WORK,
            ..Default::default()
        };
        assert_eq!(
            add_since(&mut s, &prev, 3_000, (600, 250, 5), Some(accept), true),
            700
        );
        assert_eq!(s.keys[&accept].ns, 700);
        // A thread of the runtime's own (`mark_runtime`): its time on and queued for a CPU,
        // none of its waits, and no time waiting for work.
        let before = s.keys.clone();
        assert_eq!(
            add_since(&mut s, &prev, 4_000, (700, 300, 6), Some(accept), false),
            0
        );
        assert_eq!(s.keys, before);
        assert_eq!((s.on_ns, s.runq_ns, s.switches), (800, 350, 4));
    }
}
