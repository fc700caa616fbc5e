//! The tracer's own cost, measured by the kernel: per-program run time and run count
//! (`run_time_ns`, `run_cnt` of each program's fdinfo), which the kernel keeps only while run
//! time statistics are on. They are turned on with `BPF_ENABLE_STATS` (Linux ≥ 5.8) for the
//! trace alone: the kernel keeps them on while the descriptor it returns is open and turns them
//! off when it is closed (at detach, or when the process dies), whatever happens; the host's own
//! switch (`kernel.bpf_stats_enabled`, which shows only its own setting) is never written.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::Probes;

/// How long the statistics stay on: each program run they time costs two clock reads (about
/// 95 ns per run measured here, a quarter of what tracing a syscall costs), so by default they
/// are on for the first second of every ten of the window and the figures are scaled from that
/// sample. `TRAPDETECT_BPF_STATS=on` keeps them on for the whole window (exact run counts, what
/// the end-to-end test checks), `off` leaves them off (to measure what they cost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duty {
    /// The first second of every ten.
    Sampled,
    /// The whole window.
    Always,
    /// Never.
    Off,
}

/// Seconds on, per period, when sampled.
const ON_S: f64 = 1.0;
/// The period, seconds.
const PERIOD_S: f64 = 10.0;

/// The kernel's run time statistics, switched on and off through the window.
pub struct StatsOn {
    fd: Option<OwnedFd>,
    duty: Duty,
    start: std::time::Instant,
    on_since: Option<std::time::Instant>,
    on_total: f64,
    /// Why the kernel did not switch them on (figures then exist only when
    /// `kernel.bpf_stats_enabled` was already 1).
    pub refused: Option<String>,
}

impl StatsOn {
    /// Turns them on or off for `now` (call a few times a second).
    pub fn tick(&mut self) {
        if self.duty != Duty::Sampled || self.refused.is_some() {
            return;
        }
        let t = self.start.elapsed().as_secs_f64() % PERIOD_S;
        let want = t < ON_S;
        match (want, self.on_since.is_some()) {
            (true, false) => {
                if let Ok(fd) = aya::sys::enable_stats(aya::sys::Stats::RunTime) {
                    self.fd = Some(fd);
                    self.on_since = Some(std::time::Instant::now());
                }
            }
            (false, true) => self.off(),
            _ => {}
        }
    }

    fn off(&mut self) {
        if let Some(s) = self.on_since.take() {
            self.on_total += s.elapsed().as_secs_f64();
        }
        self.fd = None;
    }

    /// Seconds they were on so far (the span the figures cover).
    pub fn on_s(&self) -> f64 {
        self.on_total + self.on_since.map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    /// Whether the figures are a sample of the window.
    pub fn sampled(&self) -> bool {
        self.duty == Duty::Sampled
    }

    /// Off now; the seconds they were on.
    pub fn finish(mut self) -> f64 {
        self.off();
        self.on_total
    }
}

/// Switches the kernel's per-program run time statistics on (see [`Duty`]) until the result is
/// dropped or finished.
pub fn enable() -> StatsOn {
    let duty = match std::env::var("TRAPDETECT_BPF_STATS").as_deref() {
        Ok("on") => Duty::Always,
        Ok("off") => Duty::Off,
        _ => Duty::Sampled,
    };
    let now = std::time::Instant::now();
    let mut s = StatsOn {
        fd: None,
        duty,
        start: now,
        on_since: None,
        on_total: 0.0,
        refused: None,
    };
    if duty == Duty::Off {
        s.refused = Some("left off on request (TRAPDETECT_BPF_STATS=off)".into());
        return s;
    }
    match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
        Ok(fd) => {
            s.fd = Some(fd);
            s.on_since = Some(now);
        }
        Err(e) => s.refused = Some(super::chain(&e)),
    }
    s
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
