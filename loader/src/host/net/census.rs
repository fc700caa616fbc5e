//! Namespace reading: sockets from sock_diag (or /proc/net/tcp{,6}), sysctls and TcpExt
//! counters read inside the target's network namespace, the target's socket inodes and
//! descriptor limits.

use std::{
    collections::HashSet,
    io,
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use nix::errno::Errno;

use super::{
    super::process,
    diag::{ALL_STATES, Diag, TCP_LISTEN},
    model::*,
    netns::{self, EnterError, Netns},
    procfs,
    tally::Tally,
};
use crate::{
    error::{Error, Result},
    escape,
};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What a census is asked for besides the sockets.
#[derive(Clone, Copy)]
struct Ask<'a> {
    ports: &'a [u16],
    target: Option<&'a HashSet<u64>>,
    /// Ports the target is known to connect to (its upstreams) besides those it holds live
    /// connections to.
    upstream: &'a [u16],
}

pub(super) fn read_proc_tcp(
    dir: &Path,
    socks: &mut Vec<SockRec>,
    notes: &mut Vec<String>,
) -> io::Result<()> {
    for f in ["tcp", "tcp6"] {
        let p = dir.join(f);
        match std::fs::read_to_string(&p) {
            Ok(text) => {
                let (mut v, bad) = procfs::parse_tcp(&text);
                if bad > 0 {
                    notes.push(format!("{}: {bad} unparsable lines skipped", p.display()));
                }
                socks.append(&mut v);
            }
            // No IPv6 in this kernel: nothing to count there.
            Err(e) if f == "tcp6" && e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn read_netstat(dir: &Path) -> Option<TcpExtSnapshot> {
    let text = std::fs::read_to_string(dir.join("netstat")).ok()?;
    Some(TcpExtSnapshot {
        taken_unix_ms: unix_ms(),
        counters: procfs::parse_netstat(&text),
    })
}

/// Reads sockets, sysctls and counters of the calling thread's namespace. With sock_diag the
/// listeners come first (a dump that skips the connection hash), then everything else is
/// tallied as it arrives.
fn read_here(read_from: String, ask: Ask) -> Result<NetObservation> {
    let here = Path::new("/proc/thread-self/net");
    let mut sysctls = procfs::sysctls_from(&procfs::read_sysctls());
    sysctls.read_from = read_from;
    let mut notes = vec![];
    let streamed = Diag::open().and_then(|mut d| {
        let mut listeners = vec![];
        d.dump_tcp(1 << TCP_LISTEN, &mut |r| listeners.push(r))?;
        let mut t = Tally::new(listeners, &sysctls, ask.ports, ask.target).upstreams(ask.upstream);
        d.dump_tcp(ALL_STATES & !(1 << TCP_LISTEN), &mut |r| t.add(&r))?;
        Ok(t.finish())
    });
    let mut obs = match streamed {
        Ok(mut o) => {
            o.source = "sock_diag".into();
            o
        }
        Err(e) => {
            notes.push(format!(
                "sock_diag unavailable ({e}): read /proc/net/tcp{{,6}} instead, which does not show listen backlogs"
            ));
            let mut socks = vec![];
            read_proc_tcp(here, &mut socks, &mut notes)
                .map_err(|e| Error::input("/proc/net/tcp", e))?;
            let mut o =
                NetObservation::build_with(&socks, &sysctls, ask.ports, ask.target, ask.upstream);
            o.source = "/proc/net/tcp".into();
            o
        }
    };
    obs.tcp_ext = read_netstat(here);
    obs.notes = notes;
    Ok(obs)
}

/// Without the right to enter a process's namespace, its /proc/PID/net files still answer
/// for it; its sysctls cannot be read, and are reported unknown rather than ours.
fn read_via_proc_pid(pid: u32, why: &io::Error, ask: Ask) -> Result<NetObservation> {
    let dir = std::path::PathBuf::from(format!("/proc/{pid}/net"));
    let mut socks = vec![];
    let mut notes = vec![format!(
        "cannot enter the network namespace of pid {pid} ({why}; needs CAP_SYS_ADMIN): sockets \
         and counters read from /proc/{pid}/net, its sysctls are unknown"
    )];
    read_proc_tcp(&dir, &mut socks, &mut notes)
        .map_err(|e| Error::input(format!("{}/tcp", dir.display()), e))?;
    let sysctls = NetSysctls {
        read_from: format!("not read: cannot enter the namespace of pid {pid}"),
        ..Default::default()
    };
    let mut obs = NetObservation::build_with(&socks, &sysctls, ask.ports, ask.target, ask.upstream);
    obs.source = "/proc/net/tcp".into();
    obs.tcp_ext = read_netstat(&dir);
    obs.notes = notes;
    Ok(obs)
}

/// Where a namespace is, relative to ours.
pub(super) enum Route {
    Here,
    Enter(std::path::PathBuf),
}

pub(super) fn route(ns: &Netns) -> Result<Route> {
    let Some(path) = ns.path() else {
        return Ok(Route::Here);
    };
    match (netns::identity(&path), netns::own_identity()) {
        (Ok(a), Ok(b)) if a == b => Ok(Route::Here),
        (Ok(_), _) => Ok(Route::Enter(path)),
        (Err(e), _) if e.kind() == io::ErrorKind::NotFound => Err(match ns {
            Netns::Named(n) => Error::usage(format!(
                "no network namespace `{}` (see `ip netns list`)",
                escape::text(n)
            )),
            _ => Error::usage(format!("{}: no such process", ns.label())),
        }),
        // No access to the namespace file: try to enter anyway, the open reports why.
        (Err(_), _) => Ok(Route::Enter(path)),
    }
}

pub(super) fn enter_error(ns: &Netns, e: EnterError) -> Error {
    let (what, e) = match e {
        EnterError::Open(e) => ("open", e),
        EnterError::Setns(e) => ("setns", e),
    };
    if matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::EPERM | Errno::EACCES)
    ) {
        Error::Privilege(format!(
            "entering the network namespace of {} needs CAP_SYS_ADMIN ({what}: {e}); run as root",
            ns.label()
        ))
    } else {
        Error::Syscall {
            call: format!("{what} network namespace of {}", ns.label()),
            source: e,
        }
    }
}

fn read_namespace(ns: &Netns, ask: Ask) -> Result<NetObservation> {
    match route(ns)? {
        Route::Here => read_here(
            match ns {
                Netns::Own => "trapdetect's own namespace".into(),
                other => format!(
                    "trapdetect's own namespace, which is that of {}",
                    other.label()
                ),
            },
            ask,
        ),
        Route::Enter(path) => {
            let label = format!("the namespace of {} (entered with setns)", ns.label());
            match netns::run_in(&path, || read_here(label, ask)) {
                Ok(r) => r,
                Err(EnterError::Setns(e) | EnterError::Open(e))
                    if matches!(ns, Netns::Pid(_))
                        && matches!(
                            e.raw_os_error().map(Errno::from_raw),
                            Some(Errno::EPERM | Errno::EACCES)
                        ) =>
                {
                    let Netns::Pid(p) = ns else { unreachable!() };
                    read_via_proc_pid(*p, &e, ask)
                }
                Err(e) => Err(enter_error(ns, e)),
            }
        }
    }
}

/// Socket inodes held by `pid` and its descendants (listeners are often held by a master
/// while workers accept), with notes on what could not be read.
fn target_inodes(pid: u32, notes: &mut Vec<String>) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for p in process::subtree(pid, 4096) {
        match std::fs::read_dir(format!("/proc/{p}/fd")) {
            Ok(rd) => {
                for e in rd.flatten() {
                    if let Ok(l) = std::fs::read_link(e.path())
                        && let Some(n) = l
                            .to_str()
                            .and_then(|s| s.strip_prefix("socket:["))
                            .and_then(|s| s.strip_suffix(']'))
                            .and_then(|s| s.parse().ok())
                    {
                        inodes.insert(n);
                    }
                }
            }
            Err(e) if p == pid => notes.push(format!(
                "cannot list /proc/{pid}/fd ({e}): the target's listeners are not identified"
            )),
            Err(_) => {}
        }
    }
    inodes
}

