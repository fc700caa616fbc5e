//! The arrival schedule: intended send instants computed from the start instant (never from the
//! previous send), whatever is still outstanding, and the seeded picks of host and path. The
//! dispatcher in `engine` releases them; the request tasks that take them never feed back
//! into when the next one is due, which is what keeps a slow server from slowing arrivals.

use serde::Serialize;

/// Inter-arrival process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Evenly spaced: arrival i at `start + i / rate`.
    Const,
    /// Exponential gaps with mean `1 / rate` (a Poisson process), from a seeded generator.
    Poisson,
}

/// `--shard I/N`: this copy is the I-th of N generators sharing one schedule. It offers rate/N,
/// its const arrivals offset by (I-1)/N of its own gap so the N copies interleave evenly into
/// the full rate's schedule, and its seed is its own (Poisson gaps and picks differ per copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Shard {
    /// I, from 1.
    pub index: u32,
    /// N.
    pub count: u32,
}

/// Most copies `--shard` splits a schedule into.
pub const MAX_SHARDS: u32 = 1_000;

impl Shard {
    /// Parses `I/N` (1 ≤ I ≤ N ≤ [`MAX_SHARDS`]); the error is the one-line usage message.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let shown = crate::escape::text(s);
        let int = |p: &str| {
            let p = p.trim();
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<u64>().ok())
                .flatten()
        };
        let (Some(i), Some(n)) = s
            .split_once('/')
            .map_or((None, None), |(i, n)| (int(i), int(n)))
        else {
            return Err(format!(
                "--shard {shown}: expected I/N, whole numbers (this copy, of how many), e.g. 1/2"
            ));
        };
        if !(1..=u64::from(MAX_SHARDS)).contains(&n) {
            return Err(format!(
                "--shard {shown}: N must be between 1 and {MAX_SHARDS}"
            ));
        }
        if !(1..=n).contains(&i) {
            return Err(format!("--shard {shown}: I must be between 1 and N"));
        }
        Ok(Shard {
            index: i as u32,
            count: n as u32,
        })
    }

    /// Where this copy's const arrivals fall in its own gap: (I-1)/N.
    pub fn phase(&self) -> f64 {
        f64::from(self.index - 1) / f64::from(self.count)
    }

    /// This copy's seed from `--seed`: the seed itself for the first copy (so `--shard 1/1` is
    /// the run without it), a distinct stream for each other.
    pub fn seed(&self, seed: u64) -> u64 {
        if self.index == 1 {
            seed
        } else {
            Rng::new(seed ^ u64::from(self.index).wrapping_mul(0xd1b5_4a32_d192_ed03)).next_u64()
        }
    }
}

/// A small, seeded, reproducible generator (SplitMix64): the same seed gives the same arrival
/// instants and the same host/path picks, so two runs can be compared arrival for arrival.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Intended send instants, as nanosecond offsets from the start instant, over `[0, span)`.
#[derive(Clone, Debug)]
pub struct Schedule {
    arrival: Arrival,
    rate: f64,
    span_ns: u64,
    i: u64,
    count: u64,
    /// Const: arrival i is at (i + phase) / rate.
    phase: f64,
    t_ns: f64,
    rng: Rng,
}

impl Schedule {
    /// Arrivals at `rate` per second over `span_ns`.
    pub fn new(arrival: Arrival, rate: f64, span_ns: u64, seed: u64) -> Self {
        // Const: arrival i is inside the span iff i / rate < span, i.e. i < rate × span. The
        // epsilon keeps float noise in rate × span (e.g. 0.30000000000000004) from adding one.
        let count = (rate * span_ns as f64 / 1e9 - 1e-9).ceil().max(0.0) as u64;
        Schedule {
            arrival,
            rate,
            span_ns,
            i: 0,
            count,
            phase: 0.0,
            t_ns: 0.0,
            // A different stream from the host/path picks, so adding hosts does not move arrivals.
            rng: Rng::new(seed ^ 0x5eed_a11c_e5ca_1ab1),
        }
    }

    /// Const arrivals shifted by `phase` (in [0, 1)) of the gap: arrival i at
    /// `(i + phase) / rate`, those still inside the span. Poisson arrivals are memoryless and
    /// have no phase.
    pub fn phased(mut self, phase: f64) -> Self {
        if self.arrival == Arrival::Const && phase > 0.0 {
            self.phase = phase;
            self.count = (self.rate * self.span_ns as f64 / 1e9 - phase - 1e-9)
                .ceil()
                .max(0.0) as u64;
        }
        self
    }
}

