//! Exports for the tools benchmarkers already use, made from the JSON document (so a saved
//! report exports the same way): HdrHistogram's `.hgrm` percentile format (wrk2, the HdrHistogram
//! plotter), the per-second series as CSV, and OpenMetrics text for node_exporter's textfile
//! collector (Prometheus/Grafana).

use std::{fmt::Write as _, path::PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// Export flags shared by every command that writes a report.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ExportArgs {
    /// Write the per-second series (load and network) as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write findings, per-request kernel figures and load summaries as OpenMetrics text to
    /// FILE (for node_exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
    /// Write the 2xx latency distribution in HdrHistogram's .hgrm format to FILE (non-2xx, when
    /// there were any, to FILE with `.non_2xx` before its extension).
    #[arg(long, value_name = "FILE")]
    pub hgrm: Option<PathBuf>,
}

impl ExportArgs {
    /// The output paths asked for, with their flags, for `output::check_all` before a run.
    pub fn paths(&self) -> [(&'static str, Option<&std::path::Path>); 3] {
        [
            ("--csv", self.csv.as_deref()),
            ("--openmetrics", self.openmetrics.as_deref()),
            ("--hgrm", self.hgrm.as_deref()),
        ]
    }

    /// Writes every export asked for.
    pub fn write(&self, doc: &Value) -> Result<()> {
        if let Some(p) = &self.csv {
            crate::output::write("--csv", p, csv(doc).as_bytes())?;
        }
        if let Some(p) = &self.openmetrics {
            crate::output::write("--openmetrics", p, openmetrics(doc).as_bytes())?;
        }
        if let Some(p) = &self.hgrm {
            let dists = distributions(doc);
            if dists.is_empty() {
                return Err(Error::usage(format!(
                    "--hgrm {}: this report has no latency distribution (only `load` and traces with --rate have one)",
                    p.display()
                )));
            }
            for (class, d) in dists {
                let path = if class == "2xx" {
                    p.clone()
                } else {
                    let stem = p
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let ext = p
                        .extension()
                        .map(|e| format!(".{}", e.to_string_lossy()))
                        .unwrap_or_default();
                    p.with_file_name(format!("{stem}.{class}{ext}"))
                };
                crate::output::write("--hgrm", &path, hgrm(d).as_bytes())?;
            }
        }
        Ok(())
    }
}

/// The load summary in a document: the document itself (`load`) or its `load` section.
pub fn load_of(doc: &Value) -> Option<&Value> {
    if doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.load"))
    {
        Some(doc)
    } else {
        doc.get("load").filter(|l| l.is_object())
    }
}

/// Latency distributions present, by class (`2xx`, `non_2xx`).
pub fn distributions(doc: &Value) -> Vec<(&'static str, &Value)> {
    let Some(l) = load_of(doc) else {
        return vec![];
    };
    ["2xx", "non_2xx"]
        .into_iter()
        .filter_map(|c| {
            let d = &l["latency_histograms"][c];
            d["steps"]
                .as_array()
                .filter(|s| !s.is_empty())
                .map(|_| (c, d))
        })
        .collect()
}

/// A distribution in HdrHistogram's percentile format, values in milliseconds as wrk2 prints
/// them.
pub fn hgrm(d: &Value) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    for s in d["steps"].as_array().into_iter().flatten() {
        let (v, p, n) = (
            s[0].as_f64().unwrap_or(0.0) / 1e3,
            s[1].as_f64().unwrap_or(0.0),
            s[2].as_f64().unwrap_or(0.0) as u64,
        );
        if p < 1.0 {
            let _ = writeln!(o, "{v:12.3} {p:2.12} {n:10} {:14.2}", 1.0 / (1.0 - p));
        } else {
            let _ = writeln!(o, "{v:12.3} {p:2.12} {n:10}");
        }
    }
    let ms = |k: &str| d[k].as_f64().unwrap_or(0.0) / 1e3;
    let _ = writeln!(
        o,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        ms("mean_us"),
        ms("stdev_us")
    );
    let _ = writeln!(
        o,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        ms("max_us"),
        d["count"].as_u64().unwrap_or(0)
    );
    o
}

/// Per-second rows: `(column prefix, rows)` of the load series and the traced network series.
/// One second's columns, `(name, cell)`.
type Row = Vec<(String, String)>;

