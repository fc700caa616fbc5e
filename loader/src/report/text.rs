//! Plain-text rendering: the verdict first, then the tables that back it.

use std::fmt::Write as _;

use serde_json::Value;

use super::Report;
use crate::traps::Finding;

fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

fn value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => num(Some(f)),
            _ => n.to_string(),
        },
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// An evidence value: numbers whose key names a time or size unit in human units.
fn evidence(key: &str, v: &Value) -> String {
    let timed = ["_us", "_ms", "_s", "_bytes"]
        .iter()
        .any(|u| key.ends_with(u) && !key.ends_with("_per_s"));
    match v.as_f64() {
        Some(f) if timed => super::units::by_key(key, f),
        _ => value(v),
    }
}

/// Renders one finding as an indented block.
pub fn finding(out: &mut String, f: &Finding) {
    let _ = writeln!(
        out,
        "{} {}  {}",
        super::color::severity(f.severity),
        f.id,
        f.title
    );
    let width = f.evidence.keys().map(|k| k.len()).max().unwrap_or(0);
    for (k, v) in &f.evidence {
        let _ = writeln!(out, "     {k:width$}  {}", evidence(k, v));
    }
    if let Some(p) = &f.predicted {
        let _ = writeln!(out, "     predicted: {p}");
    }
    if !f.remedy.is_empty() {
        let _ = writeln!(out, "     remedy: {}", f.remedy);
    }
}

/// Renders rows as aligned columns (first column left-aligned, the rest right-aligned).
pub fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::from(" ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i < 3 {
                s.push(' ');
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push(' ');
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for r in rows {
        let _ = writeln!(out, "{}", line(r.iter().map(|s| s.as_str()).collect()));
    }
}

