//! Request timeouts of one lane without a timer per request. Every request of a lane has the
//! same timeout and is registered when it starts, on the lane's one thread, so deadlines come
//! in order: a FIFO queue holds them, and one sweeper task, asleep until the oldest deadline,
//! fires what is due. A request that ends frees its entry and costs the sweeper nothing.
//!
//! tokio's `timeout` per request cost a timer-wheel insert and removal under the time driver's
//! lock, a clock read, and, whenever the wheel was empty when the thread went to sleep (most of
//! the time at a few requests in flight), a write to the runtime's eventfd to wake the thread it
//! was running on, and an extra `epoll_wait` for that wake (docs/load.md, OVERHEAD). Deadlines
//! still fire on tokio's 1 ms timer, as before.

use std::{
    collections::VecDeque,
    future::Future,
    pin::pin,
    sync::Mutex,
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use super::clock::mono_ns;

/// One lane's deadlines.
#[derive(Debug, Default)]
pub struct Deadlines {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Registered deadlines, oldest first (non-decreasing); entries of requests that ended
    /// stay until they reach the front or the queue is compacted.
    queue: VecDeque<Entry>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Slots in use.
    live: usize,
    /// The deadline the sweeper sleeps until; `None`: it waits for a registration.
    armed: Option<u64>,
    sweeper: Option<Waker>,
}

#[derive(Debug)]
struct Entry {
    deadline_ns: u64,
    gen_: u64,
    slot: u32,
}

#[derive(Debug, Default)]
struct Slot {
    /// Bumped when the slot is freed, so queue entries of an ended request are recognized.
    gen_: u64,
    fired: bool,
    waker: Option<Waker>,
}

/// A registered deadline; dropping it unregisters it.
#[derive(Debug)]
pub struct Deadline<'a> {
    owner: &'a Deadlines,
    slot: u32,
    gen_: u64,
}

impl Inner {
    fn alive(&self, e: &Entry) -> bool {
        self.slots[e.slot as usize].gen_ == e.gen_
    }

    /// Drops ended requests' entries from the front, and compacts when they are most of it.
    fn prune(&mut self) {
        while self.queue.front().is_some_and(|e| !self.alive(e)) {
            self.queue.pop_front();
        }
        if self.queue.len() > 2 * self.live + 64 {
            let slots = &self.slots;
            self.queue.retain(|e| slots[e.slot as usize].gen_ == e.gen_);
        }
    }
}