/// Open descriptors over the soft limit (0 when either is unknown or unlimited).
fn fill(u: &FdUse) -> f64 {
    match (u.open_fds, u.soft_limit) {
        (Some(o), Some(s)) if s > 0 => o as f64 / s as f64,
        _ => 0.0,
    }
}

/// Descriptor use and RLIMIT_NOFILE of a process (`role`: `target` or `generator`).
pub fn fd_use(pid: u32, role: &str) -> Result<FdUse> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .map_err(|e| Error::input(format!("/proc/{pid}/limits"), e))?;
    let (soft, hard) = procfs::parse_nofile(&limits).ok_or_else(|| {
        Error::Untrusted(format!(
            "/proc/{pid}/limits has no readable `Max open files` line"
        ))
    })?;
    let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
    let comm = escape::bytes(comm.strip_suffix(b"\n").unwrap_or(&comm));
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()
        .map(|rd| rd.count() as u64);
    Ok(FdUse {
        role: role.to_string(),
        pid,
        comm,
        open_fds,
        soft_limit: soft,
        hard_limit: hard,
    })
}

/// Census of the namespace of `pid` (or trapdetect's own), with the target's listeners and
/// descriptors, against a planned run of `plan = (rate per second, client timeout)`. `ports`
/// are ports of interest besides the target's listening ports.
pub fn census(
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
) -> Result<NetObservation> {
    census_in(&pid.map_or(Netns::Own, Netns::Pid), pid, plan, ports)
}

