//! Accounting for one run: every measured arrival ends in exactly one bucket (a status code or
//! an error kind), latencies go into HDR histograms (2xx and non-2xx apart), and a per-second
//! series is kept by completion second so its 2xx column sums to the 2xx total. Each lane keeps
//! its own [`Recorder`] (no lock shared on the hot path); they are merged when the run ends, and
//! the per-second p99, which cannot be merged from per-lane p99s, from per-second histograms the
//! lanes hand to one [`Seconds`] once a second.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{
    classify::ErrorKind,
    exchange::{Answer, Progress},
    schedule::Ticket,
};

/// Histograms hold 1 ns .. 1 day at 3 significant digits (≈300 KiB each).
const HIST_MAX_NS: u64 = 86_400_000_000_000;

/// How one request ended.
#[derive(Clone, Copy, Debug)]
pub enum Outcome {
    /// A complete response.
    Answered(Answer),
    /// No status.
    Failed(ErrorKind),
    /// Never sent: no connection came free within the wait bound (the connection budget).
    Dropped,
}

/// When a request started and ended, and what the window made of it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timing {
    /// When a worker took the arrival.
    pub start_ns: u64,
    /// Time it waited for a connection of the budget (0: one was free at once).
    pub queue_ns: u64,
    /// When it ended.
    pub end_ns: u64,
    /// Ended before the measured window closed (else: answered in the drain).
    pub in_window: bool,
}

/// One second of the measured window (and of the drain after it).
#[derive(Clone, Debug, Default)]
pub struct Second {
    /// Arrivals intended in this second.
    pub scheduled: u64,
    /// 2xx completions in this second.
    pub ok_2xx: u64,
    /// Other statuses completed in this second.
    pub non_2xx: u64,
    /// Errors per kind, by the second they ended in.
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Summed 2xx latency, ns.
    pub lat_2xx_sum_ns: u128,
    /// 99th percentile of 2xx latency in this second, ns.
    pub lat_2xx_p99_ns: u64,
    /// Highest in-flight count in this second.
    pub in_flight_max: u64,
    /// Worst scheduling lag of the arrivals intended in this second, ns.
    pub lag_max_ns: u64,
    /// Arrivals dropped in this second (no connection within the wait bound).
    pub dropped: u64,
    /// 2xx answers to warm-up arrivals that ended in this second (a queue built in the
    /// warm-up is served in the window: the server's output, not a measured arrival's).
    pub warmup_ok_2xx: u64,
    /// This second's 2xx latencies as the histogram's recorded buckets (each bucket's
    /// highest equivalent value, ns; its count), where kept (`--shard`: what merging N
    /// copies' seconds reads their p99 from).
    pub lat_2xx_buckets: Vec<(u64, u64)>,
}

/// One line of `--samples-out` (and of `Plan::samples`): everything needed to join a request
/// with kernel events. Instants are CLOCK_MONOTONIC ns, the clock of `bpf_ktime_get_ns`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Arrival sequence number (warm-up included).
    pub seq: u64,
    /// Inside the measured window.
    pub measured: bool,
    /// Intended send instant.
    pub intended_ns: u64,
    /// When a worker took it (intended + scheduling lag).
    pub start_ns: u64,
    /// When its first byte was written (absent if it never was).
    pub sent_ns: Option<u64>,
    /// When it ended (response complete, error, or timeout).
    pub end_ns: u64,
    /// HTTP status, if a response came.
    pub status: Option<u16>,
    /// Error kind, if none did.
    pub error: Option<ErrorKind>,
    /// Never sent: no connection came free within `--max-wait`.
    pub dropped: bool,
    /// Time it waited for a free connection, ns.
    pub queue_ns: u64,
    /// Response body bytes.
    pub body_bytes: u64,
    /// Sent on a reused (keep-alive) connection.
    pub reused: bool,
    /// Which prebuilt request (`host * paths + path`).
    pub target: u32,
}

