//! The tracer's own cost, measured by the kernel: per-program run time and run count
//! (`run_time_ns`, `run_cnt` of each program's fdinfo), which the kernel keeps only while run
//! time statistics are on. They are turned on with `BPF_ENABLE_STATS` (Linux ≥ 5.8) for the
//! trace alone: the kernel keeps them on while the descriptor it returns is open and turns them
//! off when it is closed (at detach, or when the process dies), whatever happens; the host's own
//! switch (`kernel.bpf_stats_enabled`, which shows only its own setting) is never written.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::Probes;

/// Run time statistics switched on for as long as this lives.
pub struct StatsOn {
    _fd: Option<OwnedFd>,
    /// Why the kernel did not switch them on (figures then exist only when
    /// `kernel.bpf_stats_enabled` was already 1).
    pub refused: Option<String>,
}

/// Switches the kernel's per-program run time statistics on until the result is dropped.
pub fn enable() -> StatsOn {
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => StatsOn {
            _fd: Some(fd),
            refused: None,
        },
        Err(e) => StatsOn {
            _fd: None,
            refused: Some(super::chain(&e)),
        },
    }
}

/// One program's runs and the time they took (cumulative since statistics were on).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProgStat {
    /// Program name (the probes table's).
    pub program: String,
    /// Times it ran.
    pub runs: u64,
    /// Nanoseconds it ran, summed over CPUs.
    pub run_ns: u64,
}

/// `(run_time_ns, run_cnt)` of a BPF program's fdinfo.
pub fn parse_fdinfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("run_time_ns:")?, field("run_cnt:")?))
}

impl Probes {
    /// Runs and run time of every attached program, in the probes table's order (empty where
    /// the kernel does not report them).
    pub fn run_stats(&self) -> Vec<ProgStat> {
        self.rows
            .iter()
            .filter(|r| r.attached)
            .filter_map(|r| {
                let fd = self.ebpf.program(&r.program)?.fd().ok()?;
                let raw = fd.as_fd().as_raw_fd();
                let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}")).ok()?;
                let (run_ns, runs) = parse_fdinfo(&text)?;
                Some(ProgStat {
                    program: r.program.clone(),
                    runs,
                    run_ns,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_time_and_count_from_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nprog_id:\t912\nrun_time_ns:\t183402\nrun_cnt:\t977\nrecursion_misses:\t0\n";
        assert_eq!(parse_fdinfo(text), Some((183_402, 977)));
        assert_eq!(parse_fdinfo("pos:\t0\n"), None);
    }
}
