//! Time for the generator: CLOCK_MONOTONIC nanoseconds, the clock eBPF's `bpf_ktime_get_ns`
//! reads, so every sample can be joined with kernel events without conversion.

use std::os::fd::AsFd;
use std::time::Duration;

use nix::sys::{
    time::TimeSpec,
    timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags},
};

pub use crate::util::mono_ns;

/// A timerfd on CLOCK_MONOTONIC with absolute deadlines, driven by the runtime's epoll: the
/// dispatcher wakes within microseconds of an arrival (tokio's own timer has 1 ms ticks) and
/// without a thread hop from a separate sleeper thread.
pub struct Ticker {
    fd: tokio::io::unix::AsyncFd<Timer>,
}

/// The timerfd, with the raw descriptor tokio's `AsyncFd` registers.
struct Timer(TimerFd);

impl std::os::fd::AsRawFd for Timer {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Ticker {
    /// Creates the timer; must be called inside a tokio runtime.
    pub fn new() -> std::io::Result<Ticker> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: the descriptor is ours alone and registered nowhere else; the AsyncFd owns it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                Timer(timer),
                tokio::io::Interest::READABLE,
            )
        }?;
        Ok(Ticker { fd })
    }

    /// Waits until the absolute instant `deadline` (CLOCK_MONOTONIC ns).
    pub async fn sleep_until(&self, deadline: u64) -> std::io::Result<()> {
        if deadline <= mono_ns() {
            return Ok(());
        }
        let at = TimeSpec::new(
            (deadline / 1_000_000_000) as _,
            (deadline % 1_000_000_000) as _,
        );
        self.fd.get_ref().0.set(
            Expiration::OneShot(at),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        )?;
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|inner| {
                // The expiration count (8 bytes); EAGAIN becomes WouldBlock for try_io.
                let mut ticks = [0u8; 8];
                match nix::unistd::read(inner.get_ref().0.as_fd(), &mut ticks) {
                    Ok(_) => Ok(()),
                    Err(e) => Err(std::io::Error::from(e)),
                }
            });
            match read {
                Ok(r) => {
                    // The expiry was consumed: without this the next arming would first see
                    // this stale readiness and pay an EAGAIN read.
                    guard.clear_ready();
                    return r;
                }
                // Stale readiness from an earlier arming: wait for this one.
                Err(_would_block) => continue,
            }
        }
    }
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME read together: the realtime reading taken between two
/// monotonic ones (the tightest of a few tries), paired with their midpoint. Converts the
/// generator's monotonic instants to wall-clock time, which copies on other hosts share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallPair {
    /// CLOCK_MONOTONIC, ns.
    pub mono_ns: u64,
    /// CLOCK_REALTIME, ns since the Unix epoch.
    pub unix_ns: i128,
}

impl WallPair {
    /// Reads both clocks now.
    pub fn now() -> WallPair {
        let mut best: Option<(u64, WallPair)> = None;
        for _ in 0..5 {
            let a = mono_ns();
            let w = unix_ns_now();
            let b = mono_ns();
            let gap = b.saturating_sub(a);
            if best.is_none_or(|(g, _)| gap < g) {
                best = Some((
                    gap,
                    WallPair {
                        mono_ns: a + gap / 2,
                        unix_ns: w,
                    },
                ));
            }
        }
        best.map(|(_, p)| p).unwrap_or(WallPair {
            mono_ns: mono_ns(),
            unix_ns: unix_ns_now(),
        })
    }

    /// The wall-clock instant, ns since the epoch, of the monotonic instant `mono`.
    pub fn unix_ns_at(&self, mono: u64) -> i128 {
        self.unix_ns + (i128::from(mono) - i128::from(self.mono_ns))
    }