/// Running totals of one run.
#[derive(Debug)]
pub struct Recorder {
    measured_start_ns: u64,
    /// Measured arrivals that ended (any outcome).
    pub completed: u64,
    /// 2xx.
    pub ok_2xx: u64,
    /// Other statuses.
    pub non_2xx: u64,
    /// Per status code.
    pub status: BTreeMap<u16, u64>,
    /// Per error kind.
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Dropped: no connection came free within the wait bound.
    pub dropped: u64,
    /// Arrivals that waited for a connection (dropped ones included).
    pub queued: u64,
    /// How long those that got one waited, ns.
    pub queue_wait: Histogram<u64>,
    /// Errors on a fresh connection before any response byte (EOF, reset): the server
    /// closed what it would not serve.
    pub refused_fresh: u64,
    /// Of the totals above, what ended after the window (the drain): 2xx, other statuses,
    /// errors.
    pub drain_ok_2xx: u64,
    /// See `drain_ok_2xx`.
    pub drain_non_2xx: u64,
    /// See `drain_ok_2xx`.
    pub drain_errors: u64,
    /// Latency of 2xx from the intended instant, ns.
    pub lat_2xx: Histogram<u64>,
    /// Latency of non-2xx answers from the intended instant, ns.
    pub lat_non_2xx: Histogram<u64>,
    /// 2xx service time: first byte sent to response complete, ns.
    pub service_2xx: Histogram<u64>,
    /// Scheduling lag: worker pick-up minus intended instant, ns (measured arrivals).
    pub lag: Histogram<u64>,
    /// New-connection setup time, ns.
    pub connect: Histogram<u64>,
    /// TLS handshake time of new connections, ns.
    pub tls: Histogram<u64>,
    /// Of those handshakes, how many resumed a session (measured).
    pub tls_resumed: u64,
    /// Body bytes received (measured).
    pub body_bytes: u64,
    /// Requests sent on reused connections (measured).
    pub reused: u64,
    /// Warm-up arrivals that ended.
    pub warmup_completed: u64,
    /// Warm-up 2xx.
    pub warmup_ok_2xx: u64,
    /// Warm-up 2xx that ended inside the measured window (in the delivered rate).
    pub warmup_ok_2xx_in_window: u64,
    /// Per second from the start of the measured window.
    pub series: Vec<Second>,
    cur_sec: usize,
    cur_hist: Histogram<u64>,
    /// End of the last completion, ns.
    pub last_end_ns: u64,
    /// Where this lane's per-second histograms go (`None`: p99 computed here, one lane).
    seconds: Option<(Arc<Seconds>, usize)>,
}

/// The per-second 2xx latency histograms of every lane, merged: a second's p99 is computed once
/// every lane has moved past it, so only the seconds still open across lanes are held.
#[derive(Debug)]
pub struct Seconds {
    inner: Mutex<SecondsInner>,
}

#[derive(Debug)]
struct SecondsInner {
    open: BTreeMap<usize, Histogram<u64>>,
    /// Per lane, the second it records into now (`usize::MAX` when finished).
    lane_at: Vec<usize>,
    p99: BTreeMap<usize, u64>,
    /// Each closed second's buckets, where kept.
    buckets: Option<BTreeMap<usize, Vec<(u64, u64)>>>,
}

impl Seconds {
    /// For `lanes` lanes; `keep_buckets`: each second's histogram kept as its buckets too.
    pub fn new(lanes: usize, keep_buckets: bool) -> Arc<Seconds> {
        Arc::new(Seconds {
            inner: Mutex::new(SecondsInner {
                open: BTreeMap::new(),
                lane_at: vec![0; lanes],
                p99: BTreeMap::new(),
                buckets: keep_buckets.then(BTreeMap::new),
            }),
        })
    }

