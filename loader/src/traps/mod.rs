//! Trap rules: pure functions from observations to findings. Rules never touch the kernel or
//! /proc, so every rule is unit-tested with recorded observations.

pub mod cpu;
pub mod dir_probe;
pub mod drift;
pub mod fpm;
pub mod fs;
pub mod fs_static;
pub mod host;
pub mod net;
pub mod process;
pub mod registry;
pub mod run;
pub mod runtime;
pub mod tuning;

pub use crate::figures::round;
pub use registry::Id;
use serde::Serialize;
use serde_json::{Map, Value};

/// How bad a finding is. Ordered: `Fail` sorts first.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The environment falsifies the benchmark (exit code 1).
    Fail,
    /// Likely to distort results; `--strict` treats it as a failure.
    Warn,
    /// Worth knowing, no action required.
    Info,
}

impl Severity {
    /// Upper-case label for text output.
    pub fn label(self) -> &'static str {
        match self {
            Severity::Fail => "FAIL",
            Severity::Warn => "WARN",
            Severity::Info => "INFO",
        }
    }
}

/// One trap found: a stable id, the evidence as numbers with units, the predicted effect where
/// it can be computed, and a concrete remedy. Rendered the same way as text, JSON and HTML.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Finding {
    /// Stable id, e.g. `fs.cwd-slow`. Harnesses `--ignore` by it.
    pub id: Id,
    /// Severity.
    pub severity: Severity,
    /// One line.
    pub title: String,
    /// Measured values; units are part of the key names (`_us`, `_per_request`, `_bytes`...).
    pub evidence: Map<String, Value>,
    /// The predicted effect, with its arithmetic, when it can be computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted: Option<String>,
    /// What to do about it: a command or a setting.
    pub remedy: String,
}

impl Finding {
    /// Starts a finding (its id is registered: see [`registry`]).
    pub fn new(id: Id, severity: Severity, title: impl Into<String>) -> Self {
        Finding {
            id,
            severity,
            title: title.into(),
            evidence: Map::new(),
            predicted: None,
            remedy: String::new(),
        }
    }

    /// Adds one piece of evidence (keys carry their unit).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.evidence.insert(key.to_string(), value.into());
        self
    }

    /// Adds evidence only when present.
    pub fn with_opt<V: Into<Value>>(self, key: &str, value: Option<V>) -> Self {
        match value {
            Some(v) => self.with(key, v),
            None => self,
        }
    }

    /// Sets the predicted effect.
    pub fn predict(mut self, p: impl Into<String>) -> Self {
        self.predicted = Some(p.into());
        self
    }

    /// Sets the remedy.
    pub fn remedy(mut self, r: impl Into<String>) -> Self {
        self.remedy = r.into();
        self
    }
}

/// Sorts findings fail first, then by id (stable output for diffs and tests).
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| a.severity.cmp(&b.severity).then_with(|| a.id.cmp(&b.id)));
}

/// Test helper: pins each value's JSON (a finding: its id, severity, title, evidence in order,
/// prediction and remedy). On a mismatch it prints what was produced, one raw string a line,
/// ready to paste when a change of output is intended.
#[cfg(test)]
pub(crate) fn assert_pinned<T: Serialize>(got: &[T], want: &[&str]) {
    let got: Vec<String> = got
        .iter()
        .map(|v| serde_json::to_string(v).unwrap())
        .collect();
    if got != want {
        for g in &got {
            eprintln!("PIN r##\"{g}\"##,");
        }
    }
    assert_eq!(got, want);
}
