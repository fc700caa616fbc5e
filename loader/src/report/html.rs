//! Self-contained HTML rendering (one file: no scripts, no fonts, nothing fetched). It works
//! from the JSON document, so a saved `--json` report of any schema re-renders the same way
//! (`trapdetect report`). Findings come first, then charts, then tables; the plumbing (probes,
//! self-monitoring counters) is collapsed at the bottom. Every string that came from the target
//! was escaped into printable text when observed; here it is escaped again for HTML (and
//! plotters escapes chart labels for SVG).

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::{
    Report,
    chart::{self, Bars, Histogram, Marks, Series, Timeline},
    units,
};
use crate::escape::html as h;

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
@media print{body{max-width:none;padding:0}details{border:none;padding:0}a{color:inherit}}";

/// Renders a report as an HTML page (with the renderings of its sections, collapsed).
pub fn render(r: &Report) -> String {
    let v = serde_json::to_value(r).unwrap_or_default();
    render_value(&v, &r.section_html)
}

/// Renders any trapdetect JSON document (`trapdetect.report/1` or `trapdetect.load/1`) as an
/// HTML page. `sections` are optional HTML renderings of the extra sections
/// ([`super::Section::html`]).
pub fn render_value(doc: &Value, sections: &[(String, String)]) -> String {
    let mut o = String::new();
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("");
    let is_load = schema.starts_with("trapdetect.load");
    let command = if is_load {
        "load"
    } else {
        doc.get("command")
            .and_then(Value::as_str)
            .unwrap_or("report")
    };
    let title = match doc.get("target") {
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
    };
    let _ = write!(
        o,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
<title>{t}</title><style>{CSS}</style></head><body><h1>{t}</h1>",
        t = h(&title)
    );
    header(&mut o, doc, is_load);
    findings(&mut o, doc);
    if is_load {
        let _ = write!(o, "<h2>Load</h2>");
        load_section(&mut o, doc);
    } else if let Some(l) = doc.get("load").filter(|l| l.is_object()) {
        let _ = write!(o, "<h2>Probe load</h2>");
        load_section(&mut o, l);
    }
    if let Some(t) = doc.pointer("/network/traced").filter(|t| t.is_object()) {
        network_charts(&mut o, t);
    }
    if let Some(n) = doc.get("network").filter(|n| n.is_object()) {
        census_charts(&mut o, n);
    }
    if let Some(s) = doc.pointer("/host/sample").filter(|s| s.is_object()) {
        cpu_sample_chart(&mut o, s);
    }
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
    // Sections owned by other modules, and everything else: collapsed, generic.
    let shown = [
        "schema",
        "command",
        "version",
        "target",
        "window_s",
        "requests",
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
    if is_load {
        load_details(&mut details, doc);
    } else if let Value::Object(m) = doc {
        for (k, v) in m.iter().filter(|(k, _)| !shown.contains(&k.as_str())) {
            if k == "load" {
                load_details(&mut details, v);
                continue;
            }
            let _ = write!(
                details,
                "<details><summary>{}</summary><div class=\"wrap\">",
                h(k)
            );
            value(&mut details, k, v);
            let _ = write!(details, "</div></details>");
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
    plumbing(&mut o, doc, sections);
    let _ = writeln!(o, "</body></html>");
    o
}

/// The load run's own details, beyond its key figures and charts.
fn load_details(o: &mut String, l: &Value) {
    let keys = [
        "plan",
        "window",
        "status",
        "errors",
        "service_time_2xx",
        "connect_time",
        "sched_lag",
        "in_flight",
        "fd_limit",
        "connections",
        "warmup",
        "generator",
    ];
    let rest: Map<String, Value> = keys
        .iter()
        .filter_map(|k| Some((k.to_string(), l.get(*k)?.clone())))
        .collect();
    let _ = write!(
        o,
        "<details><summary>load run details</summary><div class=\"wrap\">"
    );
    value(o, "", &Value::Object(rest));
    let _ = write!(o, "</div></details>");
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

fn findings(o: &mut String, doc: &Value) {
    let empty = vec![];
    let list = doc["findings"].as_array().unwrap_or(&empty);
    let _ = write!(o, "<h2>Findings ({})</h2>", list.len());
    if list.is_empty() {
        let _ = write!(o, "<p>No traps found.</p>");
    }
    for f in list {
        let sev = f["severity"].as_str().unwrap_or("info");
        let _ = write!(
            o,
            "<div class=\"finding {s}\"><h3><span class=\"sev {s}\">{}</span>{} <span class=\"id\">{}</span></h3>",
            h(&sev.to_uppercase()),
            h(f["title"].as_str().unwrap_or("")),
            h(f["id"].as_str().unwrap_or("")),
            s = h(sev)
        );
        if let Some(p) = f.get("predicted").and_then(Value::as_str) {
            let _ = write!(o, "<div class=\"pm\"><b>predicted</b> {}</div>", h(p));
        }
        if let Some(Value::Object(ev)) = f
            .get("evidence")
            .filter(|e| e.as_object().is_some_and(|m| !m.is_empty()))
        {
            let _ = write!(
                o,
                "<div class=\"wrap\"><table class=\"kv\"><tr><th colspan=\"2\" style=\"background:var(--soft)\">measured</th></tr>"
            );
            for (k, v) in ev {
                let _ = write!(o, "<tr><th>{}</th><td>", h(k));
                value(o, k, v);
                let _ = write!(o, "</td></tr>");
            }
            let _ = write!(o, "</table></div>");
        }
        if let Some(r) = f
            .get("remedy")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
        {
            let _ = write!(
                o,
                "<div class=\"remedy\"><b>remedy</b><pre>{}</pre></div>",
                h(r)
            );
        }
        let _ = write!(o, "</div>");
    }
}

fn figure(o: &mut String, svg: Option<String>) {
    if let Some(s) = svg {
        let _ = write!(o, "<figure class=\"chart\">{s}</figure>");
    }
}

fn nums(series: &[Value], f: impl Fn(&Value) -> Option<f64>) -> Vec<Option<f64>> {
    series.iter().map(f).collect()
}

fn errors_total(e: &Value) -> f64 {
    e.as_object()
        .map(|m| m.values().filter_map(Value::as_f64).sum())
        .unwrap_or(0.0)
}

/// The load generator's figures and per-second charts (a `load` document, or the `load`
/// section of a trace).
fn load_section(o: &mut String, l: &Value) {
    let lat = &l["latency_2xx"];
    let mut rows = vec![
        (
            "offered",
            format!(
                "{}/s",
                units::fmt_num(l["offered_rate_per_s"].as_f64().unwrap_or(0.0))
            ),
        ),
        (
            "delivered (2xx)",
            format!(
                "{}/s",
                units::fmt_num(l["delivered_rate_per_s"].as_f64().unwrap_or(0.0))
            ),
        ),
        (
            "success ratio",
            format!(
                "{:.1} %",
                l["success_ratio"].as_f64().unwrap_or(0.0) * 100.0
            ),
        ),
        (
            "errors",
            format!("{} (non-2xx {})", l["errors_total"], l["non_2xx"]),
        ),
    ];
    if lat.is_object() {
        rows.push((
            "2xx latency",
            ["p50_us", "p90_us", "p99_us", "p99_9_us", "max_us"]
                .iter()
                .map(|k| {
                    format!(
                        "{} {}",
                        k.trim_end_matches("_us").replace("_", "."),
                        chart::duration_us(lat[k].as_f64().unwrap_or(0.0))
                    )
                })
                .collect::<Vec<_>>()
                .join(" · "),
        ));
    }
    let _ = write!(o, "<table class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(o, "<tr><th>{k}</th><td>{v}</td></tr>");
    }
    let _ = write!(o, "</table>");
    let Some(series) = l["series"].as_array().filter(|s| !s.is_empty()) else {
        return;
    };
    let budget = l["plan"]["lag_budget_us"].as_f64().unwrap_or(f64::INFINITY);
    let lagged: Vec<usize> = series
        .iter()
        .enumerate()
        .filter(|(_, p)| p["sched_lag_max_us"].as_f64().is_some_and(|v| v > budget))
        .map(|(i, _)| i)
        .collect();
    // Seconds after the window: its last arrivals still completing, no new ones.
    let window = l["window"]["measured_s"].as_f64().unwrap_or(0.0).ceil() as usize;
    let drain: Vec<usize> = (window..series.len()).collect();
    let marks = || {
        vec![
            Marks {
                label: "generator lagged".into(),
                seconds: lagged.clone(),
            },
            Marks {
                label: "drain".into(),
                seconds: drain.clone(),
            },
        ]
    };
    figure(
        o,
        Timeline {
            title: "Offered vs delivered vs errors".into(),
            unit: "per second".into(),
            series: vec![
                Series {
                    name: "offered".into(),
                    values: nums(series, |p| p["scheduled"].as_f64()),
                },
                Series {
                    name: "delivered (2xx)".into(),
                    values: nums(series, |p| p["ok_2xx"].as_f64()),
                },
                Series {
                    name: "errors + non-2xx".into(),
                    values: nums(series, |p| {
                        Some(p["non_2xx"].as_f64().unwrap_or(0.0) + errors_total(&p["errors"]))
                    }),
                },
            ],
            marks: marks(),
            log_y: false,
        }
        .svg(),
    );
    let mut lat_series = vec![];
    for (key, name) in [
        ("lat_2xx_p50_us", "p50"),
        ("lat_2xx_mean_us", "mean"),
        ("lat_2xx_p99_us", "p99"),
    ] {
        if series
            .iter()
            .any(|p| p.get(key).is_some_and(|v| !v.is_null()))
        {
            lat_series.push(Series {
                name: format!("2xx {name}"),
                values: nums(series, |p| p[key].as_f64()),
            });
        }
    }
    figure(
        o,
        Timeline {
            title: "2xx latency per second (from the intended send time)".into(),
            unit: "latency (log scale)".into(),
            series: lat_series,
            marks: marks(),
            log_y: true,
        }
        .svg(),
    );
    figure(
        o,
        Timeline {
            title: "In flight (highest each second)".into(),
            unit: "requests".into(),
            series: vec![Series {
                name: "in flight".into(),
                values: nums(series, |p| p["in_flight_max"].as_f64()),
            }],
            marks: marks(),
            log_y: false,
        }
        .svg(),
    );
    let mut classes = vec![];
    for (key, name) in [("2xx", "2xx"), ("non_2xx", "non-2xx")] {
        let steps: Vec<(f64, u64)> = l["latency_histograms"][key]["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s[0].as_f64()?, s[2].as_f64()? as u64)))
            .collect();
        if !steps.is_empty() {
            classes.push((name.to_string(), chart::buckets_from_steps(&steps, 10)));
        }
    }
    figure(
        o,
        Histogram {
            title: "Latency histogram per status class".into(),
            classes,
        }
        .svg(),
    );
}

fn arr(v: &Value) -> Vec<Option<f64>> {
    v.as_array()
        .map(|a| a.iter().map(Value::as_f64).collect())
        .unwrap_or_default()
}

/// TCP state changes per second on the target's ports (the traced network section).
fn network_charts(o: &mut String, t: &Value) {
    let _ = write!(o, "<h2>Network (per second, target's ports)</h2>");
    let lost = t["missed_events"].as_u64().unwrap_or(0);
    if lost > 0 {
        let _ = write!(
            o,
            "<p><b>{lost} TCP events were missed</b>: per-second counts are lower bounds.</p>"
        );
    }
    let conns = arr(&t["new_connections_per_s"]);
    let tw = arr(&t["time_wait_entered_per_s"]);
    if conns.iter().chain(tw.iter()).flatten().any(|v| *v > 0.0) {
        figure(
            o,
            Timeline {
                title: "New connections and TIME_WAIT entered".into(),
                unit: "per second".into(),
                series: vec![
                    Series {
                        name: "new connections".into(),
                        values: conns,
                    },
                    Series {
                        name: "TIME_WAIT entered".into(),
                        values: tw,
                    },
                ],
                marks: vec![],
                log_y: false,
            }
            .svg(),
        );
    } else if !conns.is_empty() {
        let _ = write!(
            o,
            "<p>No new connection and no socket entering TIME_WAIT in any second (keep-alive).</p>"
        );
    }
    let ov = arr(&t["listen_overflows_per_s"]);
    let dr = arr(&t["listen_drops_per_s"]);
    if ov.iter().chain(dr.iter()).flatten().any(|v| *v > 0.0) {
        figure(
            o,
            Timeline {
                title: "Listen queue overflows and drops".into(),
                unit: "per second".into(),
                series: vec![
                    Series {
                        name: "overflows".into(),
                        values: ov,
                    },
                    Series {
                        name: "drops".into(),
                        values: dr,
                    },
                ],
                marks: vec![],
                log_y: false,
            }
            .svg(),
        );
    } else if !ov.is_empty() {
        let _ = write!(o, "<p>No listen queue overflow or drop in any second.</p>");
    }
}

/// The network census (preflight, and a trace's start): listen queues, TIME_WAIT by server
/// port, the ephemeral port range.
fn census_charts(o: &mut String, n: &Value) {
    // Six bars keep their labels readable: the fullest queues, the largest TIME_WAIT groups.
    let mut listeners: Vec<&Value> = n["listeners"].as_array().into_iter().flatten().collect();
    let fill = |l: &Value| {
        l["accept_queue"].as_f64().unwrap_or(0.0) / l["backlog"].as_f64().unwrap_or(1.0).max(1.0)
    };
    listeners.sort_by(|a, b| fill(b).total_cmp(&fill(a)));
    listeners.truncate(6);
    let groups: Vec<&Value> = n["time_wait"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .take(6)
        .collect();
    if listeners.is_empty() && groups.is_empty() {
        return;
    }
    let _ = write!(
        o,
        "<h2>Network census ({})</h2>",
        h(n["netns"].as_str().unwrap_or("?"))
    );
    if !listeners.is_empty() {
        figure(
            o,
            Bars {
                title: "Listen queues: waiting connections vs backlog (fullest 6)".into(),
                unit: "connections".into(),
                categories: listeners
                    .iter()
                    .map(|l| l["local"].as_str().unwrap_or("?").to_string())
                    .collect(),
                measures: vec![
                    (
                        "accept queue".into(),
                        listeners
                            .iter()
                            .map(|l| l["accept_queue"].as_f64().unwrap_or(0.0))
                            .collect(),
                    ),
                    (
                        "backlog".into(),
                        listeners
                            .iter()
                            .map(|l| l["backlog"].as_f64().unwrap_or(0.0))
                            .collect(),
                    ),
                ],
            }
            .svg(),
        );
    }
    if !groups.is_empty() {
        figure(
            o,
            Bars {
                title: "TIME_WAIT sockets by server (largest 6)".into(),
                unit: "sockets".into(),
                categories: groups
                    .iter()
                    .map(|g| {
                        format!(
                            "{}:{}",
                            g["server"].as_str().unwrap_or("?"),
                            g["server_port"]
                        )
                    })
                    .collect(),
                measures: vec![(
                    "TIME_WAIT".into(),
                    groups
                        .iter()
                        .map(|g| g["count"].as_f64().unwrap_or(0.0))
                        .collect(),
                )],
            }
            .svg(),
        );
    }
    let e = &n["ephemeral"];
    if let (Some(used), Some(usable)) =
        (e["distinct_ports_in_range"].as_f64(), e["usable"].as_f64())
    {
        let _ = write!(
            o,
            "<p>Ephemeral ports: {} of {} usable in use ({:.1} %).</p>",
            units::fmt_num(used),
            units::fmt_num(usable),
            if usable > 0.0 {
                used / usable * 100.0
            } else {
                0.0
            }
        );
    }
}

/// Where the CPU went during the host sample: the target, the busiest other processes.
fn cpu_sample_chart(o: &mut String, s: &Value) {
    // At most six bars, so their labels stay readable.
    let mut cats = vec![];
    let mut vals = vec![];
    let target = s["target_cpus"].as_f64().unwrap_or(0.0);
    if target > 0.0 {
        cats.push("target".to_string());
        vals.push(target);
    }
    cats.push("all others".to_string());
    vals.push(s["others_cpus"].as_f64().unwrap_or(0.0));
    for b in s["top"]
        .as_array()
        .into_iter()
        .flatten()
        .take(6 - cats.len())
    {
        cats.push(format!(
            "{} ({})",
            b["comm"].as_str().unwrap_or("?"),
            b["pid"]
        ));
        vals.push(b["cpus"].as_f64().unwrap_or(0.0));
    }
    let _ = write!(o, "<h2>CPU during the sample</h2>");
    figure(
        o,
        Bars {
            title: format!(
                "CPUs' worth used over {}",
                chart::duration_us(s["window_s"].as_f64().unwrap_or(0.0) * 1e6)
            ),
            unit: "CPUs".into(),
            categories: cats,
            measures: vec![("CPU".into(), vals)],
        }
        .svg(),
    );
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

fn plumbing(page: &mut String, doc: &Value, sections: &[(String, String)]) {
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
    for (name, fragment) in sections {
        let _ = write!(
            o,
            "<details><summary>{} (text)</summary>{fragment}</details>",
            h(name)
        );
    }
    if !o.is_empty() {
        let _ = write!(page, "<h2>Plumbing</h2>{o}");
    }
}

/// Any JSON value as HTML: objects as key/value tables, arrays of objects as tables.
fn value(o: &mut String, key: &str, v: &Value) {
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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::traps::{Finding, Severity};

    const EVIL: &str = "/srv/<script>alert(1)</script>&\"'";

    #[test]
    fn target_strings_are_escaped_everywhere() {
        let mut r = Report::new("trace");
        r.target = Some(crate::report::Target {
            pid: 1,
            comm: EVIL.into(),
            exe: EVIL.into(),
            cwd: EVIL.into(),
            processes: 1,
            exited_after_s: None,
        });
        r.findings.push(
            Finding::new("fs.cwd", Severity::Fail, EVIL)
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
            fuse_ops: vec![],
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
        let page = render(&r);
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("alert(1)</"), "{page}");
        // The filesystem bar chart carries the mount point as an escaped SVG label.
        assert!(page.contains("<svg"), "{page}");
        assert!(page.contains("&lt;script&gt;"));
        // No resource is fetched: no src/href at all.
        assert!(!page.contains("src=") && !page.contains("href="), "{page}");
    }

    #[test]
    fn load_documents_get_charts_with_lag_marks() {
        let point = |t: u64, lag: f64| {
            json!({"t_s": t, "scheduled": 100, "ok_2xx": 90, "non_2xx": 5,
                "errors": {"timeout": 5}, "lat_2xx_mean_us": 800.0, "lat_2xx_p99_us": 2500.0,
                "in_flight_max": 7, "sched_lag_max_us": lag})
        };
        let doc = json!({
            "schema": "trapdetect.load/1", "version": "0",
            "plan": {"url": "http://127.0.0.1:1/<b>", "mode": "open", "lag_budget_us": 10000.0},
            "window": {"measured_s": 3.0}, "offered_rate_per_s": 100.0,
            "delivered_rate_per_s": 90.0, "success_ratio": 0.9, "errors_total": 15, "non_2xx": 15,
            "latency_2xx": {"p50_us": 700.0, "p90_us": 900.0, "p99_us": 2500.0, "p99_9_us": 3000.0, "max_us": 4000.0},
            "series": [point(0, 50.0), point(1, 20000.0), point(2, 60.0)],
            "latency_histograms": {"2xx": {"steps": [[500.0, 0.5, 135], [2500.0, 0.99, 267], [4000.0, 1.0, 270]]}, "non_2xx": null},
            "findings": [], "measurement": {"trusted": true, "problems": []}, "exit_code": 0
        });
        let page = render_value(&doc, &[]);
        assert_eq!(page.matches("<svg").count(), 4, "{page}");
        assert!(page.contains("generator lagged (1 s)"));
        assert!(page.contains("http://127.0.0.1:1/&lt;b&gt;"));
        assert!(!page.contains("/<b>"));
    }
}
