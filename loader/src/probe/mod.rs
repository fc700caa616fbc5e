//! Loading and attaching the eBPF programs, and reading what they counted.
//!
//! One compatibility table decides what attaches: each program with the tracepoint it needs,
//! whether the trace is meaningless without it, and why it exists. A program whose tracepoint
//! this kernel lacks is skipped and the report says so; a required one missing makes the
//! measurement untrusted (exit 3).

pub mod offcpu;
pub mod stats;
pub mod tcp;
pub mod tracefs;

/// The oldest kernel whose helpers and maps the probes use (the ring buffer, 5.8); the
/// matrix tests from 5.10 (Debian 11).
pub const MIN_KERNEL: (u32, u32) = (5, 8);
/// The oldest kernel the kernel matrix runs (`cargo xtask kernels`).
pub const OLDEST_TESTED: &str = "5.10";

use std::collections::HashMap;

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::TracePoint,
};
use trapdetect_common::{
    counters::NUM_COUNTERS,
    fuse::{FuseKey, FuseQueueKey, FuseQueueVal},
    hist::HIST_BUCKETS,
    names::*,
    offcpu::PROG_OFFCPU_SWITCH,
    paths::{PathKey, PathStat},
    syscalls::{
        GLOBAL_COMPAT_MASK, GLOBAL_COMPAT_VALUE, GLOBAL_REG_ARG_OFF, GLOBAL_REG_COMPAT_OFF,
        GLOBAL_SYSCALL_FEATURES, NUM_KINDS,
    },
};

use crate::{
    btf::Btf,
    error::{Error, Result},
};
use serde::Serialize;
use tracefs::Tracefs;

/// Whether a probe is attached.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ProbeRow {
    /// Program name.
    pub program: String,
    /// Where it attaches.
    pub attach: String,
    /// Attached?
    pub attached: bool,
    /// Why not, or what it is for.
    pub note: String,
}

/// The eBPF object, built by build.rs.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/trapdetect"));

/// The "category" of a row that is not a program of its own but a part of the syscall
/// dispatch (`sys_enter_path`/`sys_exit_path`), switched on by `SYSCALL_FEATURES` before load:
/// attached when that program is.
const IN_DISPATCH: &str = "in";

/// One row of the compatibility table.
struct Entry {
    program: String,
    attach: Vec<(&'static str, String)>,
    required: bool,
    purpose: &'static str,
}

/// The compatibility table. Every program, what it attaches to, whether the trace means
/// anything without it, and why it is there.
fn table() -> Vec<Entry> {
    let mut t = vec![
        Entry {
            program: PROG_SYS_ENTER_PATH.into(),
            attach: vec![(offcpu::RAW_TP, "sys_enter".into())],
            required: true,
            purpose: "count and hash the path of each path call (stat family, open, access, chdir, getcwd, readlink), dispatched by syscall number; marks accept and connect for their exits (raw tracepoint: runs for every syscall of the host and returns after a compare for the others; detaches at once)",
        },
        Entry {
            program: PROG_SYS_EXIT_PATH.into(),
            attach: vec![(offcpu::RAW_TP, "sys_exit".into())],
            required: true,
            purpose: "latency and result of each traced path call (raw tracepoint: one inlined array lookup for every other syscall of the host)",
        },
        Entry {
            program: PROG_SCHED_PROCESS_FORK.into(),
            attach: vec![(offcpu::RAW_TP, "sched_process_fork".into())],
            required: true,
            purpose: "follow processes the target forks (php-fpm workers; raw tracepoint: no record filled for the host's other forks)",
        },
        Entry {
            program: PROG_SCHED_PROCESS_EXIT.into(),
            attach: vec![(offcpu::RAW_TP, "sched_process_exit".into())],
            required: true,
            purpose: "forget exited processes (pids are reused; raw tracepoint)",
        },
        Entry {
            program: PROG_SYS_EXIT_ACCEPT.into(),
            attach: vec![(IN_DISPATCH, PROG_SYS_EXIT_PATH.into())],
            required: false,
            purpose: "accepted connections (accept, accept4): the request count when trapdetect drives no load",
        },
        Entry {
            program: PROG_FUSE_REQUEST_SEND.into(),
            attach: vec![("fuse", "fuse_request_send".into())],
            required: false,
            purpose: "FUSE requests measured at the filesystem (tracepoint since Linux 6.13)",
        },
        Entry {
            program: PROG_FUSE_REQUEST_END.into(),
            attach: vec![("fuse", "fuse_request_end".into())],
            required: false,
            purpose: "FUSE request latency by the requests ahead of each (tracepoint since Linux 6.13): whether a mount answers one request at a time",
        },
        Entry {
            program: PROG_INET_SOCK_SET_STATE.into(),
            attach: vec![(offcpu::RAW_TP, "inet_sock_set_state".into())],
            required: false,
            purpose: "TCP state changes by port: TIME_WAIT entries, new connections, aborts (raw tracepoint since Linux 4.16: the kernel fills no record for the host's other sockets; the network section's traced series)",
        },
        Entry {
            program: PROG_TCP_PROBE.into(),
            attach: vec![(offcpu::RAW_TP, "tcp_probe".into())],
            required: false,
            purpose: "payload received on the server's ports, whatever client sent it (raw tracepoint since Linux 4.16: the kernel fills no record for the host's other segments): tells other clients' traffic from the probe load's, so per-request figures are never inflated",
        },
        Entry {
            program: PROG_SYS_ENTER_CONNECT.into(),
            attach: vec![(IN_DISPATCH, PROG_SYS_ENTER_PATH.into())],
            required: false,
            purpose: "start timing connect() of watched clients (--watch-client)",
        },
        Entry {
            program: PROG_SYS_EXIT_CONNECT.into(),
            attach: vec![(IN_DISPATCH, PROG_SYS_EXIT_PATH.into())],
            required: false,
            purpose: "connect() latency and errno of watched clients (--watch-client)",
        },
    ];
    t.extend(offcpu::entries());
    t
}

/// The tracefs event directory (system, name) of a table attach point: a `raw_tp` or `tp_btf`
/// names the tracepoint, whose event sits under its trace system. `None` for a part of the
/// syscall dispatch, which has no attach point of its own.
pub fn tracefs_event<'a>(category: &'a str, name: &'a str) -> Option<(&'a str, &'a str)> {
    let system = match category {
        IN_DISPATCH => return None,
        offcpu::TP_BTF => "sched",
        offcpu::RAW_TP if name.starts_with("sys_") => "raw_syscalls",
        offcpu::RAW_TP if name == "tcp_probe" => "tcp",
        offcpu::RAW_TP if name == "inet_sock_set_state" => "sock",
        offcpu::RAW_TP if name.starts_with("hrtimer_") => "timer",
        offcpu::RAW_TP => "sched",
        c => c,
    };
    Some((system, name))
}

