//! Self-contained HTML rendering (one file: no scripts, no fonts, nothing fetched). It works
//! from the JSON document, so a saved `--json` report of any schema re-renders the same way
//! (`trapdetect report`), and reads its parts back into their types: the verdict, the
//! findings and `run`'s timeline ([`RunSecond`]) here, every chart reading its field by name in
//! the type; the sections that draw their own part (the load, the network, the host) through
//! `sections.rs`, which hands the parts in ([`Parts`]). What is still read by key: the header,
//! the filesystem, syscall and path tables, a step run's page, and the generic tables of
//! Details and Plumbing. The verdict and findings come first, then charts, then tables; the
//! plumbing (probes, self-monitoring counters, each section's text) is collapsed at the
//! bottom. Every string that came from the target was escaped into printable text when
//! observed; here it is escaped again for HTML (and plotters escapes chart labels for SVG).

use std::fmt::Write as _;

use serde_json::Value;

use super::{
    chart::{self, Bars, Marks, Series, Timeline},
    units,
};
use crate::{
    escape::html as h,
    traps::{
        Finding,
        run::{RunSecond, Verdict},
    },
};

/// The page style, shared with `compare`.
pub const CSS: &str = "\
:root{--fail:#b00020;--warn:#b86e00;--info:#0b6bcb;--ok:#1b7f3b;--line:#d8dce0;--soft:#f5f7f9}\
*{box-sizing:border-box}\
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d232a;margin:0 auto;padding:1.5rem;max-width:62rem}\
h1{font-size:1.45rem;margin:.2rem 0 .3rem}h2{font-size:1.2rem;margin:2rem 0 .6rem;padding-bottom:.2rem;border-bottom:2px solid var(--line)}\
h3{font-size:1.02rem;margin:0 0 .4rem}.meta{color:#555;margin:.2rem 0}\
.verdict{display:inline-block;padding:.25rem .7rem;border-radius:4px;font-weight:600;color:#fff;margin:.5rem 0}\
.v0{background:var(--ok)}.v1{background:var(--fail)}.v2,.v3,.v4{background:#6b4c9a}\
.finding{border:1px solid var(--line);border-left:6px solid var(--info);border-radius:4px;padding:.7rem 1rem;margin:.9rem 0;background:#fff;break-inside:avoid}\
.finding.fail{border-left-color:var(--fail)}.finding.warn{border-left-color:var(--warn)}\
.sev{display:inline-block;min-width:3.2em;text-align:center;font-size:.78rem;font-weight:700;color:#fff;border-radius:3px;padding:0 .3em;margin-right:.4em;background:var(--info)}\
.sev.fail{background:var(--fail)}.sev.warn{background:var(--warn)}\
.id{font:.85em ui-monospace,monospace;color:#555}\
.pm{background:var(--soft);border-radius:4px;padding:.4rem .7rem;margin:.5rem 0}\
table{border-collapse:collapse;margin:.4rem 0 1rem;font-size:.9rem}\
td,th{border-bottom:1px solid var(--line);padding:.2rem .6rem;text-align:left;vertical-align:top}\
th{font-weight:600;background:var(--soft)}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
table.kv th{background:none;color:#444;font-weight:500;white-space:nowrap}\
.wrap{overflow-x:auto;max-width:100%}\
code,pre{font:.85rem ui-monospace,'DejaVu Sans Mono',monospace;background:var(--soft);border-radius:3px}\
code{padding:0 .25em;overflow-wrap:anywhere}pre{padding:.5rem .7rem;white-space:pre-wrap;overflow-wrap:anywhere}\
.remedy pre{margin:.2rem 0}\
figure.chart{margin:.6rem 0 1.2rem;break-inside:avoid}figure.chart svg{width:100%;height:auto;max-width:760px;display:block}\
details{border:1px solid var(--line);border-radius:4px;padding:.3rem .8rem;margin:.6rem 0}\
summary{cursor:pointer;font-weight:600}\
.problems{border:2px solid var(--fail);border-radius:4px;padding:.5rem 1rem;margin:1rem 0}\
.sentence{font-size:1.08rem;margin:.4rem 0}.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(22rem,1fr));gap:.8rem}\
@media print{body{max-width:none;padding:0}details{border:none;padding:0}a{color:inherit}}";

/// What a page draws from its sections' own types (`sections::html` reads them back from the
/// document): each one's part of the page, its text, and those that could not be read back.
#[derive(Debug, Default)]
pub struct Parts {
    /// Each section's part of the page, by name.
    pub bodies: Vec<(String, String)>,
    /// Each section's text, by name (collapsed under Plumbing).
    pub texts: Vec<(String, String)>,
    /// Sections that could not be read back into their type, with why.
    pub unread: Vec<(String, String)>,
}

impl Parts {
    fn body(&self, name: &str) -> Option<&str> {
        self.bodies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b.as_str())
    }

    /// Section `name`'s part of the page, or why it has none.
    fn part(&self, o: &mut String, name: &str) {
        if let Some(b) = self.body(name) {
            o.push_str(b);
        } else if let Some((_, e)) = self.unread.iter().find(|(n, _)| n == name) {
            let _ = write!(
                o,
                "<p>The {} section could not be read back: {}</p>",
                h(name),
                h(e)
            );
        }
    }
}

/// Renders any trapdetect JSON document (`trapdetect.report/1`, `trapdetect.load/1`, a step
/// run) as an HTML page, with the parts its sections drew ([`Parts`]; `sections::html`
/// makes them).
pub fn render_value(doc: &Value, parts: &Parts) -> String {
    let mut o = String::new();
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("");
    if schema.starts_with("trapdetect.load-steps/") {
        return steps_page(doc);
    }
    let is_load = schema.starts_with("trapdetect.load");
    let command = if is_load {
        "load"
    } else {
        doc.get("command")
            .and_then(Value::as_str)
            .unwrap_or("report")
    };
    page_head(&mut o, &page_title(doc, command, is_load));
    header(&mut o, doc, is_load);
    let load = if is_load { doc } else { &doc["load"] };
    let marks = second_marks(doc, load);
    let timeline = run_timeline_of(doc);
    let secs = timeline.as_ref().and_then(|t| t.as_ref().ok());
    run_verdict(&mut o, doc, secs, &marks);
    findings(&mut o, doc);
    if is_load {
        let _ = write!(o, "<h2>Load</h2>");
        parts.part(&mut o, "load");
    } else if load.is_object() {
        let _ = write!(
            o,
            "<h2>{}</h2>",
            if command == "run" {
                "Load"
            } else {
                "Probe load"
            }
        );
        parts.part(&mut o, "load");
    }
    match &timeline {
        Some(Ok(secs)) => run_section(&mut o, secs, &marks),
        Some(Err(e)) => {
            let _ = write!(
                o,
                "<h2>Kernel timeline (per second)</h2><p>The run's timeline could not be read: {}</p>",
                h(&e.to_string())
            );
        }
        None => {}
    }
    parts.part(&mut o, "network");
    parts.part(&mut o, "host");
    filesystems(&mut o, doc);
    for key in ["syscalls", "paths"] {
        if let Some(Value::Array(rows)) = doc
            .get(key)
            .filter(|r| r.as_array().is_some_and(|a| !a.is_empty()))
        {
            let _ = write!(o, "<h2>{}</h2>", h(key));
            table(&mut o, rows);
        }
    }
    details(&mut o, doc, is_load, parts);
    plumbing(&mut o, doc, parts);
    let _ = writeln!(o, "</body></html>");
    o
}