impl Deadlines {
    /// Registers a deadline (CLOCK_MONOTONIC ns), not earlier than any registered before it.
    pub fn register(&self, deadline_ns: u64) -> Deadline<'_> {
        let mut wake = None;
        let (slot, gen_) = {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let inner = &mut *g;
            debug_assert!(
                inner
                    .queue
                    .back()
                    .is_none_or(|e| e.deadline_ns <= deadline_ns),
                "deadlines out of order"
            );
            let slot = match inner.free.pop() {
                Some(s) => s,
                None => {
                    inner.slots.push(Slot::default());
                    (inner.slots.len() - 1) as u32
                }
            };
            inner.live += 1;
            inner.prune();
            let gen_ = inner.slots[slot as usize].gen_;
            inner.queue.push_back(Entry {
                deadline_ns,
                gen_,
                slot,
            });
            // An armed sweeper wakes no later than this deadline (it is the latest), then
            // looks at the queue again; an idle one needs waking.
            if inner.armed.is_none() {
                wake = inner.sweeper.take();
            }
            (slot, gen_)
        };
        if let Some(w) = wake {
            w.wake();
        }
        Deadline {
            owner: self,
            slot,
            gen_,
        }
    }

    /// Whether `d` has fired; if not, `cx`'s waker is woken when it does.
    fn fired(&self, d: &Deadline<'_>, cx: &Context<'_>) -> bool {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut g.slots[d.slot as usize];
        if s.fired || s.gen_ != d.gen_ {
            return true;
        }
        match &s.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => s.waker = Some(cx.waker().clone()),
        }
        false
    }

    /// Runs `fut` until it completes (`Some`) or `d` fires (`None`, `fut` dropped). Like
    /// tokio's `timeout`, `fut` is polled before the deadline is looked at.
    pub async fn within<F: Future>(&self, d: &Deadline<'_>, fut: F) -> Option<F::Output> {
        let mut fut = pin!(fut);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(v) = fut.as_mut().poll(cx) {
                return Poll::Ready(Some(v));
            }
            if self.fired(d, cx) {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Fires what is due at `now`; returns the wakers to wake and the next deadline (the
    /// sweeper's waker is kept when there is none).
    fn sweep_at(&self, now: u64, cx: &Context<'_>, wakers: &mut Vec<Waker>) -> Option<u64> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *g;
        loop {
            inner.prune();
            match inner.queue.front() {
                Some(e) if e.deadline_ns <= now => {
                    let s = &mut inner.slots[e.slot as usize];
                    s.fired = true;
                    wakers.extend(s.waker.take());
                    inner.queue.pop_front();
                }
                Some(e) => {
                    inner.armed = Some(e.deadline_ns);
                    return inner.armed;
                }
                None => {
                    inner.armed = None;
                    match &inner.sweeper {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => inner.sweeper = Some(cx.waker().clone()),
                    }
                    return None;
                }
            }
        }
    }

    /// The sweeper: runs until dropped (spawn it on the lane's runtime, abort it at the end).
    pub async fn sweeper(&self) {
        let mut wakers = Vec::new();
        loop {
            let next = std::future::poll_fn(|cx| {
                let next = self.sweep_at(mono_ns(), cx, &mut wakers);
                for w in wakers.drain(..) {
                    w.wake();
                }
                match next {
                    Some(at) => Poll::Ready(at),
                    None => Poll::Pending,
                }
            })
            .await;
            let now = mono_ns();
            if next > now {
                tokio::time::sleep_until(
                    (Instant::now() + Duration::from_nanos(next - now)).into(),
                )
                .await;
            }
        }
    }
}

impl Drop for Deadline<'_> {
    fn drop(&mut self) {
        let mut g = self.owner.inner.lock().unwrap_or_else(|e| e.into_inner());
        let inner = &mut *g;
        let s = &mut inner.slots[self.slot as usize];
        if s.gen_ == self.gen_ {
            s.gen_ += 1;
            s.fired = false;
            s.waker = None;
            inner.free.push(self.slot);
            inner.live -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_deadline_cuts_a_slow_future_and_spares_a_fast_one() {
        rt().block_on(async {
            let d = std::sync::Arc::new(Deadlines::default());
            let sweeper = tokio::spawn({
                let d = d.clone();
                async move { d.sweeper().await }
            });
            let t0 = mono_ns();
            let slow = d.register(t0 + 20_000_000);
            let fast = d.register(t0 + 30_000_000);
            let never = std::future::pending::<()>();
            let quick = tokio::time::sleep(Duration::from_millis(5));
            let (a, b) = tokio::join!(d.within(&slow, never), d.within(&fast, quick));
            assert_eq!(a, None);
            assert_eq!(b, Some(()));
            let took = mono_ns() - t0;
            assert!(took >= 20_000_000, "fired {took} ns after registration");
            assert!(took < 500_000_000, "fired {took} ns after registration");
            drop((slow, fast));
            // After an idle spell (queue empty, sweeper waiting), a new deadline still fires.
            tokio::time::sleep(Duration::from_millis(5)).await;
            let t1 = mono_ns();
            let again = d.register(t1 + 10_000_000);
            assert_eq!(d.within(&again, std::future::pending::<()>()).await, None);
            assert!(mono_ns() - t1 >= 10_000_000);
            sweeper.abort();
        });
    }

    #[test]
    fn ended_requests_do_not_pile_up() {
        let d = Deadlines::default();
        let far = mono_ns() + 60_000_000_000;
        // A straggler at the front keeps later entries from being popped; compaction bounds
        // the queue by the live count anyway.
        let straggler = d.register(far);
        for _ in 0..10_000 {
            drop(d.register(far));
        }
        let g = d.inner.lock().unwrap();
        assert_eq!(g.live, 1);
        assert!(g.queue.len() <= 2 * g.live + 65, "{}", g.queue.len());
        assert!(g.slots.len() <= 2, "{}", g.slots.len());
        drop(g);
        drop(straggler);
        drop(d.register(far));
        assert!(d.inner.lock().unwrap().queue.len() <= 1);
    }
}