    /// Every closed second's buckets (empty where not kept).
    pub fn buckets(&self) -> BTreeMap<usize, Vec<(u64, u64)>> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .buckets
            .clone()
            .unwrap_or_default()
    }

    /// Lane `lane` is done with second `sec` (its histogram `h`, maybe empty) and records into
    /// `next` now.
    fn hand_over(&self, lane: usize, sec: usize, h: &Histogram<u64>, next: usize) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if !h.is_empty() {
            let merged = g.open.entry(sec).or_insert_with(|| hist(2));
            // Same bounds by construction; a failure would only lose this second's p99.
            let _ = merged.add(h);
        }
        if let Some(at) = g.lane_at.get_mut(lane) {
            *at = next;
        }
        let low = g.lane_at.iter().copied().min().unwrap_or(usize::MAX);
        while let Some(entry) = g.open.first_entry() {
            if *entry.key() >= low {
                break;
            }
            let (sec, h) = entry.remove_entry();
            g.p99.insert(sec, h.value_at_quantile(0.99));
            if let Some(b) = g.buckets.as_mut() {
                b.insert(sec, buckets_of(&h));
            }
        }
    }

    /// The p99 of every closed second.
    pub fn p99s(&self) -> BTreeMap<usize, u64> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .p99
            .clone()
    }
}

/// A histogram's recorded buckets: (highest equivalent value, count), lowest first.
pub fn buckets_of(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

fn hist(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, sigfig).expect("valid histogram bounds")
}

impl Recorder {
    /// Empty totals for a window starting at `measured_start_ns`.
    pub fn new(measured_start_ns: u64) -> Self {
        Recorder {
            measured_start_ns,
            completed: 0,
            ok_2xx: 0,
            non_2xx: 0,
            status: BTreeMap::new(),
            errors: [0; ErrorKind::ALL.len()],
            dropped: 0,
            queued: 0,
            queue_wait: hist(3),
            refused_fresh: 0,
            drain_ok_2xx: 0,
            drain_non_2xx: 0,
            drain_errors: 0,
            lat_2xx: hist(3),
            lat_non_2xx: hist(3),
            service_2xx: hist(3),
            lag: hist(3),
            connect: hist(3),
            tls: hist(3),
            tls_resumed: 0,
            body_bytes: 0,
            reused: 0,
            warmup_completed: 0,
            warmup_ok_2xx: 0,
            warmup_ok_2xx_in_window: 0,
            series: vec![],
            cur_sec: 0,
            // Two digits are plenty for a per-second p99 and keep the rollover cheap.
            cur_hist: hist(2),
            last_end_ns: 0,
            seconds: None,
        }
    }

    /// Totals for lane `lane` of several, whose per-second histograms go to `seconds`.
    pub fn for_lane(measured_start_ns: u64, seconds: Arc<Seconds>, lane: usize) -> Self {
        let mut r = Recorder::new(measured_start_ns);
        r.seconds = Some((seconds, lane));
        r
    }

    fn second(&mut self, ns: u64) -> usize {
        let s = (ns.saturating_sub(self.measured_start_ns) / 1_000_000_000) as usize;
        if self.series.len() <= s {
            self.series.resize(s + 1, Second::default());
        }
        s
    }

    /// Adds `n` measured arrivals intended in second `sec` (counted by the dispatcher).
    pub fn add_scheduled(&mut self, sec: usize, n: u64) {
        if self.series.len() <= sec {
            self.series.resize(sec + 1, Second::default());
        }
        self.series[sec].scheduled += n;
    }

    /// Records the in-flight peak of second `sec` (from the once-a-second sampler).
    pub fn in_flight_peak(&mut self, sec: usize, peak: u64) {
        if self.series.len() <= sec {
            self.series.resize(sec + 1, Second::default());
        }
        let p = &mut self.series[sec].in_flight_max;
        *p = (*p).max(peak);
    }