fn series(doc: &Value) -> Vec<(&'static str, Vec<Row>)> {
    let mut out = vec![];
    let is_load = doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.load"));
    if let Some(l) = load_of(doc) {
        let rows = l["series"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                let mut cols = vec![];
                flatten("", p, &mut cols);
                cols.retain(|(k, _)| k != "t_s");
                let errors: f64 = p["errors"]
                    .as_object()
                    .map(|m| m.values().filter_map(Value::as_f64).sum())
                    .unwrap_or(0.0);
                cols.push(("errors_total".into(), errors.to_string()));
                cols
            })
            .collect();
        out.push((if is_load { "" } else { "load_" }, rows));
    }
    if let Some(t) = doc.pointer("/network/traced").filter(|t| t.is_object()) {
        let keys = [
            "new_connections_per_s",
            "time_wait_entered_per_s",
            "listen_overflows_per_s",
            "listen_drops_per_s",
        ];
        let n = keys
            .iter()
            .filter_map(|k| t[k].as_array())
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        let rows = (0..n)
            .map(|i| {
                keys.iter()
                    .map(|k| (k.trim_end_matches("_per_s").to_string(), num(&t[k][i])))
                    .collect()
            })
            .collect();
        out.push(("net_", rows));
    }
    out
}

fn num(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => out.push((prefix.to_string(), num(other))),
    }
}

/// The per-second series as CSV: `t_s` then each series' columns (a trace's load columns are
/// prefixed `load_`, its network ones `net_`); empty cells where a series has no such second.
pub fn csv(doc: &Value) -> String {
    let all = series(doc);
    let mut header = vec!["t_s".to_string()];
    for (prefix, rows) in &all {
        if let Some(first) = rows.first() {
            header.extend(first.iter().map(|(k, _)| format!("{prefix}{k}")));
        }
    }
    let n = all.iter().map(|(_, r)| r.len()).max().unwrap_or(0);
    let mut o = header.join(",") + "\n";
    for i in 0..n {
        let mut cells = vec![i.to_string()];
        for (_, rows) in &all {
            let width = rows.first().map(Vec::len).unwrap_or(0);
            match rows.get(i) {
                Some(r) => cells.extend(r.iter().map(|(_, v)| v.clone())),
                None => cells.extend(std::iter::repeat_n(String::new(), width)),
            }
        }
        o.push_str(&cells.join(","));
        o.push('\n');
    }
    o
}

/// Escapes a label value for OpenMetrics (backslash, double quote, newline).
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One OpenMetrics family: gauges, or a histogram's buckets, by their labels ([`Kind`]).
pub struct Family {
    /// How its samples are typed.
    pub kind: Kind,
    /// The metric's name.
    pub name: &'static str,
    /// Its HELP text.
    pub help: &'static str,
    /// Each sample's labels and value.
    pub samples: Vec<(Labels, f64)>,
}

/// How a family's samples are typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One value per label set.
    Gauge,
    /// A histogram: each sample a cumulative bucket, `le` its last label (`+Inf` the last),
    /// written `NAME_bucket`. Of the window (read them with `histogram_quantile`, not `rate`):
    /// OpenMetrics' `gaugehistogram` says that, but the classic text format node_exporter's
    /// textfile collector parses has no such type.
    Histogram,
}

impl Family {
    /// The series name each sample is written under.
    pub fn series_name(&self) -> String {
        match self.kind {
            Kind::Gauge => self.name.to_string(),
            Kind::Histogram => format!("{}_bucket", self.name),
        }
    }
}

/// Findings (one gauge per finding, labelled by id and severity), the verdict, per-request
/// kernel figures and the load summary as OpenMetrics text. Every sample carries the command;
/// node_exporter adds the host.
pub fn openmetrics(doc: &Value) -> String {
    let is_load = doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.load"));
    let command = if is_load {
        "load".to_string()
    } else {
        doc["command"].as_str().unwrap_or("report").to_string()
    };
    write_families(&families(doc, &vec![("command", command)]))
}

/// The families [`openmetrics`] writes, every sample labelled with `base` first.
pub fn families(doc: &Value, base: &Labels) -> Vec<Family> {
    let mut fams = vec![];
    verdict_families(doc, base, &mut fams);
    fs_families(doc, base, &mut fams);
    threads_families(doc, base, &mut fams);
    if let Some(l) = load_of(doc) {
        load_families(l, base, &mut fams);
    }
    fams
}

