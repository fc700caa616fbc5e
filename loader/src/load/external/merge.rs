//! Several generators, one run (`run --load-results A --load-results B ...`): the results of N
//! generators (several vegeta or k6 runners, N copies of `trapdetect load --shard I/N`) joined
//! on wall-clock seconds into the one load side the run judges.
//!
//! Pure. Counts are summed second by second; a second's p99 is read from the generators'
//! latencies merged into one histogram, never from their percentiles averaged: where a
//! generator gives only its own percentile for a second it had 2xx in, that second has no p99.
//! Each generator's seconds behind its own schedule stay marked. Files without wall-clock
//! times (summaries, offsets from the generator's own start) cannot be placed beside each
//! other and are refused, as are files whose runs do not overlap.

use std::collections::{BTreeMap, BTreeSet};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::results::{COLUMNS, Format, LoadResults, Origin, ResultSecond, Totals};

/// One generator's part of a merged run, as the `load` section lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GeneratorPart {
    /// The file it came from (escaped).
    pub file: String,
    /// Its format.
    pub format: Format,
    /// Its first request, Unix s.
    pub start_unix_s: Option<f64>,
    /// The window's seconds it has results in: first and last.
    pub first_s: i64,
    /// Last second with results.
    pub last_s: i64,
    /// Its totals.
    pub totals: Totals,
    /// Seconds of the window in which it fell behind its own schedule.
    pub lagged_seconds: Vec<i64>,
    /// Why it did not trust its own measurement (empty: it did, or it does not say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// Why files cannot be merged (bad input, exit 2): the reason, one line.
pub type MergeError = String;

/// Joins `parts` (file name, its results bucketed from the same window start) into one.
/// One part is returned as it is, with no generator list.
pub fn merge(
    parts: Vec<(String, LoadResults)>,
) -> Result<(LoadResults, Vec<GeneratorPart>), MergeError> {
    if parts.len() <= 1 {
        return parts
            .into_iter()
            .next()
            .map(|(_, r)| (r, vec![]))
            .ok_or_else(|| "no results to merge".to_string());
    }
    let list = parts
        .iter()
        .map(|(name, r)| part_of(name, r))
        .collect::<Result<Vec<_>, _>>()?;
    overlap(&list)?;
    let rs: Vec<&LoadResults> = parts.iter().map(|(_, r)| r).collect();
    let (seconds, hists, every_p99) = sum_seconds(&rs);
    let columns = COLUMNS
        .iter()
        .filter(|c| rs.iter().all(|r| r.columns.contains(c)))
        .filter(|c| **c != "p99_us" || every_p99)
        .copied()
        .collect();
    // The whole run's p99, where every generator gave its latencies.
    let mut whole = BTreeMap::new();
    for r in &rs {
        match &r.all_hist {
            Some(h) => add(&mut whole, 0, h),
            None => {
                whole.clear();
                break;
            }
        }
    }
    let all_hist = whole.remove(&0);
    let mut lagged: Vec<i64> = rs.iter().flat_map(|r| r.lagged.iter().copied()).collect();
    lagged.sort_unstable();
    lagged.dedup();
    let merged = LoadResults {
        format: Format::Merged,
        seconds,
        columns,
        totals: totals_of(&rs, all_hist.as_ref()),
        origin: Origin::Window,
        start_unix_s: rs
            .iter()
            .map(|r| r.start_unix_s)
            .collect::<Option<Vec<f64>>>()
            .map(|s| s.into_iter().fold(f64::INFINITY, f64::min)),
        skipped_lines: rs.iter().map(|r| r.skipped_lines).sum(),
        hists,
        all_hist,
        lagged,
        problems: list
            .iter()
            .flat_map(|g| g.problems.iter().map(move |p| format!("{}: {p}", g.file)))
            .collect(),
    };
    Ok((merged, list))
}

/// One file's part, refused where it has no wall-clock times to be placed by.
fn part_of(name: &str, r: &LoadResults) -> Result<GeneratorPart, MergeError> {
    let (Origin::Window, Some(first), Some(last)) = (
        r.origin,
        r.seconds.keys().next().copied(),
        r.seconds.keys().next_back().copied(),
    ) else {
        return Err(format!(
            "{name}: {} has no wall-clock time per request or second; several generators' results are joined on wall-clock seconds (give per-request results: vegeta or k6 JSON lines, vegeta CSV, or trapdetect load JSON with window.start_unix_s)",
            r.format.describe()
        ));
    };
    Ok(GeneratorPart {
        file: name.to_string(),
        format: r.format,
        start_unix_s: r.start_unix_s,
        first_s: first,
        last_s: last,
        totals: r.totals.clone(),
        lagged_seconds: r.lagged.clone(),
        problems: r.problems.clone(),
    })
}