    /// Records how one arrival ended.
    pub fn record(&mut self, t: &Ticket, tm: Timing, p: &Progress, o: Outcome) {
        let (start_ns, end_ns) = (tm.start_ns, tm.end_ns);
        self.last_end_ns = self.last_end_ns.max(end_ns);
        if !t.measured {
            self.warmup_completed += 1;
            if matches!(o, Outcome::Answered(a) if (200..300).contains(&a.status)) {
                self.warmup_ok_2xx += 1;
                if end_ns >= self.measured_start_ns && tm.in_window {
                    self.warmup_ok_2xx_in_window += 1;
                    let es = self.second(end_ns);
                    self.series[es].warmup_ok_2xx += 1;
                }
            }
            return;
        }
        self.completed += 1;
        let lag = start_ns.saturating_sub(t.intended_ns);
        self.lag.saturating_record(lag.max(1));
        let is = self.second(t.intended_ns);
        let l = &mut self.series[is].lag_max_ns;
        *l = (*l).max(lag);
        if tm.queue_ns > 0 || matches!(o, Outcome::Dropped) {
            self.queued += 1;
        }
        if tm.queue_ns > 0 && !matches!(o, Outcome::Dropped) {
            self.queue_wait.saturating_record(tm.queue_ns);
        }
        if let Some(c) = p.connect_ns {
            self.connect.saturating_record(c.max(1));
        }
        if let Some(h) = p.tls_ns {
            self.tls.saturating_record(h.max(1));
            self.tls_resumed += u64::from(p.tls_resumed);
        }
        if p.reused {
            self.reused += 1;
        }
        let latency = end_ns.saturating_sub(t.intended_ns).max(1);
        let es = self.second(end_ns);
        if es > self.cur_sec {
            self.roll(es);
        }
        match o {
            Outcome::Answered(a) => {
                self.body_bytes += a.body_bytes;
                *self.status.entry(a.status).or_default() += 1;
                if (200..300).contains(&a.status) {
                    self.ok_2xx += 1;
                    self.drain_ok_2xx += u64::from(!tm.in_window);
                    self.lat_2xx.saturating_record(latency);
                    if p.sent_ns > 0 {
                        self.service_2xx
                            .saturating_record(end_ns.saturating_sub(p.sent_ns).max(1));
                    }
                    let sec = &mut self.series[es];
                    sec.ok_2xx += 1;
                    sec.lat_2xx_sum_ns += u128::from(latency);
                    // A completion stamped a hair before one another thread already rolled
                    // past still counts; it only misses that second's p99.
                    if es == self.cur_sec {
                        self.cur_hist.saturating_record(latency);
                    }
                } else {
                    self.non_2xx += 1;
                    self.drain_non_2xx += u64::from(!tm.in_window);
                    self.lat_non_2xx.saturating_record(latency);
                    self.series[es].non_2xx += 1;
                }
            }
            Outcome::Failed(k) => {
                self.errors[k.index()] += 1;
                self.drain_errors += u64::from(!tm.in_window);
                self.series[es].errors[k.index()] += 1;
                if matches!(k, ErrorKind::Eof | ErrorKind::ConnReset)
                    && !p.reused
                    && p.bytes_in == 0
                {
                    self.refused_fresh += 1;
                }
            }
            Outcome::Dropped => {
                self.dropped += 1;
                self.series[es].dropped += 1;
            }
        }
    }

    fn roll(&mut self, to: usize) {
        match &self.seconds {
            Some((merge, lane)) => merge.hand_over(*lane, self.cur_sec, &self.cur_hist, to),
            None if !self.cur_hist.is_empty() => {
                self.series[self.cur_sec].lat_2xx_p99_ns = self.cur_hist.value_at_quantile(0.99);
            }
            None => {}
        }
        self.cur_hist.reset();
        self.cur_sec = to;
    }

    /// Closes the last second's p99 (a lane's recorder: hands its last second over).
    pub fn finish(&mut self) {
        if self.series.len() <= self.cur_sec {
            self.series.resize(self.cur_sec + 1, Second::default());
        }
        let next = if self.seconds.is_some() {
            usize::MAX
        } else {
            self.cur_sec + 1
        };
        self.roll(next);
    }

