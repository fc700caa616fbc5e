//! The TIME_WAIT watcher behind `wait-drain` and load steps: one port's TIME_WAIT count and
//! timers, polled on a namespace entered once.

use std::{io, path::Path, time::Duration};

use super::{
    census::{Route, enter_error, read_proc_tcp, route},
    diag::{Diag, TCP_TIME_WAIT},
    model::SockRec,
    netns::{self, EnterError, Netns},
};
use crate::error::{Error, Result};

/// TIME_WAIT sockets on one port at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSample {
    /// Sockets whose local or remote port is the port.
    pub count: u64,
    /// Their remaining timers, ms.
    pub remaining_ms: Vec<u32>,
}

impl PortSample {
    /// Exact time until fewer than `n` of these sockets remain, from their timers.
    pub fn until_below(&self, n: u64) -> Duration {
        if self.count < n || n == 0 {
            return Duration::ZERO;
        }
        let mut r = self.remaining_ms.clone();
        r.sort_unstable_by(|a, b| b.cmp(a));
        Duration::from_millis(r.get(n as usize - 1).copied().unwrap_or(0) as u64)
    }
}

enum WatchHow {
    Diag(Diag),
    ProcDir(std::path::PathBuf),
    ProcEnter(std::path::PathBuf),
}

/// Repeated TIME_WAIT counts on one namespace (for `wait-drain`): the sock_diag socket is
/// opened inside the namespace once and polled with the kernel's state filter.
pub struct TimeWaitWatch {
    how: WatchHow,
    /// `sock_diag` or `/proc/net/tcp`.
    pub source: &'static str,
}

impl TimeWaitWatch {
    /// Opens a watch on namespace `ns`.
    pub fn open(ns: &Netns) -> Result<Self> {
        let diag = match route(ns)? {
            Route::Here => Ok(Diag::open()),
            Route::Enter(path) => netns::run_in(&path, Diag::open).map_err(|e| (path, e)),
        };
        Ok(match diag {
            Ok(Ok(d)) => TimeWaitWatch {
                how: WatchHow::Diag(d),
                source: "sock_diag",
            },
            Ok(Err(_)) => TimeWaitWatch {
                how: match ns.path() {
                    None => WatchHow::ProcDir("/proc/thread-self/net".into()),
                    Some(p) => WatchHow::ProcEnter(p),
                },
                source: "/proc/net/tcp",
            },
            Err((_, EnterError::Setns(e) | EnterError::Open(e)))
                if matches!(ns, Netns::Pid(_))
                    && matches!(
                        e.raw_os_error().map(nix::errno::Errno::from_raw),
                        Some(nix::errno::Errno::EPERM | nix::errno::Errno::EACCES)
                    ) =>
            {
                let Netns::Pid(p) = ns else { unreachable!() };
                TimeWaitWatch {
                    how: WatchHow::ProcDir(format!("/proc/{p}/net").into()),
                    source: "/proc/net/tcp",
                }
            }
            Err((_, e)) => return Err(enter_error(ns, e)),
        })
    }

    /// Counts TIME_WAIT sockets whose local or remote port is `port`.
    pub fn sample(&mut self, port: u16) -> Result<PortSample> {
        let mut s = PortSample {
            count: 0,
            remaining_ms: vec![],
        };
        let mut take = |r: SockRec| {
            if r.state == TCP_TIME_WAIT && (r.local.port() == port || r.remote.port() == port) {
                s.count += 1;
                s.remaining_ms.push(r.expires_ms);
            }
        };
        let read_dir = |dir: &Path| -> io::Result<Vec<SockRec>> {
            let mut v = vec![];
            read_proc_tcp(dir, &mut v, &mut vec![])?;
            Ok(v)
        };
        match &mut self.how {
            WatchHow::Diag(d) => {
                d.dump_tcp(1 << TCP_TIME_WAIT, &mut take)
                    .map_err(|e| Error::Syscall {
                        call: "sock_diag dump".into(),
                        source: e,
                    })?
            }
            WatchHow::ProcDir(dir) => read_dir(dir)
                .map_err(|e| Error::input(dir.display().to_string(), e))?
                .into_iter()
                .for_each(take),
            WatchHow::ProcEnter(path) => {
                let here = Path::new("/proc/thread-self/net");
                netns::run_in(path, || read_dir(here))
                    .map_err(|e| Error::Untrusted(format!("re-entering the namespace: {e:?}")))?
                    .map_err(|e| Error::input("/proc/net/tcp", e))?
                    .into_iter()
                    .for_each(take)
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_below_uses_the_nth_longest_timer() {
        let s = PortSample {
            count: 4,
            remaining_ms: vec![1000, 59_000, 30_000, 2000],
        };
        assert_eq!(s.until_below(5), Duration::ZERO);
        // Fewer than 2 remain once all but the longest have expired.
        assert_eq!(s.until_below(2), Duration::from_millis(30_000));
        assert_eq!(s.until_below(1), Duration::from_millis(59_000));
    }
}
