//! The `run` section of a report: where the server's threads' time went over the window and
//! second by second. Its JSON and its text come from this one struct, so `trapdetect report`
//! on a saved run prints what the run printed.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use trapdetect_common::offcpu::CLASS_NAMES;

use crate::{
    report::section::{Section, to_json},
    traps::{
        self,
        run::{RunObs, RunSecond},
    },
};

/// `classes_method` when the blocked syscall was sampled from /proc.
pub const METHOD_SAMPLED: &str = "sampled";

/// `classes_method` of a run judged from an strace log (`run --from-strace`).
pub const METHOD_STRACE: &str = "strace";

/// The `run` section.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSection {
    /// Seconds the kernel sampler covered.
    pub window_s: f64,
    /// Online CPUs.
    pub cores: f64,
    /// Threads that did work at some sample.
    pub workers: usize,
    /// How many of them were busy on average (each one's busy share, summed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_busy: Option<f64>,
    /// Threads the target's runtime runs for itself, by name, with how many have it (a JVM's
    /// compiler, garbage collector and service threads): their time on and queued for a CPU
    /// is counted, their waits are not, and they are not workers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub runtime_threads: std::collections::BTreeMap<String, usize>,
    /// The kernel could say which syscall blocked threads were in.
    pub classified: bool,
    /// The threads' time over the window, thread-seconds.
    pub thread_seconds: ThreadSeconds,
    /// Context switches of the traced threads.
    pub switches: u64,
    /// Lock objects waited on.
    pub locks: Vec<Lock>,
    /// The target's cgroup CPU quota, when one binds.
    pub quota: Option<Quota>,
    /// The joined timeline.
    pub timeline: Vec<RunSecond>,
    /// Load columns the generator did not give (`-` in the text).
    pub load_columns_missing: Vec<String>,
    /// What the delivered rate counts (`generator-2xx`, `kernel-served-requests`...).
    pub delivered_basis: String,
    /// How the blocked syscall was known: `exact`, `syscall-entry`, `sampled` or `unknown`.
    pub classes_method: String,
    /// The benchmark's processes beside the traced ones (`trace::stack`): those that woke its
    /// threads from their system calls, and those that woke them, with their cores on the
    /// target's CPUs; their CPU is not the host's noise. Busiest first, at most 10.
    #[serde(default)]
    pub stack: Vec<traps::run::ProcCpu>,
}

/// Thread-seconds by state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThreadSeconds {
    /// Running.
    pub on_cpu: f64,
    /// Runnable, not running.
    pub run_queue: f64,
    /// Off the CPU, by class (`CLASS_NAMES` order).
    pub off_cpu: Map<String, Value>,
}

/// A lock object waited on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Lock {
    /// The file locked, or the futexes together.
    pub object: String,
    /// Time waited, s.
    pub wait_s: f64,
    /// Waits.
    pub waits: u64,
}

/// The binding cgroup quota and its throttling over the window.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Quota {
    /// `v1` or `v2`.
    pub cgroup_version: String,
    /// The cgroup whose quota binds.
    pub cgroup_dir: String,
    /// Quota per period, µs.
    pub quota_us: u64,
    /// Period, µs.
    pub period_us: u64,
    /// Periods elapsed.
    pub nr_periods: u64,
    /// Periods throttled.
    pub nr_throttled: u64,
    /// Time throttled, µs.
    pub throttled_us: u64,
}

impl RunSection {
    /// The section of a run's observations (figures rounded as the JSON carries them).
    pub fn of(
        o: &RunObs,
        switches: u64,
        missing: &[&str],
        delivered_basis: &str,
        classes_method: &str,
    ) -> RunSection {
        RunSection {
            window_s: traps::round(o.window_s, 3),
            cores: o.cores,
            workers: o.workers,
            workers_busy: o.workers_busy.map(|b| traps::round(b, 2)),
            runtime_threads: o.runtime_threads.clone(),
            classified: o.classified,
            thread_seconds: ThreadSeconds {
                on_cpu: traps::round(o.on_cpu_s, 3),
                run_queue: traps::round(o.runq_s, 3),
                off_cpu: CLASS_NAMES
                    .iter()
                    .zip(&o.off_s)
                    .map(|(c, v)| (c.to_string(), serde_json::json!(traps::round(*v, 3))))
                    .collect(),
            },
            switches,
            locks: o
                .locks
                .iter()
                .map(|l| Lock {
                    object: l.object.clone(),
                    wait_s: traps::round(l.wait_s, 3),
                    waits: l.waits,
                })
                .collect(),
            quota: o.quota.as_ref().map(|q| Quota {
                cgroup_version: q.version.to_string(),
                cgroup_dir: q.dir.clone(),
                quota_us: q.quota_us,
                period_us: q.period_us,
                nr_periods: q.nr_periods,
                nr_throttled: q.nr_throttled,
                throttled_us: q.throttled_us,
            }),
            timeline: o.seconds.clone(),
            load_columns_missing: missing.iter().map(|m| m.to_string()).collect(),
            delivered_basis: delivered_basis.to_string(),
            classes_method: classes_method.to_string(),
            stack: o.peers.clone(),
        }
    }