    /// Adds a finished lane's totals (`finish` called on both); per-second p99s come from
    /// `p99` (see [`Seconds`]).
    pub fn merge(&mut self, o: &Recorder, p99: &BTreeMap<usize, u64>) {
        self.completed += o.completed;
        self.ok_2xx += o.ok_2xx;
        self.non_2xx += o.non_2xx;
        for (code, n) in &o.status {
            *self.status.entry(*code).or_default() += n;
        }
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
        self.dropped += o.dropped;
        self.queued += o.queued;
        self.refused_fresh += o.refused_fresh;
        self.drain_ok_2xx += o.drain_ok_2xx;
        self.drain_non_2xx += o.drain_non_2xx;
        self.drain_errors += o.drain_errors;
        // Same bounds by construction, so `add` cannot fail.
        for (a, b) in [
            (&mut self.lat_2xx, &o.lat_2xx),
            (&mut self.lat_non_2xx, &o.lat_non_2xx),
            (&mut self.service_2xx, &o.service_2xx),
            (&mut self.lag, &o.lag),
            (&mut self.connect, &o.connect),
            (&mut self.tls, &o.tls),
            (&mut self.queue_wait, &o.queue_wait),
        ] {
            let _ = a.add(b);
        }
        self.body_bytes += o.body_bytes;
        self.reused += o.reused;
        self.tls_resumed += o.tls_resumed;
        self.warmup_completed += o.warmup_completed;
        self.warmup_ok_2xx += o.warmup_ok_2xx;
        self.warmup_ok_2xx_in_window += o.warmup_ok_2xx_in_window;
        self.last_end_ns = self.last_end_ns.max(o.last_end_ns);
        if self.series.len() < o.series.len() {
            self.series.resize(o.series.len(), Second::default());
        }
        for (a, b) in self.series.iter_mut().zip(&o.series) {
            a.scheduled += b.scheduled;
            a.ok_2xx += b.ok_2xx;
            a.non_2xx += b.non_2xx;
            for (x, y) in a.errors.iter_mut().zip(&b.errors) {
                *x += y;
            }
            a.lat_2xx_sum_ns += b.lat_2xx_sum_ns;
            a.in_flight_max = a.in_flight_max.max(b.in_flight_max);
            a.lag_max_ns = a.lag_max_ns.max(b.lag_max_ns);
            a.dropped += b.dropped;
            a.warmup_ok_2xx += b.warmup_ok_2xx;
        }
        for (sec, v) in p99 {
            if let Some(a) = self.series.get_mut(*sec) {
                a.lat_2xx_p99_ns = *v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(seq: u64, intended_ns: u64, measured: bool) -> Ticket {
        Ticket {
            seq,
            intended_ns,
            measured,
            target: 0,
        }
    }

    fn timing(start_ns: u64, end_ns: u64) -> Timing {
        Timing {
            start_ns,
            end_ns,
            queue_ns: 0,
            in_window: true,
        }
    }

    #[test]
    fn every_arrival_lands_in_one_bucket_and_series_sum() {
        let s0 = 1_000_000_000_000;
        let mut r = Recorder::new(s0);
        let ok = Outcome::Answered(Answer {
            status: 200,
            body_bytes: 10,
        });
        let shed = Outcome::Answered(Answer {
            status: 503,
            body_bytes: 0,
        });
        let p = Progress {
            sent_ns: s0 + 1,
            ..Default::default()
        };
        // Warm-up arrival: counted apart.
        r.record(&ticket(0, s0 - 5, false), timing(s0 - 5, s0 + 10), &p, ok);
        for i in 0..30u64 {
            let intended = s0 + i * 100_000_000; // 10/s for 3 s
            r.add_scheduled((i / 10) as usize, 1);
            let end = intended + 5_000_000 + i * 1_000; // 5 ms latency
            let o = match i % 3 {
                0 => ok,
                1 => shed,
                _ => Outcome::Failed(ErrorKind::Timeout),
            };
            r.record(
                &ticket(i + 1, intended, true),
                timing(intended + 20_000, end),
                &p,
                o,
            );
        }
        r.finish();
        assert_eq!((r.completed, r.ok_2xx, r.non_2xx), (30, 10, 10));
        assert_eq!(r.errors[ErrorKind::Timeout.index()], 10);
        assert_eq!(r.status[&200] + r.status[&503], 20);
        assert_eq!((r.warmup_completed, r.warmup_ok_2xx), (1, 1));
        assert_eq!(r.series.len(), 3);
        assert_eq!(r.series.iter().map(|s| s.ok_2xx).sum::<u64>(), r.ok_2xx);
        assert_eq!(r.series.iter().map(|s| s.scheduled).sum::<u64>(), 30);
        assert!(r.series.iter().all(|s| s.lat_2xx_p99_ns >= 5_000_000));
        assert_eq!(r.lat_2xx.len(), 10);
        assert_eq!(r.lat_non_2xx.len(), 10);
        assert!((r.lag.max() as i64 - 20_000).abs() < 100);
        assert_eq!(r.body_bytes, 100);
    }

    #[test]
    fn lanes_merge_to_what_one_recorder_sees() {
        let s0 = 1_000_000_000_000;
        let ok = Outcome::Answered(Answer {
            status: 200,
            body_bytes: 3,
        });
        let p = Progress::default();
        // 2,000 arrivals over 2 s, latency 1..=100 ms by arrival; arrival i on lane i % 2, the
        // same totals recorded by one recorder.
        let mut one = Recorder::new(s0);
        let seconds = Seconds::new(2, true);
        let mut lanes = [
            Recorder::for_lane(s0, seconds.clone(), 0),
            Recorder::for_lane(s0, seconds.clone(), 1),
        ];
        for i in 0..2_000u64 {
            let intended = s0 + i * 1_000_000;
            let end = intended + (i % 100 + 1) * 1_000_000;
            let o = if i % 10 == 9 {
                Outcome::Failed(ErrorKind::ConnReset)
            } else {
                ok
            };
            let t = ticket(i, intended, true);
            one.record(&t, timing(intended + 7, end), &p, o);
            lanes[(i % 2) as usize].record(&t, timing(intended + 7, end), &p, o);
        }
        one.finish();
        let mut merged = Recorder::new(s0);
        for l in &mut lanes {
            l.finish();
        }
        let p99 = seconds.p99s();
        for l in &lanes {
            merged.merge(l, &p99);
        }
        assert_eq!((merged.completed, merged.ok_2xx), (2_000, 1_800));
        assert_eq!(merged.errors, one.errors);
        assert_eq!(merged.status, one.status);
        assert_eq!(merged.body_bytes, 5_400);
        assert_eq!(merged.lat_2xx, one.lat_2xx);
        assert_eq!(merged.last_end_ns, one.last_end_ns);
        assert_eq!(merged.series.len(), one.series.len());
        for (m, o) in merged.series.iter().zip(&one.series) {
            assert_eq!(
                (m.ok_2xx, m.errors, m.lag_max_ns),
                (o.ok_2xx, o.errors, o.lag_max_ns)
            );
            assert_eq!(m.lat_2xx_sum_ns, o.lat_2xx_sum_ns);
            // The per-second p99 comes from the merged second, not from either lane's.
            assert_eq!(m.lat_2xx_p99_ns, o.lat_2xx_p99_ns);
        }
        assert!(one.series.iter().all(|s| s.lat_2xx_p99_ns > 0));
        // Kept as buckets, each second's histogram holds its 2xx, and its p99 read back
        // from them is the second's.
        let buckets = seconds.buckets();
        assert_eq!(buckets.len(), one.series.len());
        for (sec, b) in &buckets {
            let o = &one.series[*sec];
            assert_eq!(
                b.iter().map(|(_, n)| n).sum::<u64>(),
                o.ok_2xx,
                "second {sec}"
            );
            let mut h = hist(2);
            for &(v, n) in b {
                h.record_n(v, n).unwrap();
            }
            assert_eq!(h.value_at_quantile(0.99), o.lat_2xx_p99_ns, "second {sec}");
        }
        // Not kept unless asked.
        assert!(Seconds::new(1, false).buckets().is_empty());
    }
}