/// One row of the compatibility table, for `trapdetect version --kernel`.
#[derive(Clone, Debug)]
pub struct CompatRow {
    /// Program name.
    pub program: String,
    /// Tracepoints it attaches to, `(category, name)`.
    pub attach: Vec<(&'static str, String)>,
    /// Whether a trace means anything without it.
    pub required: bool,
    /// Why it exists.
    pub purpose: &'static str,
}

/// The compatibility table as data (what `trace` would attach, and whether it must).
pub fn compat_table() -> Vec<CompatRow> {
    table()
        .into_iter()
        .map(|e| CompatRow {
            program: e.program,
            attach: e.attach,
            required: e.required,
            purpose: e.purpose,
        })
        .collect()
}

/// Whether the kernel struct fields `trace` reads through BTF resolve here: the path-walk
/// ones (a trace fails without them), then the socket ones (they only degrade the network
/// probes). `Err` carries what is missing.
pub fn btf_fields(btf: &Btf) -> [(&'static str, bool, std::result::Result<(), String>); 2] {
    let walk = offsets(btf).map(|_| ()).map_err(|e| e.to_string());
    let (_, missing) = socket_offsets(btf);
    let sock = if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    };
    [
        (
            "task, fs, dentry, super_block, fdtable, file, inode fields",
            true,
            walk,
        ),
        (
            "socket, sock, net fields (netns filter, TCP check)",
            false,
            sock,
        ),
    ]
}

/// The embedded eBPF object (its hash is in `--version`; its helper calls are probed by
/// `version --kernel`).
pub fn object() -> &'static [u8] {
    OBJECT
}

/// Every program name in the table (for `--skip-probe` validation).
pub fn program_names() -> Vec<String> {
    table().into_iter().map(|e| e.program).collect()
}

/// Which optional programs to leave out.
#[derive(Clone, Debug, Default)]
pub struct AttachOptions {
    /// Programs not to attach (`--skip-probe`); a required one makes the trace untrusted.
    pub skip: Vec<String>,
    /// Attach the connect() programs (only useful with `--watch-client`).
    pub watch_clients: bool,
    /// Attach the off-CPU programs (`trapdetect run`: they cost a few map operations per
    /// context switch of a traced thread).
    pub offcpu: bool,
    /// No port for `tcp_probe` to count on (the target listens on no TCP port and no load
    /// names one, e.g. php-fpm on a unix socket): it is left out, since it would run for every
    /// TCP segment of the host and count nothing.
    pub no_served_ports: bool,
    /// Hold `tcp_probe` back until [`Probes::attach_held_served`]: the caller watches the
    /// target's ports for a connection that stays open (`trace::keepalive`); until then the
    /// target's accepts are its requests.
    pub served_held: bool,
}

/// The note of a `tcp_probe` held back by [`AttachOptions::served_held`].
pub const SERVED_HELD: &str = "held back: attached when a connection on the target's ports stays open between two looks 0.1 s apart (keep-alive); until then each accepted connection is one request, and the program does not run for the host's segments";

/// Offsets the socket probes use, from BTF; a missing one degrades them (the netns filter, the
/// TCP-only check of connect()) instead of failing the trace. Returns the values (0 where
/// missing) and what is missing.
fn socket_offsets(btf: &Btf) -> (Vec<(&'static str, u32)>, Vec<String>) {
    let (mut out, missing) = btf_offsets(
        btf,
        &[
            (GLOBAL_OFF_FILE_PRIVATE, "file", "private_data"),
            (GLOBAL_OFF_SOCKET_SK, "socket", "sk"),
            (GLOBAL_OFF_SK_PROTOCOL, "sock", "sk_protocol"),
            (GLOBAL_OFF_SK_NET, "sock_common", "skc_net.net"),
            (GLOBAL_OFF_NET_INUM, "net", "ns.inum"),
        ],
    );
    let missing = missing.into_iter().map(|(_, e)| e).collect();
    // The TCP check needs all three socket offsets; zero the gate when one is missing.
    if out[..3].iter().any(|(_, v)| *v == 0) {
        out[1].1 = 0;
    }
    (out, missing)
}

/// Struct offsets the programs need, from BTF.
fn offsets(btf: &Btf) -> std::result::Result<Vec<(&'static str, u32)>, crate::btf::BtfError> {
    Ok(vec![
        (GLOBAL_OFF_TASK_FS, btf.offset("task_struct", "fs")?),
        (GLOBAL_OFF_TASK_FILES, btf.offset("task_struct", "files")?),
        (
            GLOBAL_OFF_FS_PWD_DENTRY,
            btf.offset("fs_struct", "pwd.dentry")?,
        ),
        (GLOBAL_OFF_DENTRY_SB, btf.offset("dentry", "d_sb")?),
        (GLOBAL_OFF_SB_DEV, btf.offset("super_block", "s_dev")?),
        (GLOBAL_OFF_FILES_FDT, btf.offset("files_struct", "fdt")?),
        (GLOBAL_OFF_FDT_MAX_FDS, btf.offset("fdtable", "max_fds")?),
        (GLOBAL_OFF_FDT_FD, btf.offset("fdtable", "fd")?),
        (GLOBAL_OFF_FILE_INODE, btf.offset("file", "f_inode")?),
        (GLOBAL_OFF_INODE_SB, btf.offset("inode", "i_sb")?),
    ])
}

/// Globals of the syscall dispatch: where the first four arguments sit in `struct pt_regs`
/// (`REG_ARG_OFF`) and the register that tells a compat task, and which of its parts run
/// (`SYSCALL_FEATURES`).
struct DispatchGlobals {
    args: [u32; 4],
    scalars: Vec<(&'static str, u32)>,
}

fn dispatch_globals(
    btf: &Btf,
    want: &AttachOptions,
) -> std::result::Result<DispatchGlobals, crate::btf::BtfError> {
    use trapdetect_common::syscalls::{F_ACCEPTS, F_CONNECT, F_FUTEX_RESULT};
    let (args, compat, mask, value) = if cfg!(target_arch = "aarch64") {
        let regs = btf.offset("pt_regs", "regs")?;
        // arm64 keeps the first argument in orig_x0 (x0 becomes the return value);
        // PSR_MODE32_BIT in pstate: an AArch32 task.
        let a0 = btf.offset("pt_regs", "orig_x0")?;
        let pstate = btf.offset("pt_regs", "pstate")?;
        ([a0, regs + 8, regs + 16, regs + 24], pstate, 0x10, 0x10)
    } else {
        // __USER32_CS in cs: a 32-bit task's code segment.
        let f = |name| btf.offset("pt_regs", name);
        (
            [f("di")?, f("si")?, f("dx")?, f("r10")?],
            f("cs")?,
            0xffff,
            0x23,
        )
    };
    let mut features = 0;
    if dispatch_part_wanted(PROG_SYS_EXIT_ACCEPT, want) {
        features |= F_ACCEPTS;
    }
    if dispatch_part_wanted(PROG_SYS_ENTER_CONNECT, want)
        && dispatch_part_wanted(PROG_SYS_EXIT_CONNECT, want)
    {
        features |= F_CONNECT;
    }
    if want.offcpu {
        features |= F_FUTEX_RESULT;
    }
    Ok(DispatchGlobals {
        args,
        scalars: vec![
            (GLOBAL_REG_COMPAT_OFF, compat),
            (GLOBAL_COMPAT_MASK, mask),
            (GLOBAL_COMPAT_VALUE, value),
            (GLOBAL_SYSCALL_FEATURES, features),
        ],
    })
}

/// Whether a part of the syscall dispatch is switched on: not skipped, and connect only with
/// `--watch-client`. The rows' "why not" says the same.
fn dispatch_part_wanted(program: &str, want: &AttachOptions) -> bool {
    let connect = program == PROG_SYS_ENTER_CONNECT || program == PROG_SYS_EXIT_CONNECT;
    !want.skip.iter().any(|s| s == program) && (!connect || want.watch_clients)
}

/// `(tid, syscall number)` of each thread of `pid` blocked in a syscall now (the first field of
/// /proc/PID/task/TID/syscall; "running" and -1 are not in one). Unreadable threads are skipped.
fn in_syscall(pid: u32) -> Vec<(u32, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return vec![];
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(t.path().join("syscall")).ok()?;
            Some((tid, parse_in_syscall(&text)?))
        })
        .collect()
}