/// Renders the whole report.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let mut head = format!("trapdetect {} {}", r.version, r.command);
    if let Some(t) = &r.target {
        let _ = write!(head, ": pid {} ({})", t.pid, t.comm);
    }
    if let Some(w) = r.window_s {
        let _ = write!(head, ", {w:.1} s window");
    }
    let _ = writeln!(out, "{head}");
    if let Some(t) = &r.target {
        let _ = writeln!(
            out,
            "  exe {}  cwd {}  processes traced {}",
            t.exe, t.cwd, t.processes
        );
        if let Some(s) = t.exited_after_s {
            let _ = writeln!(
                out,
                "  the target exited after {s:.1} s: figures cover what was gathered until then"
            );
        }
    }
    if let Some(q) = &r.requests {
        let _ = match q.count {
            Some(n) => writeln!(
                out,
                "  requests {n} ({}, {} req/s){}",
                q.basis,
                num(q.rate_per_s),
                q.note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
            None => writeln!(
                out,
                "  no request basis: figures are per second{}",
                q.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ),
        };
    }
    out.push('\n');
    if r.findings.is_empty() {
        let _ = writeln!(out, "No traps found.");
    } else {
        let _ = writeln!(out, "FINDINGS");
        for f in &r.findings {
            finding(&mut out, f);
        }
    }
    if !r.ignored.is_empty() {
        let ids: Vec<&str> = r.ignored.iter().map(|f| f.id.as_str()).collect();
        let _ = writeln!(out, "ignored (--ignore): {}", ids.join(", "));
    }
    for s in &r.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.check, s.reason);
    }
    if !r.syscalls.is_empty() {
        let _ = writeln!(
            out,
            "\nSYSCALLS (by the filesystem of the object each call names)"
        );
        let rows: Vec<Vec<String>> = r
            .syscalls
            .iter()
            .map(|s| {
                vec![
                    s.syscall.clone(),
                    s.fs_type.clone(),
                    s.mount_point.clone(),
                    s.count.to_string(),
                    num(s.per_request),
                    num(s.lookups_per_request),
                    s.errors.to_string(),
                    num(Some(s.latency.mean_us)),
                    num(Some(s.latency.p50_us)),
                    num(Some(s.latency.p99_us)),
                    num(Some(s.latency.max_us)),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "syscall",
                "fs",
                "mount",
                "calls",
                "/req",
                "lookups/req",
                "errors",
                "mean µs",
                "p50 µs",
                "p99 µs",
                "max µs",
            ],
            &rows,
        );
    }
    if !r.filesystems.is_empty() {
        let _ = writeln!(
            out,
            "\nFILESYSTEMS WALKED (one lookup = one path component resolved there)"
        );
        let rows: Vec<Vec<String>> = r
            .filesystems
            .iter()
            .map(|f| {
                let fuse: Vec<String> = f
                    .fuse_ops
                    .iter()
                    .map(|o| {
                        format!(
                            "{} {}",
                            o.opcode,
                            num(o.per_request.or(Some(o.count as f64)))
                        )
                    })
                    .collect();
                vec![
                    f.mount_point.clone(),
                    f.fs_type.clone(),
                    f.slow
                        .map(|s| format!("{s:?}").to_lowercase())
                        .unwrap_or_else(|| "-".into()),
                    f.lookups.to_string(),
                    num(f.lookups_per_request),
                    num(Some(f.lookups_per_second)),
                    num(f.syscall_ms_per_request),
                    if fuse.is_empty() {
                        "-".into()
                    } else {
                        fuse.join(", ")
                    },
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "mount",
                "type",
                "slow",
                "lookups",
                "/req",
                "/s",
                "syscall ms/req",
                "fuse requests (measured at the fuse tracepoint)",
            ],
            &rows,
        );
    }
    if !r.paths.is_empty() {
        let _ = writeln!(out, "\nPATHS (most called; each string sampled once)");
        let rows: Vec<Vec<String>> = r
            .paths
            .iter()
            .map(|p| {
                vec![
                    if p.nofollow {
                        format!("{} (nofollow)", p.syscall)
                    } else {
                        p.syscall.clone()
                    },
                    p.base.to_string(),
                    p.path.clone(),
                    p.count.to_string(),
                    num(p.per_request),
                    p.walk.clone(),
                    num(Some(p.mean_us)),
                    p.errors.to_string(),
                ]
            })
            .collect();
        table(
            &mut out,
            &[
                "syscall",
                "base",
                "path",
                "calls",
                "/req",
                "lookups per call",
                "mean µs",
                "errors",
            ],
            &rows,
        );
    }
    for (name, text) in &r.section_text {
        let _ = writeln!(out, "\n{}", name.to_uppercase());
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    let missing: Vec<&super::ProbeRow> = r.probes.iter().filter(|p| !p.attached).collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "\nPROBES NOT ATTACHED");
        for p in missing {
            let _ = writeln!(out, "  {} ({}): {}", p.program, p.attach, p.note);
        }
    }
    let m = &r.measurement;
    let _ = writeln!(out);
    if m.trusted {
        let _ = writeln!(
            out,
            "measurement: trusted{}",
            if m.notes.is_empty() {
                ""
            } else {
                " (notes below)"
            }
        );
    } else {
        let _ = writeln!(out, "measurement: NOT TRUSTED");
        for p in &m.problems {
            let _ = writeln!(out, "  - {p}");
        }
    }
    for n in &m.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    let fails = r
        .findings
        .iter()
        .filter(|f| f.severity == crate::traps::Severity::Fail)
        .count();
    let warns = r
        .findings
        .iter()
        .filter(|f| f.severity == crate::traps::Severity::Warn)
        .count();
    let _ = writeln!(
        out,
        "verdict: {} -> exit {}",
        super::color::verdict(&format!("{fails} fail, {warns} warn"), r.exit_code),
        r.exit_code
    );
    out
}

