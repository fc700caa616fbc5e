//! The target's process tree and identity: who to trace (the target and its descendants), and
//! each process's working directory, read from /proc.

use std::path::Path;

use super::process::parse_stat;
use crate::error::{Error, Result};

/// What /proc says about one process.
#[derive(Clone, Debug, Default)]
pub struct ProcInfo {
    /// Pid (tgid).
    pub pid: u32,
    /// Parent pid.
    pub ppid: u32,
    /// Start time in clock ticks since boot (identifies the process across pid reuse).
    pub starttime: u64,
    /// `comm` (untrusted bytes).
    pub comm: Vec<u8>,
    /// /proc/PID/exe target (untrusted bytes), if readable.
    pub exe: Option<Vec<u8>>,
    /// /proc/PID/cwd target (untrusted bytes), if readable.
    pub cwd: Option<Vec<u8>>,
    /// Command line arguments (untrusted bytes).
    pub cmdline: Vec<Vec<u8>>,
}

fn read_link(p: &Path) -> Option<Vec<u8>> {
    std::fs::read_link(p)
        .ok()
        .map(|t| t.into_os_string().into_encoded_bytes())
}

/// Reads one process. A missing process is a usage error (wrong pid), naming the pid.
pub fn info(pid: u32) -> Result<ProcInfo> {
    let dir = Path::new("/proc").join(pid.to_string());
    let stat = std::fs::read(dir.join("stat")).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::usage(format!("no process with pid {pid}"))
        } else {
            Error::input(format!("/proc/{pid}/stat"), e)
        }
    })?;
    let st = parse_stat(&stat)
        .ok_or_else(|| Error::usage(format!("/proc/{pid}/stat: unexpected format")))?;
    let cmdline = std::fs::read(dir.join("cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(<[u8]>::to_vec)
                .collect()
        })
        .unwrap_or_default();
    Ok(ProcInfo {
        pid,
        ppid: st.ppid,
        starttime: st.start_ticks,
        comm: st.comm,
        exe: read_link(&dir.join("exe")),
        cwd: read_link(&dir.join("cwd")),
        cmdline,
    })
}

/// Whether the process that had `starttime` is still alive (not exited, not a reused pid).
pub fn alive(pid: u32, starttime: u64) -> bool {
    // A zombie still has its stat: exited for our purposes.
    std::fs::read(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| parse_stat(&t))
        .is_some_and(|st| st.start_ticks == starttime && st.state != 'Z')
}

/// `root` and all its descendants now (one scan of /proc; the walker is `process::descendants`).
pub fn descendants(root: u32) -> Vec<u32> {
    super::process::descendants(&super::process::scan(), root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process() {
        let me = info(std::process::id()).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(alive(me.pid, me.starttime));
        assert!(!alive(me.pid, me.starttime + 1));
        assert_eq!(
            me.cwd.unwrap(),
            std::env::current_dir()
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        );
        assert!(matches!(info(u32::MAX - 1), Err(Error::Usage(_))));
    }
}
