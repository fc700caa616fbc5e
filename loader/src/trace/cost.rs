//! The report's `tracer` section: what the trace itself cost the host while it measured, from
//! the kernel's per-program run time statistics (switched on for the window only, see
//! `probe::stats`) and the tracer process's own CPU time. A user reads it beside the ceiling
//! the report names: a tracer that took a few percent of a CPU moved that ceiling by about as
//! much.

use serde::Serialize;

use crate::{
    figures::fmt_count,
    probe::stats::ProgStat,
    report::section::{Section, to_json},
    traps::round,
};

/// What the trace measured of itself (gathered at the end of the window).
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Seconds from attach to detach.
    pub window_s: f64,
    /// Seconds the statistics were on within it (all of it unless sampled).
    pub on_s: f64,
    /// On for a sample of the window only (`probe::stats::Duty`).
    pub sampled: bool,
    /// Per attached program.
    pub programs: Vec<ProgStat>,
    /// Why the kernel did not switch the statistics on (`None`: it did).
    pub refused: Option<String>,
    /// User + system CPU of the tracer process over the same span, seconds.
    pub process_cpu_s: Option<f64>,
}

/// One program's row.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ProgramRow {
    /// Program name.
    pub program: String,
    /// Times it ran (every process's events, not only the target's: each program decides
    /// in the kernel whether an event is the target's).
    pub runs: u64,
    /// Nanoseconds it ran, all CPUs.
    pub run_ns: u64,
    /// Mean nanoseconds per run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_run: Option<f64>,
}

/// The `tracer` section.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct TracerCost {
    /// `kernel-stats` when the kernel measured its programs, `unavailable` when it would not.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub method: crate::util::de::Name,
    /// Why not, when unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Seconds from attach to detach.
    pub window_s: f64,
    /// Seconds of it the kernel measured: the figures below cover these (the first second of
    /// every ten unless `TRAPDETECT_BPF_STATS=on`: timing every run costs the traced host).
    pub measured_s: f64,
    /// Program runs (events) in the measured seconds, all programs.
    pub events: u64,
    /// Nanoseconds the programs ran in the measured seconds, all CPUs.
    pub bpf_ns: u64,
    /// The programs' time as a share of one CPU while measured, percent.
    pub bpf_cpu_pct: f64,
    /// Mean nanoseconds per event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_event: Option<f64>,
    /// The programs' time per request, µs (when the report has a request count; scaled from
    /// the measured seconds to the window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bpf_us_per_request: Option<f64>,
    /// The tracer process's own CPU (reading maps, /proc, the probe load) as a share of one
    /// CPU, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_cpu_pct: Option<f64>,
    /// Per program that ran, most time first.
    pub programs: Vec<ProgramRow>,
}

/// The section from what was measured and the report's request count.
pub fn section(m: &Measured, requests: Option<u64>) -> TracerCost {
    let events: u64 = m.programs.iter().map(|p| p.runs).sum();
    let bpf_ns: u64 = m.programs.iter().map(|p| p.run_ns).sum();
    let window_ns = (m.window_s * 1e9).max(1.0);
    let on_ns = (m.on_s * 1e9).max(1.0);
    let per = |ns: u64, n: u64| (n > 0).then(|| round(ns as f64 / n as f64, 1));
    let mut programs: Vec<ProgramRow> = m
        .programs
        .iter()
        .filter(|p| p.runs > 0)
        .map(|p| ProgramRow {
            program: p.program.clone(),
            runs: p.runs,
            run_ns: p.run_ns,
            ns_per_run: per(p.run_ns, p.runs),
        })
        .collect();
    programs.sort_by(|a, b| b.run_ns.cmp(&a.run_ns).then(a.program.cmp(&b.program)));
    // Statistics refused and nothing counted: the host's own setting was off too.
    let measured = m.refused.is_none() || events > 0;
    TracerCost {
        method: if measured {
            "kernel-stats"
        } else {
            "unavailable"
        },
        note: (!measured).then(|| {
            format!(
                "the kernel did not measure the programs' run time (BPF_ENABLE_STATS: {}; Linux 5.8 or later, or kernel.bpf_stats_enabled = 1)",
                m.refused.as_deref().unwrap_or("refused")
            )
        }),
        window_s: round(m.window_s, 3),
        measured_s: round(m.on_s, 3),
        events,
        bpf_ns,
        bpf_cpu_pct: round(100.0 * bpf_ns as f64 / on_ns, 3),
        ns_per_event: per(bpf_ns, events),
        bpf_us_per_request: requests.filter(|&n| n > 0 && measured).map(|n| {
            let scaled = bpf_ns as f64 * (m.window_s / m.on_s.max(1e-9)).max(1.0);
            round(scaled / n as f64 / 1000.0, 3)
        }),
        process_cpu_pct: m
            .process_cpu_s
            .map(|s| round(100.0 * s * 1e9 / window_ns, 2)),
        programs,
    }
}

