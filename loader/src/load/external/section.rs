//! The `load` section of `run -- COMMAND` / `run --load-results FILE`: what the external
//! generator was, how it ended and what its results said. JSON and text come from this one
//! struct, so `trapdetect report` on a saved run prints what the run printed.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Format, LoadResults, Totals, merge::GeneratorPart};
use crate::report::{
    chart::Marks,
    html::kv,
    section::{Section, to_json},
};

/// The section.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExternalLoad {
    /// `command` (its stdout was read) or `file` (`--load-results`).
    pub source: String,
    /// The generator's command line (escaped; empty with `--load-results` alone).
    pub command: Vec<String>,
    /// Its exit status.
    pub exit_status: Option<i32>,
    /// Interrupted at the end of the window.
    pub interrupted: bool,
    /// Killed after the grace period.
    pub killed: bool,
    /// Per-second columns its results did not give.
    pub missing_columns: Vec<String>,
    /// What its results said, when they were read (several files: merged).
    #[serde(flatten)]
    pub results: Option<ExternalResults>,
    /// Several generators' files (`--load-results` repeated): each one's part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generators: Vec<GeneratorPart>,
}

/// What the generator's results said.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExternalResults {
    /// Their format.
    pub format: Format,
    /// Their totals.
    pub totals: Totals,
    /// 2xx per second of its run.
    pub delivered_per_s: Option<f64>,
    /// When its run started (Unix time, s), where the results say.
    pub start_unix_s: Option<f64>,
    /// Lines that could not be read.
    pub skipped_lines: u64,
    /// Seconds of results before the window opened.
    pub seconds_before_window: usize,
}

impl ExternalResults {
    /// What `r` says, placed in the window its seconds count from.
    pub fn of(r: &LoadResults) -> ExternalResults {
        let round = crate::traps::round;
        ExternalResults {
            format: r.format,
            totals: r.totals.clone(),
            delivered_per_s: r.totals.delivered_per_s().map(|d| round(d, 1)),
            start_unix_s: r.start_unix_s.map(|s| round(s, 3)),
            skipped_lines: r.skipped_lines,
            seconds_before_window: r.seconds.range(..0).count(),
        }
    }
}

impl Section for ExternalLoad {
    fn name(&self) -> &'static str {
        "load"
    }
    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }
    fn text(&self) -> String {
        let mut out = String::new();
        for (label, indented, value) in self.lines() {
            let _ = writeln!(out, "{}{label}: {value}", if indented { "  " } else { "" });
        }
        out
    }
    fn html(&self, _marks: &[Marks]) -> Option<String> {
        let rows: Vec<(String, String)> = self
            .lines()
            .into_iter()
            .map(|(label, _, value)| (label, value))
            .collect();
        let mut o = String::new();
        kv(&mut o, &rows);
        Some(o)
    }
}

impl ExternalLoad {
    /// What the section says, line by line: its label, whether it is one generator's part of
    /// several (indented under the results), and what it says.
    fn lines(&self) -> Vec<(String, bool, String)> {
        let mut out = vec![];
        if !self.command.is_empty() {
            out.push((
                "Generator".to_string(),
                false,
                format!(
                    "{} (exit {}{})",
                    self.command.join(" "),
                    self.exit_status.map_or("-".into(), |s| s.to_string()),
                    if self.killed {
                        ", killed after the grace period"
                    } else if self.interrupted {
                        ", interrupted at the end of the window"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let results = match &self.results {
            Some(r) => {
                let t = &r.totals;
                let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
                format!(
                    "{}: {} requests, {} 2xx, {} other, {} errors over {} s{}{}",
                    r.format.describe(),
                    opt(t.requests),
                    opt(t.ok_2xx),
                    opt(t.non_2xx),
                    opt(t.errors),
                    t.duration_s.map_or("-".into(), |d| format!("{d:.2}")),
                    t.delivered_per_s()
                        .map(|d| format!(", {d:.1} 2xx/s"))
                        .unwrap_or_default(),
                    t.p99_us
                        .map(|p| format!(", p99 {:.1} ms", p / 1e3))
                        .unwrap_or_default(),
                )
            }
            None => "none read".to_string(),
        };
        out.push(("Results".to_string(), false, results));
        for g in &self.generators {
            let t = &g.totals;
            out.push((
                g.file.clone(),
                true,
                format!(
                    "{}, seconds {}..{} of the window, {} requests, {} 2xx{}",
                    g.format.describe(),
                    g.first_s,
                    g.last_s,
                    t.requests.map_or("-".to_string(), |v| v.to_string()),
                    t.ok_2xx.map_or("-".to_string(), |v| v.to_string()),
                    if g.lagged_seconds.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", behind its schedule in {} second(s): those seconds are marked generator-lag",
                            g.lagged_seconds.len()
                        )
                    }
                ),
            ));
        }
        if !self.missing_columns.is_empty() {
            out.push((
                "Per-second columns the generator did not give".to_string(),
                false,
                format!(
                    "{}{}",
                    self.missing_columns.join(", "),
                    if self.missing_columns.iter().any(|c| c == "ok_2xx") {
                        " (the `served` column, counted in the kernel, is the delivered rate)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        out
    }
}
