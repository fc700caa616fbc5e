//! The comparison of two saved runs (`trapdetect compare`), before and after a change, side by
//! side: rates, percentiles, errors, per-request kernel figures and findings, each change set
//! against the run-to-run noise the runs themselves show (the spread of their per-second
//! values); its model and its text and HTML renderings.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use crate::{
    escape::html as h,
    report::{
        chart::{self, Series, Timeline},
        export::load_of,
    },
};

/// Version of the comparison's JSON.
pub const SCHEMA: &str = "trapdetect.compare/1";

/// One figure of both runs.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Row {
    /// `load`, `filesystem`, `syscall`, `network`, `trace`.
    pub group: String,
    /// What is measured (mount points and names escaped).
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Run A.
    pub a: Option<f64>,
    /// Run B.
    pub b: Option<f64>,
    /// (B − A) ÷ A, percent.
    pub change_pct: Option<f64>,
    /// Standard deviation of the per-second values in A and in B (`None`: no series).
    pub noise_a: Option<f64>,
    /// See `noise_a`.
    pub noise_b: Option<f64>,
    /// |B − A| exceeds twice the standard error of the difference of the two runs' per-second
    /// means, √(sd_A²/n_A + sd_B²/n_B) (Welch): `None` without series to judge the noise by.
    pub beyond_noise: Option<bool>,
}

/// Findings present in one run only, or in both.
#[derive(Debug, Default, Serialize, serde::Deserialize)]
pub struct FindingsDiff {
    /// In A only (gone in B).
    pub only_a: Vec<String>,
    /// In B only (new).
    pub only_b: Vec<String>,
    /// In both.
    pub both: Vec<String>,
}

/// One field of the environment fingerprint that differs between the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FieldDiff {
    /// The field (`kernel`, `thp`, `mitigations.mds`, `config_sha256./etc/...`).
    pub field: String,
    /// In A.
    pub a: String,
    /// In B.
    pub b: String,
}

/// The comparison.
#[derive(Debug, Serialize, serde::Deserialize)]
pub struct Comparison {
    /// `trapdetect.compare/1`.
    pub schema: String,
    /// A's file and command.
    pub a: String,
    /// B's file and command.
    pub b: String,
    /// Fields of the two runs' environment fingerprints that differ, said before any figure
    /// (`null`: a run carries no fingerprint).
    pub fingerprint_differences: Option<Vec<FieldDiff>>,
    /// Figures.
    pub rows: Vec<Row>,
    /// Findings.
    pub findings: FindingsDiff,
}

struct Metric {
    group: &'static str,
    name: String,
    unit: &'static str,
    value: f64,
    /// Per-second standard deviation and the number of seconds.
    noise: Option<(f64, usize)>,
}