impl Iterator for Schedule {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        match self.arrival {
            Arrival::Const => {
                if self.i >= self.count {
                    return None;
                }
                let t = ((self.i as f64 + self.phase) * 1e9 / self.rate) as u64;
                self.i += 1;
                Some(t.min(self.span_ns.saturating_sub(1)))
            }
            Arrival::Poisson => {
                // Inverse transform: -ln(1 - u) / rate, u in [0, 1), so the gap is finite.
                let gap_s = -(1.0 - self.rng.unit()).ln() / self.rate;
                self.t_ns += gap_s * 1e9;
                if self.t_ns >= self.span_ns as f64 {
                    return None;
                }
                self.i += 1;
                Some(self.t_ns as u64)
            }
        }
    }
}

/// Picks the request (host × path) for each arrival: hosts uniformly, paths by weight.
#[derive(Clone, Debug)]
pub struct Picker {
    rng: Rng,
    hosts: u32,
    path_cum: Vec<u64>,
}

impl Picker {
    /// A picker over `hosts` hosts and paths with the given integer weights.
    pub fn new(seed: u64, hosts: usize, weights: &[u32]) -> Self {
        let mut acc = 0u64;
        let path_cum = weights
            .iter()
            .map(|w| {
                acc += u64::from(*w);
                acc
            })
            .collect();
        Picker {
            rng: Rng::new(seed),
            hosts: hosts.max(1) as u32,
            path_cum,
        }
    }

    /// Index of the prebuilt request: `host * paths + path`.
    pub fn pick(&mut self) -> u32 {
        let paths = self.path_cum.len().max(1) as u32;
        let host = if self.hosts > 1 {
            self.rng.below(u64::from(self.hosts)) as u32
        } else {
            0
        };
        let path = match self.path_cum.last() {
            Some(&total) if self.path_cum.len() > 1 => {
                let r = self.rng.below(total);
                self.path_cum.partition_point(|&c| c <= r) as u32
            }
            _ => 0,
        };
        host * paths + path
    }
}

/// One arrival handed from the producer to the workers.
#[derive(Clone, Copy, Debug)]
pub struct Ticket {
    /// Sequence number, from 0 (warm-up included).
    pub seq: u64,
    /// Intended send instant, CLOCK_MONOTONIC ns.
    pub intended_ns: u64,
    /// Inside the measured window (not warm-up).
    pub measured: bool,
    /// Which prebuilt request.
    pub target: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn const_schedule_holds_exactly_rate_times_duration() {
        for (rate, secs) in [
            (1.0, 1.0),
            (3.0, 0.1),
            (10.0, 3.0),
            (25.0, 10.0),
            (400.0, 60.0),
            (800.0, 60.0),
            (7.0, 13.0),
            (1000.0, 0.5),
            (0.5, 4.0),
            (40_000.0, 2.5),
            (33.3, 3.0),
        ] {
            let span = (secs * 1e9) as u64;
            let v: Vec<u64> = Schedule::new(Arrival::Const, rate, span, 1).collect();
            let expect = (rate * secs - 1e-9).ceil() as usize;
            assert_eq!(v.len(), expect, "rate {rate} for {secs}s");
            if rate * secs == (rate * secs).round() {
                assert_eq!(v.len(), (rate * secs) as usize, "rate {rate} for {secs}s");
            }
            // From the start instant, evenly spaced, all inside the span, increasing.
            assert_eq!(v[0], 0);
            for (i, t) in v.iter().enumerate() {
                let exact = i as f64 * 1e9 / rate;
                assert!(
                    (*t as f64 - exact).abs() <= 1.0,
                    "arrival {i}: {t} vs {exact}"
                );
                assert!(*t < span);
            }
        }
    }

    #[test]
    fn poisson_is_seeded_and_has_the_right_mean() {
        let span = 100_000_000_000; // 100 s
        let a: Vec<u64> = Schedule::new(Arrival::Poisson, 500.0, span, 7).collect();
        let b: Vec<u64> = Schedule::new(Arrival::Poisson, 500.0, span, 7).collect();
        let c: Vec<u64> = Schedule::new(Arrival::Poisson, 500.0, span, 8).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // 50,000 expected; a Poisson count has sd √50,000 ≈ 224: allow 5 sd.
        assert!((a.len() as i64 - 50_000).abs() < 1_120, "{}", a.len());
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(*a.last().unwrap() < span);
        // Exponential gaps: the coefficient of variation is 1 (const would be 0).
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
    }

    #[test]
    fn picker_follows_weights() {
        let mut p = Picker::new(3, 10, &[3, 1, 1]);
        let mut hosts = [0u32; 10];
        let mut paths = [0u32; 3];
        for _ in 0..50_000 {
            let t = p.pick();
            hosts[(t / 3) as usize] += 1;
            paths[(t % 3) as usize] += 1;
        }
        assert!(
            hosts.iter().all(|&h| (4_500..5_500).contains(&h)),
            "{hosts:?}"
        );
        assert!((29_000..31_000).contains(&paths[0]), "{paths:?}");
        assert!((9_300..10_700).contains(&paths[1]), "{paths:?}");
        let mut one = Picker::new(3, 1, &[1]);
        assert!((0..100).all(|_| one.pick() == 0));
    }

