//! One report model, rendered as text, JSON and HTML. Every command that reports findings
//! builds a [`Report`]; sections a command does not fill are left out of every format.

pub mod chart;
pub mod color;
pub mod compare;
pub mod export;
pub mod fingerprint;
pub mod html;
mod net;
pub mod preflight;
pub mod section;
pub mod text;
pub mod units;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    error::exit,
    traps::{Finding, Severity},
};

pub use self::section::Section;
pub use crate::{
    figures::{Latency, latency, merge_hist, percentile_us},
    probe::ProbeRow,
};

/// Version of the JSON wire format (`schema` field). Bump on incompatible change.
pub const SCHEMA: &str = "trapdetect.report/1";

/// The process the report is about.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Target {
    /// Process id given on the command line.
    pub pid: u32,
    /// `comm` (escaped).
    pub comm: String,
    /// /proc/PID/exe (escaped).
    pub exe: String,
    /// /proc/PID/cwd (escaped).
    pub cwd: String,
    /// Processes traced at the start (the target and its descendants).
    pub processes: usize,
    /// Set when the target exited before the end of the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exited_after_s: Option<f64>,
    /// How the target was chosen when it was named rather than given by pid (`--comm`,
    /// `--cgroup`, `--container`, `--unit`): the root traced and what else matched (escaped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_by: Option<String>,
}

/// What "per request" means in this report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Requests {
    /// Number of requests in the window (`None`: no request basis, figures are per second).
    pub count: Option<u64>,
    /// `probe-load` (trapdetect drove the load and counted responses), `accepted-connections`
    /// (accept() returns in the target), `served-requests` (requests the target's own ports
    /// received, whatever client sent them), `declined` (other clients' requests share the
    /// window and cannot be counted: see `note`), or `none`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub basis: crate::util::de::Name,
    /// Requests per second over the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Caveat shown next to per-request figures, or why they were declined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Payload the server's ports received in the window, whatever client sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served: Option<crate::probe::tcp::Served>,
}

/// One row of the syscall table: a syscall on the filesystem its final component lives on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyscallRow {
    /// Kernel syscall name.
    pub syscall: String,
    /// Filesystem type of the object the call names (`?` when unresolved).
    pub fs_type: String,
    /// Its mount point (escaped).
    pub mount_point: String,
    /// Completed calls.
    pub count: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Calls per request (`None` without a request basis).
    pub per_request: Option<f64>,
    /// Calls per second.
    pub per_second: f64,
    /// Path components these calls resolved, on every filesystem.
    pub lookups: u64,
    /// Lookups per request.
    pub lookups_per_request: Option<f64>,
    /// Latency of the calls.
    pub latency: Latency,
}

/// One row of the filesystem table: lookups walked on one mount.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FsRow {
    /// Mount point (escaped).
    pub mount_point: String,
    /// Filesystem type.
    pub fs_type: String,
    /// Mount source (escaped).
    pub source: String,
    /// Why it is slow, if it is known to be.
    pub slow: Option<crate::host::mounts::SlowKind>,
    /// Path components resolved on it.
    pub lookups: u64,
    /// Per request.
    pub lookups_per_request: Option<f64>,
    /// Per second.
    pub lookups_per_second: f64,
    /// Time per request spent in syscalls whose walk ends on this filesystem, ms.
    pub syscall_ms_per_request: Option<f64>,
    /// Those syscalls' latency distribution (absent when none ended here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall_latency: Option<LatencyBuckets>,
    /// FUSE requests measured at the fuse tracepoint, per opcode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fuse_ops: Vec<FuseOps>,
    /// The traced processes' FUSE requests timed send to answer, by how many of theirs were
    /// already in flight on the connection (fuse_request_end, Linux 6.13+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fuse_queue: Vec<FuseQueueRow>,
}

/// A latency distribution as cumulative counts at fixed bounds: the calls at or under each
/// bound, the bounds every second power of two of nanoseconds (1.024 µs, 4.096 µs, 16.4 µs …
/// 4.29 s), where the kernel's log-linear buckets have edges, so each count is exact; every
/// bound listed, always the same twelve (a histogram's series must not come and go between
/// windows: a pushed bucket that is not pushed again stays in Prometheus as it was).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyBuckets {
    /// Calls.
    pub calls: u64,
    /// Their summed latency, µs.
    pub sum_us: f64,
    /// (bound µs, calls at or under it), ascending.
    pub le_us: Vec<(f64, u64)>,
}