impl Section for TracerCost {
    fn name(&self) -> &'static str {
        "tracer"
    }

    fn json(&self) -> Result<serde_json::Value, String> {
        to_json(self)
    }

    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(n) = &self.note {
            s.push_str(&format!("  {n}\n"));
        } else {
            s.push_str(&format!(
                "  eBPF programs: {} % of one CPU, measured over {} s of {} s ({} events, {} ns each{})\n",
                self.bpf_cpu_pct,
                self.measured_s,
                self.window_s,
                fmt_count(self.events),
                self.ns_per_event.unwrap_or(0.0),
                self.bpf_us_per_request
                    .map(|u| format!("; {u} µs per request"))
                    .unwrap_or_default()
            ));
        }
        if let Some(p) = self.process_cpu_pct {
            s.push_str(&format!("  tracer process: {p} % of one CPU\n"));
        }
        for p in self.programs.iter().take(6) {
            s.push_str(&format!(
                "    {:<24} {:>12} runs  {:>8} ns each\n",
                p.program,
                fmt_count(p.runs),
                p.ns_per_run.unwrap_or(0.0)
            ));
        }
        s
    }
}

/// User + system CPU of this process (every thread), seconds.
pub fn process_cpu_s() -> Option<f64> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).ok()?;
    let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
    Some(t(u.user_time()) + t(u.system_time()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(name: &str, runs: u64, ns: u64) -> ProgStat {
        ProgStat {
            program: name.into(),
            runs,
            run_ns: ns,
        }
    }

    #[test]
    fn shares_and_per_event_figures() {
        let m = Measured {
            window_s: 2.0,
            on_s: 2.0,
            sampled: false,
            programs: vec![
                prog("sys_enter_openat", 1_000, 150_000),
                prog("tcp_probe", 9_000, 450_000),
                prog("sched_process_fork", 0, 0),
            ],
            refused: None,
            process_cpu_s: Some(0.01),
        };
        let c = section(&m, Some(500));
        assert_eq!(c.method, "kernel-stats");
        assert_eq!(c.events, 10_000);
        assert_eq!(c.bpf_ns, 600_000);
        // 0.6 ms of 2 s.
        assert_eq!(c.bpf_cpu_pct, 0.03);
        assert_eq!(c.ns_per_event, Some(60.0));
        assert_eq!(c.bpf_us_per_request, Some(1.2));
        assert_eq!(c.process_cpu_pct, Some(0.5));
        // Programs that never ran are left out; the costliest first.
        let names: Vec<&str> = c.programs.iter().map(|p| p.program.as_str()).collect();
        assert_eq!(names, ["tcp_probe", "sys_enter_openat"]);
        assert_eq!(c.programs[0].ns_per_run, Some(50.0));
        let t = c.text();
        assert!(
            t.contains("eBPF programs: 0.03 % of one CPU, measured over 2 s of 2 s (10,000 events, 60 ns each; 1.2 µs per request)"),
            "{t}"
        );
    }

    #[test]
    fn a_sample_of_the_window_is_scaled_to_it() {
        // On for 1 s of 10: the share is the sample's, per request is scaled to the window.
        let m = Measured {
            window_s: 10.0,
            on_s: 1.0,
            sampled: true,
            programs: vec![prog("tcp_probe", 10_000, 2_000_000)],
            refused: None,
            process_cpu_s: None,
        };
        let c = section(&m, Some(1000));
        assert_eq!(c.bpf_cpu_pct, 0.2);
        assert_eq!(c.measured_s, 1.0);
        assert_eq!(c.bpf_us_per_request, Some(20.0));
    }

    #[test]
    fn refused_statistics_say_so() {
        let m = Measured {
            window_s: 1.0,
            on_s: 0.0,
            sampled: true,
            programs: vec![prog("tcp_probe", 0, 0)],
            refused: Some("EINVAL".into()),
            process_cpu_s: None,
        };
        let c = section(&m, Some(10));
        assert_eq!(c.method, "unavailable");
        assert_eq!(c.bpf_us_per_request, None);
        assert!(c.note.unwrap().contains("BPF_ENABLE_STATS: EINVAL"));
    }
}