    #[test]
    fn shard_parses_i_of_n_and_refuses_the_rest() {
        assert_eq!(Shard::parse("2/4"), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(
            Shard::parse("1000/1000"),
            Ok(Shard {
                index: 1000,
                count: 1000
            })
        );
        let got: Vec<String> = [
            "3/2",
            "0/2",
            "1/0",
            "1/1001",
            "2",
            "a/b",
            "1/",
            "/2",
            "-1/2",
            "1.5/2",
            "1/2/3",
            "99999999999999999999/2",
        ]
        .iter()
        .map(|s| Shard::parse(s).unwrap_err())
        .collect();
        assert_eq!(
            got,
            [
                "--shard 3/2: I must be between 1 and N",
                "--shard 0/2: I must be between 1 and N",
                "--shard 1/0: N must be between 1 and 1000",
                "--shard 1/1001: N must be between 1 and 1000",
                "--shard 2: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard a/b: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard 1/: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard /2: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard -1/2: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard 1.5/2: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard 1/2/3: expected I/N, whole numbers (this copy, of how many), e.g. 1/2",
                "--shard 99999999999999999999/2: expected I/N, whole numbers (this copy, of how \
                 many), e.g. 1/2",
            ]
        );
    }

    /// Rate 1000 split 4 ways: shard 2/4 offers 250/s, a 4 ms gap, its arrivals 1 ms into
    /// each; the four shards together are exactly the 1000/s schedule.
    #[test]
    fn const_shards_interleave_into_the_full_schedule() {
        let span = 1_000_000_000;
        let shard = |i| Shard { index: i, count: 4 };
        let two: Vec<u64> = Schedule::new(Arrival::Const, 1000.0 / 4.0, span, 1)
            .phased(shard(2).phase())
            .collect();
        assert_eq!(two.len(), 250);
        assert_eq!(two[..4], [1_000_000, 5_000_000, 9_000_000, 13_000_000]);
        assert_eq!(*two.last().unwrap(), 997_000_000);
        let mut all: Vec<u64> = (1..=4)
            .flat_map(|i| Schedule::new(Arrival::Const, 250.0, span, 1).phased(shard(i).phase()))
            .collect();
        all.sort_unstable();
        let full: Vec<u64> = Schedule::new(Arrival::Const, 1000.0, span, 1).collect();
        assert_eq!(all, full);
        // 200/s over 2 s in two copies: 200 arrivals each, the second 5 ms after the first.
        let s = |i| {
            Schedule::new(Arrival::Const, 100.0, 2_000_000_000, 1)
                .phased(Shard { index: i, count: 2 }.phase())
                .collect::<Vec<u64>>()
        };
        let (a, b) = (s(1), s(2));
        assert_eq!((a.len(), b.len()), (200, 200));
        assert_eq!(a[..3], [0, 10_000_000, 20_000_000]);
        assert_eq!(b[..3], [5_000_000, 15_000_000, 25_000_000]);
        assert_eq!((a[199], b[199]), (1_990_000_000, 1_995_000_000));
        // A phase that pushes the last arrival out of the span drops it.
        let c: Vec<u64> = Schedule::new(Arrival::Const, 3.0, 1_000_000_000, 1)
            .phased(0.5)
            .collect();
        assert_eq!(c, [166_666_666, 500_000_000, 833_333_333]);
        let d: Vec<u64> = Schedule::new(Arrival::Const, 2.0, 900_000_000, 1)
            .phased(0.5)
            .collect();
        assert_eq!(d, [250_000_000, 750_000_000]);
    }

    #[test]
    fn shard_seeds_are_distinct_and_the_first_is_the_seed() {
        let seeds: Vec<u64> = (1..=8)
            .map(|i| Shard { index: i, count: 8 }.seed(7))
            .collect();
        assert_eq!(seeds[0], 7);
        let mut uniq = seeds.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 8, "{seeds:?}");
        assert_ne!(
            Shard { index: 2, count: 2 }.seed(7),
            Shard { index: 2, count: 2 }.seed(8)
        );
        // Poisson: phase changes nothing, the derived seed changes the arrivals.
        let span = 1_000_000_000;
        let p = |seed| Schedule::new(Arrival::Poisson, 500.0, span, seed).phased(0.5);
        assert_eq!(
            p(7).collect::<Vec<_>>(),
            Schedule::new(Arrival::Poisson, 500.0, span, 7).collect::<Vec<_>>()
        );
        assert_ne!(
            p(seeds[0]).collect::<Vec<_>>(),
            p(seeds[1]).collect::<Vec<_>>()
        );
    }
}