    /// The monotonic instant of the wall-clock instant `unix_ns` (0 when before boot).
    pub fn mono_at(&self, unix_ns: i128) -> u64 {
        let m = i128::from(self.mono_ns) + (unix_ns - self.unix_ns);
        m.clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// CLOCK_REALTIME, ns since the Unix epoch (negative before it).
pub fn unix_ns_now() -> i128 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// What the wall clock is worth for joining runs of several hosts: the clock source and the
/// kernel's NTP state (`adjtimex(2)`, read only).
pub fn clock_info() -> super::summary::ClockInfo {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()
            .map(|s| crate::escape::text(s.trim()))
            .filter(|s| !s.is_empty());
    // SAFETY: timex is plain integers (all-zero is valid); modes 0 makes adjtimex a read that
    // fills the struct and changes nothing.
    let (state, tx) = unsafe {
        let mut tx: nix::libc::timex = std::mem::zeroed();
        tx.modes = 0;
        let state = nix::libc::adjtimex(&mut tx);
        (state, tx)
    };
    if state < 0 {
        return super::summary::ClockInfo {
            source,
            synchronized: false,
            esterror_us: None,
            maxerror_us: None,
        };
    }
    super::summary::ClockInfo {
        source,
        synchronized: synchronized(state, tx.status),
        esterror_us: Some(tx.esterror),
        maxerror_us: Some(tx.maxerror),
    }
}

/// adjtimex's verdict: the clock is synchronized unless the state is TIME_ERROR or the status
/// has STA_UNSYNC.
fn synchronized(state: i32, status: i32) -> bool {
    state != nix::libc::TIME_ERROR && status & nix::libc::STA_UNSYNC == 0
}

/// Nanoseconds in a duration, saturating.
pub fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// Longest wait `--start-at` accepts.
const START_AT_AHEAD_NS: i128 = 86_400 * 1_000_000_000;
/// How long ago a `--start-at` instant may be and still start the run (at once).
const START_AT_LATE_NS: i128 = 1_000_000_000;

/// `--start-at UNIX_TIME` against the wall clock `now_ns`: the instant, ns since the epoch.
/// Refuses a time more than 24 h ahead or more than 1 s past.
pub fn start_at(s: &str, now_ns: i128) -> crate::error::Result<i128> {
    let shown = crate::escape::text(s);
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 12 || !digits(int) || !digits(frac) || s.ends_with('.') {
        return Err(crate::error::Error::usage(format!(
            "--start-at {shown}: expected seconds since the Unix epoch, e.g. 1733400000.5 \
             (date +%s)"
        )));
    }
    let ns_frac: i128 = format!("{:0<9}", &frac[..frac.len().min(9)])
        .parse()
        .unwrap_or(0);
    let at = int.parse::<i128>().unwrap_or(0) * 1_000_000_000 + ns_frac;
    if at - now_ns > START_AT_AHEAD_NS {
        return Err(crate::error::Error::usage(format!(
            "--start-at {shown}: more than 24 h ahead ({:.0} s from now)",
            (at - now_ns) as f64 / 1e9
        )));
    }
    if now_ns - at > START_AT_LATE_NS {
        return Err(crate::error::Error::usage(format!(
            "--start-at {shown}: that time passed {:.1} s ago",
            (now_ns - at) as f64 / 1e9
        )));
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticker_wakes_at_an_absolute_instant() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let t = Ticker::new().unwrap();
            for _ in 0..20 {
                let due = mono_ns() + 300_000;
                t.sleep_until(due).await.unwrap();
                let now = mono_ns();
                assert!(now >= due, "woke {} ns early", due - now);
            }
            // Past deadlines return at once; a re-armed timer does not fire on stale readiness.
            t.sleep_until(mono_ns() - 1).await.unwrap();
            let due = mono_ns() + 2_000_000;
            t.sleep_until(due).await.unwrap();
            assert!(mono_ns() >= due);
        });
    }

    #[test]
    fn wall_pair_converts_both_ways() {
        let p = WallPair {
            mono_ns: 5_000_000_000,
            unix_ns: 1_733_400_000_000_000_000,
        };
        assert_eq!(p.unix_ns_at(5_250_000_000), 1_733_400_000_250_000_000);
        assert_eq!(p.mono_at(1_733_400_000_500_000_000), 5_500_000_000);
        assert_eq!(p.mono_at(1_733_399_990_000_000_000), 0, "before boot");
        // The live pair agrees with a fresh reading of both clocks within a few ms.
        let live = WallPair::now();
        let drift = live.unix_ns_at(mono_ns()) - unix_ns_now();
        assert!(drift.abs() < 5_000_000, "{drift} ns");
    }

    #[test]
    fn synchronized_needs_no_time_error_and_no_unsync() {
        use nix::libc::{STA_PLL, STA_UNSYNC, TIME_ERROR, TIME_OK};
        assert!(synchronized(TIME_OK, STA_PLL));
        assert!(!synchronized(TIME_ERROR, STA_PLL));
        assert!(!synchronized(TIME_OK, STA_PLL | STA_UNSYNC));
        let c = clock_info();
        assert!(c.esterror_us.is_some() && c.maxerror_us.is_some(), "{c:?}");
    }

    #[test]
    fn start_at_is_an_instant_within_a_day_and_not_past() {
        let now = 1_733_400_000_250_000_000i128;
        assert_eq!(
            start_at("1733400000.5", now).unwrap(),
            1_733_400_000_500_000_000
        );
        assert_eq!(
            start_at("1733400010", now).unwrap(),
            1_733_400_010_000_000_000
        );
        assert_eq!(
            start_at("1733400000.1234567899", now).unwrap(),
            1_733_400_000_123_456_789
        );
        // Within 1 s past: accepted (the run starts at once).
        assert_eq!(
            start_at("1733399999.3", now).unwrap(),
            1_733_399_999_300_000_000
        );
        assert_eq!(
            start_at("1733486400.25", now).unwrap(),
            1_733_486_400_250_000_000
        );
        let got: Vec<String> = [
            "1733399990",
            "1733486400.26",
            "",
            "x",
            "1e9",
            "-5",
            "1733400000.",
            ".5",
            "17334000001111111",
            "1733400000.5.5",
            " 1733400000",
        ]
        .iter()
        .map(|s| {
            let e = start_at(s, now).unwrap_err();
            format!("{} {e}", e.exit_code())
        })
        .collect();
        let bad = |s: &str| {
            format!(
                "2 --start-at {s}: expected seconds since the Unix epoch, e.g. 1733400000.5 \
                 (date +%s)"
            )
        };
        assert_eq!(
            got,
            [
                "2 --start-at 1733399990: that time passed 10.2 s ago".to_string(),
                "2 --start-at 1733486400.26: more than 24 h ahead (86400 s from now)".into(),
                bad(""),
                bad("x"),
                bad("1e9"),
                bad("-5"),
                bad("1733400000."),
                bad(".5"),
                bad("17334000001111111"),
                bad("1733400000.5.5"),
                bad(" 1733400000"),
            ]
        );
    }
}