impl LatencyBuckets {
    /// From a kernel histogram ([`trapdetect_common::hist`]) of `calls` calls summing `sum_ns`.
    pub fn of(hist: &[u64], calls: u64, sum_ns: u64) -> LatencyBuckets {
        use trapdetect_common::hist::{MIN_OCTAVE, OCTAVES, bucket_of};
        let mut le_us = vec![];
        // 2^k ns is the lower edge of its bucket: every bucket before it is under 2^k ns.
        for k in (MIN_OCTAVE + 2..=MIN_OCTAVE + OCTAVES - 4).step_by(2) {
            let below = bucket_of(1u64 << k) as usize;
            let n: u64 = hist.iter().take(below).sum();
            le_us.push(((1u64 << k) as f64 / 1e3, n));
        }
        LatencyBuckets {
            calls,
            sum_us: crate::traps::round(sum_ns as f64 / 1e3, 3),
            le_us,
        }
    }
}

/// FUSE requests sent with `ahead` of the traced processes' requests already in flight on the
/// connection, and their mean latency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FuseQueueRow {
    /// Requests already in flight when these were sent (the last row: this many or more).
    pub ahead: u32,
    /// Requests.
    pub count: u64,
    /// Their mean latency, send to answer, µs.
    pub mean_us: f64,
}

/// FUSE requests of one opcode on one connection.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FuseOps {
    /// Opcode name (`LOOKUP`, `GETATTR`...).
    pub opcode: String,
    /// Requests.
    pub count: u64,
    /// Per request.
    pub per_request: Option<f64>,
    /// Per second.
    pub per_second: f64,
}

/// A sampled path and what it cost.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PathRow {
    /// Syscall.
    pub syscall: String,
    /// The path as the target passed it (escaped untrusted bytes).
    pub path: String,
    /// How the walk started: `absolute`, `cwd`, `dirfd`, `none`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub base: crate::util::de::Name,
    /// `AT_SYMLINK_NOFOLLOW`: the call did not follow a final symlink (lstat semantics).
    pub nofollow: bool,
    /// Calls.
    pub count: u64,
    /// Errors returned.
    pub errors: u64,
    /// Calls per request.
    pub per_request: Option<f64>,
    /// Lookups per call, per filesystem type (`fuse.slowfs:7 ext4:2`).
    pub walk: String,
    /// Mean latency, µs.
    pub mean_us: f64,
}

/// Can the numbers in this report be trusted? (A load run saves `trusted` and `problems` only.)
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Measurement {
    /// False when a problem below compromises the figures (exit code 3).
    pub trusted: bool,
    /// What compromises them.
    pub problems: Vec<String>,
    /// Lesser issues that do not.
    pub notes: Vec<String>,
    /// Self-monitoring counters from the probes.
    pub counters: serde_json::Map<String, Value>,
    /// Which backend measured and why (`trace` and `run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendInfo>,
}

/// The backend that measured (`--backend`): `ebpf` or `sample`, and why it was chosen.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BackendInfo {
    /// `ebpf` or `sample`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub name: crate::util::de::Name,
    /// Why: asked for, or what kept eBPF from attaching under `auto`.
    pub reason: String,
    /// Sampling rounds per second (sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_hz: Option<u32>,
    /// Thread samples taken (sample).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
}

/// A check that could not run, and why.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// What was skipped.
    pub check: String,
    /// Why.
    pub reason: String,
}

/// The report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// Wire format version.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub schema: crate::util::de::Name,
    /// Which command produced it: `trace`, `preflight`, `run`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub command: crate::util::de::Name,
    /// trapdetect version.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub version: crate::util::de::Name,
    /// The target process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Length of the measured window, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_s: Option<f64>,
    /// What "per request" means here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Requests>,
    /// `run`'s one verdict: what capped the run, and what followed from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<crate::traps::run::Verdict>,
    /// Traps found, fail first.
    pub findings: Vec<Finding>,
    /// Findings silenced with `--ignore`, still listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<Finding>,
    /// Checks that could not run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Per syscall and filesystem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<SyscallRow>,
    /// Per filesystem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<FsRow>,
    /// The most frequent paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<PathRow>,
    /// Extra sections by name (`network`, `load`, ...), each owned by its module.
    #[serde(flatten)]
    pub sections: serde_json::Map<String, Value>,
    /// Probes and their state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeRow>,
    /// Trust in the measurement.
    pub measurement: Measurement,
    /// The exit code this report produces.
    pub exit_code: i32,
    /// Text renderings of the extra sections, in order (not serialized).
    #[serde(skip)]
    pub section_text: Vec<(String, String)>,
    /// A skipped check that could have failed ([`incomplete`]) fails `--strict` (preflight,
    /// which lists them as INCOMPLETE; not serialized).
    #[serde(skip)]
    pub incomplete_fails_strict: bool,
}