fn stdev(v: &[f64]) -> Option<(f64, usize)> {
    if v.len() < 2 {
        return None;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let sd = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
    Some((sd, v.len()))
}

/// Per-second values of a load series field, measured window only (not the drain).
fn per_second(l: &Value, key: &str) -> Vec<f64> {
    let secs = l["window"]["measured_s"].as_f64().unwrap_or(0.0).floor() as usize;
    l["series"]
        .as_array()
        .into_iter()
        .flatten()
        .take(secs)
        .filter_map(|p| p[key].as_f64())
        .collect()
}

fn metrics(doc: &Value) -> Vec<Metric> {
    let mut out = vec![];
    if let Some(l) = load_of(doc) {
        load_metrics(&mut out, l);
    }
    trace_metrics(&mut out, doc);
    out
}

/// Adds a figure, when the run has it.
fn push(
    out: &mut Vec<Metric>,
    group: &'static str,
    name: String,
    unit: &'static str,
    value: Option<f64>,
    noise: Option<(f64, usize)>,
) {
    if let Some(value) = value {
        out.push(Metric {
            group,
            name,
            unit,
            value,
            noise,
        });
    }
}

/// The load's figures: rates, success, errors and the 2xx percentiles.
fn load_metrics(out: &mut Vec<Metric>, l: &Value) {
    push(
        out,
        "load",
        "offered".into(),
        "req/s",
        l["offered_rate_per_s"].as_f64(),
        stdev(&per_second(l, "scheduled")),
    );
    push(
        out,
        "load",
        "delivered (2xx)".into(),
        "req/s",
        l["delivered_rate_per_s"].as_f64(),
        stdev(&per_second(l, "ok_2xx")),
    );
    push(
        out,
        "load",
        "success".into(),
        "%",
        l["success_ratio"].as_f64().map(|v| v * 100.0),
        None,
    );
    push(
        out,
        "load",
        "errors".into(),
        "count",
        l["errors_total"].as_f64(),
        None,
    );
    push(
        out,
        "load",
        "non-2xx".into(),
        "count",
        l["non_2xx"].as_f64(),
        None,
    );
    for (k, n) in [
        ("p50_us", "2xx latency p50"),
        ("p90_us", "2xx latency p90"),
        ("p99_us", "2xx latency p99"),
        ("p99_9_us", "2xx latency p99.9"),
        ("max_us", "2xx latency max"),
    ] {
        let noise = match k {
            "p99_us" => stdev(&per_second(l, "lat_2xx_p99_us")),
            "p50_us" => stdev(&per_second(l, "lat_2xx_mean_us")),
            _ => None,
        };
        push(
            out,
            "load",
            n.into(),
            "µs",
            l["latency_2xx"][k].as_f64(),
            noise,
        );
    }
}

/// The trace's figures: requests, filesystems, syscalls and the traced network.
fn trace_metrics(out: &mut Vec<Metric>, doc: &Value) {
    if let Some(r) = doc["requests"]["rate_per_s"].as_f64() {
        push(out, "trace", "requests".into(), "req/s", Some(r), None);
    }
    for f in doc["filesystems"].as_array().into_iter().flatten() {
        let name = format!(
            "{} ({})",
            f["mount_point"].as_str().unwrap_or("?"),
            f["fs_type"].as_str().unwrap_or("?")
        );
        push(
            out,
            "filesystem",
            format!("{name} lookups"),
            "/request",
            f["lookups_per_request"].as_f64(),
            None,
        );
        push(
            out,
            "filesystem",
            format!("{name} syscall time"),
            "ms/request",
            f["syscall_ms_per_request"].as_f64(),
            None,
        );
    }
    for s in doc["syscalls"].as_array().into_iter().flatten() {
        let name = format!(
            "{} on {} ({})",
            s["syscall"].as_str().unwrap_or("?"),
            s["mount_point"].as_str().unwrap_or("?"),
            s["fs_type"].as_str().unwrap_or("?")
        );
        push(
            out,
            "syscall",
            name,
            "/request",
            s["per_request"].as_f64(),
            None,
        );
    }
    if let Some(t) = doc.pointer("/network/traced").filter(|t| t.is_object()) {
        for (k, n) in [
            ("new_connections_per_s", "new connections"),
            ("time_wait_entered_per_s", "TIME_WAIT entered"),
            ("listen_overflows_per_s", "listen overflows"),
        ] {
            let v: Vec<f64> = t[k]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect();
            if !v.is_empty() {
                push(
                    out,
                    "network",
                    n.into(),
                    "/s",
                    Some(v.iter().sum::<f64>() / v.len() as f64),
                    stdev(&v),
                );
            }
        }
    }
}

fn ids(doc: &Value) -> Vec<String> {
    doc["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| Some(format!("{} {}", f["severity"].as_str()?, f["id"].as_str()?)))
        .collect()
}

/// Compares two documents.
pub fn compare(a_name: String, a: &Value, b_name: String, b: &Value) -> Comparison {
    let (ma, mb) = (metrics(a), metrics(b));
    let mut rows = vec![];
    let key = |m: &Metric| (m.group, m.name.clone());
    for m in &ma {
        let other = mb.iter().find(|x| key(x) == key(m));
        rows.push(row(Some(m), other));
    }
    for m in mb.iter().filter(|x| !ma.iter().any(|m| key(m) == key(x))) {
        rows.push(row(None, Some(m)));
    }
    let (ia, ib) = (ids(a), ids(b));
    let fingerprint_differences = match (a.get("fingerprint"), b.get("fingerprint")) {
        (Some(x), Some(y)) => Some(
            crate::host::fingerprint::differences(x, y)
                .into_iter()
                .map(|(field, a, b)| FieldDiff { field, a, b })
                .collect(),
        ),
        _ => None,
    };
    Comparison {
        schema: SCHEMA.into(),
        a: a_name,
        b: b_name,
        fingerprint_differences,
        rows,
        findings: FindingsDiff {
            only_a: ia.iter().filter(|i| !ib.contains(i)).cloned().collect(),
            only_b: ib.iter().filter(|i| !ia.contains(i)).cloned().collect(),
            both: ia.iter().filter(|i| ib.contains(i)).cloned().collect(),
        },
    }
}

fn row(a: Option<&Metric>, b: Option<&Metric>) -> Row {
    let m = a.or(b).expect("one side");
    let (va, vb) = (a.map(|m| m.value), b.map(|m| m.value));
    let (na, nb) = (a.and_then(|m| m.noise), b.and_then(|m| m.noise));
    let round = |v: f64| crate::traps::round(v, 3);
    Row {
        group: m.group.into(),
        metric: m.name.clone(),
        unit: m.unit.into(),
        a: va.map(round),
        b: vb.map(round),
        change_pct: match (va, vb) {
            (Some(x), Some(y)) if x != 0.0 => Some(crate::traps::round((y - x) / x * 100.0, 1)),
            _ => None,
        },
        noise_a: na.map(|n| round(n.0)),
        noise_b: nb.map(|n| round(n.0)),
        beyond_noise: match (va, vb, na, nb) {
            (Some(x), Some(y), Some((p, n)), Some((q, m))) => {
                let se = (p * p / n as f64 + q * q / m as f64).sqrt();
                Some((y - x).abs() > 2.0 * se)
            }
            _ => None,
        },
    }
}

fn fmt(unit: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if unit == "µs" => chart::duration_us(v),
        Some(v) => chart::human(v),
    }
}

fn verdict(r: &Row) -> &'static str {
    match r.beyond_noise {
        Some(true) => "beyond noise",
        Some(false) => "within noise",
        None => "",
    }
}