/// The syscall number of a /proc/PID/task/TID/syscall line, if the thread is in one.
fn parse_in_syscall(text: &str) -> Option<u64> {
    text.split_whitespace()
        .next()?
        .parse::<i64>()
        .ok()
        .and_then(|n| u64::try_from(n).ok())
}

/// Checks that root (or CAP_BPF + CAP_PERFMON) is available, naming what is missing.
pub fn check_privilege() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| cap_eff & (1u64 << bit) != 0;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_SYS_PTRACE: u32 = 19;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let mut missing = vec![];
    if !has(CAP_SYS_ADMIN) {
        if !has(CAP_BPF) {
            missing.push("CAP_BPF");
        }
        if !has(CAP_PERFMON) {
            missing.push("CAP_PERFMON");
        }
    }
    if !has(CAP_SYS_PTRACE) && !has(CAP_SYS_ADMIN) {
        missing.push("CAP_SYS_PTRACE (to read another process's /proc entries)");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::Privilege(format!(
            "tracing needs {} (run as root: sudo trapdetect ...)",
            missing.join(" and ")
        )))
    }
}

/// Per-path statistics summed over CPUs.
#[derive(Clone, Debug, Default)]
pub struct PathTotals {
    /// Completed calls.
    pub count: u64,
    /// Errors.
    pub errors: u64,
    /// Summed latency, ns.
    pub sum_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Histogram.
    pub hist: Vec<u64>,
}

/// Everything the maps held at one moment.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Per path key.
    pub paths: HashMap<PathKey, PathTotals>,
    /// Completed calls per syscall kind (attributed to a path key or not).
    pub kinds: Vec<u64>,
    /// Self-monitoring counters.
    pub counters: Vec<u64>,
    /// FUSE requests by (connection, opcode).
    pub fuse: HashMap<FuseKey, u64>,
    /// FUSE request latency by (connection, requests ahead): (requests, summed ns).
    pub fuse_queue: HashMap<FuseQueueKey, (u64, u64)>,
}

/// Loaded and attached programs.
pub struct Probes {
    ebpf: Ebpf,
    /// State of every program in the table.
    pub rows: Vec<ProbeRow>,
    /// Required programs that did not attach.
    pub missing_required: Vec<String>,
    /// Socket offsets missing from BTF (the socket probes run degraded).
    pub socket_offsets_missing: Vec<String>,
    /// The namespace filter of the TCP state probe can be used.
    pub netns_filter: bool,
    /// Kernel BTF the `tp_btf` programs are loaded against.
    btf_path: std::path::PathBuf,
    /// aya's reading of it, parsed at the first `tp_btf` program and kept for the others
    /// (each parse of vmlinux's 5 MB BTF took about a sixth of an agent window's CPU when
    /// every `tp_btf` program parsed it again).
    kernel_btf: Option<std::result::Result<aya::Btf, String>>,
    /// Why the off-CPU programs cannot run, when a kernel offset they need is missing.
    offcpu_missing: Option<String>,
    /// The `tp_btf` switch program reads the blocked syscall from the task's registers.
    offcpu_regs: bool,
    /// `tcp_probe` is held back (`AttachOptions::served_held`), or its late attach failed: the
    /// accepts are the requests.
    served_held: bool,
    /// Connections the target had accepted when a held-back `tcp_probe` was attached: its
    /// request count starts there.
    served_base: Option<u64>,
    /// Every program's link, owned here so that they detach side by side ([`Probes::drop`]).
    links: Vec<Box<dyn Send>>,
    /// Kept alive so tracefs stays mounted while attached.
    _tracefs: Tracefs,
}

impl Drop for Probes {
    /// Detaches every link at once, one thread each, before the rest drops. Detaching a
    /// perf-event tracepoint link can wait for an RCU grace period: the FUSE tracepoints'
    /// (`fuse_request_send`, `fuse_request_end`) took 70-98 ms each here, 0.19 s at the end of
    /// every trace one after the other; waits that run side by side share their grace period.
    /// The others detach in microseconds.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        std::thread::scope(|s| {
            for link in links {
                s.spawn(move || drop(link));
            }
        });
    }
}

/// Adds `flag` to each pid's flags in the `TRACED` array.
pub(crate) fn add_flag<T: std::borrow::BorrowMut<MapData>>(
    traced: &mut Array<T, u8>,
    pids: &[u32],
    flag: u8,
) -> Result<()> {
    for &p in pids {
        let old = traced.get(&p, 0).unwrap_or(0);
        traced
            .set(p, old | flag, 0)
            .map_err(|e| map_err(&format!("{MAP_TRACED}[{p}]"), e))?;
    }
    Ok(())
}

/// Slot `i` of a per-CPU u64 array, summed over CPUs (no 64-bit atomics on the BPF side:
/// every counter is per CPU).
pub(crate) fn sum_slot<T: std::borrow::Borrow<MapData>>(
    m: &PerCpuArray<T, u64>,
    name: &str,
    i: u32,
) -> Result<u64> {
    m.get(&i, 0)
        .map(|v| v.iter().sum())
        .map_err(|e| map_err(name, e))
}

fn map_err(what: &str, e: impl std::fmt::Display) -> Error {
    let msg = e.to_string();
    fd_limit(what, &msg).unwrap_or_else(|| Error::Untrusted(format!("{what}: {msg}")))
}