/// The checks of `skipped` whose rule can return `fail` (registry `can_fail`) and that the
/// user did not `--ignore`: a clean result does not clear them.
pub fn incomplete(skipped: &[Skipped], ignore: &[String]) -> Vec<String> {
    skipped
        .iter()
        .filter(|s| crate::traps::Id::parse(&s.check).is_some_and(|id| id.rule().can_fail))
        .filter(|s| !ignore.contains(&s.check))
        .map(|s| s.check.clone())
        .collect()
}

impl Report {
    /// An empty, trusted report for `command`.
    pub fn new(command: &'static str) -> Self {
        Report {
            schema: SCHEMA,
            command,
            version: env!("CARGO_PKG_VERSION"),
            target: None,
            window_s: None,
            requests: None,
            verdict: None,
            findings: vec![],
            ignored: vec![],
            skipped: vec![],
            syscalls: vec![],
            filesystems: vec![],
            paths: vec![],
            sections: serde_json::Map::new(),
            probes: vec![],
            measurement: Measurement {
                trusted: true,
                ..Default::default()
            },
            exit_code: 0,
            section_text: vec![],
            incomplete_fails_strict: false,
        }
    }

    /// Moves findings whose id is in `ignore` to `ignored`, sorts, and computes the exit code
    /// (the only place it is decided): 3 when the measurement cannot be trusted, else 1 when a
    /// `fail` finding remains (or, with `strict`, a `warn` one or, where
    /// `incomplete_fails_strict`, a skipped check that could have failed), else 0.
    pub fn finish(&mut self, ignore: &[String], strict: bool) {
        let (ignored, kept): (Vec<Finding>, Vec<Finding>) = std::mem::take(&mut self.findings)
            .into_iter()
            .partition(|f| ignore.iter().any(|i| i == f.id.as_str()));
        self.findings = kept;
        self.ignored = ignored;
        crate::traps::sort(&mut self.findings);
        crate::traps::sort(&mut self.ignored);
        let failing = self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Fail || (strict && f.severity == Severity::Warn))
            || (strict
                && self.incomplete_fails_strict
                && !incomplete(&self.skipped, ignore).is_empty());
        self.exit_code = if !self.measurement.trusted {
            exit::UNTRUSTED
        } else if failing {
            exit::FAIL
        } else {
            exit::OK
        };
    }

    /// JSON rendering (pretty).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traps::Id;

    #[test]
    fn percentiles_interpolate_within_buckets_and_clamp_to_max() {
        use trapdetect_common::hist::{HIST_BUCKETS, bucket_of};
        // 100 samples in [1024, 1280) ns, max 1200 ns.
        let mut h = vec![0u64; HIST_BUCKETS as usize];
        h[bucket_of(1100) as usize] = 100;
        assert_eq!(
            percentile_us(&h, 0.5, 1200),
            (1024.0 + (1200.0 - 1024.0) * 0.5) / 1000.0
        );
        assert_eq!(percentile_us(&h, 1.0, 1200), 1.2);
        // 99 fast, 1 slow: p99 is still fast, max is the slow one.
        let mut h = vec![0u64; HIST_BUCKETS as usize];
        h[bucket_of(300) as usize] = 99;
        h[bucket_of(1_500_000) as usize] = 1;
        let l = latency(&h, 100, 99 * 300 + 1_500_000, 1_500_000);
        // 300 ns is in [256, 320): the 99th sample is the last in that bucket, so p99 is its
        // upper edge, not the slow outlier.
        assert_eq!(l.p99_us, 0.32, "{l:?}");
        assert_eq!(l.max_us, 1500.0);
        assert_eq!(l.mean_us, 15.3);
    }

    #[test]
    fn exit_codes() {
        let mut r = Report::new("trace");
        r.findings
            .push(Finding::new(Id::HostVirt, Severity::Warn, "w"));
        r.finish(&[], false);
        assert_eq!(r.exit_code, 0);
        r.finish(&[], true);
        assert_eq!(r.exit_code, 1);
        r.findings
            .push(Finding::new(Id::FsCwdSlow, Severity::Fail, "f"));
        r.finish(&["fs.cwd-slow".into()], false);
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.ignored.len(), 1);
        r.findings
            .push(Finding::new(Id::FsDirSlow, Severity::Fail, "f"));
        r.finish(&[], false);
        assert_eq!(r.exit_code, 1);
        assert_eq!(r.findings[0].id, "fs.dir-slow");
        r.measurement.trusted = false;
        r.finish(&[], false);
        assert_eq!(r.exit_code, 3);
    }
}
