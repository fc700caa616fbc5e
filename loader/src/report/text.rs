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

/// Renders the whole report: the head, the findings, the trace's tables, the commands'
/// sections, then how far the measurement can be trusted and the verdict.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    for part in [
        head,
        run_verdict,
        findings,
        syscalls,
        filesystems,
        paths,
        sections,
        probes_not_attached,
        measurement,
        verdict,
    ] {
        part(&mut out, r);
    }
    out
}

/// Who was traced, for how long, and the request basis.
fn head(out: &mut String, r: &Report) {
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
        if let Some(how) = &t.selected_by {
            let _ = writeln!(out, "  target {how}");
        }
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
}

/// `run`'s verdict, first: the cause, its share, the ceiling beside the delivered rate.
fn run_verdict(out: &mut String, r: &Report) {
    if let Some(v) = &r.verdict {
        verdict_lines(out, v);
    }
}

/// The verdict's lines (a live report and a saved one print the same).
pub fn verdict_lines(out: &mut String, v: &crate::traps::run::Verdict) {
    let _ = writeln!(out, "VERDICT");
    let _ = writeln!(out, "  {}", v.summary);
    if let Some(s) = v.share_of_thread_wall_time_pct {
        let _ = writeln!(out, "  explains {s} % of the server's threads' wall time");
    }
    if let Some(b) = &v.ceiling_basis {
        let _ = writeln!(out, "  ceiling: {b}");
    }
    let _ = writeln!(
        out,
        "  delivered {} req/s ({}){}",
        v.delivered_per_s,
        v.delivered_basis,
        v.offered_per_s
            .map(|o| format!(", offered {o} req/s"))
            .unwrap_or_default()
    );
    if v.capped {
        let _ = writeln!(out, "  capped: {}", v.capped_by.join(", "));
    }
    if !v.consequences.is_empty() {
        let _ = writeln!(out, "  consequences: {}", v.consequences.join(", "));
    }
    if !v.trusted {
        let _ = writeln!(
            out,
            "  the run measured something other than the server: untrusted (exit 3)"
        );
    }
    out.push('\n');
}

/// The findings, what `--ignore` set aside and the checks skipped.
fn findings(out: &mut String, r: &Report) {
    if r.findings.is_empty() {
        let _ = writeln!(out, "No traps found.");
    } else {
        let _ = writeln!(out, "FINDINGS");
        for f in &r.findings {
            finding(out, f);
        }
    }
    if !r.ignored.is_empty() {
        let ids: Vec<&str> = r.ignored.iter().map(|f| f.id.as_str()).collect();
        let _ = writeln!(out, "ignored (--ignore): {}", ids.join(", "));
    }
    for s in &r.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.check, s.reason);
    }
}

/// The SYSCALLS table.
fn syscalls(out: &mut String, r: &Report) {
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
            out,
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
}

/// The FILESYSTEMS WALKED table.
fn filesystems(out: &mut String, r: &Report) {
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
            out,
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
}

/// The PATHS table.
fn paths(out: &mut String, r: &Report) {
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
            out,
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
}

/// Each command's own sections, in the order they were added.
fn sections(out: &mut String, r: &Report) {
    for (name, text) in &r.section_text {
        let _ = writeln!(out, "\n{}", name.to_uppercase());
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
}

/// Programs that did not attach.
fn probes_not_attached(out: &mut String, r: &Report) {
    let missing: Vec<&super::ProbeRow> = r.probes.iter().filter(|p| !p.attached).collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "\nPROBES NOT ATTACHED");
        for p in missing {
            let _ = writeln!(out, "  {} ({}): {}", p.program, p.attach, p.note);
        }
    }
}

/// Whether the figures can be trusted, and why not.
fn measurement(out: &mut String, r: &Report) {
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
}

/// Fail and warn counts and the exit code.
fn verdict(out: &mut String, r: &Report) {
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
}

