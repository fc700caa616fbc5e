//! Where the traced threads' time went over a trace window (`trace --offcpu`, the agent): on
//! a CPU, waiting for one, blocked by why — the split `run` makes each second, made once
//! between the window's start and its end ([`super::seconds::TimeMark`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use trapdetect_common::offcpu::CLASS_NAMES;

use super::seconds::KernelSecond;
use crate::{
    report::section::{Section, to_json},
    traps::round,
};

/// The states a thread's time is split into, besides the off-CPU classes (`CLASS_NAMES`).
pub const ON_CPU: &str = "on_cpu";
/// Runnable, waiting for a CPU.
pub const RUN_QUEUE: &str = "run_queue";

/// The section `threads`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadTime {
    /// Seconds between the two readings.
    pub window_s: f64,
    /// Threads of the traced tree at the end.
    pub threads: usize,
    /// Thread-seconds by state: `on_cpu`, `run_queue` and each off-CPU class, every one
    /// present (0 when none). A thread that has not been switched since the probes attached
    /// counts from its first switch: one blocked since before the window and never woken is
    /// not in these figures.
    pub thread_seconds: BTreeMap<String, f64>,
    /// Intervals the kernel could not record (a thread slot taken over, the map full): the
    /// figures are short by them.
    pub lost_intervals: u64,
    /// Threads the target's runtime runs for itself, by name, with how many have it (a JVM's
    /// compiler, garbage collector and service threads): their waits are not in
    /// `thread_seconds` (docs/run.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runtime_threads: BTreeMap<String, usize>,
}

impl ThreadTime {
    /// From the split of the window's time.
    pub fn of(sec: &KernelSecond) -> ThreadTime {
        let mut thread_seconds = BTreeMap::new();
        thread_seconds.insert(ON_CPU.to_string(), round(sec.on_cpu_s, 3));
        thread_seconds.insert(RUN_QUEUE.to_string(), round(sec.runq_s, 3));
        for (name, s) in CLASS_NAMES.iter().zip(sec.off_s) {
            thread_seconds.insert(name.to_string(), round(s, 3));
        }
        ThreadTime {
            window_s: round(sec.dt_s, 3),
            threads: sec.threads,
            thread_seconds,
            lost_intervals: sec.lost,
            runtime_threads: BTreeMap::new(),
        }
    }

    /// Threads on average in each state: thread-seconds per second of the window.
    pub fn per_second(&self) -> Vec<(&str, f64)> {
        self.thread_seconds
            .iter()
            .map(|(k, v)| (k.as_str(), round(v / self.window_s.max(1e-9), 3)))
            .collect()
    }
}

impl Section for ThreadTime {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn json(&self) -> Result<serde_json::Value, String> {
        to_json(self)
    }

    fn text(&self) -> String {
        let avg = self.per_second();
        let of = |k: &str| avg.iter().find(|(n, _)| *n == k).map_or(0.0, |(_, v)| *v);
        let mut blocked: Vec<&(&str, f64)> = avg
            .iter()
            .filter(|(k, v)| *k != ON_CPU && *k != RUN_QUEUE && *v >= 0.005)
            .collect();
        blocked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let blocked: Vec<String> = blocked.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let mut s = format!(
            "  {} thread{} over {} s; threads on average on a CPU {}, waiting for a CPU {}, blocked: {}\n",
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.window_s,
            of(ON_CPU),
            of(RUN_QUEUE),
            if blocked.is_empty() {
                "none".to_string()
            } else {
                blocked.join(", ")
            }
        );
        if self.lost_intervals > 0 {
            s.push_str(&format!(
                "  {} intervals lost (a thread slot taken over, or the map full): the figures are short by them\n",
                self.lost_intervals
            ));
        }
        if !self.runtime_threads.is_empty() {
            s.push_str(&format!(
                "  the runtime's own threads (their waits not counted): {}\n",
                super::runtime_threads::listed(&self.runtime_threads)
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers and a master over 2 s: the split's thread-seconds, every class present, the
    /// averages per second, and the text naming the blocked states largest first.
    #[test]
    fn a_windows_split_in_thread_seconds_and_threads_on_average() {
        let mut sec = KernelSecond {
            dt_s: 2.0,
            threads: 3,
            on_cpu_s: 0.5,
            runq_s: 0.1,
            lost: 2,
            ..Default::default()
        };
        let idx = |n: &str| CLASS_NAMES.iter().position(|c| *c == n).unwrap();
        sec.off_s[idx("path")] = 1.2;
        sec.off_s[idx("wait_work")] = 4.2;
        sec.off_s[idx("other")] = 0.004;
        let t = ThreadTime::of(&sec);
        assert_eq!(t.thread_seconds.len(), 2 + CLASS_NAMES.len());
        assert_eq!(t.thread_seconds["wait_work"], 4.2);
        assert_eq!(t.thread_seconds["futex"], 0.0);
        let avg: BTreeMap<&str, f64> = t.per_second().into_iter().collect();
        assert_eq!(
            (
                avg["on_cpu"],
                avg["run_queue"],
                avg["path"],
                avg["wait_work"]
            ),
            (0.25, 0.05, 0.6, 2.1)
        );
        assert!((avg.values().sum::<f64>() - 3.002).abs() < 1e-9, "{avg:?}");
        assert_eq!(
            t.text(),
            "  3 threads over 2 s; threads on average on a CPU 0.25, waiting for a CPU 0.05, blocked: wait_work 2.1, path 0.6\n  2 intervals lost (a thread slot taken over, or the map full): the figures are short by them\n"
        );
        let back: ThreadTime = serde_json::from_value(t.json().unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
