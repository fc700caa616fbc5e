//! The directory probe judged (issue 23): fs.dir-slow for a run directory and the measured
//! severity of fs.cwd-slow, from what an operation costs there beside the same operation on a
//! local reference directory in the same run (`host::dirprobe`), instead of a guess from the
//! mount's type.
//!
//! When a cost is material, derived (not fitted): a benchmark request is taken as
//! [`REQUEST_US`] of server time (1,000 requests/s per worker: a small dynamic page), and a
//! filesystem may cost it at most [`SHARE`] of that before the run measures the filesystem
//! rather than the server (the same 10 % bound `trace` holds a measured walk to). A request
//! pays path lookups on every request whatever the application ([`LOOKUPS_PER_REQUEST`]: PHP's
//! chdir back through a cwd 7 levels deep is 7, plus the script and its includes), so
//! a lookup's excess over local of more than 100 µs ÷ 10 = 10 µs fails. The excess is the
//! directory's median beyond the local reference's 99th percentile (its spread), so that the
//! noise of a few samples (fsync on a shared disk varies tenfold) is not called a difference. Opens, reads,
//! listings and durable writes happen per request only in some applications (a static file, a
//! script without opcache, a session file), once each ([`OTHER_PER_REQUEST`]): their excess
//! beyond 100 µs is a warning, with the figure. Either must also be at least [`RATIO`] × the
//! local cost, so that on a machine where everything is slow at this moment (a loaded VM)
//! the filesystem is blamed only for the part that is its own.

use serde_json::json;

use super::{Finding, Id, Severity, fs::mount_evidence, fs_static::static_severity};
use crate::{
    escape,
    host::{
        dirprobe::{DirProbe, Op},
        mounts::{Mount, MountTable},
    },
};

/// The reference request's server time, µs.
pub const REQUEST_US: f64 = 1000.0;
/// The share of it a filesystem may take.
pub const SHARE: f64 = 0.10;
/// Path lookups a request makes in the directory, whatever the application.
pub const LOOKUPS_PER_REQUEST: f64 = 10.0;
/// Opens, listings or durable writes per request, for the applications that make them.
pub const OTHER_PER_REQUEST: f64 = 1.0;
/// The directory's cost must be at least this many times the local one.
pub const RATIO: f64 = 2.0;

/// The excess over local a lookup may have, µs (10 µs).
pub fn lookup_floor_us() -> f64 {
    REQUEST_US * SHARE / LOOKUPS_PER_REQUEST
}

/// The excess over local any other operation may have, µs (100 µs).
pub fn other_floor_us() -> f64 {
    REQUEST_US * SHARE / OTHER_PER_REQUEST
}

/// One operation of the probe beside its local reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The operation.
    pub op: Op,
    /// Samples in the directory.
    pub n: usize,
    /// Median there, µs.
    pub p50_us: f64,
    /// 99th percentile there, µs.
    pub p99_us: f64,
    /// Median on the local reference, µs.
    pub local_p50_us: Option<f64>,
    /// 99th percentile on the local reference, µs.
    pub local_p99_us: Option<f64>,
    /// p50 ÷ local p50.
    pub slower_x: Option<f64>,
    /// p50 − local p99 (beyond anything the local reference showed), µs.
    pub excess_us: Option<f64>,
    /// Past the floor and the ratio (a verdict operation only; cold stats are shown).
    pub material: bool,
}

/// The probe's rows, each judged.
pub fn rows(p: &DirProbe) -> Vec<Row> {
    let r2 = |v: f64| crate::figures::round(v, 2);
    p.measured
        .ops
        .iter()
        .map(|m| {
            let local = p.reference.get(m.op);
            let slower_x = local.map(|l| r2(m.p50_us / l.p50_us.max(0.1)));
            // Beyond the local spread, not only its median: a disk's fsync varies tenfold
            // from one call to the next on a shared VM, and a handful of samples each side
            // would otherwise call two runs of the same disk different.
            let excess_us = local.map(|l| crate::figures::round(m.p50_us - l.p99_us, 1));
            let floor = match m.op {
                Op::StatCold => None,
                Op::StatRepeated => Some(lookup_floor_us()),
                _ => Some(other_floor_us()),
            };
            let material = match (floor, excess_us, slower_x) {
                (Some(f), Some(e), Some(x)) => e >= f && x >= RATIO,
                _ => false,
            };
            Row {
                op: m.op,
                n: m.n,
                p50_us: m.p50_us,
                p99_us: m.p99_us,
                local_p50_us: local.map(|l| l.p50_us),
                local_p99_us: local.map(|l| l.p99_us),
                slower_x,
                excess_us,
                material,
            }
        })
        .collect()
}