/// Renders a saved step run or wait-drain result (`trapdetect report FILE --text`); reports and
/// load runs are read back into their types and printed by their own renderers. Bytes that
/// would drive a terminal are escaped: the file may not be ours.
pub fn steps_or_drain(doc: &Value) -> String {
    let schema = doc["schema"].as_str().unwrap_or("");
    let out = if schema.starts_with("trapdetect.load-steps/") {
        steps_value(doc)
    } else {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "trapdetect wait-drain: port {} in netns {} ({}) (re-rendered from JSON)",
            value(&doc["port"]),
            value(&doc["netns"]),
            value(&doc["source"])
        );
        let _ = writeln!(
            out,
            "  {}: {} TIME_WAIT sockets after {} (waiting for fewer than {}); their timers put fewer than that {} away",
            if doc["drained"] == Value::Bool(true) {
                "drained"
            } else {
                "timed out"
            },
            value(&doc["time_wait"]),
            super::units::duration_us(doc["elapsed_s"].as_f64().unwrap_or(0.0) * 1e6),
            value(&doc["below"]),
            super::units::duration_us(doc["expected_below_in_s"].as_f64().unwrap_or(0.0) * 1e6),
        );
        generic_rest(
            &mut out,
            doc,
            &[
                "schema",
                "port",
                "below",
                "drained",
                "time_wait",
                "elapsed_s",
                "expected_below_in_s",
                "netns",
                "source",
            ],
        );
        out
    };
    terminal_safe(&out)
}

/// Every string of a document the user handed us, made terminal-safe before it is rendered
/// (the file may not be ours; our own strings are escaped already and pass unchanged).
pub fn terminal_safe_doc(v: &mut Value) {
    match v {
        Value::String(s) => *s = terminal_safe(s),
        Value::Array(a) => a.iter_mut().for_each(terminal_safe_doc),
        Value::Object(m) => {
            *m = std::mem::take(m)
                .into_iter()
                .map(|(k, mut x)| {
                    terminal_safe_doc(&mut x);
                    (terminal_safe(&k), x)
                })
                .collect();
        }
        _ => {}
    }
}

/// Control characters (other than newlines) and invisible ones as visible escapes.
pub fn terminal_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\n'
            || c == '\\'
            || !(c.is_control() || crate::escape::text(&c.to_string()).starts_with('\\'))
        {
            out.push(c);
        } else {
            out.push_str(&crate::escape::text(&c.to_string()));
        }
    }
    out
}

/// A step run: the plan, the steps' table and the knee.
fn steps_value(doc: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trapdetect {} load steps: {} (re-rendered from JSON)",
        doc["version"].as_str().unwrap_or("?"),
        doc["plan"]["url"].as_str().unwrap_or("?")
    );
    let _ = writeln!(
        out,
        "  {}/s to {}/s by {}/s, {} each, {}",
        num(doc["from_per_s"].as_f64()),
        num(doc["to_per_s"].as_f64()),
        num(doc["step_per_s"].as_f64()),
        super::units::duration_us(doc["step_duration_s"].as_f64().unwrap_or(0.0) * 1e6),
        doc["slo_p99_us"]
            .as_f64()
            .map_or("no latency SLO".into(), |us| format!(
                "SLO p99 {}",
                super::units::duration_us(us)
            ))
    );
    let ms = |v: &Value| v.as_f64().map_or("-".into(), super::units::duration_us);
    let rows: Vec<Vec<String>> = doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            vec![
                num(s["rate_per_s"].as_f64()),
                num(s["offered_per_s"].as_f64()),
                num(s["delivered_per_s"].as_f64()),
                format!(
                    "{:.2} %",
                    s["delivered_ratio"].as_f64().unwrap_or(0.0) * 100.0
                ),
                value(&s["non_2xx"]),
                value(&s["errors_total"]),
                ms(&s["latency_p50_us"]),
                ms(&s["latency_p99_us"]),
                ms(&s["sched_lag_p99_us"]),
                if s["passed"] == Value::Bool(true) {
                    "pass".into()
                } else {
                    let why: Vec<String> = s["why"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(value)
                        .collect();
                    format!(
                        "{}: {}",
                        if s["valid"] == Value::Bool(false) {
                            "INVALID"
                        } else {
                            "FAIL"
                        },
                        why.join("; ")
                    )
                },
            ]
        })
        .collect();
    out.push('\n');
    table_left(
        &mut out,
        &[
            "rate/s",
            "offered/s",
            "delivered/s",
            "delivered",
            "non-2xx",
            "errors",
            "p50",
            "p99",
            "lag p99",
            "verdict",
        ],
        &rows,
        1,
    );
    let _ = writeln!(
        out,
        "\nknee: {} ({})\nexit {}",
        doc["knee"]["text"].as_str().unwrap_or("?"),
        doc["knee"]["verdict"].as_str().unwrap_or("?"),
        value(&doc["exit_code"])
    );
    out
}