/// The page's title: the command and its target (or the load's URL).
fn page_title(doc: &Value, command: &str, is_load: bool) -> String {
    match doc.get("target") {
        Some(t) if t.is_object() => format!(
            "trapdetect {command}: pid {} ({})",
            t["pid"],
            t["comm"].as_str().unwrap_or("?")
        ),
        _ if is_load => format!(
            "trapdetect load: {}",
            doc["plan"]["url"].as_str().unwrap_or("?")
        ),
        _ => format!("trapdetect {command}"),
    }
}

/// The `Details` heading: the sections that drew no part of their own and everything else
/// (collapsed, generic), the ignored and skipped rules. A load run's document is its load,
/// which shows its own details.
fn details(o: &mut String, doc: &Value, is_load: bool, parts: &Parts) {
    // Sections owned by other modules, and everything else: collapsed, generic.
    let shown = [
        "schema",
        "command",
        "version",
        "target",
        "window_s",
        "requests",
        "verdict",
        "findings",
        "ignored",
        "skipped",
        "syscalls",
        "filesystems",
        "paths",
        "probes",
        "measurement",
        "exit_code",
    ];
    let mut details = String::new();
    if let Value::Object(m) = doc
        && !is_load
    {
        for (k, v) in m
            .iter()
            .filter(|(k, _)| !shown.contains(&k.as_str()) && parts.body(k).is_none())
        {
            collapsed(&mut details, k, v);
        }
    }
    for key in ["ignored", "skipped"] {
        if let Some(Value::Array(a)) = doc
            .get(key)
            .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
        {
            let _ = write!(
                details,
                "<details><summary>{} ({})</summary><div class=\"wrap\">",
                h(key),
                a.len()
            );
            table(&mut details, a);
            let _ = write!(details, "</div></details>");
        }
    }
    if !details.is_empty() {
        let _ = write!(o, "<h2>Details</h2>{details}");
    }
}

fn page_head(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{t}</title><style>{CSS}</style></head><body><h1>{t}</h1>",
        t = h(title)
    );
}

/// A step run (`load --rate A..B --step N`): the knee first, then offered vs delivered and the
/// latency per step with the knee drawn, then the steps' table; each step's per-second series
/// collapsed.
fn steps_page(doc: &Value) -> String {
    let mut o = String::new();
    let o = &mut o;
    steps_head(o, doc);
    let steps: Vec<&Value> = doc["steps"].as_array().into_iter().flatten().collect();
    let rates: Vec<f64> = steps
        .iter()
        .map(|s| s["rate_per_s"].as_f64().unwrap_or(0.0))
        .collect();
    let knee_rate = doc["knee"]["rate_per_s"].as_f64();
    let _ = write!(o, "<h2>Steps ({})</h2>", steps.len());
    steps_rate_chart(o, doc, &steps, rates.clone(), knee_rate);
    steps_latency_chart(o, &steps, rates, knee_rate);
    table(o, &step_rows(&steps));
    steps_details(o, doc, &steps);
    let _ = writeln!(o, "</body></html>");
    std::mem::take(o)
}

/// The step run's title, plan, SLO and knee.
fn steps_head(o: &mut String, doc: &Value) {
    page_head(
        o,
        &format!(
            "trapdetect load steps: {}",
            doc["plan"]["url"].as_str().unwrap_or("?")
        ),
    );
    let slo = doc["slo_p99_us"]
        .as_f64()
        .map_or("no latency SLO".to_string(), |us| {
            format!("SLO p99 {}", chart::duration_us(us))
        });
    let _ = write!(
        o,
        "<p class=\"meta\">{}/s to {}/s by {}/s · {} each · {} · trapdetect {}</p>",
        units::fmt_num(doc["from_per_s"].as_f64().unwrap_or(0.0)),
        units::fmt_num(doc["to_per_s"].as_f64().unwrap_or(0.0)),
        units::fmt_num(doc["step_per_s"].as_f64().unwrap_or(0.0)),
        chart::duration_us(doc["step_duration_s"].as_f64().unwrap_or(0.0) * 1e6),
        h(&slo),
        h(doc["version"].as_str().unwrap_or("?"))
    );
    let code = doc["exit_code"].as_i64().unwrap_or(0);
    let knee = &doc["knee"];
    let _ = write!(
        o,
        "<span class=\"verdict v{}\">knee: {} · exit {code}</span>\
<div class=\"pm\">{}</div>",
        code.min(4),
        h(&knee["verdict"].as_str().unwrap_or("?").replace('_', " ")),
        h(knee["text"].as_str().unwrap_or(""))
    );
}

/// Field `k` of each step.
fn per_step(steps: &[&Value], k: &str) -> Vec<Option<f64>> {
    steps.iter().map(|s| s[k].as_f64()).collect()
}

/// Offered, delivered and errors per step, the knee drawn.
fn steps_rate_chart(
    o: &mut String,
    doc: &Value,
    steps: &[&Value],
    rates: Vec<f64>,
    knee: Option<f64>,
) {
    figure(
        o,
        chart::Steps {
            title: "Offered vs delivered per step".into(),
            unit: "req/s".into(),
            rates,
            series: vec![
                Series {
                    name: "offered".into(),
                    values: per_step(steps, "offered_per_s"),
                },
                Series {
                    name: "delivered (2xx in the step)".into(),
                    values: per_step(steps, "delivered_per_s"),
                },
                Series {
                    name: "errors + non-2xx".into(),
                    values: steps
                        .iter()
                        .map(|s| {
                            let secs = doc["step_duration_s"].as_f64().unwrap_or(1.0).max(1e-9);
                            Some(
                                (s["errors_total"].as_f64().unwrap_or(0.0)
                                    + s["non_2xx"].as_f64().unwrap_or(0.0))
                                    / secs,
                            )
                        })
                        .collect(),
                },
            ],
            knee,
            log_y: false,
        }
        .svg(),
    );
}

/// 2xx latency and scheduling lag per step, the knee drawn.
fn steps_latency_chart(o: &mut String, steps: &[&Value], rates: Vec<f64>, knee: Option<f64>) {
    figure(
        o,
        chart::Steps {
            title: "2xx latency per step (from the intended send time)".into(),
            unit: "latency (log scale)".into(),
            rates,
            series: vec![
                Series {
                    name: "p50".into(),
                    values: per_step(steps, "latency_p50_us"),
                },
                Series {
                    name: "p99".into(),
                    values: per_step(steps, "latency_p99_us"),
                },
                Series {
                    name: "scheduling lag p99".into(),
                    values: per_step(steps, "sched_lag_p99_us"),
                },
            ],
            knee,
            log_y: true,
        }
        .svg(),
    );
}

/// The table's rows: every scalar of a step (the series are below, collapsed); the errors by
/// kind in one cell, only the kinds that occurred, so a row stays one line high.
fn step_rows(steps: &[&Value]) -> Vec<Value> {
    steps
        .iter()
        .map(|s| {
            let mut m = s.as_object().cloned().unwrap_or_default();
            m.remove("series");
            if let Some(Value::Object(kinds)) = m.get("errors") {
                let seen: Vec<String> = kinds
                    .iter()
                    .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let cell = if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                };
                m.insert("errors".into(), Value::String(cell));
            }
            Value::Object(m)
        })
        .collect()
}

/// Each step's per-second series and the plan, collapsed.
fn steps_details(o: &mut String, doc: &Value, steps: &[&Value]) {
    let mut details = String::new();
    for s in steps {
        let _ = write!(
            details,
            "<details><summary>step {}/s: per second</summary><div class=\"wrap\">",
            units::fmt_num(s["rate_per_s"].as_f64().unwrap_or(0.0))
        );
        if let Some(a) = s["series"].as_array() {
            table(&mut details, a);
        }
        let _ = write!(details, "</div></details>");
    }
    let _ = write!(
        details,
        "<details><summary>plan</summary><div class=\"wrap\">"
    );
    value(&mut details, "", &doc["plan"]);
    let _ = write!(details, "</div></details>");
    let _ = write!(o, "<h2>Details</h2>{details}");
}

