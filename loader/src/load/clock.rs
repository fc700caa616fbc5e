//! Time for the generator: CLOCK_MONOTONIC nanoseconds, the clock eBPF's `bpf_ktime_get_ns`
//! reads, so every sample can be joined with kernel events without conversion.

use std::time::Duration;

pub use crate::util::mono_ns;

/// A timerfd on CLOCK_MONOTONIC with absolute deadlines, driven by the runtime's epoll: the
/// dispatcher wakes within microseconds of an arrival (tokio's own timer has 1 ms ticks) and
/// without a thread hop from a separate sleeper thread.
pub struct Ticker {
    fd: tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>,
}

impl Ticker {
    /// Creates the timer; must be called inside a tokio runtime.
    pub fn new() -> std::io::Result<Ticker> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the result is checked before use.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: the descriptor is ours alone and registered nowhere else; the AsyncFd owns it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }?;
        Ok(Ticker { fd })
    }

    /// Waits until the absolute instant `deadline` (CLOCK_MONOTONIC ns).
    pub async fn sleep_until(&self, deadline: u64) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        if deadline <= mono_ns() {
            return Ok(());
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
            },
        };
        let fd = self.fd.get_ref().as_raw_fd();
        // SAFETY: valid descriptor and itimerspec; no old value requested.
        if unsafe {
            libc::timerfd_settime(fd, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        } != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|inner| {
                let mut ticks = 0u64;
                // SAFETY: reads 8 bytes into a u64 we own.
                let n = unsafe {
                    libc::read(
                        inner.get_ref().as_raw_fd(),
                        (&mut ticks as *mut u64).cast(),
                        8,
                    )
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
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