/// Renders any saved trapdetect JSON document (`trapdetect report FILE --text`): the verdict
/// and findings as the live command prints them, then the load figures and the tables, each
/// with the columns the JSON has.
pub fn render_value(doc: &Value) -> String {
    let mut out = String::new();
    let is_load = doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.load"));
    let command = if is_load {
        "load"
    } else {
        doc["command"].as_str().unwrap_or("report")
    };
    let mut head = format!(
        "trapdetect {} {command}",
        doc["version"].as_str().unwrap_or("?")
    );
    if let Some(t) = doc.get("target").filter(|t| t.is_object()) {
        let _ = write!(
            head,
            ": pid {} ({})",
            t["pid"],
            t["comm"].as_str().unwrap_or("?")
        );
    }
    if is_load {
        let _ = write!(head, ": {}", doc["plan"]["url"].as_str().unwrap_or("?"));
    }
    if let Some(w) = doc["window_s"].as_f64() {
        let _ = write!(head, ", {} window", super::chart::duration_us(w * 1e6));
    }
    let _ = writeln!(out, "{head} (re-rendered from JSON)");
    if let Some(t) = doc.get("target").filter(|t| t.is_object()) {
        let _ = writeln!(
            out,
            "  exe {}  cwd {}  processes traced {}",
            t["exe"].as_str().unwrap_or("?"),
            t["cwd"].as_str().unwrap_or("?"),
            t["processes"]
        );
    }
    if let Some(q) = doc.get("requests").filter(|q| q.is_object()) {
        let _ = writeln!(
            out,
            "  requests {} ({})",
            value(&q["count"]),
            q["basis"].as_str().unwrap_or("")
        );
    }
    if let Some(l) = super::export::load_of(doc) {
        let d = |k: &str| super::chart::duration_us(l["latency_2xx"][k].as_f64().unwrap_or(0.0));
        let _ = writeln!(
            out,
            "  load: offered {}/s, delivered (2xx) {}/s, success {:.1} %, errors {}, non-2xx {}",
            num(l["offered_rate_per_s"].as_f64()),
            num(l["delivered_rate_per_s"].as_f64()),
            l["success_ratio"].as_f64().unwrap_or(0.0) * 100.0,
            value(&l["errors_total"]),
            value(&l["non_2xx"])
        );
        if l["latency_2xx"].is_object() {
            let _ = writeln!(
                out,
                "  2xx latency: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
                d("p50_us"),
                d("p90_us"),
                d("p99_us"),
                d("p99_9_us"),
                d("max_us")
            );
        }
    }
    out.push('\n');
    let findings = doc["findings"].as_array().cloned().unwrap_or_default();
    if findings.is_empty() {
        let _ = writeln!(out, "No traps found.");
    } else {
        let _ = writeln!(out, "FINDINGS");
    }
    for f in &findings {
        let _ = writeln!(
            out,
            "{} {}  {}",
            f["severity"].as_str().unwrap_or("?").to_uppercase(),
            f["id"].as_str().unwrap_or("?"),
            f["title"].as_str().unwrap_or("")
        );
        if let Some(ev) = f["evidence"].as_object() {
            let width = ev.keys().map(|k| k.len()).max().unwrap_or(0);
            for (k, v) in ev {
                let _ = writeln!(out, "     {k:width$}  {}", evidence(k, v));
            }
        }
        if let Some(p) = f["predicted"].as_str() {
            let _ = writeln!(out, "     predicted: {p}");
        }
        if let Some(r) = f["remedy"].as_str().filter(|r| !r.is_empty()) {
            let _ = writeln!(out, "     remedy: {r}");
        }
    }
    for key in ["filesystems", "syscalls", "paths"] {
        let Some(rows) = doc[key].as_array().filter(|r| !r.is_empty()) else {
            continue;
        };
        let _ = writeln!(out, "\n{}", key.to_uppercase());
        let cols: Vec<&String> = rows[0]
            .as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| !rows[0][*k].is_object() && !rows[0][*k].is_array())
                    .collect()
            })
            .unwrap_or_default();
        let header: Vec<&str> = cols.iter().map(|c| c.as_str()).collect();
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|r| cols.iter().map(|c| value(&r[c.as_str()])).collect())
            .collect();
        table(&mut out, &header, &body);
    }
    let m = &doc["measurement"];
    let _ = writeln!(out);
    if m["trusted"] == Value::Bool(false) {
        let _ = writeln!(out, "measurement: NOT TRUSTED");
        for p in m["problems"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  - {}", p.as_str().unwrap_or(""));
        }
    } else {
        let _ = writeln!(out, "measurement: trusted");
    }
    let count = |s: &str| findings.iter().filter(|f| f["severity"] == s).count();
    let _ = writeln!(
        out,
        "verdict: {} fail, {} warn -> exit {}",
        count("fail"),
        count("warn"),
        value(&doc["exit_code"])
    );
    out
}