fn change(r: &Row) -> String {
    r.change_pct
        .map(|c| format!("{c:+.1} %"))
        .unwrap_or_else(|| "-".into())
}

fn noise(r: &Row) -> String {
    match (r.noise_a, r.noise_b) {
        (None, None) => "-".into(),
        (a, b) => format!("±{} / ±{}", fmt(&r.unit, a), fmt(&r.unit, b)),
    }
}

/// The comparison as text.
pub fn text(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "trapdetect compare\n  A: {}\n  B: {}\n", c.a, c.b);
    let _ = writeln!(o, "{}\n", environment_line(c));
    let rows: Vec<Vec<String>> = c
        .rows
        .iter()
        .map(|r| {
            vec![
                r.group.clone(),
                r.metric.clone(),
                r.unit.to_string(),
                fmt(&r.unit, r.a),
                fmt(&r.unit, r.b),
                change(r),
                noise(r),
                verdict(r).to_string(),
            ]
        })
        .collect();
    crate::report::text::table(
        &mut o,
        &[
            "group",
            "metric",
            "unit",
            "A",
            "B",
            "change",
            "per-second sd A / B",
            "vs noise",
        ],
        &rows,
    );
    let f = &c.findings;
    let _ = writeln!(o, "\nFINDINGS");
    for (label, list) in [
        ("gone in B", &f.only_a),
        ("new in B", &f.only_b),
        ("in both", &f.both),
    ] {
        let _ = writeln!(
            o,
            "  {label}: {}",
            if list.is_empty() {
                "-".into()
            } else {
                list.join(", ")
            }
        );
    }
    o
}