/// The rows as JSON (the `probe` evidence and the `dir_probe` section).
pub fn rows_json(rows: &[Row]) -> serde_json::Value {
    json!(
        rows.iter()
            .map(|r| json!({
                "op": r.op,
                "operation": r.op.name(),
                "n": r.n,
                "p50_us": r.p50_us,
                "p99_us": r.p99_us,
                "local_p50_us": r.local_p50_us,
                "local_p99_us": r.local_p99_us,
                "slower_x": r.slower_x,
                "excess_us": r.excess_us,
                "material": r.material,
            }))
            .collect::<Vec<_>>()
    )
}

/// The probe as a text table ("× slower than local").
pub fn table(p: &DirProbe, rows: &[Row]) -> String {
    let notes: Vec<String> = p
        .measured
        .notes
        .iter()
        .chain(&p.reference.notes)
        .cloned()
        .collect();
    table_of(
        (&p.dir, p.elapsed_ms, p.reference_dir.as_deref()),
        p.error.as_deref(),
        rows,
        &notes,
    )
}

/// The table from its parts (a saved report's `dir_probe` section prints through here too):
/// the directory, the probe's wall time (ms) and where the reference was made.
pub fn table_of(
    (dir, elapsed_ms, reference_dir): (&str, f64, Option<&str>),
    error: Option<&str>,
    rows: &[Row],
    notes: &[String],
) -> String {
    let mut s = format!(
        "  dir probe {} ({} ms; local reference in {})\n",
        dir,
        elapsed_ms,
        reference_dir.unwrap_or("-")
    );
    if let Some(e) = error {
        s.push_str(&format!("    not measured: {e}\n"));
        return s;
    }
    let f = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
    s.push_str(&format!(
        "    {:<26} {:>4} {:>10} {:>10} {:>10} {:>10} {:>9}\n",
        "operation", "n", "p50 µs", "p99 µs", "local p50", "local p99", "× local"
    ));
    for r in rows {
        s.push_str(&format!(
            "    {:<26} {:>4} {:>10.1} {:>10.1} {:>10} {:>10} {:>9}{}\n",
            r.op.name(),
            r.n,
            r.p50_us,
            r.p99_us,
            f(r.local_p50_us),
            f(r.local_p99_us),
            match r.slower_x {
                Some(x) if x < 0.1 => "<0.1×".to_string(),
                Some(x) => format!("{x:.1}×"),
                None => "-".into(),
            },
            if r.material { "  material" } else { "" }
        ));
    }
    for n in notes {
        s.push_str(&format!("    note: {n}\n"));
    }
    s
}

/// What the rows say, for a title and the severity.
struct Verdict {
    severity: Option<Severity>,
    because: String,
    summary: String,
}

