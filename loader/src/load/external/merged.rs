//! `trapdetect report A B ...`: several generators' results (copies of `trapdetect load
//! --shard I/N`, vegeta or k6 runners on several hosts) merged on wall-clock seconds without a
//! run, by the same [`merge`] `run --load-results` uses: counts summed second by second, p99
//! from the merged latencies, each generator's part and its seconds behind schedule kept.
//! The document ([`MergedLoad`], schema `trapdetect.merged-load/1`) prints the same text when
//! `trapdetect report` reads it back.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{
    LoadResults,
    merge::merge,
    parse,
    section::{ExternalLoad, ExternalResults},
};
use crate::report::section::Section;

/// The merged document's schema.
pub const SCHEMA: &str = "trapdetect.merged-load/1";

/// Several generators' results, merged.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MergedLoad {
    /// [`SCHEMA`].
    pub schema: String,
    /// trapdetect's version.
    pub version: String,
    /// Second 0 of `series`: the earliest generator's first request, Unix s.
    pub start_unix_s: f64,
    /// The merged totals and each generator's part, as `run --load-results` shows them.
    pub load: ExternalLoad,
    /// Second by second, summed over the generators.
    pub series: Vec<MergedSecond>,
}

/// One wall-clock second of the merged run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedSecond {
    /// Seconds from `start_unix_s`.
    pub t_s: i64,
    /// Requests the generators intended to send in it.
    pub offered: u64,
    /// 2xx that ended in it.
    pub ok_2xx: u64,
    /// Other statuses that ended in it.
    pub non_2xx: u64,
    /// Requests without a status.
    pub errors: u64,
    /// 99th percentile latency of its 2xx from every generator's latencies, µs (absent where
    /// one gave only its own percentile).
    pub p99_us: Option<f64>,
    /// A generator fell behind its own schedule in it: its arrivals went out late.
    pub generator_lag: bool,
}

/// Merges the files (name, bytes, the file's modification time in Unix s). Each is placed by
/// its own wall-clock times: a file without them, one the parsers do not read, or files whose
/// runs do not overlap are refused with the reason (bad input).
pub fn build(files: &[(String, Vec<u8>, f64)]) -> Result<MergedLoad, String> {
    // A generator writes its file when its run ends, so its start is within a day of the
    // file's time: read once against that to learn where each run starts, then again against
    // the earliest start, which is second 0.
    let mut start = f64::INFINITY;
    for (name, bytes, mtime) in files {
        let r = parse(bytes, *mtime).map_err(|e| format!("{name}: {e}"))?;
        let s = r.start_unix_s.ok_or_else(|| {
            format!(
                "{name}: {} has no wall-clock times: it cannot be placed beside the others",
                r.format.describe()
            )
        })?;
        start = start.min(s);
    }
    let mut parts = vec![];
    for (name, bytes, _) in files {
        let r = parse(bytes, start).map_err(|e| format!("{name}: {e}"))?;
        parts.push((name.clone(), r));
    }
    let (r, generators) = merge(parts)?;
    Ok(MergedLoad {
        schema: SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        start_unix_s: crate::traps::round(start, 3),
        series: series_of(&r),
        load: ExternalLoad {
            source: "files".into(),
            command: vec![],
            exit_status: None,
            interrupted: false,
            killed: false,
            missing_columns: r.missing().iter().map(|c| c.to_string()).collect(),
            results: Some(ExternalResults::of(&r)),
            generators,
        },
    })
}

fn series_of(r: &LoadResults) -> Vec<MergedSecond> {
    r.seconds
        .iter()
        .map(|(t, s)| MergedSecond {
            t_s: *t,
            offered: s.offered,
            ok_2xx: s.ok_2xx,
            non_2xx: s.non_2xx,
            errors: s.errors,
            p99_us: s.p99_us.map(|p| crate::traps::round(p, 1)),
            generator_lag: r.lagged.contains(t),
        })
        .collect()
}