/// Like [`table`], with the first `left` columns left-aligned and the last one too (a verdict).
fn table_left(out: &mut String, header: &[&str], rows: &[Vec<String>], left: usize) {
    let n = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::from(" ");
        for (i, c) in cells.iter().enumerate().take(n) {
            let pad = " ".repeat(w[i] - c.chars().count());
            s.push(' ');
            if i < left || i + 1 == n {
                s.push_str(c);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(c);
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header));
    for r in rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
    }
}

/// Members of `doc` not in `shown`, each as a titled block.
fn generic_rest(out: &mut String, doc: &Value, shown: &[&str]) {
    for (k, v) in doc.as_object().into_iter().flatten() {
        if shown.contains(&k.as_str()) || v.is_null() {
            continue;
        }
        if v.is_object() || v.as_array().is_some_and(|a| a.iter().any(Value::is_object)) {
            let _ = writeln!(out, "\n{}", k.to_uppercase().replace('_', " "));
            generic(out, 2, k, v);
        } else {
            let _ = writeln!(out, "{k}: {}", scalar(k, v));
        }
    }
}

/// A scalar (or a list of them) in human units by its key.
fn scalar(key: &str, v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) => super::units::by_key(key, f),
            None => n.to_string(),
        },
        Value::Array(a) => a
            .iter()
            .map(|x| scalar(key, x))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(m) => m
            .iter()
            .map(|(k, x)| format!("{k}={}", scalar(k, x)))
            .collect::<Vec<_>>()
            .join(" "),
        other => value(other),
    }
}

/// Any JSON value as indented text: objects as `key: value` lines, arrays of objects as
/// tables (nested objects in a cell as `k=v` pairs).
fn generic(out: &mut String, indent: usize, key: &str, v: &Value) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) => {
            let width = m.keys().map(|k| k.chars().count()).max().unwrap_or(0);
            for (k, x) in m {
                let table_like = x
                    .as_array()
                    .is_some_and(|a| !a.is_empty() && a.iter().all(Value::is_object));
                let nested = x
                    .as_object()
                    .is_some_and(|m| m.values().any(|y| y.is_object() || y.is_array()));
                if table_like || nested {
                    let _ = writeln!(out, "{pad}{k}:");
                    generic(out, indent + 2, k, x);
                } else {
                    let _ = writeln!(out, "{pad}{k:width$}  {}", scalar(k, x));
                }
            }
        }
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_object) => {
            let mut cols: Vec<&String> = vec![];
            for r in a {
                for k in r.as_object().into_iter().flat_map(|m| m.keys()) {
                    if !cols.contains(&k) {
                        cols.push(k);
                    }
                }
            }
            let header: Vec<&str> = cols.iter().map(|c| c.as_str()).collect();
            let rows: Vec<Vec<String>> = a
                .iter()
                .map(|r| {
                    cols.iter()
                        .map(|c| r.get(c.as_str()).map_or("-".into(), |x| scalar(c, x)))
                        .collect()
                })
                .collect();
            let mut t = String::new();
            table_left(&mut t, &header, &rows, 1);
            for l in t.lines() {
                let _ = writeln!(out, "{pad}{}", l.trim_start());
            }
        }
        other => {
            let _ = writeln!(out, "{pad}{}", scalar(key, other));
        }
    }
}
