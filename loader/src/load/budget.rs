//! The connection budget of one lane: above the server's capacity an open loop must not answer
//! every arrival that finds no idle connection with a new one (the connection storm that
//! drowned the generator, issue 15). An arrival holds a slot while it uses a connection; one
//! that finds every slot taken queues for one (FIFO) and is dropped after a bound, counted,
//! never silently; new connections are paced by a token bucket, so a reconnect storm after
//! server-side closes is bounded too.
//!
//! Why a slot bounds the sockets: a request opens a connection only while holding a slot and
//! finding the lane's idle pool empty, and returns its socket to the pool before it gives the
//! slot back. So sockets (busy, idle, or being opened) never outnumber slots. The lane is a
//! single-threaded runtime, so looking at the pool and taking from it happen with no other
//! request of the lane running in between.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::clock::mono_ns;

/// One lane's slots and connect pacing.
#[derive(Debug)]
pub struct Budget {
    slots: Semaphore,
    size: usize,
    /// Theoretical arrival time of the next connect token (GCRA), CLOCK_MONOTONIC ns; only
    /// the lane's own thread writes it.
    tat_ns: AtomicU64,
    /// Token spacing, ns (0: unbounded).
    interval_ns: u64,
    /// How far ahead of its spacing a burst may run, ns.
    burst_ns: u64,
}

/// How getting a slot went.
pub enum Slot<'a> {
    /// Free at once.
    Now(SemaphorePermit<'a>),
    /// After waiting this long, ns.
    Waited(SemaphorePermit<'a>, u64),
    /// No slot within the bound.
    Dropped,
}

impl Budget {
    /// `size` connections; `connect_rate` new ones per second at most (`None`: unbounded),
    /// with bursts of up to `size` (a whole pool may be opened at the start).
    pub fn new(size: usize, connect_rate: Option<f64>) -> Budget {
        let interval_ns = connect_rate.map_or(0, |r| (1e9 / r.max(1e-9)).round() as u64);
        Budget {
            slots: Semaphore::new(size),
            size,
            tat_ns: AtomicU64::new(0),
            interval_ns,
            burst_ns: interval_ns.saturating_mul(size.saturating_sub(1) as u64),
        }
    }

    /// Slots in use now.
    pub fn busy(&self) -> usize {
        self.size - self.slots.available_permits()
    }

    /// A slot, waiting at most `bound` (FIFO among the waiters).
    pub async fn slot(&self, bound: Duration) -> Slot<'_> {
        if let Ok(p) = self.slots.try_acquire() {
            return Slot::Now(p);
        }
        let t0 = mono_ns();
        let bound_ns = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
        match tokio::time::timeout(bound, self.slots.acquire()).await {
            // A slot handed over after the bound (the thread was not running when its timer
            // fired) is given back: the bound holds however late the lane ran.
            Ok(Ok(p)) => match mono_ns().saturating_sub(t0).max(1) {
                waited if waited <= bound_ns => Slot::Waited(p, waited),
                _ => Slot::Dropped,
            },
            _ => Slot::Dropped,
        }
    }

    /// When a new connection may be opened if asked at `now`, or `None` when that would be
    /// after `latest` (the token is then not taken).
    pub fn connect_at(&self, now: u64, latest: u64) -> Option<u64> {
        if self.interval_ns == 0 {
            return Some(now);
        }
        let tat = self.tat_ns.load(Ordering::Relaxed).max(now);
        let at = tat.saturating_sub(self.burst_ns).max(now);
        if at > latest {
            return None;
        }
        self.tat_ns.store(tat + self.interval_ns, Ordering::Relaxed);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_tokens_burst_to_the_budget_then_keep_the_rate() {
        // 4 slots, 1,000 connects/s: 4 at once, then one per ms.
        let b = Budget::new(4, Some(1_000.0));
        let t0 = 1_000_000_000;
        let got: Vec<u64> = (0..7)
            .map(|_| b.connect_at(t0, u64::MAX).unwrap() - t0)
            .collect();
        assert_eq!(got, [0, 0, 0, 0, 1_000_000, 2_000_000, 3_000_000]);
        // A token later than allowed is refused and not taken.
        assert_eq!(b.connect_at(t0, t0 + 3_999_999), None);
        assert_eq!(b.connect_at(t0, u64::MAX), Some(t0 + 4_000_000));
        // Unbounded: always now.
        let u = Budget::new(1, None);
        assert_eq!(u.connect_at(5, 5), Some(5));
    }

    #[test]
    fn a_full_budget_queues_then_drops() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let b = Budget::new(1, None);
            let first = match b.slot(Duration::from_millis(1)).await {
                Slot::Now(p) => p,
                _ => panic!("a free slot"),
            };
            assert_eq!(b.busy(), 1);
            assert!(matches!(
                b.slot(Duration::from_millis(20)).await,
                Slot::Dropped
            ));
            let waiter = b.slot(Duration::from_secs(5));
            let release = async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(first);
            };
            let (got, ()) = tokio::join!(waiter, release);
            match got {
                Slot::Waited(_, ns) => assert!(ns >= 9_000_000, "{ns}"),
                _ => panic!("the freed slot"),
            }
        });
    }
}