impl MergedLoad {
    /// The text `trapdetect report` prints, live and read back.
    pub fn text(&self) -> String {
        let mut out = format!(
            "MERGED LOAD: {} generators on wall-clock seconds from Unix {:.3} (second 0: the \
             earliest one's first request)\n",
            self.load.generators.len(),
            self.start_unix_s
        );
        out.push_str(&self.load.text());
        let _ = writeln!(
            out,
            "\n{:>6} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "t", "offered", "2xx", "other", "errors", "p99 ms"
        );
        for s in &self.series {
            let _ = writeln!(
                out,
                "{:>6} {:>9} {:>9} {:>9} {:>9} {:>9}{}",
                s.t_s,
                s.offered,
                s.ok_2xx,
                s.non_2xx,
                s.errors,
                s.p99_us.map_or("-".into(), |p| format!("{:.2}", p / 1e3)),
                if s.generator_lag {
                    "  generator-lag"
                } else {
                    ""
                }
            );
        }
        // Why a generator did not trust its own measurement, by file.
        for g in &self.load.generators {
            for p in &g.problems {
                let _ = writeln!(out, "Not trusted by its generator: {}: {p}", g.file);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/load_results")
            .join(name);
        std::fs::read(p).unwrap()
    }

    /// vegeta's 30 requests dealt to two runners by sequence number: merged, the run of the
    /// one file, second by second; placed from the files' own times whatever their mtime says
    /// (within a day).
    #[test]
    fn two_runners_merge_to_the_one_run_and_read_back_the_same() {
        let all = fixture("vegeta-results.jsonl");
        let (mut even, mut odd) = (vec![], vec![]);
        for (i, l) in all
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            let half = if i % 2 == 0 { &mut even } else { &mut odd };
            half.extend_from_slice(l);
            half.push(b'\n');
        }
        let t0 = 1_715_258_085.0;
        let m = build(&[
            ("a.jsonl".into(), even, t0 + 3_600.0),
            ("b.jsonl".into(), odd, t0 - 3_600.0),
        ])
        .unwrap();
        let one = parse(&all, m.start_unix_s).unwrap();
        assert_eq!(m.load.generators.len(), 2);
        let r = m.load.results.as_ref().unwrap();
        assert_eq!((r.totals.requests, r.totals.ok_2xx), (Some(30), Some(28)));
        assert_eq!(r.totals.requests, one.totals.requests);
        assert_eq!(m.series.len(), one.seconds.len());
        for s in &m.series {
            let o = &one.seconds[&s.t_s];
            assert_eq!(
                (s.offered, s.ok_2xx, s.non_2xx, s.errors),
                (o.offered, o.ok_2xx, o.non_2xx, o.errors),
                "second {}",
                s.t_s
            );
        }
        assert_eq!(m.series.iter().map(|s| s.offered).sum::<u64>(), 30);
        // Read back from its JSON, the same document and the same text.
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["schema"], SCHEMA);
        let back: MergedLoad = serde_json::from_value(v).unwrap();
        assert_eq!(back.text(), m.text());
        assert!(
            m.text()
                .starts_with("MERGED LOAD: 2 generators on wall-clock seconds from Unix "),
            "{}",
            m.text()
        );
    }

    /// A summary (no per-request times), a file no parser reads, one run apart from the
    /// other: each refused with the file named.
    #[test]
    fn files_that_cannot_be_placed_are_refused_by_name() {
        let vegeta = fixture("vegeta-results.jsonl");
        let t0 = 1_715_258_085.0;
        let e = build(&[
            ("v.jsonl".into(), vegeta.clone(), t0),
            ("wrk.txt".into(), fixture("wrk.txt"), t0),
        ])
        .unwrap_err();
        assert!(
            e.starts_with("wrk.txt: ")
                && e.ends_with("has no wall-clock times: it cannot be placed beside the others"),
            "{e}"
        );
        let e = build(&[
            ("v.jsonl".into(), vegeta.clone(), t0),
            ("x".into(), b"hello".to_vec(), t0),
        ])
        .unwrap_err();
        assert!(e.starts_with("x: "), "{e}");
    }
}