fn header(o: &mut String, doc: &Value, is_load: bool) {
    if let Some(t) = doc.get("target").filter(|t| t.is_object()) {
        let _ = write!(
            o,
            "<p class=\"meta\">exe <code>{}</code> · cwd <code>{}</code> · {} processes</p>",
            h(t["exe"].as_str().unwrap_or("?")),
            h(t["cwd"].as_str().unwrap_or("?")),
            t["processes"]
        );
        if let Some(how) = t.get("selected_by").and_then(Value::as_str) {
            let _ = write!(o, "<p class=\"meta\">target {}</p>", h(how));
        }
    }
    let mut facts = vec![];
    if let Some(w) = doc.get("window_s").and_then(Value::as_f64) {
        facts.push(format!("window {}", chart::duration_us(w * 1e6)));
    }
    if let Some(q) = doc.get("requests").filter(|q| q.is_object()) {
        let c = q["count"]
            .as_u64()
            .map(|c| c.to_string())
            .unwrap_or("-".into());
        facts.push(format!(
            "{} requests ({})",
            c,
            h(q["basis"].as_str().unwrap_or(""))
        ));
    }
    if is_load {
        facts.push(format!(
            "{} offered at {}/s, {} s",
            doc["plan"]["mode"].as_str().unwrap_or("?"),
            chart::human(doc["offered_rate_per_s"].as_f64().unwrap_or(0.0)),
            units::fmt_num(doc["window"]["measured_s"].as_f64().unwrap_or(0.0))
        ));
    }
    if let Some(v) = doc.get("version").and_then(Value::as_str) {
        facts.push(format!("trapdetect {}", h(v)));
    }
    if !facts.is_empty() {
        let _ = write!(o, "<p class=\"meta\">{}</p>", facts.join(" · "));
    }
    let code = doc.get("exit_code").and_then(Value::as_i64).unwrap_or(0);
    let verdict = match code {
        0 => "no failing trap",
        1 => "failing trap found",
        3 => "measurement not trusted",
        _ => "error",
    };
    let _ = write!(
        o,
        "<span class=\"verdict v{code}\">{verdict} · exit {code}</span>"
    );
    let m = &doc["measurement"];
    if m["trusted"] == Value::Bool(false) {
        let _ = write!(
            o,
            "<div class=\"problems\"><b>The measurement cannot be trusted:</b><ul>"
        );
        for p in m["problems"].as_array().into_iter().flatten() {
            let _ = write!(o, "<li>{}</li>", h(p.as_str().unwrap_or("")));
        }
        let _ = write!(o, "</ul></div>");
    }
}

/// `run`'s verdict first: the sentence, its figures, the consequences, and the chart that
/// proves it: delivered against offered beside the threads waiting on the cause's resource.
fn run_verdict(o: &mut String, doc: &Value, secs: Option<&RunSeconds>, marks: &[Marks]) {
    let Some(v) = doc.get("verdict").filter(|v| v.is_object()) else {
        return;
    };
    let v = match serde_json::from_value::<Verdict>(v.clone()) {
        Ok(v) => v,
        Err(e) => {
            let _ = write!(
                o,
                "<h2>Verdict</h2><p>The verdict could not be read: {}</p>",
                h(&e.to_string())
            );
            return;
        }
    };
    verdict_text(o, &v);
    let Some(secs) = secs.filter(|s| !s.rows.is_empty()) else {
        return;
    };
    let cause = v.cause.as_deref().unwrap_or("");
    let waiters = cause_waiters(secs, cause);
    let _ = write!(o, "<div class=\"pair\">");
    figure(
        o,
        Timeline {
            title: "Delivered against offered".into(),
            unit: "requests per second".into(),
            series: verdict_rates(secs),
            marks: marks.to_vec(),
            log_y: false,
        }
        .svg(),
    );
    if !waiters.is_empty() {
        figure(
            o,
            Timeline {
                title: format!("What the cause holds ({cause})"),
                unit: "threads, on average".into(),
                series: waiters,
                marks: marks.to_vec(),
                log_y: false,
            }
            .svg(),
        );
    }
    let _ = write!(o, "</div>");
}

/// The verdict's sentence, its figures and its consequences.
fn verdict_text(o: &mut String, v: &Verdict) {
    let _ = write!(
        o,
        "<h2>Verdict</h2><p class=\"sentence\"><b>{}</b></p>",
        h(&v.summary)
    );
    let mut facts = vec![];
    if let Some(s) = v.share_of_thread_wall_time_pct {
        facts.push(format!("explains {s} % of the server's threads' wall time"));
    }
    facts.push(format!(
        "delivered {}/s ({})",
        units::fmt_num(v.delivered_per_s),
        h(&v.delivered_basis)
    ));
    if let Some(r) = v.offered_per_s {
        facts.push(format!("offered {}/s", units::fmt_num(r)));
    }
    if let Some(c) = v.predicted_ceiling_per_s {
        facts.push(format!("predicted ceiling {}/s", units::fmt_num(c)));
    }
    if !v.capped_by.is_empty() {
        facts.push(format!("capped: {}", h(&v.capped_by.join(", "))));
    }
    let _ = write!(o, "<p class=\"meta\">{}</p>", facts.join(" · "));
    if let Some(b) = &v.ceiling_basis {
        let _ = write!(o, "<div class=\"pm\"><b>ceiling</b> {}</div>", h(b));
    }
    if !v.consequences.is_empty() {
        let _ = write!(
            o,
            "<p class=\"meta\">consequences (listed below as warnings): {}</p>",
            h(&v.consequences.join(", "))
        );
    }
}

/// Delivered (2xx, or served) each second, and offered when the run offered any.
fn verdict_rates(secs: &RunSeconds) -> Vec<Series> {
    let offered = secs.rows.iter().any(|p| p.offered > 0);
    let mut rates = vec![Series {
        name: "delivered (2xx)".into(),
        values: secs.col(|p| {
            Some(p.ok_2xx as f64)
                .filter(|v| *v > 0.0)
                .or(p.served.map(|s| s as f64))
        }),
    }];
    if offered {
        rates.insert(
            0,
            Series {
                name: "offered".into(),
                values: secs.col(|p| Some(p.offered as f64)),
            },
        );
    }
    rates
}

/// What the verdict's cause holds each second: the threads waiting on its resource (none for
/// a cause without one).
fn cause_waiters(secs: &RunSeconds, cause: &str) -> Vec<Series> {
    let col = |f: &dyn Fn(&RunSecond) -> Option<f64>| secs.col(f);
    let class = |names: &'static [&'static str]| -> Vec<Option<f64>> {
        col(&move |p| Some(names.iter().filter_map(|c| p.off_cpu.get(c)).sum()))
    };
    match cause {
        c if c.starts_with("fs.") => vec![Series {
            name: "threads waiting on the filesystem".into(),
            values: class(&["path", "file_io"]),
        }],
        "lock.contention" => vec![Series {
            name: "threads waiting for the lock".into(),
            values: class(&["file_lock", "futex"]),
        }],
        "pool.too-small" | "net.fd-limit" => vec![
            Series {
                name: "busy workers".into(),
                values: col(&|p| Some(p.busy_threads as f64)),
            },
            Series {
                name: "accept queue".into(),
                values: col(&|p| p.accept_queue.map(|q| q as f64)),
            },
        ],
        "host.noise" => vec![
            Series {
                name: "the target's cores".into(),
                values: col(&|p| Some(p.target_cores)),
            },
            Series {
                name: "others on its CPUs".into(),
                values: col(&|p| Some(p.noise_cores)),
            },
            Series {
                name: "of them, the hypervisor (steal)".into(),
                values: col(&|p| Some(p.steal_cores)),
            },
        ],
        c if c.starts_with("cpu.") => vec![
            Series {
                name: "on CPU".into(),
                values: col(&|p| Some(p.target_cores)),
            },
            Series {
                name: "run queue".into(),
                values: col(&|p| Some(p.run_queue)),
            },
        ],
        _ => vec![],
    }
}