/// One run: some second in which every generator was sending.
fn overlap(list: &[GeneratorPart]) -> Result<(), MergeError> {
    let (Some(latest), Some(earliest_end)) = (
        list.iter().max_by_key(|g| g.first_s),
        list.iter().min_by_key(|g| g.last_s),
    ) else {
        return Ok(());
    };
    if latest.first_s > earliest_end.last_s {
        return Err(format!(
            "{} (seconds {}..{} of the window) and {} (seconds {}..{}) do not overlap: not one run",
            earliest_end.file,
            earliest_end.first_s,
            earliest_end.last_s,
            latest.file,
            latest.first_s,
            latest.last_s
        ));
    }
    Ok(())
}

/// The seconds summed, their latencies merged, each second's p99 read from them; and whether
/// every second with 2xx had every generator's latencies (else those seconds have no p99).
fn sum_seconds(
    rs: &[&LoadResults],
) -> (
    BTreeMap<i64, ResultSecond>,
    BTreeMap<i64, Histogram<u64>>,
    bool,
) {
    let mut seconds: BTreeMap<i64, ResultSecond> = BTreeMap::new();
    let mut hists: BTreeMap<i64, Histogram<u64>> = BTreeMap::new();
    // Seconds with 2xx whose latencies some generator gave only as a percentile.
    let mut no_hist: BTreeSet<i64> = BTreeSet::new();
    for r in rs {
        for (t, s) in &r.seconds {
            let m = seconds.entry(*t).or_default();
            m.offered = m.offered.saturating_add(s.offered);
            m.ok_2xx = m.ok_2xx.saturating_add(s.ok_2xx);
            m.non_2xx = m.non_2xx.saturating_add(s.non_2xx);
            m.errors = m.errors.saturating_add(s.errors);
            // Each one's highest: their sum bounds the second's highest from above.
            m.in_flight = m.in_flight.saturating_add(s.in_flight);
            match r.hists.get(t) {
                Some(h) => add(&mut hists, *t, h),
                None if s.ok_2xx > 0 => {
                    no_hist.insert(*t);
                }
                None => {}
            }
        }
    }
    for (t, s) in seconds.iter_mut() {
        s.p99_us = match hists.get(t) {
            Some(h) if !no_hist.contains(t) => Some(h.value_at_quantile(0.99) as f64),
            _ => None,
        };
    }
    (seconds, hists, no_hist.is_empty())
}

/// The generators' totals: counts summed (unknown where one does not say), the run from the
/// first one's start to the last one's end, the offered rates summed, the p99 from `all`.
fn totals_of(rs: &[&LoadResults], all: Option<&Histogram<u64>>) -> Totals {
    let sum = |f: fn(&Totals) -> Option<u64>| {
        rs.iter()
            .map(|r| f(&r.totals))
            .try_fold(0u64, |a, v| Some(a.saturating_add(v?)))
    };
    let spans: Option<Vec<(f64, f64)>> = rs
        .iter()
        .map(|r| Some((r.start_unix_s?, r.start_unix_s? + r.totals.duration_s?)))
        .collect();
    let duration_s = spans.and_then(|s| {
        let lo = s.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
        let hi = s.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        (hi > lo).then_some(hi - lo)
    });
    Totals {
        requests: sum(|t| t.requests),
        ok_2xx: sum(|t| t.ok_2xx),
        non_2xx: sum(|t| t.non_2xx),
        errors: sum(|t| t.errors),
        duration_s,
        offered_per_s: rs
            .iter()
            .map(|r| r.totals.offered_per_s)
            .try_fold(0.0, |a, v| Some(a + v?)),
        p99_us: all.map(|h| h.value_at_quantile(0.99) as f64),
    }
}