/// Census of namespace `ns` (which need not be `pid`'s).
pub fn census_in(
    ns: &Netns,
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
) -> Result<NetObservation> {
    census_with_upstreams(ns, pid, plan, ports, &[])
}

/// [`census_in`] with the ports the target is known to connect to (its upstreams, from a
/// trace's kernel count), whose TIME_WAIT is then the target's own even with none of its
/// connections to them alive at this instant.
pub fn census_with_upstreams(
    ns: &Netns,
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
    upstream: &[u16],
) -> Result<NetObservation> {
    let t0 = Instant::now();
    if let Some(p) = pid
        && let Err(e) = std::fs::metadata(format!("/proc/{p}"))
    {
        return Err(if e.kind() == io::ErrorKind::NotFound {
            Error::usage(format!("pid {p}: no such process"))
        } else {
            Error::input(format!("/proc/{p}"), e)
        });
    }
    let mut notes = vec![];
    let inodes = pid.map(|p| target_inodes(p, &mut notes));
    let ask = Ask {
        ports,
        target: inodes.as_ref(),
        upstream,
    };
    let mut obs = read_namespace(ns, ask)?;
    if let Some(p) = pid {
        let root = fd_use(p, "target")?;
        // The process of the tree closest to its limit binds (an nginx worker at 64 of 64
        // while its master sits at 9): it is reported beside the pid given.
        let fullest = process::subtree(p, 4096)
            .into_iter()
            .filter(|&q| q != p)
            .filter_map(|q| fd_use(q, "target").ok())
            .filter(|u| u.soft_limit.is_some() && u.open_fds.is_some())
            .max_by(|a, b| fill(a).total_cmp(&fill(b)))
            .filter(|u| fill(u) > fill(&root));
        obs.fds.push(root);
        obs.fds.extend(fullest);
    }
    obs.netns = ns.label();
    obs.taken_unix_ms = unix_ms();
    obs.plan = plan.map(|(r, t)| Plan::new(r, t));
    notes.append(&mut obs.notes);
    obs.notes = notes;
    obs.census_ms = crate::figures::round(t0.elapsed().as_secs_f64() * 1000.0, 2);
    Ok(obs)
}