/// `run`'s timeline as the typed rows `run` joined (what its text renders from too); `None`
/// for a document without one.
fn run_timeline_of(doc: &Value) -> Option<Result<RunSeconds, serde_json::Error>> {
    doc.pointer("/run/timeline")
        .map(|t| serde_json::from_value::<Vec<RunSecond>>(t.clone()).map(RunSeconds::new))
}

/// `run`'s per-second rows, typed, as chart columns indexed by the second of the run (so the
/// shading lines up with the load charts).
struct RunSeconds {
    rows: Vec<RunSecond>,
    n: usize,
}

impl RunSeconds {
    fn new(rows: Vec<RunSecond>) -> Self {
        let n = rows
            .iter()
            .map(|p| p.t_s)
            .max()
            .map_or(rows.len(), |t| t as usize + 1);
        RunSeconds { rows, n }
    }

    /// `f` of each second's row (`None` for a second without a row).
    fn col(&self, f: impl Fn(&RunSecond) -> Option<f64>) -> Vec<Option<f64>> {
        let mut v = vec![None; self.n];
        for p in &self.rows {
            if let Some(x) = v.get_mut(p.t_s as usize) {
                *x = f(p);
            }
        }
        v
    }

    /// Keys of a per-second map (off-CPU classes, mounts), in first-seen order.
    fn keys_of<'a, K: AsRef<str> + 'a, I: Iterator<Item = &'a K>>(
        &'a self,
        f: impl Fn(&'a RunSecond) -> I,
    ) -> Vec<String> {
        let mut keys: Vec<String> = vec![];
        for p in &self.rows {
            for k in f(p) {
                if !keys.iter().any(|x| x == k.as_ref()) {
                    keys.push(k.as_ref().to_string());
                }
            }
        }
        keys
    }
}

/// The findings, fail first as the report holds them, each read back into its type: the
/// title, the prediction, the measured evidence (collapsed) and the remedy.
fn findings(o: &mut String, doc: &Value) {
    let list = match serde_json::from_value::<Vec<Finding>>(
        doc.get("findings").cloned().unwrap_or(Value::Array(vec![])),
    ) {
        Ok(l) => l,
        Err(e) => {
            let _ = write!(
                o,
                "<h2>Findings</h2><p>The findings could not be read: {}</p>",
                h(&e.to_string())
            );
            return;
        }
    };
    let _ = write!(o, "<h2>Findings ({})</h2>", list.len());
    if list.is_empty() {
        let _ = write!(o, "<p>No traps found.</p>");
    }
    for f in &list {
        let sev = f.severity.label();
        let _ = write!(
            o,
            "<div class=\"finding {s}\"><h3><span class=\"sev {s}\">{}</span>{} <span class=\"id\">{}</span></h3>",
            sev,
            h(&f.title),
            f.id,
            s = sev.to_lowercase()
        );
        if let Some(p) = &f.predicted {
            let _ = write!(o, "<div class=\"pm\"><b>predicted</b> {}</div>", h(p));
        }
        if !f.evidence.is_empty() {
            // Collapsed under the title: 20-30 rows each would bury the verdict.
            let _ = write!(
                o,
                "<details><summary>measured ({} values)</summary><div class=\"wrap\"><table class=\"kv\">",
                f.evidence.len()
            );
            for (k, v) in &f.evidence {
                let _ = write!(o, "<tr><th>{}</th><td>", h(k));
                value(o, k, v);
                let _ = write!(o, "</td></tr>");
            }
            let _ = write!(o, "</table></div></details>");
        }
        if !f.remedy.is_empty() {
            let _ = write!(
                o,
                "<div class=\"remedy\"><b>remedy</b><pre>{}</pre></div>",
                h(&f.remedy)
            );
        }
        let _ = write!(o, "</div>");
    }
}

/// A chart, when there is one to draw.
pub fn figure(o: &mut String, svg: Option<String>) {
    if let Some(s) = svg {
        let _ = write!(o, "<figure class=\"chart\">{s}</figure>");
    }
}

/// The seconds every timeline shades: where the generator fell behind its schedule (its lag
/// above the plan's budget, or marked so by `run`), where the kernel lost events, the drain
/// after the window, and any other reason `run` marks a second with. `l` is the load run (the
/// document itself, or its `load` section).
pub fn second_marks(doc: &Value, l: &Value) -> Vec<Marks> {
    let mut by: Vec<(String, Vec<usize>)> = vec![
        ("generator lagged".into(), vec![]),
        ("events lost".into(), vec![]),
        ("drain".into(), vec![]),
    ];
    let mut add = |label: &str, t: usize| {
        let i = match by.iter().position(|(l, _)| l == label) {
            Some(i) => i,
            None => {
                by.push((label.to_string(), vec![]));
                by.len() - 1
            }
        };
        if !by[i].1.contains(&t) {
            by[i].1.push(t);
        }
    };
    let series = l["series"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let budget = l["plan"]["lag_budget_us"].as_f64().unwrap_or(f64::INFINITY);
    for (i, p) in series.iter().enumerate() {
        let t = p["t_s"].as_u64().map_or(i, |t| t as usize);
        if p["sched_lag_max_us"].as_f64().is_some_and(|v| v > budget) {
            add("generator lagged", t);
        }
    }
    // Seconds after the window: its last arrivals still completing, no new ones.
    if let Some(w) = l["window"]["measured_s"].as_f64() {
        for t in w.ceil() as usize..series.len() {
            add("drain", t);
        }
    }
    for r in doc
        .pointer("/run/timeline")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(t) = r["t_s"].as_u64() else { continue };
        for m in r["marks"].as_array().into_iter().flatten() {
            let label = match m.as_str().unwrap_or("?") {
                "generator-lag" => "generator lagged".to_string(),
                "lost-events" => "events lost".to_string(),
                other => other.replace('-', " "),
            };
            add(&label, t as usize);
        }
    }
    by.into_iter()
        .map(|(label, mut seconds)| {
            seconds.sort_unstable();
            Marks { label, seconds }
        })
        .collect()
}

/// How a chart reads one field of a second.
type ReadSecond = fn(&RunSecond) -> Option<f64>;

/// The per-second fields of `run`'s timeline that get a chart of their own when any second
/// has them (in [`RunSecond`]'s order), with how to read each; the charts above show the
/// others (the unit test `every_timeline_field_is_charted` keeps the two lists whole).
const RUN_EXTRA: [(&str, ReadSecond); 7] = [
    ("charged_cores", |p| p.charged_cores),
    ("accept_queue", |p| p.accept_queue.map(|v| v as f64)),
    ("throttled_periods", |p| {
        p.throttled_periods.map(|v| v as f64)
    }),
    ("throttled_ms", |p| p.throttled_ms),
    ("served", |p| p.served.map(|v| v as f64)),
    ("client_cores", |p| p.client_cores),
    ("client_run_queue", |p| p.client_run_queue),
];