/// Adds `h` into the histogram at `t` (a copy of it where there is none yet).
fn add(hists: &mut BTreeMap<i64, Histogram<u64>>, t: i64, h: &Histogram<u64>) {
    match hists.get_mut(&t) {
        // Both were made with the same bounds (1 µs to an hour, 3 digits), their values
        // clamped into them when recorded: adding cannot fail.
        Some(into) => {
            let _ = into.add(h);
        }
        None => {
            hists.insert(t, h.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::external::parse;

    /// 2024-05-09T12:34:45Z, the window start the vegeta and k6 fixtures are written against.
    const W: f64 = 1_715_258_085.0;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/load_results")
            .join(name);
        std::fs::read_to_string(p).unwrap()
    }

    /// vegeta's 30 requests dealt to two runners by sequence number, as two hosts attacking
    /// together at 5/s each would record them.
    fn vegeta_halves() -> (String, String) {
        let (mut even, mut odd) = (String::new(), String::new());
        for (i, l) in fixture("vegeta-results.jsonl").lines().enumerate() {
            let half = if i % 2 == 0 { &mut even } else { &mut odd };
            half.push_str(l);
            half.push('\n');
        }
        (even, odd)
    }

    fn two(a: &str, b: &str) -> Result<(LoadResults, Vec<GeneratorPart>), MergeError> {
        merge(vec![
            ("a".into(), parse(a.as_bytes(), W).unwrap()),
            ("b".into(), parse(b.as_bytes(), W).unwrap()),
        ])
    }

    #[test]
    fn two_runners_of_one_run_merge_to_the_one_file() {
        let (even, odd) = vegeta_halves();
        let whole = parse(fixture("vegeta-results.jsonl").as_bytes(), W).unwrap();
        let (m, parts) = two(&even, &odd).unwrap();
        // Every count, every second's p99 (from the merged latencies), the totals: exactly
        // what one runner sending all 30 recorded.
        assert_eq!(m.seconds, whole.seconds);
        assert_eq!(m.totals, whole.totals);
        assert_eq!(m.columns, whole.columns);
        assert_eq!(m.format, Format::Merged);
        assert_eq!(m.start_unix_s, whole.start_unix_s);
        // Each half's part: 15 requests over seconds 0..3 (the 1 s request ends in second 3).
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].file, "a");
        assert_eq!(parts[0].totals.requests, Some(15));
        assert_eq!(parts[1].totals.requests, Some(15));
        assert_eq!(
            parts[0].totals.ok_2xx.unwrap() + parts[1].totals.ok_2xx.unwrap(),
            28
        );
        // The halves' own p99 differ from the merged one: percentiles are not averaged.
        let (a, b) = (parts[0].totals.p99_us, parts[1].totals.p99_us);
        assert_ne!(a, b);
    }

    #[test]
    fn two_tools_on_two_hosts_sum_second_by_second() {
        let vegeta = fixture("vegeta-results.jsonl");
        let k6 = fixture("k6-out.jsonl");
        let (v, k) = (
            parse(vegeta.as_bytes(), W).unwrap(),
            parse(k6.as_bytes(), W).unwrap(),
        );
        let (m, _) = two(&vegeta, &k6).unwrap();
        for (t, s) in &m.seconds {
            let (a, b) = (v.seconds.get(t), k.seconds.get(t));
            let sum = |f: fn(&ResultSecond) -> u64| a.map_or(0, f) + b.map_or(0, f);
            assert_eq!(s.offered, sum(|x| x.offered), "second {t}");
            assert_eq!(s.ok_2xx, sum(|x| x.ok_2xx), "second {t}");
            assert_eq!(s.non_2xx, sum(|x| x.non_2xx), "second {t}");
            assert_eq!(s.errors, sum(|x| x.errors), "second {t}");
        }
        assert_eq!(m.totals.requests, Some(40));
        assert_eq!(
            m.totals.ok_2xx,
            Some(v.totals.ok_2xx.unwrap() + k.totals.ok_2xx.unwrap())
        );
        assert_eq!(
            m.seconds.keys().collect::<Vec<_>>(),
            v.seconds
                .keys()
                .chain(k.seconds.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn files_without_wall_clock_times_or_apart_in_time_are_refused() {
        let vegeta = fixture("vegeta-results.jsonl");
        // A summary: totals only.
        let e = two(&vegeta, &fixture("wrk.txt")).unwrap_err();
        assert!(
            e.starts_with("b: wrk text summary has no wall-clock time"),
            "{e}"
        );
        // hey's CSV: offsets from its own start.
        let e = two(&fixture("hey-404.csv"), &vegeta).unwrap_err();
        assert!(
            e.starts_with("a: hey CSV results has no wall-clock time"),
            "{e}"
        );
        // The same run an hour later is not this one.
        let later = merge(vec![
            ("a".into(), parse(vegeta.as_bytes(), W).unwrap()),
            ("b".into(), parse(vegeta.as_bytes(), W - 3600.0).unwrap()),
        ])
        .unwrap_err();
        assert_eq!(
            later,
            "a (seconds 0..3 of the window) and b (seconds 3600..3603) do not overlap: not one run"
        );
        // One file is itself, no generator list.
        let (one, parts) = merge(vec![("a".into(), parse(vegeta.as_bytes(), W).unwrap())]).unwrap();
        assert_eq!(one.format, Format::VegetaJsonLines);
        assert!(parts.is_empty());
    }

    /// A trapdetect load JSON that says when its second 0 was (`window.start_unix_s`) is
    /// placed by it; its percentiles cannot be merged with another's, so the seconds both
    /// answered in have no p99; a second behind its schedule stays marked.
    #[test]
    fn load_jsons_are_placed_by_their_start_and_keep_their_lag() {
        // The fixture: 20 2xx a second for 3 s, its lag beyond the 10 ms budget in seconds 0
        // (19.7 ms) and 2 (39.7 ms).
        let mut v: serde_json::Value =
            serde_json::from_str(&fixture("trapdetect-load.json")).unwrap();
        v["window"]["start_unix_s"] = (W + 2.25).into();
        let a = serde_json::to_string(&v).unwrap();
        v["window"]["start_unix_s"] = (W + 3.0).into();
        for p in v["series"].as_array_mut().unwrap() {
            p["sched_lag_max_us"] = 0.into();
        }
        let b = serde_json::to_string(&v).unwrap();
        let ra = parse(a.as_bytes(), W).unwrap();
        assert_eq!(ra.origin, Origin::Window);
        assert_eq!(ra.start_unix_s, Some(W + 2.25));
        assert_eq!(ra.seconds.keys().copied().collect::<Vec<_>>(), [2, 3, 4]);
        assert_eq!(ra.lagged, [2, 4]);
        let (m, parts) = two(&a, &b).unwrap();
        let ok: Vec<(i64, u64, Option<f64>)> = m
            .seconds
            .iter()
            .map(|(t, s)| (*t, s.ok_2xx, s.p99_us))
            .collect();
        assert_eq!(
            ok,
            [(2, 20, None), (3, 40, None), (4, 40, None), (5, 20, None)]
        );
        assert!(!m.columns.contains(&"p99_us"));
        assert_eq!(m.lagged, [2, 4]);
        assert_eq!(parts[0].lagged_seconds, [2, 4]);
        assert!(parts[1].lagged_seconds.is_empty());
        assert_eq!(m.totals.offered_per_s, Some(40.0));
        // From the first one's start to the second one's end: 2.25 .. 6.0.
        assert_eq!(m.totals.duration_s, Some(3.75));
        assert_eq!(m.totals.p99_us, None);
        // The fixture's copy said it fell behind (untrusted): both copies here say so, each
        // named.
        assert_eq!(
            m.problems,
            [
                "a: the generator fell behind its schedule: scheduling lag p99 39715 µs > budget 10000 µs",
                "b: the generator fell behind its schedule: scheduling lag p99 39715 µs > budget 10000 µs"
            ]
        );
        // An older file (no start) cannot be placed beside another.
        let old = fixture("trapdetect-load.json");
        let e = two(&a, &old).unwrap_err();
        assert!(
            e.starts_with("b: trapdetect load JSON has no wall-clock time"),
            "{e}"
        );
    }

    /// Two copies (`--shard`) that kept each second's latencies as buckets: the second's p99
    /// is read from the 200 latencies together (99 at 10 ms and 1 at 50 ms from one, 100 at
    /// 20 ms from the other: 20 ms), not averaged from the copies' own (10 and 20 ms: 15).
    #[test]
    fn shards_with_buckets_merge_their_p99() {
        let mut v: serde_json::Value =
            serde_json::from_str(&fixture("trapdetect-load.json")).unwrap();
        v["window"]["start_unix_s"] = W.into();
        let one = |buckets: serde_json::Value| {
            let mut v = v.clone();
            let mut p = v["series"][0].clone();
            p["ok_2xx"] = 100.into();
            p["lat_2xx_hist_ns"] = buckets;
            v["series"] = serde_json::json!([p]);
            v.to_string()
        };
        let a = one(serde_json::json!([[10_000_000, 99], [50_000_000, 1]]));
        let b = one(serde_json::json!([[20_000_000, 100]]));
        let (m, _) = two(&a, &b).unwrap();
        let p99 = m.seconds[&0].p99_us.unwrap();
        assert!((p99 - 20_000.0).abs() <= 20.0, "{p99}");
        assert!(m.columns.contains(&"p99_us"));
        let whole = m.totals.p99_us.unwrap();
        assert!((whole - 20_000.0).abs() <= 20.0, "{whole}");
        // The first one's own second: 10 ms.
        let pa = parse(a.as_bytes(), W).unwrap();
        let own = pa.hists[&0].value_at_quantile(0.99) as f64;
        assert!((own - 10_000.0).abs() <= 10.0, "{own}");
        // Without buckets in one of them: no p99 for the second they share.
        let (m, _) = two(&a, &one(serde_json::Value::Null)).unwrap();
        assert_eq!(m.seconds[&0].p99_us, None);
        assert_eq!(m.totals.p99_us, None);
    }
}