fn verdict(m: Option<&Mount>, rows: &[Row], error: Option<&str>) -> Verdict {
    let slow_kind = m.and_then(|m| m.slow_kind());
    if let Some(e) = error {
        let (severity, why) = match m.filter(|m| m.slow_kind().is_some()) {
            Some(m) => {
                let (s, w) = static_severity(m);
                (
                    Some(s),
                    format!("not measured ({e}); by the mount's type: {w}"),
                )
            }
            None => (None, format!("not measured ({e})")),
        };
        return Verdict {
            severity,
            because: why,
            summary: format!("not measured: {e}"),
        };
    }
    let lookup = rows.iter().find(|r| r.op == Op::StatRepeated);
    let others: Vec<&Row> = rows
        .iter()
        .filter(|r| r.material && r.op != Op::StatRepeated)
        .collect();
    let lookup_text = lookup
        .map(|r| {
            format!(
                "a lookup costs {:.1} µs, {:.1}× local ({:.1} µs)",
                r.p50_us,
                r.slower_x.unwrap_or(0.0),
                r.local_p50_us.unwrap_or(0.0)
            )
        })
        .unwrap_or_else(|| "lookups not measured".into());
    let others_text = others
        .iter()
        .map(|r| {
            format!(
                "{} {:.0} µs ({:.0}× local)",
                r.op.name(),
                r.p50_us,
                r.slower_x.unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    if m.is_some_and(|m| m.is_drvfs()) {
        return Verdict {
            severity: Some(Severity::Fail),
            because: "WSL2 DrvFs is one shared, serialized resource whatever one thread measures (the seed measured ~20,000 lookups/s for the whole machine)".into(),
            summary: lookup_text,
        };
    }
    if let Some(r) = lookup.filter(|r| r.material) {
        let loss_us = r.excess_us.unwrap_or(0.0) * LOOKUPS_PER_REQUEST;
        return Verdict {
            severity: Some(Severity::Fail),
            because: format!(
                "a lookup's excess over local ({:.1} µs) is at least {:.0} µs and {RATIO}× local: a request making {LOOKUPS_PER_REQUEST:.0} lookups there loses {:.0} µs, more than {:.0} % of a {:.0} µs request",
                r.excess_us.unwrap_or(0.0),
                lookup_floor_us(),
                loss_us,
                SHARE * 100.0,
                REQUEST_US
            ),
            summary: if others.is_empty() {
                lookup_text
            } else {
                format!("{lookup_text}; {others_text}")
            },
        };
    }
    if !others.is_empty() {
        return Verdict {
            severity: Some(Severity::Warn),
            because: format!(
                "lookups are answered at local speed, but {others_text} exceed local by {:.0} µs or more: a request that makes one of them there loses more than {:.0} % of a {:.0} µs request (only applications that do so per request pay it)",
                other_floor_us(),
                SHARE * 100.0,
                REQUEST_US
            ),
            summary: format!("{lookup_text}; {others_text}"),
        };
    }
    Verdict {
        severity: slow_kind.map(|_| Severity::Info),
        because: "every operation measured within the floors: the kernel answers this mount from its cache (its cost is shown, not judged material)".into(),
        summary: lookup_text,
    }
}

/// fs.dir-slow from the probe of a `--dir`: fail when its lookups are material, warn when only
/// other operations are, info (figures shown) for a slow kind of mount the kernel answers
/// from its cache, nothing for a local directory within the floors.
pub fn dir(t: &MountTable, dir: &[u8], p: &DirProbe) -> Option<Finding> {
    let (m, depth) = match t.depth_below_mount(dir) {
        Some((i, depth)) => (Some(&t.mounts[i]), depth),
        None => (None, 0),
    };
    let rows = rows(p);
    let v = verdict(m, &rows, p.error.as_deref());
    let severity = v.severity?;
    let kind = m
        .and_then(|m| m.slow_kind())
        .map(|k| k.describe().to_string())
        .or_else(|| m.map(|m| escape::text(&m.fs_type)))
        .unwrap_or_else(|| "?".into());
    let mut f = Finding::new(
        Id::FsDirSlow,
        severity,
        format!("--dir {} on {kind}: {}", escape::bytes(dir), v.summary),
    )
    .with("dir", escape::bytes(dir))
    .with("depth_below_mount", depth as u64)
    .with("severity_because", v.because)
    .with("probe", rows_json(&rows))
    .with("probe_ms", p.elapsed_ms)
    .with_opt("probe_error", p.error.clone())
    .with_opt("reference_dir", p.reference_dir.clone())
    .with("lookup_floor_us", lookup_floor_us())
    .with("other_floor_us", other_floor_us())
    .with("ratio_floor", RATIO)
    .with_opt(
        "lookup_excess_us",
        rows.iter()
            .find(|r| r.op == Op::StatRepeated)
            .and_then(|r| r.excess_us),
    );
    if let Some(m) = m {
        f = mount_evidence(f, m);
    }
    let remedy = match (severity, m) {
        (Severity::Info, _) => "nothing to do while the mount keeps caching (its TTLs); compare runs only with the same mount options".to_string(),
        (_, Some(m)) => format!(
            "use a run directory on a local filesystem; in the harness: case \"$RUN\" in {}/*) echo \"RUN is on {}\" >&2; exit 1 ;; esac",
            escape::shell(&m.mount_point_display()),
            escape::text(&m.fs_type)
        ),
        (_, None) => "use a run directory on a local filesystem".to_string(),
    };
    Some(
        f.predict(format!(
            "per request: {LOOKUPS_PER_REQUEST:.0} lookups and one of each other operation cost {:.0} µs more than on the local reference",
            rows.iter()
                .filter(|r| r.op != Op::StatCold)
                .map(|r| r.excess_us.unwrap_or(0.0).max(0.0)
                    * if r.op == Op::StatRepeated { LOOKUPS_PER_REQUEST } else { OTHER_PER_REQUEST })
                .sum::<f64>()
        ))
        .remedy(remedy),
    )
}

/// fs.cwd-slow with the probe of the working directory (read-only: nothing is written in a
/// server's directory): the static finding's facts, with the severity the measurement gives
/// (fail when lookups are material, since the walk back to the cwd is lookups; information
/// when the kernel answers from its cache). Without a measurement the static one stands.
pub fn cwd(
    static_finding: Option<Finding>,
    p: Option<&DirProbe>,
    m: Option<&Mount>,
) -> Option<Finding> {
    let mut f = static_finding?;
    let Some(p) = p else {
        return Some(f);
    };
    let rows = rows(p);
    let v = verdict(m, &rows, p.error.as_deref());
    if let Some(s) = v.severity {
        f.severity = s;
    }
    f.title = format!("{}: {}", f.title, v.summary);
    Some(
        f.with("severity_because", v.because)
            .with("probe", rows_json(&rows))
            .with("probe_ms", p.elapsed_ms)
            .with_opt("probe_error", p.error.clone())
            .with("lookup_floor_us", lookup_floor_us())
            .with_opt(
                "lookup_excess_us",
                rows.iter()
                    .find(|r| r.op == Op::StatRepeated)
                    .and_then(|r| r.excess_us),
            ),
    )
}

/// fs.hot-path-slow with the probes of the directories the files live in (read-only): fail
/// when a lookup in one of them is material (the files are used per request: each open or
/// stat walks to them), the static warning otherwise. `probes`: (mount point shown, probe).
pub fn hot_path(mut f: Finding, probes: &[(String, DirProbe)]) -> Finding {
    let mp = f
        .evidence
        .get("mount_point")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    let mine: Vec<&DirProbe> = probes
        .iter()
        .filter(|(m, p)| *m == mp && p.error.is_none())
        .map(|(_, p)| p)
        .collect();
    if mine.is_empty() {
        return f;
    }
    let judged: Vec<(&DirProbe, Vec<Row>)> = mine.iter().map(|p| (*p, rows(p))).collect();
    let worst = judged
        .iter()
        .filter_map(|(p, r)| {
            r.iter()
                .find(|r| r.op == Op::StatRepeated)
                .map(|r| (p.dir.clone(), r.clone()))
        })
        .max_by(|a, b| a.1.p50_us.total_cmp(&b.1.p50_us));
    if let Some((dir, r)) = &worst {
        if r.material {
            f.severity = Severity::Fail;
        }
        f.title = format!(
            "{}: a lookup in {dir} costs {:.1} µs, {:.1}× local",
            f.title,
            r.p50_us,
            r.slower_x.unwrap_or(0.0)
        );
        f = f
            .with_opt("lookup_excess_us", r.excess_us)
            .with("lookup_floor_us", lookup_floor_us());
    }
    f.with(
        "probes",
        json!(
            judged
                .iter()
                .map(|(p, r)| json!({"dir": p.dir, "ops": rows_json(r)}))
                .collect::<Vec<_>>()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::dirprobe::{OpTimes, Side};

    fn side(v: &[(Op, f64)]) -> Side {
        Side {
            ops: v
                .iter()
                .map(|&(op, us)| OpTimes {
                    op,
                    n: 50,
                    p50_us: us,
                    p99_us: us * 1.5,
                })
                .collect(),
            notes: vec![],
            wrote: false,
        }
    }

    fn probe(measured: &[(Op, f64)], local: &[(Op, f64)]) -> DirProbe {
        DirProbe {
            dir: "/mnt/x/run".into(),
            measured: side(measured),
            reference: side(local),
            reference_dir: Some("/var/tmp".into()),
            elapsed_ms: 80.0,
            error: None,
        }
    }

    fn table_fuse() -> MountTable {
        MountTable::parse(
            "22 1 0:21 / / rw - ext4 /dev/vda1 rw\n90 22 0:60 / /mnt/x rw,nosuid - fuse.slowfs slowfs rw\n",
        )
        .unwrap()
    }

    const LOCAL: &[(Op, f64)] = &[
        (Op::StatCold, 3.0),
        (Op::StatRepeated, 1.5),
        (Op::OpenReadClose, 6.0),
        (Op::Readdir, 5.0),
    ];

    #[test]
    fn floors_are_derived_from_the_reference_request() {
        assert_eq!(lookup_floor_us(), 10.0);
        assert_eq!(other_floor_us(), 100.0);
    }

    #[test]
    fn uncached_fuse_at_200_us_fails_on_lookups() {
        let p = probe(
            &[
                (Op::StatCold, 420.0),
                (Op::StatRepeated, 410.0),
                (Op::OpenReadClose, 830.0),
                (Op::Readdir, 620.0),
            ],
            LOCAL,
        );
        let f = dir(&table_fuse(), b"/mnt/x/run", &p).unwrap();
        assert_eq!(f.id, "fs.dir-slow");
        assert_eq!(f.severity, Severity::Fail);
        assert_eq!(
            f.title,
            "--dir /mnt/x/run on FUSE (a user-space filesystem): a lookup costs 410.0 µs, 273.3× local (1.5 µs); open+read+close 830 µs (138× local), readdir 620 µs (124× local)"
        );
        // 410 µs beyond the local p99 (2.25 µs).
        assert_eq!(f.evidence["lookup_excess_us"], 407.8);
        assert_eq!(f.evidence["depth_below_mount"], 1);
        assert_eq!(f.evidence["fs_type"], "fuse.slowfs");
        let rows = f.evidence["probe"].as_array().unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0]["operation"], "stat (cold)");
        assert_eq!(
            rows[0]["material"], false,
            "cold stats are shown, not judged"
        );
        assert_eq!(rows[1]["material"], true);
        assert!(
            f.evidence["severity_because"]
                .as_str()
                .unwrap()
                .contains("loses 4078 µs")
        );
        assert!(f.remedy.contains("case \"$RUN\" in /mnt/x/*)"));
    }

    #[test]
    fn cached_fuse_warns_on_opens_only_and_passes_lookups() {
        let p = probe(
            &[
                (Op::StatCold, 230.0),
                (Op::StatRepeated, 1.7),
                (Op::OpenReadClose, 420.0),
                (Op::Readdir, 7.0),
            ],
            LOCAL,
        );
        let f = dir(&table_fuse(), b"/mnt/x/run", &p).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(
            f.title.ends_with("open+read+close 420 µs (70× local)"),
            "{}",
            f.title
        );
        // Everything at local speed on a FUSE mount: information, with the figures.
        let p = probe(
            &[
                (Op::StatCold, 4.0),
                (Op::StatRepeated, 1.6),
                (Op::Readdir, 6.0),
            ],
            LOCAL,
        );
        let f = dir(&table_fuse(), b"/mnt/x/run", &p).unwrap();
        assert_eq!(f.severity, Severity::Info);
    }

    #[test]
    fn the_ratio_keeps_a_uniformly_slow_machine_from_blaming_the_directory() {
        // Everything took 25 µs per lookup at this moment, local included.
        let slow_local: Vec<(Op, f64)> = LOCAL.iter().map(|&(o, v)| (o, v * 15.0)).collect();
        let p = probe(
            &[(Op::StatRepeated, 40.0), (Op::Readdir, 80.0)],
            &slow_local,
        );
        let f = dir(&table_fuse(), b"/mnt/x/run", &p).unwrap();
        assert_eq!(f.severity, Severity::Info, "{}", f.title);
        // A local directory within the floors: no finding at all.
        assert!(dir(&table_fuse(), b"/srv/run", &probe(LOCAL, LOCAL)).is_none());
    }

    #[test]
    fn an_unmeasured_slow_mount_falls_back_to_its_type() {
        let mut p = probe(&[], LOCAL);
        p.error = Some("/mnt/x/run did not answer within 2 s".into());
        let f = dir(&table_fuse(), b"/mnt/x/run", &p).unwrap();
        assert_eq!(f.severity, Severity::Warn);
        assert!(f.title.contains("not measured"), "{}", f.title);
        assert!(dir(&table_fuse(), b"/srv/run", &p).is_none());
    }

    #[test]
    fn a_measured_cwd_takes_the_measured_severity() {
        let t = table_fuse();
        let m = &t.mounts[t.mount_of(b"/mnt/x/run").unwrap()];
        let stat = || crate::traps::fs_static::cwd(&t, 42, b"/mnt/x/run", "( cd /srv && exec x )");
        assert_eq!(stat().unwrap().severity, Severity::Warn);
        let slow = probe(&[(Op::StatRepeated, 410.0)], LOCAL);
        let f = cwd(stat(), Some(&slow), Some(m)).unwrap();
        assert_eq!(f.severity, Severity::Fail);
        assert!(
            f.title
                .ends_with("a lookup costs 410.0 µs, 273.3× local (1.5 µs)"),
            "{}",
            f.title
        );
        assert_eq!(f.remedy, "( cd /srv && exec x )");
        let cached = probe(&[(Op::StatRepeated, 1.4)], LOCAL);
        assert_eq!(
            cwd(stat(), Some(&cached), Some(m)).unwrap().severity,
            Severity::Info
        );
        assert_eq!(cwd(stat(), None, Some(m)).unwrap().severity, Severity::Warn);
        assert!(cwd(None, Some(&slow), Some(m)).is_none());
    }

    #[test]
    fn hot_paths_fail_when_their_directory_lookups_are_material() {
        let t = table_fuse();
        let open = vec![b"/mnt/x/www/index.php".to_vec()];
        let stat = || crate::traps::fs_static::hot_paths(&t, 9, None, &open).remove(0);
        assert_eq!(stat().severity, Severity::Warn);
        let mut slow = probe(&[(Op::StatRepeated, 410.0)], LOCAL);
        slow.dir = "/mnt/x/www".into();
        let f = hot_path(stat(), &[("/mnt/x".into(), slow.clone())]);
        assert_eq!(f.severity, Severity::Fail);
        assert!(
            f.title
                .ends_with("a lookup in /mnt/x/www costs 410.0 µs, 273.3× local"),
            "{}",
            f.title
        );
        let cached = probe(&[(Op::StatRepeated, 1.4)], LOCAL);
        assert_eq!(
            hot_path(stat(), &[("/mnt/x".into(), cached)]).severity,
            Severity::Warn
        );
        // A probe of another mount says nothing about this one.
        assert_eq!(
            hot_path(stat(), &[("/mnt/y".into(), slow)]).severity,
            Severity::Warn
        );
    }

    #[test]
    fn the_table_names_each_operation_and_its_ratio() {
        let p = probe(&[(Op::StatRepeated, 410.0)], LOCAL);
        let t = table(&p, &rows(&p));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("  dir probe /mnt/x/run (80 ms"), "{t}");
        assert!(lines[1].contains("× local"), "{t}");
        assert!(lines[2].contains("stat (repeated)"), "{t}");
        assert!(lines[2].contains("273.3×  material"), "{t}");
    }
}

#[cfg(test)]
mod noise {
    use super::*;
    use crate::host::dirprobe::{OpTimes, Side};

    #[test]
    fn a_median_inside_the_local_spread_is_not_material() {
        // Recorded here: fsync on the same ext4 disk, 3 samples a side, medians 4.4 ms and
        // 0.5 ms, the reference's worst 9.1 ms.
        let side = |p50, p99| Side {
            ops: vec![OpTimes {
                op: Op::CreateWriteFsyncUnlink,
                n: 3,
                p50_us: p50,
                p99_us: p99,
            }],
            notes: vec![],
            wrote: true,
        };
        let p = DirProbe {
            dir: "/tmp/x".into(),
            measured: side(4416.7, 4801.0),
            reference: side(512.1, 9100.0),
            ..Default::default()
        };
        let r = rows(&p);
        assert_eq!(r[0].slower_x, Some(8.62));
        assert!(!r[0].material);
        let p = DirProbe {
            reference: side(512.1, 600.0),
            ..p
        };
        assert!(rows(&p)[0].material);
    }
}