/// An error with its sources (aya's map and program errors keep the errno in `source()`,
/// which `{:#}` does not print for non-anyhow errors).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
}

/// Whether an error chain's text carries `errno`: by its number, which Rust's io::Error
/// prints as `(os error N)` whatever the libc calls it (EMFILE is "Too many open files" to
/// glibc and "No file descriptors available" to musl, whose static binary is the one users
/// copy), else by its name (aya's own messages) or glibc's wording. Where a number is
/// printed it decides alone ("Too many open files in system" is ENFILE).
fn has_errno(msg: &str, errno: nix::errno::Errno, glibc_text: &str) -> bool {
    if msg.contains("(os error ") {
        return msg.contains(&format!("(os error {})", errno as i32));
    }
    msg.contains(&format!("{errno:?}")) || msg.contains(glibc_text)
}

/// EPERM in an error chain (see [`has_errno`]).
fn refused(msg: &str) -> bool {
    has_errno(msg, nix::errno::Errno::EPERM, "Operation not permitted")
}

/// EMFILE named for what it is: the process's descriptor limit, not the kernel (exit 4).
pub fn fd_limit(what: &str, msg: &str) -> Option<Error> {
    has_errno(msg, nix::errno::Errno::EMFILE, "Too many open files").then(|| {
        let (soft, hard) = crate::util::nofile_limit();
        Error::Privilege(format!(
            "{what}: out of file descriptors (EMFILE: RLIMIT_NOFILE soft {soft}, hard {hard}); \
             raise the limit (ulimit -n 4096) and run again"
        ))
    })
}

/// Reads the kernel BTF at `path` (`btf_file` when the user gave one).
fn read_btf(btf_file: Option<&std::path::Path>, path: &std::path::Path) -> Result<Vec<u8>> {
    crate::input::read_capped_io(path, crate::input::BTF_CAP).map_err(|e| {
        use std::io::ErrorKind as K;
        match (btf_file, e.kind()) {
            // A device, FIFO, directory or oversized file given by the user: bad input.
            (Some(p), K::InvalidInput | K::FileTooLarge | K::IsADirectory) => {
                Error::input(format!("--btf {}", p.display()), e)
            }
            _ => Error::Kernel(format!(
                "no kernel BTF at {} ({e}); trapdetect needs BTF (CONFIG_DEBUG_INFO_BTF=y) to find kernel \
                 struct offsets, or a BTF file for this kernel with --btf",
                path.display()
            )),
        }
    })
}

/// What tcp_probe reads of the socket and the segment, from BTF: the globals' values, or the
/// note on its row naming what BTF lacks (then it is not attached: zero offsets would misread).
fn served_offsets(btf: &Btf) -> std::result::Result<Vec<(&'static str, u32)>, String> {
    all_offsets(
        btf,
        &[
            (GLOBAL_SERVED_OFF_SK_NUM, "sock_common", "skc_num"),
            (GLOBAL_SERVED_OFF_TCP_SND_NXT, "tcp_sock", "snd_nxt"),
            (GLOBAL_SERVED_OFF_SKB_LEN, "sk_buff", "len"),
            (GLOBAL_SERVED_OFF_SKB_DATA, "sk_buff", "data"),
        ],
        "requests other clients send cannot be counted, so per-request figures rest on the \
         probe load or accepted connections",
    )
}

/// What the TCP state program reads of the socket, from BTF, or the note on its row.
fn tcp_state_offsets(btf: &Btf) -> std::result::Result<Vec<(&'static str, u32)>, String> {
    all_offsets(
        btf,
        &[
            (GLOBAL_TCP_OFF_INET_SPORT, "inet_sock", "inet_sport"),
            (GLOBAL_TCP_OFF_SK_DPORT, "sock_common", "skc_dport"),
            (GLOBAL_TCP_OFF_SK_PROTOCOL, "sock", "sk_protocol"),
        ],
        "TCP state changes (TIME_WAIT, new connections) are not counted; the census's \
         snapshots remain",
    )
}

