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

/// Nanoseconds in a duration, saturating.
pub fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
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
}