/// What the fingerprints say, before any figure: the same environment, or which fields differ.
pub fn environment_line(c: &Comparison) -> String {
    match &c.fingerprint_differences {
        None => "ENVIRONMENT: not compared (a run carries no fingerprint: reports of preflight carry one)".into(),
        Some(d) if d.is_empty() => "ENVIRONMENT: the same fingerprint in both runs".into(),
        Some(d) => format!(
            "ENVIRONMENT DIFFERS in {} field(s): the figures below were measured in different environments\n{}",
            d.len(),
            d.iter()
                .map(|f| format!("  {}: {} -> {}", f.field, f.a, f.b))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// The comparison as HTML (self-contained), with per-second overlays of both runs.
pub fn html(c: &Comparison, a: &Value, b: &Value) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>trapdetect compare</title><style>{}</style></head><body><h1>trapdetect compare</h1>\
<p class=\"meta\">A: <code>{}</code><br>B: <code>{}</code></p><pre>{}</pre><h2>Figures</h2><div class=\"wrap\"><table><tr>",
        crate::report::html::CSS,
        h(&c.a),
        h(&c.b),
        h(&environment_line(c))
    );
    for col in [
        "group",
        "metric",
        "A",
        "B",
        "change",
        "per-second sd A / B",
        "vs noise",
    ] {
        let _ = write!(o, "<th>{col}</th>");
    }
    let _ = write!(o, "</tr>");
    for r in &c.rows {
        let style = match r.beyond_noise {
            Some(true) => " style=\"font-weight:600\"",
            _ => "",
        };
        let _ = write!(
            o,
            "<tr{style}><td>{}</td><td>{} <span class=\"id\">{}</span></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            h(&r.group),
            h(&r.metric),
            h(&r.unit),
            h(&fmt(&r.unit, r.a)),
            h(&fmt(&r.unit, r.b)),
            h(&change(r)),
            h(&noise(r)),
            verdict(r)
        );
    }
    let _ = write!(o, "</table></div>");
    if let (Some(la), Some(lb)) = (load_of(a), load_of(b)) {
        overlays(&mut o, la, lb);
    }
    let f = &c.findings;
    let _ = write!(o, "<h2>Findings</h2><table class=\"kv\">");
    for (label, list) in [
        ("gone in B", &f.only_a),
        ("new in B", &f.only_b),
        ("in both", &f.both),
    ] {
        let _ = write!(
            o,
            "<tr><th>{label}</th><td>{}</td></tr>",
            if list.is_empty() {
                "-".into()
            } else {
                h(&list.join(", "))
            }
        );
    }
    let _ = writeln!(o, "</table></body></html>");
    o
}

/// The per-second overlays of both runs' loads: delivered 2xx, and the 2xx latency p99.
fn overlays(o: &mut String, la: &Value, lb: &Value) {
    let s = |l: &Value, k: &str| -> Vec<Option<f64>> {
        l["series"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| p[k].as_f64())
            .collect()
    };
    for (title, key, unit, log) in [
        ("Delivered (2xx) per second", "ok_2xx", "per second", false),
        (
            "2xx latency p99 per second",
            "lat_2xx_p99_us",
            "µs (log scale)",
            true,
        ),
    ] {
        let t = Timeline {
            title: title.into(),
            unit: unit.into(),
            series: vec![
                Series {
                    name: "A".into(),
                    values: s(la, key),
                },
                Series {
                    name: "B".into(),
                    values: s(lb, key),
                },
            ],
            marks: vec![],
            log_y: log,
        };
        if let Some(svg) = t.svg() {
            let _ = write!(o, "<figure class=\"chart\">{svg}</figure>");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn run_doc(per_sec: &[u64], p99: f64, finding: &str) -> Value {
        let n = per_sec.len();
        json!({"schema": "trapdetect.load/1", "plan": {"url": "http://x/"},
            "window": {"measured_s": n as f64},
            "offered_rate_per_s": 100.0,
            "delivered_rate_per_s": per_sec.iter().sum::<u64>() as f64 / n as f64,
            "success_ratio": 1.0, "errors_total": 0, "non_2xx": 0,
            "latency_2xx": {"p50_us": 100.0, "p90_us": 200.0, "p99_us": p99, "p99_9_us": 400.0, "max_us": 500.0},
            "series": per_sec.iter().map(|v| json!({"scheduled": 100, "ok_2xx": v, "lat_2xx_mean_us": 100.0, "lat_2xx_p99_us": p99})).collect::<Vec<_>>(),
            "findings": [{"id": finding, "severity": "warn"}]})
    }

    #[test]
    fn changes_are_judged_against_the_per_second_spread() {
        let a = run_doc(&[90, 110, 100, 100], 300.0, "load.x");
        // +5/s is inside the spread (sd ≈ 8.2 over 4 s each: 2 × se ≈ 11.5); +50/s is not.
        let near = run_doc(&[95, 115, 105, 105], 300.0, "load.x");
        let far = run_doc(&[150, 150, 150, 150], 300.0, "load.y");
        let c = compare("a".into(), &a, "b".into(), &near);
        let d = c
            .rows
            .iter()
            .find(|r| r.metric == "delivered (2xx)")
            .unwrap();
        assert_eq!(
            (d.a, d.b, d.change_pct),
            (Some(100.0), Some(105.0), Some(5.0))
        );
        assert_eq!(d.beyond_noise, Some(false));
        let c = compare("a".into(), &a, "b".into(), &far);
        let d = c
            .rows
            .iter()
            .find(|r| r.metric == "delivered (2xx)")
            .unwrap();
        assert_eq!(d.beyond_noise, Some(true));
        assert_eq!(c.findings.only_a, ["warn load.x"]);
        assert_eq!(c.findings.only_b, ["warn load.y"]);
        // Figures without a per-second series are not judged.
        let e = c.rows.iter().find(|r| r.metric == "errors").unwrap();
        assert_eq!(e.beyond_noise, None);
        let page = html(&c, &a, &far);
        assert_eq!(page.matches("<svg").count(), 2);
        assert!(text(&c).contains("beyond noise"));
    }

    #[test]
    fn differing_fingerprints_are_said_before_the_figures() {
        let doc = |thp: &str| {
            json!({"schema": "trapdetect.report/1", "command": "preflight",
                "fingerprint": {"kernel": "6.18", "thp": thp, "mitigations": {"mds": "Not affected"}},
                "findings": []})
        };
        let c = compare("a".into(), &doc("madvise"), "b".into(), &doc("always"));
        assert_eq!(
            c.fingerprint_differences,
            Some(vec![FieldDiff {
                field: "thp".into(),
                a: "madvise".into(),
                b: "always".into()
            }])
        );
        let t = text(&c);
        let env = t.find("ENVIRONMENT DIFFERS in 1 field(s)").unwrap();
        assert!(t[env..].starts_with("ENVIRONMENT DIFFERS in 1 field(s): the figures below were measured in different environments\n  thp: madvise -> always"), "{t}");
        assert!(env < t.find("FINDINGS").unwrap());
        let same = compare("a".into(), &doc("madvise"), "b".into(), &doc("madvise"));
        assert!(text(&same).contains("ENVIRONMENT: the same fingerprint in both runs"));
        let none = compare("a".into(), &json!({"findings": []}), "b".into(), &doc("x"));
        assert_eq!(none.fingerprint_differences, None);
    }

    #[test]
    fn target_strings_are_escaped_in_the_html() {
        let evil = "/srv/<script>alert(1)</script>";
        let doc = json!({"schema": "trapdetect.report/1", "command": "trace",
            "filesystems": [{"mount_point": evil, "fs_type": "ext4", "lookups_per_request": 3.0}],
            "findings": [{"id": evil, "severity": "fail"}]});
        let c = compare(evil.into(), &doc, "b".into(), &doc);
        let page = html(&c, &doc, &doc);
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
    }
}
