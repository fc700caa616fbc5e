//! Self-contained HTML rendering (one file, no scripts, no external resources). Every string
//! that came from the target was escaped into printable text when observed; here it is escaped
//! again for HTML.

use std::fmt::Write as _;

use super::Report;
use crate::escape::html as h;

fn cell(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::String(s) => h(s),
        Value::Null => "-".into(),
        // Nested rows (latency, FUSE ops): `key value` pairs, one object per line.
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{} {}", h(k), cell(v)))
            .collect::<Vec<_>>()
            .join(" · "),
        Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join("<br>"),
        other => h(&other.to_string()),
    }
}

/// Renders the report as an HTML page.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let title = match &r.target {
        Some(t) => format!("trapdetect {}: pid {} ({})", r.command, t.pid, t.comm),
        None => format!("trapdetect {}", r.command),
    };
    let _ = write!(
        o,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>\
body{{font:14px system-ui,sans-serif;margin:2em;max-width:80em}}table{{border-collapse:collapse;margin:.5em 0 1.5em}}\
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.fail{{border-left:6px solid #c00}}.warn{{border-left:6px solid #e90}}.info{{border-left:6px solid #09c}}\
.finding{{padding:.3em 1em;margin:.8em 0;background:#f8f8f8}}code,pre{{background:#eee;padding:1px 4px}}\
</style></head><body><h1>{}</h1>",
        h(&title),
        h(&title)
    );
    if let Some(t) = &r.target {
        let _ = write!(
            o,
            "<p>exe <code>{}</code> cwd <code>{}</code> processes {}</p>",
            h(&t.exe),
            h(&t.cwd),
            t.processes
        );
    }
    if let Some(w) = r.window_s {
        let _ = write!(o, "<p>window {w:.1} s</p>");
    }
    if let Some(q) = &r.requests {
        let _ = write!(
            o,
            "<p>requests {} ({})</p>",
            q.count.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            h(q.basis)
        );
    }
    let _ = write!(o, "<h2>Findings</h2>");
    if r.findings.is_empty() {
        let _ = write!(o, "<p>No traps found.</p>");
    }
    for f in &r.findings {
        let sev = format!("{:?}", f.severity).to_lowercase();
        let _ = write!(
            o,
            "<div class=\"finding {sev}\"><h3>{} <code>{}</code> {}</h3><table>",
            f.severity.label(),
            h(&f.id),
            h(&f.title)
        );
        for (k, v) in &f.evidence {
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", h(k), cell(v));
        }
        let _ = write!(o, "</table>");
        if let Some(p) = &f.predicted {
            let _ = write!(o, "<p><b>predicted</b> {}</p>", h(p));
        }
        let _ = write!(
            o,
            "<p><b>remedy</b> <code>{}</code></p></div>",
            h(&f.remedy)
        );
    }
    let json = serde_json::to_value(r).unwrap_or_default();
    for key in ["syscalls", "filesystems", "paths", "probes"] {
        if let Some(serde_json::Value::Array(rows)) = json.get(key) {
            if rows.is_empty() {
                continue;
            }
            let _ = write!(o, "<h2>{key}</h2><table><tr>");
            let cols: Vec<String> = rows[0]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for c in &cols {
                let _ = write!(o, "<th>{}</th>", h(c));
            }
            let _ = write!(o, "</tr>");
            for row in rows {
                let _ = write!(o, "<tr>");
                for c in &cols {
                    let _ = write!(o, "<td>{}</td>", row.get(c).map(cell).unwrap_or_default());
                }
                let _ = write!(o, "</tr>");
            }
            let _ = write!(o, "</table>");
        }
    }
    for (name, text) in &r.section_text {
        let _ = write!(o, "<h2>{}</h2><pre>{}</pre>", h(name), h(text));
    }
    let m = &r.measurement;
    let _ = write!(
        o,
        "<h2>Measurement</h2><p>{}</p><ul>",
        if m.trusted {
            "trusted"
        } else {
            "<b>NOT TRUSTED</b>"
        }
    );
    for p in m.problems.iter().chain(m.notes.iter()) {
        let _ = write!(o, "<li>{}</li>", h(p));
    }
    let _ = writeln!(o, "</ul><p>exit code {}</p></body></html>", r.exit_code);
    o
}