/// `run`'s kernel timeline: where the traced threads were each second (stacked: on CPU,
/// run queue, off CPU by class), busy workers, cores, filesystem requests, and the other
/// per-second fields any second has, each shaded with `marks`.
fn run_section(o: &mut String, secs: &RunSeconds, marks: &[Marks]) {
    if secs.rows.is_empty() {
        return;
    }
    let _ = write!(o, "<h2>Kernel timeline (per second)</h2>");
    threads_chart(o, secs, marks);
    workers_and_cpu_charts(o, secs, marks);
    let mut fs = vec![Series {
        name: "path syscalls".into(),
        values: secs.col(|p| Some(p.path_calls as f64)),
    }];
    for k in secs.keys_of(|p| p.fs_ops.keys()) {
        fs.push(Series {
            name: format!("requests on {k}"),
            values: secs.col(|p| p.fs_ops.get(&k).map(|v| *v as f64)),
        });
    }
    figure(
        o,
        run_timeline(
            "Path syscalls and filesystem requests",
            "per second",
            fs,
            marks,
        )
        .svg(),
    );
    extra_charts(o, secs, marks);
}

/// One of `run`'s per-second charts, shaded with `marks`.
fn run_timeline(title: &str, unit: &str, series: Vec<Series>, marks: &[Marks]) -> Timeline {
    Timeline {
        title: title.into(),
        unit: unit.into(),
        series,
        marks: marks.to_vec(),
        log_y: false,
    }
}

/// Where the traced threads were each second, stacked: on CPU, run queue, off CPU by class.
fn threads_chart(o: &mut String, secs: &RunSeconds, marks: &[Marks]) {
    let mut parts = vec![
        Series {
            name: "on CPU".into(),
            values: secs.col(|p| Some(p.target_cores)),
        },
        Series {
            name: "run queue".into(),
            values: secs.col(|p| Some(p.run_queue)),
        },
    ];
    for k in secs.keys_of(|p| p.off_cpu.keys()) {
        parts.push(Series {
            name: format!("off CPU: {}", k.replace('_', " ")),
            values: secs.col(|p| p.off_cpu.get(k.as_str()).copied()),
        });
    }
    figure(
        o,
        chart::Stacked {
            title: "Where the traced threads were (stacked)".into(),
            unit: "threads, on average".into(),
            series: parts,
            marks: marks.to_vec(),
        }
        .svg(),
    );
}

/// Busy workers against the traced threads; the host's cores, the target's and the noise.
fn workers_and_cpu_charts(o: &mut String, secs: &RunSeconds, marks: &[Marks]) {
    figure(
        o,
        run_timeline(
            "Busy workers (not waiting for work at the sample)",
            "threads",
            vec![
                Series {
                    name: "busy".into(),
                    values: secs.col(|p| Some(p.busy_threads as f64)),
                },
                Series {
                    name: "traced threads".into(),
                    values: secs.col(|p| Some(p.threads as f64)),
                },
            ],
            marks,
        )
        .svg(),
    );
    figure(
        o,
        run_timeline(
            "CPU: host cores busy, the target's CPUs busy, the target's share and others' (noise)",
            "cores",
            vec![
                Series {
                    name: "host".into(),
                    values: secs.col(|p| Some(p.cores_busy)),
                },
                Series {
                    name: "the target's CPUs".into(),
                    values: secs.col(|p| Some(p.target_cpus_busy)),
                },
                Series {
                    name: "target".into(),
                    values: secs.col(|p| Some(p.target_cores)),
                },
                Series {
                    name: "noise".into(),
                    values: secs.col(|p| Some(p.noise_cores)),
                },
                Series {
                    name: "of it, the hypervisor's (steal)".into(),
                    values: secs.col(|p| Some(p.steal_cores)),
                },
            ],
            marks,
        )
        .svg(),
    );
}

/// The other per-second fields ([`RUN_EXTRA`]): one chart each that some second has, in the
/// order the seconds first have them.
fn extra_charts(o: &mut String, secs: &RunSeconds, marks: &[Marks]) {
    let mut extra: Vec<(&str, ReadSecond)> = vec![];
    for p in &secs.rows {
        for (k, f) in RUN_EXTRA {
            if f(p).is_some() && !extra.iter().any(|(e, _)| *e == k) {
                extra.push((k, f));
            }
        }
    }
    for (k, f) in extra {
        figure(
            o,
            run_timeline(
                &k.replace('_', " "),
                "per second",
                vec![Series {
                    name: k.replace('_', " "),
                    values: secs.col(f),
                }],
                marks,
            )
            .svg(),
        );
    }
}

/// Lookups and syscall time per request, per filesystem.
fn filesystems(o: &mut String, doc: &Value) {
    let Some(rows) = doc["filesystems"].as_array().filter(|r| !r.is_empty()) else {
        return;
    };
    let _ = write!(o, "<h2>Filesystems</h2>");
    let per_req = rows.iter().any(|r| r["lookups_per_request"].is_number());
    let cats: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} ({})",
                r["mount_point"].as_str().unwrap_or("?"),
                r["fs_type"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let (lk, unit) = if per_req {
        ("lookups_per_request", "per request")
    } else {
        ("lookups_per_second", "per second")
    };
    figure(
        o,
        Bars {
            title: format!("Path lookups {unit}"),
            unit: unit.into(),
            categories: cats.clone(),
            measures: vec![(
                "lookups".into(),
                rows.iter().map(|r| r[lk].as_f64().unwrap_or(0.0)).collect(),
            )],
        }
        .svg(),
    );
    if per_req {
        figure(
            o,
            Bars {
                title: "Syscall time per request".into(),
                unit: "ms per request".into(),
                categories: cats,
                measures: vec![(
                    "syscall time".into(),
                    rows.iter()
                        .map(|r| r["syscall_ms_per_request"].as_f64().unwrap_or(0.0))
                        .collect(),
                )],
            }
            .svg(),
        );
    }
    table(o, rows);
}

fn plumbing(page: &mut String, doc: &Value, parts: &Parts) {
    let mut o = String::new();
    let o = &mut o;
    let m = &doc["measurement"];
    let notes: Vec<&Value> = m["notes"].as_array().into_iter().flatten().collect();
    if !notes.is_empty() {
        let _ = write!(
            o,
            "<details><summary>measurement notes ({})</summary><ul>",
            notes.len()
        );
        for n in notes {
            let _ = write!(o, "<li>{}</li>", h(n.as_str().unwrap_or("")));
        }
        let _ = write!(o, "</ul></details>");
    }
    if let Some(Value::Array(p)) = doc
        .get("probes")
        .filter(|p| p.as_array().is_some_and(|a| !a.is_empty()))
    {
        let up = p
            .iter()
            .filter(|r| r["attached"] == Value::Bool(true))
            .count();
        let _ = write!(
            o,
            "<details><summary>probes ({up} of {} attached)</summary><div class=\"wrap\">",
            p.len()
        );
        table(o, p);
        let _ = write!(o, "</div></details>");
    }
    if let Some(c) = m
        .get("counters")
        .filter(|c| c.as_object().is_some_and(|m| !m.is_empty()))
    {
        let _ = write!(
            o,
            "<details><summary>self-monitoring counters</summary><div class=\"wrap\">"
        );
        value(o, "", c);
        let _ = write!(o, "</div></details>");
    }
    for (name, text) in &parts.texts {
        let _ = write!(
            o,
            "<details><summary>{} (text)</summary><pre>{}</pre></details>",
            h(name),
            h(text)
        );
    }
    for (name, e) in &parts.unread {
        let _ = write!(
            o,
            "<details><summary>{} (could not be read back)</summary><p>{}</p></details>",
            h(name),
            h(e)
        );
    }
    if !o.is_empty() {
        let _ = write!(page, "<h2>Plumbing</h2>{o}");
    }
}

