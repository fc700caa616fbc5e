//! Which network namespace a census reads, and how trapdetect gets there without moving
//! itself: sockets, /proc/net files and `/proc/sys/net` all answer for the namespace of the
//! *calling thread*, so everything namespace-bound is done on a short-lived helper thread that
//! `setns(2)`s into the target's namespace and ends with the work (nothing else in trapdetect
//! ever runs inside the target's namespace, so there is nothing to switch back).
//!
//! Decision on sysctls: `/proc/PID/root/proc/sys/net` is no help (procfs answers for the
//! reader's namespace, not the path's), and `/proc/PID/net/` has no sysctls. So sysctls are
//! read on the helper thread inside the namespace. Without CAP_SYS_ADMIN the census falls back
//! to `/proc/PID/net/tcp{,6}` and `/proc/PID/net/netstat` (readable without entering) and
//! reports the sysctls of a foreign namespace as unknown rather than showing our own.

use std::{fs::File, io, os::unix::fs::MetadataExt, path::PathBuf};

/// A network namespace to take the census of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Netns {
    /// trapdetect's own.
    Own,
    /// The namespace of a process (`/proc/PID/ns/net`).
    Pid(u32),
    /// A namespace made by `ip netns add NAME` (`/run/netns/NAME`).
    Named(String),
}

impl Netns {
    /// A named namespace, with the name checked (it becomes a path).
    pub fn named(name: &str) -> Result<Self, String> {
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name.contains('\0')
        {
            return Err(format!(
                "`{}` is not a network namespace name (as in `ip netns list`)",
                crate::escape::text(name)
            ));
        }
        Ok(Netns::Named(name.to_string()))
    }

    /// How reports name it.
    pub fn label(&self) -> String {
        match self {
            Netns::Own => "trapdetect's own".into(),
            Netns::Pid(p) => format!("pid {p}"),
            Netns::Named(n) => format!("`{}`", crate::escape::text(n)),
        }
    }

    /// The namespace file to `setns` into (`None`: our own).
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Netns::Own => None,
            Netns::Pid(p) => Some(PathBuf::from(format!("/proc/{p}/ns/net"))),
            Netns::Named(n) => Some(PathBuf::from("/run/netns").join(n)),
        }
    }
}

/// Identity of a namespace file: (device, inode), as `ip netns identify` compares them.
pub fn identity(path: &std::path::Path) -> io::Result<(u64, u64)> {
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// The namespace of the calling thread.
pub fn own_identity() -> io::Result<(u64, u64)> {
    identity(std::path::Path::new("/proc/thread-self/ns/net"))
}

/// Why a namespace could not be entered.
#[derive(Debug)]
pub enum EnterError {
    /// The namespace file cannot be opened (no such process or name, or no access).
    Open(io::Error),
    /// `setns` refused (EPERM without CAP_SYS_ADMIN).
    Setns(io::Error),
}

/// Runs `f` on a fresh thread inside the namespace at `path`; the thread ends with `f`.
/// Sockets `f` creates stay bound to that namespace and can be used from any thread after.
pub fn run_in<T: Send>(
    path: &std::path::Path,
    f: impl FnOnce() -> T + Send,
) -> Result<T, EnterError> {
    let file = File::open(path).map_err(EnterError::Open)?;
    std::thread::scope(|s| {
        let h = s.spawn(move || {
            // CLONE_NEWNET affects this thread only.
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| EnterError::Setns(e.into()))?;
            Ok(f())
        });
        match h.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(Netns::named("bench1").is_ok());
        for bad in ["", ".", "..", "a/b", "../etc"] {
            assert!(Netns::named(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Netns::Named("x".into()).path().unwrap(),
            PathBuf::from("/run/netns/x")
        );
        assert_eq!(
            Netns::Pid(7).path().unwrap(),
            PathBuf::from("/proc/7/ns/net")
        );
        assert_eq!(Netns::Own.path(), None);
    }

    #[test]
    fn own_namespace_is_entered_and_identified() {
        let me = own_identity().unwrap();
        let inside = run_in(std::path::Path::new("/proc/self/ns/net"), || {
            own_identity().unwrap()
        });
        match inside {
            Ok(id) => assert_eq!(id, me),
            // Unprivileged test runs cannot setns even into their own namespace.
            Err(EnterError::Setns(e)) => {
                assert_eq!(e.raw_os_error(), Some(nix::errno::Errno::EPERM as i32))
            }
            Err(EnterError::Open(e)) => panic!("open: {e}"),
        }
    }
}