/// Every `(global, struct, field)` offset from BTF, or a "not attached" note naming the
/// missing fields and what is lost without them (`without`).
fn all_offsets(
    btf: &Btf,
    fields: &[(&'static str, &str, &str)],
    without: &str,
) -> std::result::Result<Vec<(&'static str, u32)>, String> {
    let (out, missing) = btf_offsets(btf, fields);
    if missing.is_empty() {
        return Ok(out);
    }
    let names: Vec<String> = missing.into_iter().map(|(name, _)| name).collect();
    Err(format!(
        "not attached: the kernel's BTF has no {}: {without}",
        names.join(", ")
    ))
}

/// A struct field BTF lacks: `struct.field`, and BTF's error.
type Missing = (String, String);

/// Each `(global, struct, field)` offset from BTF (0 where missing), and the missing ones.
fn btf_offsets(
    btf: &Btf,
    want: &[(&'static str, &str, &str)],
) -> (Vec<(&'static str, u32)>, Vec<Missing>) {
    let mut out = vec![];
    let mut missing = vec![];
    for &(global, st, field) in want {
        let v = btf.offset(st, field).unwrap_or_else(|e| {
            missing.push((format!("{st}.{field}"), e.to_string()));
            0
        });
        out.push((global, v));
    }
    (out, missing)
}

/// The error for an eBPF object the kernel would not load.
fn load_error(e: &dyn std::error::Error) -> Error {
    let msg = chain(e);
    if let Some(e) = fd_limit("loading the eBPF object", &msg) {
        e
    } else if refused(&msg) {
        Error::Privilege(format!(
            "loading eBPF maps was refused ({msg}); run as root or grant CAP_BPF"
        ))
    } else {
        let release = crate::util::kernel_release(std::path::Path::new("/"));
        Error::Kernel(format!(
            "loading the eBPF object failed on kernel {}: {msg} (trapdetect needs Linux \
             {}.{} or later: BPF ring buffer; tested from {})",
            release, MIN_KERNEL.0, MIN_KERNEL.1, OLDEST_TESTED
        ))
    }
}

impl Probes {
    /// Loads the object and attaches every program the kernel supports.
    pub fn attach(btf_file: Option<&std::path::Path>, want: &AttachOptions) -> Result<Self> {
        let path = btf_file.unwrap_or(std::path::Path::new("/sys/kernel/btf/vmlinux"));
        let btf_data = read_btf(btf_file, path)?;
        let btf =
            Btf::parse(&btf_data).map_err(|e| Error::Kernel(format!("{}: {e}", path.display())))?;
        let offs = offsets(&btf).map_err(|e| Error::Kernel(format!("kernel BTF: {e}")))?;
        let (sock_offs, socket_offsets_missing) = socket_offsets(&btf);
        let (offcpu_offs, offcpu_missing, offcpu_regs) = offcpu::globals(&btf);
        let netns_filter = sock_offs
            .iter()
            .filter(|(g, _)| *g == GLOBAL_OFF_SK_NET || *g == GLOBAL_OFF_NET_INUM)
            .all(|(_, v)| *v != 0);
        let tracefs = Tracefs::ensure()?;
        if !tracefs.has_event("raw_syscalls", "sys_enter") {
            return Err(Error::Kernel(
                "this kernel has no syscall tracepoints (raw_syscalls/sys_enter; CONFIG_HAVE_SYSCALL_TRACEPOINTS); trapdetect needs them".into(),
            ));
        }
        let dispatch =
            dispatch_globals(&btf, want).map_err(|e| Error::Kernel(format!("kernel BTF: {e}")))?;
        let served = served_offsets(&btf);
        let tcp_state = tcp_state_offsets(&btf);
        // The fork probe reads both tasks' pid (the off-CPU globals carry the offset).
        btf.offset("task_struct", "pid")
            .map_err(|e| Error::Kernel(format!("kernel BTF: {e}")))?;
        // The record's group_dead field is the raw tracepoint's second argument.
        let exit_group_dead = tracefs
            .format("sched", "sched_process_exit")
            .map_or(0, |f| tracefs::exit_group_dead_offset(&f));
        let has_group_dead = u32::from(exit_group_dead != 0);
        let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4_194_304);
        let mut loader = EbpfLoader::new();
        for (name, v) in offs
            .iter()
            .chain(&sock_offs)
            .chain(&offcpu_offs)
            .chain(&dispatch.scalars)
        {
            loader.override_global(name, v, true);
        }
        loader.override_global(GLOBAL_REG_ARG_OFF, &dispatch.args, true);
        for (name, v) in served.iter().chain(&tcp_state).flatten() {
            loader.override_global(name, v, true);
        }
        loader.override_global(GLOBAL_EXIT_HAS_GROUP_DEAD, &has_group_dead, true);
        loader.map_max_entries(MAP_TRACED, pid_max + 1);
        let ebpf = loader.load(OBJECT).map_err(|e| load_error(&e))?;
        let mut probes = Probes {
            ebpf,
            rows: vec![],
            missing_required: vec![],
            socket_offsets_missing,
            netns_filter,
            btf_path: path.to_path_buf(),
            kernel_btf: None,
            offcpu_missing,
            offcpu_regs,
            served_held: false,
            served_base: None,
            links: vec![],
            _tracefs: tracefs,
        };
        probes.attach_table(want, served.err().as_deref(), tcp_state.err().as_deref())?;
        if exit_group_dead == 0 {
            probes.note_no_group_dead();
        }
        Ok(probes)
    }

    /// Attaches the table's programs, or records why each one is not attached.
    fn attach_table(
        &mut self,
        want: &AttachOptions,
        served_missing: Option<&str>,
        tcp_state_missing: Option<&str>,
    ) -> Result<()> {
        // Attach exits before enters, so an enter never records a call whose exit is unseen.
        let mut entries = table();
        entries.sort_by_key(|e| !e.program.starts_with("sys_exit"));
        for e in entries {
            match self.why_not(&e, want, served_missing, tcp_state_missing) {
                Some(note) => {
                    self.served_held |= note == SERVED_HELD;
                    self.not_attached(&e, note)
                }
                None => self.attach_entry(&e)?,
            }
        }
        Ok(())
    }

    /// Why `e` is not to be attached, or `None` when it is.
    fn why_not<'a>(
        &self,
        e: &Entry,
        want: &AttachOptions,
        served_missing: Option<&'a str>,
        tcp_state_missing: Option<&'a str>,
    ) -> Option<&'a str> {
        let connect = e.program == PROG_SYS_ENTER_CONNECT || e.program == PROG_SYS_EXIT_CONNECT;
        let offcpu_row = offcpu::is_offcpu_program(&e.program);
        if want.skip.contains(&e.program) {
            Some("skipped on request (--skip-probe)")
        } else if offcpu_row && !want.offcpu {
            Some("not attached: off-CPU time is measured by `trapdetect run`")
        } else if offcpu_row && self.offcpu_missing.is_some() {
            Some("not attached: a kernel struct offset it needs is missing from BTF")
        } else if offcpu::raw_twin_of(&e.program).is_some_and(|t| self.is_attached(t)) {
            Some("not attached: its tp_btf program is")
        } else if offcpu::is_entry_program(&e.program)
            && self.is_attached(PROG_OFFCPU_SWITCH)
            && self.offcpu_regs
        {
            Some(offcpu::REGS_NOTE)
        } else if offcpu::is_entry_program(&e.program) && !self.offcpu_attached() {
            Some("not attached: no off-CPU switch program attached")
        } else if connect && !want.watch_clients {
            Some("not attached: no --watch-client")
        } else if e.program == PROG_TCP_PROBE && want.no_served_ports {
            Some(
                "not attached: the target listens on no TCP port and no --url names one, so \
                 there is no port to count on (requests are its accepted connections)",
            )
        } else if e.program == PROG_TCP_PROBE && served_missing.is_some() {
            served_missing
        } else if e.program == PROG_TCP_PROBE && want.served_held {
            Some(SERVED_HELD)
        } else if e.program == PROG_INET_SOCK_SET_STATE && tcp_state_missing.is_some() {
            tcp_state_missing
        } else {
            None
        }
    }

    /// Notes on the attached exit program that this kernel's record has no group_dead.
    fn note_no_group_dead(&mut self) {
        if let Some(r) = self
            .rows
            .iter_mut()
            .find(|r| r.program == PROG_SCHED_PROCESS_EXIT && r.attached)
        {
            r.note = "forget exited processes; this kernel's record has no group_dead \
                      (present on 6.18, absent on 6.12 and older): a process ends when its \
                      thread group leader exits"
                .into();
        }
    }

    fn not_attached(&mut self, e: &Entry, note: &str) {
        self.rows.push(ProbeRow {
            program: e.program.clone(),
            attach: e
                .attach
                .iter()
                .map(|(c, n)| format!("{c}/{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            attached: false,
            note: note.into(),
        });
        if e.required {
            self.missing_required.push(e.program.clone());
        }
    }

    /// Attaches the held-back `tcp_probe` now and points it at the ports; `Ok(true)` when it
    /// counts from here on, `Ok(false)` when nothing was held or it did not attach (its row
    /// says why, and the accepts stay the requests: the window goes on).
    pub fn attach_held_served(&mut self, own: &[u16], front: &[u16], note: &str) -> Result<bool> {
        if !self.served_held {
            return Ok(false);
        }
        let Some(e) = table().into_iter().find(|e| e.program == PROG_TCP_PROBE) else {
            return Ok(false);
        };
        let accepts = self
            .counters()?
            .get(trapdetect_common::counters::C_ACCEPTS as usize)
            .copied()
            .unwrap_or(0);
        self.rows.retain(|r| r.program != PROG_TCP_PROBE);
        // Loaded only now: what the verifier or the kernel says is the row's note, and a
        // failure here must not end a window already half measured.
        let failed = self.attach_entry(&e).err().map(|err| err.to_string());
        if !self.is_attached(PROG_TCP_PROBE) {
            let why = match failed {
                Some(f) => f,
                None => self
                    .rows
                    .iter()
                    .find(|r| r.program == PROG_TCP_PROBE)
                    .map(|r| r.note.clone())
                    .unwrap_or_default(),
            };
            self.rows.retain(|r| r.program != PROG_TCP_PROBE);
            self.not_attached(
                &e,
                &format!(
                    "held back, then not attached ({note}): {why}; the accepts stayed the requests"
                ),
            );
            return Ok(false);
        }
        self.served_held = false;
        self.served_base = Some(accepts);
        if let Some(r) = self.rows.iter_mut().find(|r| r.program == PROG_TCP_PROBE) {
            r.note = format!("{}; {note}", e.purpose);
        }
        self.watch_served_ports(own, front)
    }

    /// `tcp_probe` is held back: the target's accepts are its requests.
    pub fn served_held(&self) -> bool {
        self.served_held
    }

    /// When a held-back `tcp_probe` was attached: the connections accepted before it.
    pub fn served_base(&self) -> Option<u64> {
        self.served_base
    }

    /// Requests the target received so far, given its `accepts`: those while `tcp_probe` is
    /// held back, then the accepts before its attach plus what it counted (`None`: no count
    /// of requests, only accepts).
    pub fn requests_so_far(&self, accepts: u64) -> Option<u64> {
        if self.served_held {
            return Some(accepts);
        }
        let served = self.served().ok().flatten()?;
        Some(served[2] + self.served_base.unwrap_or(0))
    }

    /// Whether `program` is attached.
    pub fn is_attached(&self, program: &str) -> bool {
        self.rows.iter().any(|r| r.program == program && r.attached)
    }

    /// The attach points of `e` this kernel has.
    fn available<'e>(&self, e: &'e Entry) -> Vec<&'e (&'static str, String)> {
        e.attach
            .iter()
            .filter(|(c, n)| match tracefs_event(c, n) {
                Some((c, n)) => self._tracefs.has_event(c, n),
                None => self.is_attached(n),
            })
            .collect()
    }

    /// Where the records of the `available` attach points differ in layout from what `e` reads.
    fn layout_mismatches(&self, e: &Entry, available: &[&(&'static str, String)]) -> Vec<String> {
        let mut layout: Vec<String> = vec![];
        for f in trapdetect_common::records::FIXED_FIELDS {
            if f.program != e.program {
                continue;
            }
            for (c, n) in available {
                if *c != f.category || !(f.event.is_empty() || f.event == n) {
                    continue;
                }
                if let Some(format) = self._tracefs.format(c, n)
                    && let Some(m) = tracefs::layout_mismatch(&format, f)
                {
                    layout.push(format!("{c}/{n}: {m}"));
                }
            }
        }
        layout
    }

    /// Loads `e`'s program and attaches it to every `available` point; the error as text.
    fn load_and_attach(
        &mut self,
        e: &Entry,
        available: &[&(&'static str, String)],
    ) -> std::result::Result<(), String> {
        if available[0].0 == IN_DISPATCH {
            // Switched on by SYSCALL_FEATURES before load; nothing of its own to attach.
            return Ok(());
        }
        let btf_tp = available[0].0 == offcpu::TP_BTF;
        let raw_tp = available[0].0 == offcpu::RAW_TP;
        if btf_tp {
            let path = &self.btf_path;
            let btf = self
                .kernel_btf
                .get_or_insert_with(|| {
                    aya::Btf::parse_file(path, aya::Endianness::default())
                        .map_err(|e| format!("BTF {}: {e}", path.display()))
                })
                .as_ref()
                .map_err(|e| e.clone())?;
            let link = offcpu::attach(&mut self.ebpf, &e.program, &available[0].1, btf)?;
            self.links.push(Box::new(link));
            return Ok(());
        }
        if raw_tp {
            let link = offcpu::attach_raw(&mut self.ebpf, &e.program, &available[0].1)?;
            self.links.push(Box::new(link));
            return Ok(());
        }
        let prog: &mut TracePoint = self
            .ebpf
            .program_mut(&e.program)
            .ok_or_else(|| format!("program {} not in the object", e.program))?
            .try_into()
            .map_err(|err| format!("{err}"))?;
        prog.load()
            .map_err(|err| format!("load: {}", chain(&err)))?;
        for (c, n) in available {
            let id = prog
                .attach(c, n)
                .map_err(|err| format!("attach {c}/{n}: {}", chain(&err)))?;
            let link = prog.take_link(id).map_err(|err| format!("{err}"))?;
            self.links.push(Box::new(link));
        }
        Ok(())
    }

    fn attach_entry(&mut self, e: &Entry) -> Result<()> {
        let available = self.available(e);
        let attach_desc = e
            .attach
            .iter()
            .map(|(c, n)| format!("{c}/{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        if available.is_empty() {
            self.rows.push(ProbeRow {
                program: e.program.clone(),
                attach: attach_desc,
                attached: false,
                note: match e.attach.first() {
                    Some((IN_DISPATCH, host)) => format!("not attached: {host} is not"),
                    _ => format!("tracepoint not on this kernel; {}", e.purpose),
                },
            });
            if e.required {
                self.missing_required.push(e.program.clone());
            }
            return Ok(());
        }
        // A record whose layout differs from what the program reads would be misread: not
        // attached, and said so (a required one makes the trace untrusted).
        let layout = self.layout_mismatches(e, &available);
        if !layout.is_empty() {
            self.rows.push(ProbeRow {
                program: e.program.clone(),
                attach: attach_desc,
                attached: false,
                note: format!("record layout differs: {}", layout.join("; ")),
            });
            if e.required {
                self.missing_required.push(e.program.clone());
            }
            return Ok(());
        }
        let result = self.load_and_attach(e, &available);
        match result {
            Ok(()) => self.rows.push(ProbeRow {
                program: e.program.clone(),
                attach: attach_desc,
                attached: true,
                note: e.purpose.into(),
            }),
            Err(msg) => {
                if let Some(err) = fd_limit(&format!("attaching {}", e.program), &msg) {
                    return Err(err);
                }
                if refused(&msg) {
                    return Err(Error::Privilege(format!(
                        "attaching {} was refused ({msg}); run as root (CAP_BPF + CAP_PERFMON)",
                        e.program
                    )));
                }
                self.rows.push(ProbeRow {
                    program: e.program.clone(),
                    attach: attach_desc,
                    attached: false,
                    note: msg,
                });
                if e.required {
                    self.missing_required.push(e.program.clone());
                }
            }
        }
        Ok(())
    }

    /// Marks processes as traced.
    pub fn trace_pids(&mut self, pids: &[u32]) -> Result<()> {
        self.mark(pids, trapdetect_common::TRACED_TARGET)
    }

    /// Marks processes as watched clients (their connect() calls are timed).
    pub fn watch_client_pids(&mut self, pids: &[u32]) -> Result<()> {
        self.mark(pids, trapdetect_common::TRACED_CLIENT)
    }

    /// Adds `flag` to each pid's flags (the kernel's fork probe may have set others already).
    fn mark(&mut self, pids: &[u32], flag: u8) -> Result<()> {
        let mut traced: Array<&mut MapData, u8> = self.array_mut(MAP_TRACED)?;
        add_flag(&mut traced, pids, flag)?;
        for &p in pids {
            self.mark_in_flight(p, flag)?;
        }
        Ok(())
    }

    /// Calls the process's threads were already in when it was marked: the dispatch sees only
    /// their exits, which carry no syscall number. Read from /proc/PID/task/TID/syscall and
    /// written into the threads' in-flight slots (empty ones only), so an `accept` a worker was
    /// blocked in still counts, and a path or connect call in progress is counted as untimed.
    fn mark_in_flight(&mut self, pid: u32, flag: u8) -> Result<()> {
        use trapdetect_common::{
            TRACED_CLIENT, TRACED_TARGET,
            paths::{INFLIGHT_SLOTS, Inflight},
            syscalls::{K_ACCEPT, K_CONNECT, K_IN_FLIGHT_AT_ATTACH, kind_of},
            tcp::{CONNECT_AT_ATTACH, CONNECT_INFLIGHT_SLOTS, ConnectInflight},
        };
        let arch = trapdetect_common::offcpu::host_arch();
        let accepts = self.is_attached(PROG_SYS_EXIT_ACCEPT);
        let connects = self.is_attached(PROG_SYS_EXIT_CONNECT);
        for (tid, nr) in in_syscall(pid) {
            let kind = match kind_of(arch, nr) {
                Some(K_ACCEPT) if flag == TRACED_TARGET && accepts => K_ACCEPT,
                Some(K_CONNECT) if flag == TRACED_CLIENT && connects => K_CONNECT,
                Some(k) if k < NUM_KINDS as u16 && flag == TRACED_TARGET => K_IN_FLIGHT_AT_ATTACH,
                _ => continue,
            };
            if kind == K_CONNECT {
                let mut slots: Array<&mut MapData, ConnectInflight> =
                    self.array_mut(MAP_CONNECT_INFLIGHT)?;
                let i = tid & (CONNECT_INFLIGHT_SLOTS - 1);
                if slots.get(&i, 0).is_ok_and(|s| s.tid == 0) {
                    let v = ConnectInflight {
                        tid,
                        tcp: CONNECT_AT_ATTACH,
                        ts: 0,
                    };
                    slots
                        .set(i, v, 0)
                        .map_err(|e| map_err(MAP_CONNECT_INFLIGHT, e))?;
                }
                continue;
            }
            let mut slots: Array<&mut MapData, Inflight> = self.array_mut(MAP_INFLIGHT)?;
            let i = tid & (INFLIGHT_SLOTS - 1);
            if slots.get(&i, 0).is_ok_and(|s| s.tid == 0) {
                let mut v = Inflight {
                    tid,
                    ..Default::default()
                };
                v.key.kind = kind;
                slots.set(i, v, 0).map_err(|e| map_err(MAP_INFLIGHT, e))?;
            }
        }
        Ok(())
    }

    fn array_mut<V: aya::Pod>(&mut self, name: &str) -> Result<Array<&mut MapData, V>> {
        Array::try_from(
            self.ebpf
                .map_mut(name)
                .ok_or_else(|| map_err(name, "missing"))?,
        )
        .map_err(|e| map_err(name, e))
    }

    /// Takes the ring buffer of first sightings (read on its own thread).
    pub fn take_path_events(&mut self) -> Result<RingBuf<MapData>> {
        let m = self
            .ebpf
            .take_map(MAP_PATH_EVENTS)
            .ok_or_else(|| map_err(MAP_PATH_EVENTS, "missing"))?;
        RingBuf::try_from(m).map_err(|e| map_err(MAP_PATH_EVENTS, e))
    }

    /// A per-CPU u64 array of the object, by name.
    fn percpu_u64(&self, name: &str) -> Result<PerCpuArray<&MapData, u64>> {
        PerCpuArray::try_from(
            self.ebpf
                .map(name)
                .ok_or_else(|| map_err(name, "missing"))?,
        )
        .map_err(|e| map_err(name, e))
    }

    /// Slots `0..n` of a per-CPU u64 array, each summed over CPUs.
    pub(crate) fn sums(&self, name: &str, n: u32) -> Result<Vec<u64>> {
        let m = self.percpu_u64(name)?;
        (0..n).map(|i| sum_slot(&m, name, i)).collect()
    }

    /// Self-monitoring counters only (cheap: for the progress line).
    pub fn counters(&self) -> Result<Vec<u64>> {
        self.sums(MAP_COUNTERS, NUM_COUNTERS)
    }

    /// Total completed path calls so far (for the progress line).
    pub fn path_calls(&self) -> u64 {
        self.kind_counts().map(|k| k.iter().sum()).unwrap_or(0)
    }

    fn kind_counts(&self) -> Result<Vec<u64>> {
        self.sums(MAP_KIND_COUNTS, NUM_KINDS)
    }

    /// Reads every map.
    pub fn read(&self) -> Result<Counts> {
        let mut c = Counts {
            counters: self.counters()?,
            ..Default::default()
        };
        c.kinds = self.kind_counts()?;
        let paths: PerCpuHashMap<&MapData, PathKey, PathStat> = PerCpuHashMap::try_from(
            self.ebpf
                .map(MAP_PATH_STATS)
                .ok_or_else(|| map_err(MAP_PATH_STATS, "missing"))?,
        )
        .map_err(|e| map_err(MAP_PATH_STATS, e))?;
        for kv in paths.iter() {
            let (k, per_cpu) = kv.map_err(|e| map_err(MAP_PATH_STATS, e))?;
            let t = c.paths.entry(k).or_insert_with(|| PathTotals {
                hist: vec![0; HIST_BUCKETS as usize],
                ..Default::default()
            });
            for v in per_cpu.iter() {
                t.count += v.count;
                t.errors += v.errors;
                t.sum_ns += v.sum_ns;
                t.max_ns = t.max_ns.max(v.max_ns);
                for (i, h) in v.hist.iter().enumerate() {
                    t.hist[i] += *h as u64;
                }
            }
        }
        if let Some(map) = self.ebpf.map(MAP_FUSE_OPS) {
            let fuse: PerCpuHashMap<&MapData, FuseKey, u64> =
                PerCpuHashMap::try_from(map).map_err(|e| map_err(MAP_FUSE_OPS, e))?;
            for kv in fuse.iter() {
                let (k, v) = kv.map_err(|e| map_err(MAP_FUSE_OPS, e))?;
                *c.fuse.entry(k).or_default() += v.iter().sum::<u64>();
            }
        }
        if let Some(map) = self.ebpf.map(MAP_FUSE_QUEUE) {
            let queue: PerCpuHashMap<&MapData, FuseQueueKey, FuseQueueVal> =
                PerCpuHashMap::try_from(map).map_err(|e| map_err(MAP_FUSE_QUEUE, e))?;
            for kv in queue.iter() {
                let (k, v) = kv.map_err(|e| map_err(MAP_FUSE_QUEUE, e))?;
                let e = c.fuse_queue.entry(k).or_default();
                for x in v.iter() {
                    e.0 += x.count;
                    e.1 += x.sum_ns;
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use trapdetect_common::syscalls::{NO_ARG, SYSCALLS};

    use super::*;

    #[test]
    fn errors_are_known_by_their_number_whatever_the_libc_calls_them() {
        let musl = "map error: failed to create map `FUSE_SENT`: No file descriptors available (os error 24)";
        let glibc =
            "map error: failed to create map `FUSE_SENT`: Too many open files (os error 24)";
        for m in [musl, glibc, "bpf_map_create failed: EMFILE"] {
            let e = fd_limit("loading the eBPF object", m).unwrap();
            assert!(
                matches!(&e, Error::Privilege(t) if t.contains("out of file descriptors (EMFILE"))
            );
        }
        // ENFILE (os error 23) is the host's table, not this process's limit; 240 is not 24.
        assert!(fd_limit("x", "Too many open files in system (os error 23)").is_none());
        assert!(fd_limit("x", "(os error 240)").is_none());
        assert!(refused("Operation not permitted (os error 1)"));
        assert!(refused("bpf() failed: EPERM"));
        assert!(!refused("Permission denied (os error 13)"));
        assert!(!refused("(os error 11)"));
    }

    /// The dispatch reads each path call's arguments by index; the kernel's own description of
    /// each syscall (its tracefs format: arguments at 16 + 8·i) must put the path, dfd and fd
    /// there.
    #[test]
    fn syscall_argument_indices_match_tracefs() {
        // Found, or mounted the way `trace` does (this test thread's own mount namespace).
        let fs = match Tracefs::ensure() {
            Ok(fs) => fs,
            Err(e) => {
                assert!(std::env::var_os("CI").is_none(), "tracefs under CI: {e}");
                eprintln!("SKIP: {e}");
                return;
            }
        };
        let mut checked = 0;
        for s in trapdetect_common::syscalls::on_arch(trapdetect_common::offcpu::host_arch()) {
            let text = fs
                .format("syscalls", &format!("sys_enter_{}", s.name))
                .unwrap_or_else(|| panic!("no tracefs format for {}", s.name));
            let at = |i: u8| 16 + 8 * i as u32;
            if s.path_arg != NO_ARG {
                let off = ["filename", "path", "pathname"]
                    .iter()
                    .find_map(|f| tracefs::parse_field_offset(&text, f));
                assert_eq!(off, Some(at(s.path_arg)), "{}", s.name);
            }
            for (arg, names) in [
                (s.dfd_arg, &["dfd"][..]),
                (s.fd_arg, &["fd"][..]),
                (s.flags_arg, &["flag", "flags"][..]),
            ] {
                if arg != NO_ARG {
                    let off = names
                        .iter()
                        .find_map(|f| tracefs::parse_field_offset(&text, f));
                    assert_eq!(off, Some(at(arg)), "{} {names:?}", s.name);
                }
            }
            checked += 1;
        }
        assert_eq!(checked, SYSCALLS.len());
    }

    /// /proc/PID/task/TID/syscall: a number when blocked in a syscall, else "running" or -1.
    #[test]
    fn threads_in_a_syscall_are_read_from_proc() {
        assert_eq!(
            parse_in_syscall("43 0x3 0x7ffd 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f12\n"),
            Some(43)
        );
        assert_eq!(parse_in_syscall("running\n"), None);
        assert_eq!(parse_in_syscall("-1 0x7ffd 0x7f12\n"), None);
        assert_eq!(parse_in_syscall(""), None);
        // This thread reads its own file from inside read(2).
        let me = nix::unistd::gettid().as_raw() as u32;
        let read = if cfg!(target_arch = "aarch64") { 63 } else { 0 };
        assert!(in_syscall(std::process::id()).contains(&(me, read)));
        // A sleeping child is in nanosleep (or clock_nanosleep).
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        std::thread::sleep(std::time::Duration::from_millis(200));
        let got = in_syscall(child.id());
        let _ = child.kill();
        let _ = child.wait();
        let nanosleep = if cfg!(target_arch = "aarch64") {
            [101, 115]
        } else {
            [35, 230]
        };
        assert!(
            matches!(&got[..], [(t, nr)] if *t == child.id() && nanosleep.contains(nr)),
            "{got:?}"
        );
    }

    /// tcp_probe's offsets come from BTF; a BTF without them leaves it unattached with a note
    /// naming every missing field (never a zero offset read as a port).
    #[test]
    fn served_offsets_from_btf_or_a_note_naming_what_is_missing() {
        let mut blob = vec![0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
        blob.extend_from_slice(&[0; 16]);
        let empty = Btf::parse(&blob).unwrap();
        let note = served_offsets(&empty).unwrap_err();
        assert!(
            note.starts_with(
                "not attached: the kernel's BTF has no sock_common.skc_num, tcp_sock.snd_nxt, \
                 sk_buff.len, sk_buff.data: "
            ),
            "{note}"
        );
        let Ok(data) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            eprintln!("SKIP: no /sys/kernel/btf/vmlinux");
            return;
        };
        let offs = served_offsets(&Btf::parse(&data).unwrap()).unwrap();
        let names: Vec<&str> = offs.iter().map(|(g, _)| *g).collect();
        assert_eq!(
            names,
            [
                GLOBAL_SERVED_OFF_SK_NUM,
                GLOBAL_SERVED_OFF_TCP_SND_NXT,
                GLOBAL_SERVED_OFF_SKB_LEN,
                GLOBAL_SERVED_OFF_SKB_DATA
            ]
        );
        // skc_num in sock_common's port pair; snd_nxt well past struct sock's start.
        assert_eq!(offs[0].1, 14);
        assert!(offs[1].1 > 1000, "{offs:?}");
    }
}