/// Section `name`'s JSON value as tables, collapsed under its name.
pub fn collapsed(o: &mut String, name: &str, v: &Value) {
    let _ = write!(
        o,
        "<details><summary>{}</summary><div class=\"wrap\">",
        h(name)
    );
    value(o, name, v);
    let _ = write!(o, "</div></details>");
}

/// Labelled lines as a key/value table, both sides escaped.
pub fn kv<K: AsRef<str>, V: AsRef<str>>(o: &mut String, rows: &[(K, V)]) {
    let _ = write!(o, "<table class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(
            o,
            "<tr><th>{}</th><td>{}</td></tr>",
            h(k.as_ref()),
            h(v.as_ref())
        );
    }
    let _ = write!(o, "</table>");
}

/// Any JSON value as HTML: objects as key/value tables, arrays of objects as tables.
pub fn value(o: &mut String, key: &str, v: &Value) {
    match v {
        Value::String(s) => {
            let _ = write!(o, "{}", h(s));
        }
        Value::Null => o.push('-'),
        Value::Bool(b) => {
            let _ = write!(o, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(o, "{}", h(&units::by_key(key, n.as_f64().unwrap_or(0.0))));
        }
        Value::Array(a) if a.iter().all(Value::is_object) && !a.is_empty() => table(o, a),
        Value::Array(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|x| {
                    let mut s = String::new();
                    value(&mut s, key, x);
                    s
                })
                .collect();
            let _ = write!(o, "{}", parts.join(", "));
        }
        Value::Object(m) if m.is_empty() => o.push('-'),
        Value::Object(m) => {
            let _ = write!(o, "<table class=\"kv\">");
            for (k, v) in m {
                let _ = write!(o, "<tr><th>{}</th><td>", h(k));
                value(o, k, v);
                let _ = write!(o, "</td></tr>");
            }
            let _ = write!(o, "</table>");
        }
    }
}