    /// Off-CPU thread-seconds by class, in `CLASS_NAMES` order.
    fn off_cpu(&self) -> Vec<(&str, f64)> {
        self.thread_seconds
            .off_cpu
            .iter()
            .map(|(c, v)| (c.as_str(), v.as_f64().unwrap_or(0.0)))
            .collect()
    }

    /// The threads' time over the window and where it went.
    fn totals_text(&self, out: &mut String) {
        let ts = &self.thread_seconds;
        let off = self.off_cpu();
        let wall = (ts.on_cpu + ts.run_queue + off.iter().map(|(_, v)| v).sum::<f64>()).max(1e-9);
        let _ = writeln!(
            out,
            "Where the threads' time went ({:.1} thread-seconds over {:.1} s; {} workers; classes: {}):",
            wall,
            self.window_s,
            self.workers,
            match self.classes_method.as_str() {
                "exact" => "exact, the blocked syscall read from its registers",
                "syscall-entry" => "from syscall entry",
                METHOD_SAMPLED => "sampled from /proc (see SAMPLE for the samples behind them)",
                METHOD_STRACE =>
                    "the call each thread was in, from an strace log (its whole time, blocked or not)",
                _ => "unknown on this kernel",
            }
        );
        let mut parts: Vec<(String, f64)> = vec![
            ("on CPU".into(), ts.on_cpu),
            ("run queue".into(), ts.run_queue),
        ];
        for (c, v) in off {
            parts.push((format!("off CPU: {c}"), v));
        }
        for (name, v) in parts.iter().filter(|(_, v)| *v > 0.0) {
            let _ = writeln!(out, "  {name:<22} {v:9.2} s  {:5.1} %", v / wall * 100.0);
        }
        if !self.stack.is_empty() {
            let _ = writeln!(
                out,
                "The benchmark's other processes (they woke its threads, or those that did; not noise): {}",
                self.stack
                    .iter()
                    .map(|p| format!("{} (pid {}) {:.2} cores", p.comm, p.pid, p.cores))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !self.runtime_threads.is_empty() {
            let _ = writeln!(
                out,
                "The runtime's own threads (their CPU counted, their waits not; not workers): {}",
                crate::trace::runtime_threads::listed(&self.runtime_threads)
            );
        }
    }
}

impl Section for RunSection {
    fn name(&self) -> &'static str {
        "run"
    }
    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }
    fn text(&self) -> String {
        let mut out = String::new();
        self.totals_text(&mut out);
        let missing = &self.load_columns_missing;
        let _ = writeln!(
            out,
            "\nPer second (off-CPU columns: threads blocked, on average; `served`: {}{}):",
            if self.classes_method == METHOD_STRACE {
                "connections the threads accepted, from the log"
            } else {
                "requests the server received, counted in the kernel"
            },
            if missing.is_empty() {
                String::new()
            } else {
                format!(
                    "; `-`: not in the generator's results ({})",
                    missing.join(", ")
                )
            }
        );
        let client = self.timeline.iter().any(|s| s.client_cores.is_some());
        let _ = writeln!(
            out,
            "  {:>4} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>7} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>7} {:>6}{}  marks",
            "t",
            "offered",
            "2xx",
            "served",
            "non2xx",
            "errors",
            "p99 ms",
            "inflt",
            "cores",
            "tgt",
            "runq",
            "path",
            "fileio",
            "lock",
            "futex",
            "wait",
            "sleep",
            "busy",
            "acceptq",
            "thr ms",
            if client { "   gen gen-rq" } else { "" }
        );
        for s in &self.timeline {
            second_text(&mut out, s, missing, client);
        }
        out
    }
}

/// One row of the per-second table.
fn second_text(out: &mut String, s: &RunSecond, missing: &[String], client: bool) {
    let col = |name: &str, v: String| {
        if missing.iter().any(|m| m == name) {
            "-".to_string()
        } else {
            v
        }
    };
    let g = |c: &str| s.off_cpu.get(c).copied().unwrap_or(0.0);
    let client_cols = if client {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        format!(" {:>5} {:>6}", f(s.client_cores), f(s.client_run_queue))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {:>4} {:>7} {:>7} {:>6} {:>6} {:>6} {:>9} {:>7} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5} {:>7} {:>6}{}  {}",
        s.t_s,
        col("offered", s.offered.to_string()),
        col("ok_2xx", s.ok_2xx.to_string()),
        s.served.map_or("-".to_string(), |v| v.to_string()),
        col("non_2xx", s.non_2xx.to_string()),
        col("errors", s.errors.values().sum::<u64>().to_string()),
        col(
            "p99_us",
            s.p99_us
                .map(|v| format!("{:.1}", v / 1e3))
                .unwrap_or_else(|| "-".into())
        ),
        col("in_flight", s.in_flight.to_string()),
        s.cores_busy,
        s.target_cores,
        s.run_queue,
        g("path"),
        g("file_io"),
        g("file_lock"),
        g("futex"),
        g("wait_work"),
        g("sleep"),
        s.busy_threads,
        s.accept_queue
            .map(|q| q.to_string())
            .unwrap_or_else(|| "-".into()),
        s.throttled_ms
            .map(|t| format!("{t:.0}"))
            .unwrap_or_else(|| "-".into()),
        client_cols,
        s.marks.join(",")
    );
}