/// Labels every sample carries.
pub type Labels = Vec<(&'static str, String)>;

/// The findings, the exit code and whether the figures are trusted.
fn verdict_families(doc: &Value, base: &Labels, fams: &mut Vec<Family>) {
    let base = || base.clone();
    let mut f = Family {
        kind: Kind::Gauge,
        name: "trapdetect_finding",
        help: "A trap the run found (1 per finding), by id and severity.",
        samples: vec![],
    };
    for x in doc["findings"].as_array().into_iter().flatten() {
        let mut l = base();
        l.push(("id", x["id"].as_str().unwrap_or("").to_string()));
        l.push(("severity", x["severity"].as_str().unwrap_or("").to_string()));
        f.samples.push((l, 1.0));
    }
    fams.push(f);
    fams.push(Family {
        kind: Kind::Gauge,
        name: "trapdetect_exit_code",
        help: "The run's exit code (0 ok, 1 fail finding, 3 untrusted).",
        samples: vec![(base(), doc["exit_code"].as_f64().unwrap_or(0.0))],
    });
    fams.push(Family {
        kind: Kind::Gauge,
        name: "trapdetect_measurement_trusted",
        help: "1 when the run's figures can be trusted.",
        samples: vec![(
            base(),
            if doc["measurement"]["trusted"] == Value::Bool(false) {
                0.0
            } else {
                1.0
            },
        )],
    });
}

/// Per filesystem: lookups and syscall time per request; per syscall: calls per request.
fn fs_families(doc: &Value, base: &Labels, fams: &mut Vec<Family>) {
    let base = || base.clone();
    let fs_labels = |r: &Value| {
        let mut l = base();
        l.push((
            "mount_point",
            r["mount_point"].as_str().unwrap_or("").to_string(),
        ));
        l.push(("fs_type", r["fs_type"].as_str().unwrap_or("").to_string()));
        l
    };
    let fs = doc["filesystems"].as_array().cloned().unwrap_or_default();
    let per_fs = |name, help, key: &str, scale: f64| Family {
        kind: Kind::Gauge,
        name,
        help,
        samples: fs
            .iter()
            .filter_map(|r| Some((fs_labels(r), r[key].as_f64()? * scale)))
            .collect(),
    };
    fams.push(per_fs(
        "trapdetect_lookups_per_request",
        "Path components resolved per request, per filesystem.",
        "lookups_per_request",
        1.0,
    ));
    fams.push(per_fs(
        "trapdetect_syscall_seconds_per_request",
        "Time per request in syscalls whose walk ends on the filesystem.",
        "syscall_ms_per_request",
        1e-3,
    ));
    let sys = doc["syscalls"].as_array().cloned().unwrap_or_default();
    fams.push(latency_family(&fs, fs_labels));
    fams.push(Family {
        kind: Kind::Gauge,
        name: "trapdetect_syscalls_per_request",
        help: "Calls per request, per syscall and filesystem.",
        samples: sys
            .iter()
            .filter_map(|r| {
                let mut l = fs_labels(r);
                l.push(("syscall", r["syscall"].as_str().unwrap_or("").to_string()));
                Some((l, r["per_request"].as_f64()?))
            })
            .collect(),
    });
}

/// The latency of the syscalls ending on each filesystem (`syscall_latency`), as buckets of
/// seconds.
fn latency_family(fs: &[Value], labels: impl Fn(&Value) -> Labels) -> Family {
    let mut f = Family {
        kind: Kind::Histogram,
        name: "trapdetect_syscall_duration_seconds",
        help: "Latency of the window's syscalls whose object is on the filesystem: calls at \
               or under each bound (exact: the bounds are the kernel buckets' edges).",
        samples: vec![],
    };
    for r in fs {
        let h = &r["syscall_latency"];
        let (Some(calls), Some(le)) = (h["calls"].as_f64(), h["le_us"].as_array()) else {
            continue;
        };
        let bucket = |bound: String, n: f64| {
            let mut l = labels(r);
            l.push(("le", bound));
            (l, n)
        };
        for b in le {
            if let (Some(us), Some(n)) = (b[0].as_f64(), b[1].as_f64()) {
                // The bounds are whole nanoseconds: seconds from those, correctly rounded.
                let ns = (us * 1e3).round() as u64;
                f.samples.push(bucket(format!("{}", ns as f64 / 1e9), n));
            }
        }
        f.samples.push(bucket("+Inf".into(), calls));
    }
    f
}

/// Where the traced threads' time went (the `threads` section of `trace --offcpu` and the
/// agent's windows): threads on average in each state, thread-seconds per second.
fn threads_families(doc: &Value, base: &Labels, fams: &mut Vec<Family>) {
    let t = &doc["threads"];
    let (Some(states), Some(w)) = (t["thread_seconds"].as_object(), t["window_s"].as_f64()) else {
        return;
    };
    fams.push(Family {
        kind: Kind::Gauge,
        name: "trapdetect_threads",
        help: "The target's threads on average in each state over the window (thread-seconds \
               per second): on_cpu, run_queue (runnable, waiting for a CPU), or blocked by why \
               (path, file_io, file_lock, futex, wait_work, sleep, other, no_syscall, unknown).",
        samples: states
            .iter()
            .filter_map(|(state, v)| {
                let mut l = base.clone();
                l.push(("state", state.clone()));
                Some((l, crate::traps::round(v.as_f64()? / w.max(1e-9), 3)))
            })
            .collect(),
    });
}

/// The load run's headline and its latency quantiles.
fn load_families(l: &Value, base: &Labels, fams: &mut Vec<Family>) {
    let base = || base.clone();
    let url = || {
        let mut b = base();
        b.push(("url", l["plan"]["url"].as_str().unwrap_or("").to_string()));
        b
    };
    for (name, help, key) in [
        (
            "trapdetect_load_offered_requests_per_second",
            "Arrivals per second of the window.",
            "offered_rate_per_s",
        ),
        (
            "trapdetect_load_delivered_requests_per_second",
            "2xx answers per second of the window.",
            "delivered_rate_per_s",
        ),
        (
            "trapdetect_load_success_ratio",
            "2xx answers / arrivals.",
            "success_ratio",
        ),
        (
            "trapdetect_load_errors",
            "Arrivals that got no status.",
            "errors_total",
        ),
        (
            "trapdetect_load_non_2xx",
            "Answers with a status other than 2xx.",
            "non_2xx",
        ),
    ] {
        if let Some(v) = l[key].as_f64() {
            fams.push(Family {
                kind: Kind::Gauge,
                name,
                help,
                samples: vec![(url(), v)],
            });
        }
    }
    let mut lat = Family {
        kind: Kind::Gauge,
        name: "trapdetect_load_latency_seconds",
        help: "Latency from the intended send time, by status class and quantile.",
        samples: vec![],
    };
    for (class, key) in [("2xx", "latency_2xx"), ("non_2xx", "latency_non_2xx")] {
        for (q, k) in [
            ("0.5", "p50_us"),
            ("0.9", "p90_us"),
            ("0.99", "p99_us"),
            ("0.999", "p99_9_us"),
            ("1", "max_us"),
        ] {
            if let Some(v) = l[key][k].as_f64() {
                let mut lb = url();
                lb.push(("class", class.to_string()));
                lb.push(("quantile", q.to_string()));
                lat.samples.push((lb, v / 1e6));
            }
        }
    }
    fams.push(lat);
}

/// The exposition text (families without samples are left out).
pub fn write_families(fams: &[Family]) -> String {
    let mut o = String::new();
    for f in fams.iter().filter(|f| !f.samples.is_empty()) {
        let kind = match f.kind {
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(o, "# TYPE {} {kind}\n# HELP {} {}", f.name, f.name, f.help);
        let series = f.series_name();
        for (labels, v) in &f.samples {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
                .collect();
            let _ = writeln!(o, "{series}{{{}}} {}", l.join(","), fmt_value(*v));
        }
    }
    o.push_str("# EOF\n");
    o
}

fn fmt_value(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn hgrm_lines_follow_hdrhistogram() {
        let d = json!({"count": 4, "mean_us": 1500.0, "stdev_us": 500.0, "max_us": 2000.0,
            "steps": [[1000.0, 0.0, 1], [1000.0, 0.5, 2], [2000.0, 1.0, 4]]});
        let t = hgrm(&d);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        );
        assert_eq!(lines[1], "");
        assert_eq!(
            lines[3],
            "       1.000 0.500000000000          2           2.00"
        );
        assert_eq!(lines[4], "       2.000 1.000000000000          4");
        assert!(lines[5].starts_with("#[Mean    =        1.500, StdDeviation   =        0.500]"));
        assert!(lines[6].ends_with("Total count    =            4]"));
    }

    /// A filesystem's syscall latency from the kernel's buckets: calls at 300 ns, 5 µs and
    /// two at 250 µs give exact counts at every one of the twelve bounds, and the OpenMetrics
    /// histogram of them in seconds, `+Inf` the calls.
    #[test]
    fn syscall_latency_is_exact_at_the_kernels_bucket_edges() {
        use trapdetect_common::hist::{HIST_BUCKETS, bucket_of};
        let mut hist = vec![0u64; HIST_BUCKETS as usize];
        for ns in [300, 5_000, 250_000, 250_000] {
            hist[bucket_of(ns) as usize] += 1;
        }
        let b = crate::report::LatencyBuckets::of(&hist, 4, 505_300);
        assert_eq!(b.le_us.len(), 12);
        assert_eq!(
            b.le_us[..6],
            [
                (1.024, 1),
                (4.096, 1),
                (16.384, 2),
                (65.536, 2),
                (262.144, 4),
                (1048.576, 4)
            ]
        );
        assert_eq!(b.le_us[11], (4_294_967.296, 4));
        assert_eq!((b.calls, b.sum_us), (4, 505.3));
        let doc = json!({"schema": "trapdetect.report/1", "command": "trace", "exit_code": 0,
            "filesystems": [{"mount_point": "/mnt/slow", "fs_type": "fuse.slowfs",
                "syscall_latency": serde_json::to_value(&b).unwrap()},
                {"mount_point": "/", "fs_type": "ext4"}]});
        let t = openmetrics(&doc);
        let l = "command=\"trace\",mount_point=\"/mnt/slow\",fs_type=\"fuse.slowfs\"";
        let lines: Vec<&str> = t
            .lines()
            .filter(|x| x.contains("syscall_duration"))
            .collect();
        assert_eq!(lines.len(), 2 + 13, "{t}");
        assert_eq!(
            lines[..7],
            [
                "# TYPE trapdetect_syscall_duration_seconds histogram".to_string(),
                "# HELP trapdetect_syscall_duration_seconds Latency of the window's syscalls whose object is on the filesystem: calls at or under each bound (exact: the bounds are the kernel buckets' edges).".to_string(),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"0.000001024\"}} 1"),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"0.000004096\"}} 1"),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"0.000016384\"}} 2"),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"0.000065536\"}} 2"),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"0.000262144\"}} 4"),
            ]
        );
        assert_eq!(
            lines[13..],
            [
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"4.294967296\"}} 4"),
                format!("trapdetect_syscall_duration_seconds_bucket{{{l},le=\"+Inf\"}} 4"),
            ]
        );
        // A call beyond the last bound (4.29 s) is in +Inf only.
        hist[bucket_of(5_000_000_000) as usize] += 1;
        let b = crate::report::LatencyBuckets::of(&hist, 5, 0);
        assert_eq!(b.le_us.len(), 12);
        assert_eq!(b.le_us[11], (4_294_967.296, 4));
    }

    #[test]
    fn label_values_are_escaped() {
        let doc = json!({"schema": "trapdetect.report/1", "command": "trace", "exit_code": 1,
            "measurement": {"trusted": true},
            "findings": [{"id": "fs.x", "severity": "fail"}],
            "filesystems": [{"mount_point": "/a\"b\\x0a\nc", "fs_type": "ext4", "lookups_per_request": 3.0, "syscall_ms_per_request": 2.0}]});
        let t = openmetrics(&doc);
        assert!(t.contains(r#"mount_point="/a\"b\\x0a\nc""#), "{t}");
        assert!(
            t.contains("trapdetect_syscall_seconds_per_request{command=\"trace\",mount_point="),
            "{t}"
        );
        assert!(
            t.contains("trapdetect_finding{command=\"trace\",id=\"fs.x\",severity=\"fail\"} 1\n"),
            "{t}"
        );
        assert!(t.ends_with("# EOF\n"));
    }

    #[test]
    fn csv_joins_series_by_second() {
        let doc = json!({"schema": "trapdetect.report/1",
            "load": {"series": [{"t_s": 0, "scheduled": 10, "errors": {"timeout": 1, "eof": 2}}]},
            "network": {"traced": {"new_connections_per_s": [5, 6], "time_wait_entered_per_s": [1, 2],
                "listen_overflows_per_s": [0, 0], "listen_drops_per_s": [0, 0]}}});
        let c = csv(&doc);
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(
            lines[0],
            "t_s,load_scheduled,load_errors_timeout,load_errors_eof,load_errors_total,net_new_connections,net_time_wait_entered,net_listen_overflows,net_listen_drops"
        );
        assert_eq!(lines[1], "0,10,1,2,3,5,1,0,0");
        assert_eq!(lines[2], "1,,,,,6,2,0,0");
    }
}