/// An array of objects as one table; numbers right-aligned, text left-aligned.
fn table(o: &mut String, rows: &[Value]) {
    let mut cols: Vec<String> = vec![];
    for r in rows {
        for k in r.as_object().into_iter().flat_map(|m| m.keys()) {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    if cols.is_empty() {
        return;
    }
    let numeric = |c: &String| {
        rows.iter()
            .all(|r| r.get(c).is_none_or(|v| v.is_number() || v.is_null()))
    };
    let _ = write!(o, "<div class=\"wrap\"><table><tr>");
    for c in &cols {
        let _ = write!(
            o,
            "<th{}>{}</th>",
            if numeric(c) { " class=\"n\"" } else { "" },
            h(c)
        );
    }
    let _ = write!(o, "</tr>");
    for r in rows {
        let _ = write!(o, "<tr>");
        for c in &cols {
            let _ = write!(o, "<td{}>", if numeric(c) { " class=\"n\"" } else { "" });
            if let Some(v) = r.get(c) {
                value(o, c, v);
            }
            let _ = write!(o, "</td>");
        }
        let _ = write!(o, "</tr>");
    }
    let _ = write!(o, "</table></div>");
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;
    use crate::traps::Id;
    use crate::traps::{Finding, Severity};

    const EVIL: &str = "/srv/<script>alert(1)</script>&\"'";

    #[test]
    fn target_strings_are_escaped_everywhere() {
        let mut r = crate::report::Report::new("trace");
        r.target = Some(crate::report::Target {
            pid: 1,
            comm: EVIL.into(),
            exe: EVIL.into(),
            cwd: EVIL.into(),
            processes: 1,
            exited_after_s: None,
            selected_by: None,
        });
        r.findings.push(
            Finding::new(Id::FsCwdSlow, Severity::Fail, EVIL)
                .with("cwd", EVIL)
                .with("nested", json!({ "path": EVIL, "rows": [{ "p": EVIL }] })),
        );
        r.filesystems.push(crate::report::FsRow {
            mount_point: EVIL.into(),
            fs_type: "fuse.slowfs".into(),
            source: EVIL.into(),
            slow: None,
            lookups: 10,
            lookups_per_request: Some(7.0),
            lookups_per_second: 70.0,
            syscall_ms_per_request: Some(1.5),
            syscall_latency: None,
            fuse_ops: vec![],
            fuse_queue: vec![],
        });
        struct Host;
        impl crate::report::Section for Host {
            fn name(&self) -> &'static str {
                "host"
            }
            fn json(&self) -> Result<Value, String> {
                Ok(json!({ "hostname": EVIL }))
            }
            fn text(&self) -> String {
                EVIL.into()
            }
        }
        r.add(&Host);
        r.probes.push(crate::report::ProbeRow {
            program: "p".into(),
            attach: EVIL.into(),
            attached: true,
            note: EVIL.into(),
        });
        let doc = serde_json::to_value(&r).unwrap();
        let page = render_value(
            &doc,
            &Parts {
                texts: r.section_text.clone(),
                ..Default::default()
            },
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("alert(1)</"), "{page}");
        // The filesystem bar chart carries the mount point as an escaped SVG label.
        assert!(page.contains("<svg"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        // No resource is fetched: no src/href at all.
        assert!(!page.contains("src=") && !page.contains("href="), "{page}");
    }

    #[test]
    fn run_documents_stack_threads_and_shade_marked_seconds() {
        let sec = |t: u64, marks: &[&str]| {
            json!({"t_s": t, "offered": 80, "ok_2xx": 25, "non_2xx": 0, "errors": {},
                "p99_us": 900000.0, "in_flight": 60, "cores_busy": 0.5, "target_cpus_busy": 0.5,
                "noise_cores": 0.0, "target_cores": 0.1,
                "run_queue": 0.0, "off_cpu": {"sleep": 0.9, "futex": 0.0},
                "threads": 2, "busy_threads": 1, "path_calls": 10, "fs_ops": {},
                "accept_queue": 7, "throttled_periods": null, "throttled_ms": null,
                "marks": marks})
        };
        let doc = json!({
            "schema": "trapdetect.report/1", "command": "run", "version": "0",
            "findings": [], "measurement": {"trusted": true, "problems": []}, "exit_code": 0,
            "run": {"timeline": [sec(0, &[]), sec(1, &["lost-events"]), sec(2, &["lost-events", "generator-lag"])]}
        });
        let page = render_value(&doc, &Parts::default());
        // Stacked threads, busy workers, cores, path calls, and the accept queue's own chart.
        assert_eq!(page.matches("<svg").count(), 5, "{page}");
        assert!(page.contains("Where the traced threads were (stacked)"));
        assert!(page.contains("off CPU: sleep"));
        // A class that stayed at zero is left out of the legend.
        assert!(!page.contains("off CPU: futex"));
        assert!(page.contains("accept queue"));
        assert_eq!(page.matches("events lost (2 s)").count(), 5, "{page}");
        assert_eq!(page.matches("generator lagged (1 s)").count(), 5);
    }

    /// Every per-second field of `run`'s timeline is charted: by the charts the section draws
    /// (`RUN_CHARTED`), the load charts (`LOAD_COLUMNS`) or one of its own (`RUN_EXTRA`). A field
    /// added to `RunSecond` fails here until it is given a place.
    #[test]
    fn every_timeline_field_is_charted() {
        const RUN_CHARTED: [&str; 13] = [
            "t_s",
            "marks",
            "cores_busy",
            "target_cpus_busy",
            "noise_cores",
            "steal_cores",
            "target_cores",
            "run_queue",
            "off_cpu",
            "threads",
            "busy_threads",
            "path_calls",
            "fs_ops",
        ];
        let full = RunSecond {
            charged_cores: Some(1.0),
            accept_queue: Some(1),
            throttled_periods: Some(1),
            throttled_ms: Some(1.0),
            served: Some(1),
            client_cores: Some(1.0),
            client_run_queue: Some(1.0),
            ..RunSecond::default()
        };
        let v = serde_json::to_value(&full).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let extra: Vec<&str> = RUN_EXTRA.iter().map(|(k, _)| *k).collect();
        for k in &keys {
            let places = [
                RUN_CHARTED.contains(k),
                crate::traps::run::LOAD_COLUMNS.contains(k),
                extra.contains(k),
            ];
            assert_eq!(places.iter().filter(|p| **p).count(), 1, "{k}: {places:?}");
        }
        // Each extra reads its own field.
        for (k, f) in RUN_EXTRA {
            assert_eq!(f(&full), v[k].as_f64(), "{k}");
            assert_eq!(f(&RunSecond::default()), None, "{k}");
        }
        assert_eq!(keys.len(), RUN_CHARTED.len() + 6 + RUN_EXTRA.len());
    }

    #[test]
    fn an_unreadable_timeline_verdict_or_finding_is_said_and_the_page_still_renders() {
        let doc = json!({
            "schema": "trapdetect.report/1", "command": "run", "version": "0",
            "findings": [{"id": "no.such-trap", "severity": "fail"}], "measurement": {"trusted": true, "problems": []}, "exit_code": 0,
            "run": {"timeline": [{"t_s": 0, "offered": "many"}]},
            "verdict": {"summary": 5}
        });
        let page = render_value(&doc, &Parts::default());
        assert!(
            page.contains("<p>The run's timeline could not be read: invalid type: string"),
            "{page}"
        );
        assert!(
            page.contains(
                "<h2>Verdict</h2><p>The verdict could not be read: invalid type: integer `5`"
            ),
            "{page}"
        );
        assert!(page.ends_with("</body></html>\n"));
    }

    #[test]
    fn step_runs_draw_the_knee() {
        let step = |r: f64, d: f64, p99: f64| {
            json!({"rate_per_s": r, "offered_per_s": r, "delivered_per_s": d,
                "latency_p50_us": p99 / 2.0, "latency_p99_us": p99, "sched_lag_p99_us": 50.0,
                "errors_total": 0, "non_2xx": 0, "passed": d >= r, "valid": true, "why": [],
                "series": [{"t_s": 0, "scheduled": r}]})
        };
        let doc = json!({
            "schema": "trapdetect.load-steps/1", "version": "0",
            "plan": {"url": "http://127.0.0.1:1/<i>"}, "from_per_s": 50.0, "to_per_s": 150.0,
            "step_per_s": 50.0, "step_duration_s": 2.0,
            "steps": [step(50.0, 50.0, 900.0), step(100.0, 100.0, 1500.0), step(150.0, 110.0, 400000.0)],
            "knee": {"rate_per_s": 100.0, "verdict": "found", "text": "the knee is 100/s"},
            "exit_code": 0
        });
        let page = render_value(&doc, &Parts::default());
        assert_eq!(page.matches("<svg").count(), 2, "{page}");
        assert_eq!(page.matches("knee 100/s").count(), 2);
        assert!(page.contains("step 150/s: per second"));
        assert!(!page.contains("<i>"));
    }

    /// Golden pages: `page` normalized (the style sheet checked and left out, each SVG replaced
    /// by a digest, a line break before each block so a difference reads well) against
    /// `testdata/NAME`. `TRAPDETECT_BLESS=1` rewrites the file instead.
    pub(crate) fn golden(name: &str, page: &str) {
        let fnv = |s: &str| {
            s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            })
        };
        let mut page = page.to_string();
        let css = format!("<style>{CSS}</style>");
        if page.contains(&css) {
            page = page.replace(&css, "<style>CSS</style>");
        }
        let mut out = String::new();
        let mut rest = page.as_str();
        while let Some(i) = rest.find("<svg") {
            let j = rest[i..].find("</svg>").expect("closed svg") + i + "</svg>".len();
            out.push_str(&rest[..i]);
            out.push_str(&format!("<svg fnv1a={:016x}/>", fnv(&rest[i..j])));
            rest = &rest[j..];
        }
        out.push_str(rest);
        // Lossless: the page's own line breaks are marked, the added ones are not.
        let mut out = out.replace('\n', "⏎\n");
        for tag in [
            "<h2>",
            "<details>",
            "<figure",
            "<div class=\"finding",
            "<tr>",
            "<table",
        ] {
            out = out.replace(tag, &format!("\n{tag}"));
        }
        let path = format!("{}/src/report/testdata/{name}", env!("CARGO_MANIFEST_DIR"));
        if std::env::var_os("TRAPDETECT_BLESS").is_some() {
            std::fs::write(&path, &out).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(out == want, "{name} differs from {path}:\n{out}");
    }

    fn run_doc(cause: &str) -> Value {
        let sec = |t: u64, marks: &[&str]| {
            json!({"t_s": t, "offered": 80 + t, "ok_2xx": 25 + 3 * t, "non_2xx": t % 2,
                "errors": {"timeout": t % 3}, "p99_us": 900000.0 - t as f64 * 1000.0,
                "in_flight": 60, "cores_busy": 0.5 + t as f64 / 10.0, "target_cpus_busy": 0.7,
                "target_cores": 0.1 * t as f64, "noise_cores": 0.2, "run_queue": 0.25 * t as f64,
                "off_cpu": {"sleep": 0.9, "futex": 0.0, "path": 0.5 * t as f64, "file_io": 0.3},
                "threads": 4, "busy_threads": 1 + t % 3, "path_calls": 10 * t,
                "fs_ops": {"/mnt/slow": 5 * t, "/": 2}, "accept_queue": 7 - t,
                "throttled_periods": null, "throttled_ms": null, "charged_cores": 0.1 * t as f64,
                "served": 20 + t, "note": "not a field: ignored", "marks": marks})
        };
        let point = |t: u64, lag: f64| {
            json!({"t_s": t, "scheduled": 100, "ok_2xx": 90 - t, "non_2xx": 5,
                "errors": {"timeout": 5, "conn_reset": t}, "lat_2xx_mean_us": 800.0 + t as f64,
                "lat_2xx_p99_us": 2500.0 * (t + 1) as f64, "in_flight_max": 7 + t,
                "sched_lag_max_us": lag})
        };
        json!({
            "schema": "trapdetect.report/1", "command": "run", "version": "1.2.3<",
            "target": {"pid": 42, "comm": "php-fpm", "exe": "/usr/sbin/php-fpm", "cwd": "/mnt/slow",
                "processes": 5},
            "window_s": 4.0, "requests": {"count": 320, "basis": "load generator 2xx"},
            "verdict": {"summary": "the mount <slow> caps the server", "cause": cause,
                "share_of_thread_wall_time_pct": 71.5, "delivered_per_s": 80.5,
                "delivered_basis": "2xx in the window", "offered_per_s": 100.0,
                "predicted_ceiling_per_s": 82.25, "capped_by": ["fs.cwd-slow", "pool"],
                "ceiling_basis": "4 workers / 48 ms each", "consequences": ["net.time-wait"],
                "capped": true, "trusted": false},
            "findings": [
                {"id": "fs.cwd-slow", "severity": "fail", "title": "cwd on a slow mount",
                    "predicted": "80/s at most", "evidence": {"mount": "/mnt/slow", "lookup_us": 1500.0,
                        "rows": [{"p": "/a", "n": 3}, {"p": "/b", "n": null}], "list": [1, 2, "x"],
                        "empty": {}, "none": null, "flag": true},
                    "remedy": "move the cwd\nto a local disk"},
                {"id": "net.time-wait", "severity": "warn", "title": "TIME_WAIT piles up",
                    "evidence": {}, "remedy": ""},
                {"id": "host.noise", "severity": "info", "title": "just so", "evidence": {}, "remedy": ""}
            ],
            "load": {
                "plan": {"url": "http://127.0.0.1:1/", "mode": "open", "lag_budget_us": 10000.0},
                "window": {"measured_s": 3.0}, "offered_rate_per_s": 100.0,
                "delivered_rate_per_s": 90.0, "success_ratio": 0.9, "errors_total": 15,
                "non_2xx": 15, "status": {"200": 270, "503": 15},
                "latency_2xx": {"p50_us": 700.0, "p90_us": 900.0, "p99_us": 2500.0,
                    "p99_9_us": 3000.0, "max_us": 4000.0},
                "series": [point(0, 50.0), point(1, 20000.0), point(2, 60.0), point(3, 70.0)],
                "latency_histograms": {"2xx": {"steps": [[500.0, 0.5, 135], [2500.0, 0.99, 267],
                    [4000.0, 1.0, 270]]}, "non_2xx": {"steps": [[900.0, 1.0, 15]]}},
                "generator": {"cpu_user_s": 0.1}, "unknown_key": 1
            },
            "run": {"timeline": [sec(0, &[]), sec(1, &["lost-events"]),
                sec(2, &["lost-events", "generator-lag"]), sec(4, &["cpu-hog"])]},
            "network": {
                "netns": "net:[4026531840]",
                "listeners": [{"local": "0.0.0.0:80", "accept_queue": 3, "backlog": 511},
                    {"local": "127.0.0.1:9000", "accept_queue": 120, "backlog": 128}],
                "time_wait": {"groups": [{"server": "127.0.0.1", "server_port": 80, "count": 900}]},
                "ephemeral": {"distinct_ports_in_range": 900, "usable": 28232},
                "traced": {"missed_events": 3, "new_connections_per_s": [1, 5, 0],
                    "time_wait_entered_per_s": [0, 4, 1], "listen_overflows_per_s": [0, 0, 0],
                    "listen_drops_per_s": [0, 0, 0]}
            },
            "host": {"hostname": "box", "sample": {"target_cpus": 0.75, "others_cpus": 1.5,
                "window_s": 2.0, "top": [{"comm": "a", "pid": 1, "cpus": 0.5},
                    {"comm": "b", "pid": 2, "cpus": 0.25}]}},
            "filesystems": [{"mount_point": "/mnt/slow", "fs_type": "fuse.slowfs",
                    "lookups_per_request": 7.0, "lookups_per_second": 70.0,
                    "syscall_ms_per_request": 1.5},
                {"mount_point": "/", "fs_type": "ext4", "lookups_per_request": null,
                    "lookups_per_second": 3.0, "syscall_ms_per_request": null}],
            "syscalls": [{"name": "openat", "calls": 100, "total_us": 1234.5}],
            "paths": [],
            "ignored": [{"id": "a.b", "why": "asked"}], "skipped": [],
            "probes": [{"program": "p", "attach": "x", "attached": true, "note": ""},
                {"program": "q", "attach": "y", "attached": false, "note": "no BTF"}],
            "measurement": {"trusted": false, "problems": ["lost events <3>"],
                "notes": ["note one", "note & two"], "counters": {"ringbuf_drops": 0}},
            "exit_code": 3
        })
    }

    /// The parts a page is given: the load's, the network's and the host's (drawn by their own
    /// code, pinned by their own tests), the host's text, and a section that could not be read
    /// back.
    fn parts() -> Parts {
        Parts {
            bodies: vec![
                ("load".into(), "<p>the load's part</p>".into()),
                ("network".into(), "<p>the network's part</p>".into()),
                ("host".into(), "<p>the host's part</p>".into()),
            ],
            texts: vec![("host".into(), "box & co".into())],
            unread: vec![("sample".into(), "missing field `x`".into())],
        }
    }

    /// A run's whole page, every part present: pins the HTML (the SVGs by digest).
    #[test]
    fn run_page_golden() {
        golden("run.html", &render_value(&run_doc("fs.cwd-slow"), &parts()));
        // The verdict's second chart, per kind of cause.
        let mut verdicts = String::new();
        for cause in [
            "lock.contention",
            "pool.too-small",
            "net.fd-limit",
            "host.noise",
            "cpu.saturated",
            "other.thing",
        ] {
            let doc = run_doc(cause);
            let secs = run_timeline_of(&doc).map(Result::unwrap);
            run_verdict(
                &mut verdicts,
                &doc,
                secs.as_ref(),
                &second_marks(&doc, &doc["load"]),
            );
        }
        let mut doc = run_doc("fs.x");
        doc["run"] = json!({});
        doc["verdict"]["offered_per_s"] = Value::Null;
        doc["verdict"]["capped_by"] = json!([]);
        assert!(run_timeline_of(&doc).is_none());
        run_verdict(&mut verdicts, &doc, None, &[]);
        golden("run_verdicts.html", &verdicts);
        // A trace: its probe load, the rest absent.
        let mut doc = run_doc("fs.x");
        for k in [
            "verdict",
            "run",
            "network",
            "host",
            "filesystems",
            "syscalls",
        ] {
            doc.as_object_mut().unwrap().remove(k);
        }
        doc["command"] = json!("trace");
        doc["load"]["series"] = json!([]);
        doc["measurement"] = json!({"trusted": true});
        // Only the sections the document holds have parts.
        let load = Parts {
            bodies: parts().bodies.into_iter().take(1).collect(),
            ..Default::default()
        };
        golden("trace.html", &render_value(&doc, &load));
    }

    /// A step run: pins its HTML (a `load` document's page is pinned with the load's part,
    /// in load/html.rs).
    #[test]
    fn steps_pages_golden() {
        let step = |r: f64, d: f64, p99: f64, e: u64| {
            json!({"rate_per_s": r, "offered_per_s": r, "delivered_per_s": d,
                "latency_p50_us": p99 / 2.0, "latency_p99_us": p99, "sched_lag_p99_us": 50.0,
                "errors_total": e, "non_2xx": 1, "passed": d >= r, "valid": true, "why": [],
                "errors": {"timeout": e, "conn_reset": 0},
                "series": [{"t_s": 0, "scheduled": r}, {"t_s": 1, "scheduled": r}]})
        };
        let doc = json!({
            "schema": "trapdetect.load-steps/1", "version": "0",
            "plan": {"url": "http://127.0.0.1:1/<i>", "mode": "open"}, "from_per_s": 50.0,
            "to_per_s": 150.0, "step_per_s": 50.0, "step_duration_s": 2.0, "slo_p99_us": 5000.0,
            "steps": [step(50.0, 50.0, 900.0, 0), step(100.0, 100.0, 1500.0, 2),
                step(150.0, 110.0, 400000.0, 9)],
            "knee": {"rate_per_s": 100.0, "verdict": "found_below", "text": "the knee is 100/s"},
            "exit_code": 1
        });
        golden("steps.html", &render_value(&doc, &Parts::default()));
        let doc = json!({"schema": "trapdetect.load-steps/1", "steps": [], "knee": {}});
        golden("steps_empty.html", &render_value(&doc, &Parts::default()));
    }
}
