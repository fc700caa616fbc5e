//! The reports people look at, from real runs: each command's HTML loaded in headless Chromium
//! (no console message, every chart present and drawn, nothing fetched), re-rendered from its
//! saved JSON, two runs compared, and the exports (.hgrm, CSV, OpenMetrics read by the
//! reference Python parser) checked against the JSON figures.
//!
//! Screenshots go to $TRAPDETECT_SCREENSHOTS when set (docs/ holds the ones shown there).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use serde_json::Value;
use trapdetect_e2e::{
    IGNORE_NET, TempDir,
    browser::{self, chromium},
    json,
    misbehave::{Behaviour, Server},
    require_root, run_bounded,
    servers::PhpStack,
    slowfs::SlowFs,
    trapdetect,
};

const LIMIT: Duration = Duration::from_secs(60);

fn shot_path(dir: &TempDir, name: &str) -> PathBuf {
    match std::env::var_os("TRAPDETECT_SCREENSHOTS") {
        Some(d) => PathBuf::from(d).join(name),
        None => dir.path().join(name),
    }
}

/// Loads `page` in Chromium; checks it is self-contained, logs nothing to the console, and
/// has at least `min_charts` charts, each with data drawn. Returns the SVGs' count, or `None`
/// when no browser is installed (outside CI).
fn check_page(
    test: &str,
    dir: &TempDir,
    page: &Path,
    png: &str,
    min_charts: usize,
) -> Option<usize> {
    let html = std::fs::read_to_string(page).expect("html written");
    for fetch in [
        "src=",
        "href=",
        "url(",
        "@import",
        "<script",
        "<link",
        "@font-face",
    ] {
        assert!(
            !html.contains(fetch),
            "{}: {fetch:?} in a self-contained page",
            page.display()
        );
    }
    let b = chromium(test)?;
    let png = shot_path(dir, png);
    let r = browser::render(&b, dir.path(), page, &png, 1100);
    assert!(r.console.is_empty(), "console messages: {:#?}", r.console);
    let svgs = browser::svgs(&r.dom);
    assert!(
        svgs.len() >= min_charts,
        "{} charts, expected at least {min_charts}",
        svgs.len()
    );
    for (i, s) in svgs.iter().enumerate() {
        assert!(
            browser::data_marks(s) > 0,
            "chart {i} has no data drawn:\n{s}"
        );
        assert!(s.contains("<text"), "chart {i} has no text");
    }
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "screenshot {} is {size} bytes",
        png.display()
    );
    Some(svgs.len())
}

/// Samples of an OpenMetrics file as the reference parser (prometheus_client) reads them, by
/// metric name: `[labels, value]`. The classic Prometheus text parser must accept it too.
/// Debian's python3 (with python3-prometheus-client from setup), not whatever is first in PATH.
fn parse_openmetrics(path: &Path) -> Value {
    let script = r##"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as prom
text = open(sys.argv[1]).read()
out = {}
for fam in om(text):
    for s in fam.samples:
        out.setdefault(s.name, []).append([s.labels, s.value])
classic = sum(len(f.samples) for f in prom(text.replace("# EOF\n", "")))
assert classic == sum(len(v) for v in out.values()), (classic, out)
print(json.dumps(out))
"##;
    let out = run_bounded(
        Command::new("/usr/bin/python3")
            .args(["-c", script])
            .arg(path),
        LIMIT,
    );
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejected {}:\n{}\n{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path).unwrap_or_default()
    );
    serde_json::from_slice(&out.stdout).expect("parser output")
}

fn sample(om: &Value, name: &str, label: (&str, &str)) -> f64 {
    om[name]
        .as_array()
        .unwrap_or_else(|| panic!("{name} missing: {om}"))
        .iter()
        .find(|s| s[0][label.0] == label.1)
        .unwrap_or_else(|| panic!("{name}{{{}={}}} missing: {om}", label.0, label.1))[1]
        .as_f64()
        .unwrap()
}

/// `trapdetect report FILE --text` on a saved document: exit 0, the text, with `wanted`
/// lines in it and no raw control byte.
fn rerendered(dir: &TempDir, file: &str, wanted: &[&str]) -> String {
    let out = trapdetect(&["report", &p(dir, file), "--text"], LIMIT);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 text");
    for w in wanted {
        assert!(text.contains(w), "{file}: {w:?} missing from\n{text}");
    }
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{file}: a control character in\n{text}"
    );
    text
}

/// `trapdetect report FILE --text` prints exactly what the command printed live, and
/// `--html` writes exactly the page it wrote (`page`, beside FILE): the saved document is read
/// back into the typed report and its sections, and printed and drawn by the same code
/// (issue 27).
fn same_as_live(dir: &TempDir, file: &str, live: &[u8], page: &str) {
    let text = rerendered(dir, file, &[]);
    let live = String::from_utf8_lossy(live);
    assert!(!live.is_empty(), "{file}: no live text");
    if text != live {
        let line = text
            .lines()
            .zip(live.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(text.lines().count().min(live.lines().count()));
        panic!(
            "{file}: the saved report prints differently from the live one from line {}:\n--- report\n{text}\n--- live\n{live}",
            line + 1
        );
    }
    let again = format!("{page}.again.html");
    let out = trapdetect(&["report", &p(dir, file), "--html", &p(dir, &again)], LIMIT);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{file}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let (saved, live) = (read(&again), read(page));
    assert!(live.contains("</body></html>"), "{page}: {live}");
    assert!(!live.contains("could not be read back"), "{page}: {live}");
    if saved != live {
        let at = saved
            .bytes()
            .zip(live.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(saved.len().min(live.len()));
        let from = at.saturating_sub(200);
        panic!(
            "{file}: the saved report's page differs from the live one at byte {at}:\n--- report\n{}\n--- live\n{}",
            &saved[from..(at + 200).min(saved.len())],
            &live[from..(at + 200).min(live.len())]
        );
    }
}

fn p(dir: &TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_string()
}

/// Runs `trapdetect load` against `url` with every output; returns the JSON report and the
/// text it printed.
fn load_run(dir: &TempDir, tag: &str, url: &str, rate: &str) -> (Value, Vec<u8>) {
    let out = trapdetect(
        &[
            "load",
            "--url",
            url,
            "--rate",
            rate,
            "--duration",
            "3s",
            "--lag-budget",
            "5s",
            "-q",
            "--json-out",
            &p(dir, &format!("{tag}.json")),
            "--html",
            &p(dir, &format!("{tag}.html")),
            "--csv",
            &p(dir, &format!("{tag}.csv")),
            "--hgrm",
            &p(dir, &format!("{tag}.hgrm")),
            "--openmetrics",
            &p(dir, &format!("{tag}.om")),
        ],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(format!("{tag}.json"))).unwrap())
            .unwrap();
    // The new latency_histograms field is pinned by the schema like the rest.
    let schema = trapdetect_e2e::schema::load("load.schema.json");
    trapdetect_e2e::schema::validate(&schema, &v, "$");
    (v, out.stdout)
}

fn csv_rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text
        .lines()
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    let header = lines.next().expect("header");
    let rows: Vec<Vec<String>> = lines.collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "ragged CSV row {r:?}");
    }
    (header, rows)
}

fn column_sum(header: &[String], rows: &[Vec<String>], col: &str) -> u64 {
    let i = header
        .iter()
        .position(|h| h == col)
        .unwrap_or_else(|| panic!("{col} in {header:?}"));
    rows.iter().map(|r| r[i].parse::<u64>().unwrap_or(0)).sum()
}

/// The data lines of a .hgrm file: (value ms, percentile, total count).
fn hgrm_lines(path: &Path) -> Vec<(f64, f64, u64)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    );
    assert!(text.contains("#[Mean    ="), "{text}");
    lines
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn load_report_renders_in_chromium_and_exports_match_the_json() {
    let s = Server::start(Behaviour::Status(200));
    let dir = TempDir::new("reports-load");
    let (v, live) = load_run(&dir, "a", &s.url("/"), "200");
    let ok = v["ok_2xx"].as_u64().unwrap();
    assert_eq!(
        ok, 600,
        "200/s for 3 s against a server that always answers 200"
    );

    // CSV: one row per second of the series, summing to the totals.
    let (header, rows) = csv_rows(&dir.path().join("a.csv"));
    assert_eq!(rows.len(), v["series"].as_array().unwrap().len());
    assert_eq!(column_sum(&header, &rows, "ok_2xx"), ok);
    assert_eq!(
        column_sum(&header, &rows, "scheduled"),
        v["scheduled"].as_u64().unwrap()
    );

    // .hgrm: cumulative counts up to every 2xx answer, percentiles ascending to 1.
    let h = hgrm_lines(&dir.path().join("a.hgrm"));
    assert_eq!(h.last().unwrap().2, ok);
    assert_eq!(h.last().unwrap().1, 1.0);
    assert!(
        h.windows(2)
            .all(|w| w[0].1 <= w[1].1 && w[0].2 <= w[1].2 && w[0].0 <= w[1].0)
    );
    let max_ms = v["latency_2xx"]["max_us"].as_f64().unwrap() / 1e3;
    // The last value is the top of the histogram bucket that holds the max (3 significant digits).
    assert!(
        (h.last().unwrap().0 - max_ms).abs() <= max_ms * 0.002 + 0.001,
        "{h:?} vs {max_ms}"
    );
    assert!(
        !dir.path().join("a.non_2xx.hgrm").exists(),
        "no non-2xx answer, no file"
    );

    // OpenMetrics, read by the reference parser.
    let om = parse_openmetrics(&dir.path().join("a.om"));
    let url = s.url("/");
    assert_eq!(
        sample(
            &om,
            "trapdetect_load_delivered_requests_per_second",
            ("url", &url)
        ),
        v["delivered_rate_per_s"].as_f64().unwrap()
    );
    assert_eq!(
        sample(&om, "trapdetect_exit_code", ("command", "load")),
        0.0
    );
    assert_eq!(
        om["trapdetect_finding"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0),
        v["findings"].as_array().unwrap().len()
    );

    // The same page comes back from the saved JSON, byte for byte.
    let out = trapdetect(
        &["report", &p(&dir, "a.json"), "--html", &p(&dir, "b.html")],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.html")).unwrap(),
        std::fs::read_to_string(dir.path().join("b.html")).unwrap()
    );
    let out = trapdetect(&["report", &p(&dir, "a.json"), "--text"], LIMIT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2xx               600"), "{text}");
    same_as_live(&dir, "a.json", &live, "a.html");

    // Offered, delivered, errors; latency per second; in flight; the latency histogram.
    let Some(n) = check_page(
        "load_report_renders_in_chromium",
        &dir,
        &dir.path().join("a.html"),
        "load.png",
        4,
    ) else {
        return;
    };
    assert_eq!(n, 4);
}

#[test]
fn report_refuses_what_is_not_a_trapdetect_report() {
    let dir = TempDir::new("reports-bad");
    std::fs::write(dir.path().join("x.json"), "{\"schema\": \"other/1\"}").unwrap();
    std::fs::write(dir.path().join("y.json"), "not json").unwrap();
    for (f, msg) in [
        ("x.json", "unknown schema"),
        ("y.json", "not JSON"),
        ("missing.json", "read"),
    ] {
        let out = trapdetect(&["report", &p(&dir, f)], LIMIT);
        assert_eq!(out.status.code(), Some(2), "{f}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("trapdetect: ") && err.contains(msg) && err.lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn compare_sets_two_load_runs_side_by_side() {
    let s = Server::start(Behaviour::Status(200));
    let dir = TempDir::new("reports-compare");
    load_run(&dir, "a", &s.url("/"), "100");
    load_run(&dir, "b", &s.url("/"), "200");
    let out = trapdetect(
        &[
            "compare",
            &p(&dir, "a.json"),
            &p(&dir, "b.json"),
            "--json",
            "--html",
            &p(&dir, "c.html"),
        ],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = json(&out);
    assert_eq!(c["schema"], "trapdetect.compare/1");
    std::fs::write(dir.path().join("c.json"), &out.stdout).unwrap();
    let text = rerendered(&dir, "c.json", &["trapdetect compare", "beyond noise"]);
    // The re-rendered comparison is the one compare printed.
    let live = trapdetect(&["compare", &p(&dir, "a.json"), &p(&dir, "b.json")], LIMIT);
    assert_eq!(text, String::from_utf8_lossy(&live.stdout));
    let row = |m: &str| {
        c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metric"] == m)
            .unwrap_or_else(|| panic!("{m}: {c}"))
            .clone()
    };
    let offered = row("offered");
    assert_eq!(
        (offered["a"].as_f64(), offered["b"].as_f64()),
        (Some(100.0), Some(200.0))
    );
    assert_eq!(offered["change_pct"], 100.0);
    // Doubling a constant open-loop rate is far beyond its per-second spread.
    assert_eq!(offered["beyond_noise"], true, "{offered}");
    let delivered = row("delivered (2xx)");
    assert_eq!(delivered["change_pct"], 100.0);
    assert_eq!(delivered["beyond_noise"], true, "{delivered}");
    let text = trapdetect(&["compare", &p(&dir, "a.json"), &p(&dir, "b.json")], LIMIT);
    assert!(String::from_utf8_lossy(&text.stdout).contains("beyond noise"));
    check_page(
        "compare_sets_two_load_runs_side_by_side",
        &dir,
        &dir.path().join("c.html"),
        "compare.png",
        2,
    );
}

#[test]
fn preflight_report_renders_in_chromium() {
    // A listener of ours, so the census has a listen queue to draw.
    let _s = Server::start(Behaviour::Status(200));
    let dir = TempDir::new("reports-preflight");
    let out = trapdetect(
        &[
            "preflight",
            "--sample",
            "300ms",
            // Every section in the text, as the saved report prints it.
            "--verbose",
            "--json-out",
            &p(&dir, "p.json"),
            "--html",
            &p(&dir, "p.html"),
            "--openmetrics",
            &p(&dir, "p.om"),
        ],
        LIMIT,
    );
    let code = out.status.code().unwrap();
    assert!(
        matches!(code, 0 | 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("p.json")).unwrap()).unwrap();
    let om = parse_openmetrics(&dir.path().join("p.om"));
    assert_eq!(
        sample(&om, "trapdetect_exit_code", ("command", "preflight")),
        code as f64
    );
    for f in v["findings"].as_array().unwrap() {
        let id = f["id"].as_str().unwrap();
        assert_eq!(sample(&om, "trapdetect_finding", ("id", id)), 1.0);
    }
    // Every finding and the census come back from the saved JSON.
    let mut wanted: Vec<String> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    wanted.push("NETWORK".into());
    wanted.push(format!("-> exit {code}"));
    let w: Vec<&str> = wanted.iter().map(String::as_str).collect();
    rerendered(&dir, "p.json", &w);
    same_as_live(&dir, "p.json", &out.stdout, "p.html");
    // The listen queues and the CPU sample.
    check_page(
        "preflight_report_renders_in_chromium",
        &dir,
        &dir.path().join("p.html"),
        "preflight.png",
        2,
    );
}

#[test]
fn trace_report_renders_in_chromium_with_every_chart() {
    if !require_root("trace_report_renders_in_chromium_with_every_chart") {
        return;
    }
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let stack = PhpStack::start(&deep, 2, "<?php echo \"ok\\n\";");
    let dir = TempDir::new("reports-trace");
    let pid = stack.fpm.pid().to_string();
    let url = stack.url();
    let mut args = vec![
        "--pid",
        &pid,
        "--url",
        &url,
        "--rate",
        "40",
        "--duration",
        "4s",
        "--quiet",
        "--offcpu",
    ];
    let (j, h, c, o) = (
        p(&dir, "t.json"),
        p(&dir, "t.html"),
        p(&dir, "t.csv"),
        p(&dir, "t.om"),
    );
    args.extend([
        "--json-out",
        &j,
        "--html",
        &h,
        "--csv",
        &c,
        "--openmetrics",
        &o,
    ]);
    args.extend(IGNORE_NET);
    let out = trapdetect(&args, LIMIT);
    assert_eq!(
        out.status.code(),
        Some(1),
        "fs.cwd-slow fails\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    trapdetect_e2e::schema::validate(&trapdetect_e2e::schema::load("report.schema.json"), &v, "$");
    // --offcpu: the threads' time split, php-fpm's master and two workers, each state there.
    assert_eq!(v["threads"]["threads"], 3, "{}", v["threads"]);
    assert_eq!(
        v["threads"]["thread_seconds"].as_object().unwrap().len(),
        11
    );
    let html = std::fs::read_to_string(&h).unwrap();
    // Findings first, then the charts.
    let finding = html.find("fs.cwd-slow").expect("the finding in the page");
    assert!(
        finding < html.find("<svg").unwrap(),
        "findings before charts"
    );
    assert!(
        html.find("<details><summary>probes").unwrap() > html.rfind("<svg").unwrap(),
        "plumbing last"
    );
    // Exports: the kernel's per-request figures and both per-second series.
    let om = parse_openmetrics(Path::new(&o));
    assert_eq!(
        sample(
            &om,
            "trapdetect_lookups_per_request",
            ("fs_type", "fuse.slowfs")
        ),
        7.0
    );
    assert_eq!(
        sample(&om, "trapdetect_finding", ("id", "fs.cwd-slow")),
        1.0
    );
    // The slow mount's syscall latency, bucket by bucket, as the JSON has it.
    let slow_fs = v["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fs_type"] == "fuse.slowfs")
        .unwrap();
    let lat = &slow_fs["syscall_latency"];
    let om_buckets: Vec<(String, f64)> = om["trapdetect_syscall_duration_seconds_bucket"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0]["fs_type"] == "fuse.slowfs")
        .map(|s| {
            (
                s[0]["le"].as_str().unwrap().to_string(),
                s[1].as_f64().unwrap(),
            )
        })
        .collect();
    let mut want: Vec<(String, f64)> = lat["le_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let ns = (b[0].as_f64().unwrap() * 1e3).round();
            (format!("{}", ns / 1e9), b[1].as_f64().unwrap())
        })
        .collect();
    want.push(("+Inf".into(), lat["calls"].as_f64().unwrap()));
    assert_eq!(om_buckets, want, "{lat}");
    // Each state's threads on average: its thread-seconds over the window.
    let w = v["threads"]["window_s"].as_f64().unwrap();
    for (state, ts) in v["threads"]["thread_seconds"].as_object().unwrap() {
        assert_eq!(
            sample(&om, "trapdetect_threads", ("state", state)),
            (ts.as_f64().unwrap() / w * 1e3).round() / 1e3,
            "{state}"
        );
    }
    let (header, rows) = csv_rows(Path::new(&c));
    assert_eq!(
        column_sum(&header, &rows, "load_ok_2xx"),
        v["load"]["ok_2xx"].as_u64().unwrap()
    );
    let conns: u64 = v["network"]["traced"]["new_connections_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(column_sum(&header, &rows, "net_new_connections"), conns);
    let text = rerendered(
        &dir,
        "t.json",
        &[
            "FILESYSTEMS",
            "fuse.slowfs",
            "NETWORK",
            "THREADS",
            "-> exit 1",
        ],
    );
    assert!(text.contains("FAIL fs.cwd-slow"), "{text}");
    same_as_live(&dir, "t.json", &out.stdout, "t.html");
    // Load: rates, latency, in flight, histogram; filesystems: lookups and syscall time. The
    // keep-alive probe load opens no connection per second (the network timeline is then a
    // sentence) and the census charts depend on the machine's sockets: not counted here.
    for title in [
        "Offered vs delivered vs errors",
        "2xx latency per second",
        "In flight",
        "Latency histogram per status class",
        "Path lookups per request",
        "Syscall time per request",
    ] {
        assert!(html.contains(title), "chart {title:?} missing");
    }
    check_page(
        "trace_report_renders_in_chromium_with_every_chart",
        &dir,
        Path::new(&h),
        "trace.png",
        6,
    );
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    // A fail/warn finding or not, the verdict line is always painted when colour is on.
    let esc = |args: &[&str], no_color: bool| {
        let mut cmd = Command::new(trapdetect_e2e::bin());
        cmd.args(args);
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        let out = run_bounded(&mut cmd, LIMIT);
        String::from_utf8_lossy(&out.stdout).contains('\x1b')
    };
    let s = Server::start(Behaviour::Status(200));
    let url = s.url("/");
    let load = [
        "load",
        "--url",
        &url,
        "--rate",
        "20",
        "--duration",
        "1s",
        "--lag-budget",
        "5s",
        "-q",
    ];
    // stdout is a pipe here: no colour unless forced.
    assert!(!esc(&load, false));
    assert!(esc(&[&load[..], &["--color", "always"]].concat(), false));
    assert!(
        esc(&[&load[..], &["--color", "always"]].concat(), true),
        "--color always wins over NO_COLOR"
    );
    assert!(!esc(&[&load[..], &["--color", "never"]].concat(), false));
}

#[test]
fn steps_report_marks_the_knee_in_chromium() {
    // Two workers, 20 ms each: 100 req/s, so the steps pass up to 100/s and fail above.
    let s = Server::start(Behaviour::Capacity {
        workers: 2,
        service: Duration::from_millis(20),
    });
    let dir = TempDir::new("reports-steps");
    let url = s.url("/");
    let (j, h) = (p(&dir, "s.json"), p(&dir, "s.html"));
    let out = trapdetect(
        &[
            "load",
            "--url",
            &url,
            "--rate",
            "40..200",
            "--step",
            "40",
            "--step-duration",
            "2s",
            "--slo-p99",
            "1s",
            "--lag-budget",
            "200ms",
            "-q",
            "--json-out",
            &j,
            "--html",
            &h,
        ],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    assert_eq!(v["knee"]["verdict"], "found", "{:#}", v["knee"]);
    let knee = v["knee"]["rate_per_s"].as_f64().unwrap();
    assert_eq!(knee, 80.0, "the last step at or below 100 req/s");
    let html = std::fs::read_to_string(&h).unwrap();
    // Both charts carry the knee as a legend entry; the steps' table lists every step.
    assert_eq!(html.matches("knee 80/s").count(), 2, "{html}");
    for t in ["Offered vs delivered per step", "2xx latency per step"] {
        assert!(html.contains(t), "{t:?} missing");
    }
    let steps = v["steps"].as_array().unwrap();
    for st in steps {
        let summary = format!("step {}/s: per second", st["rate_per_s"].as_f64().unwrap());
        assert!(html.contains(&summary), "{summary:?} missing");
    }
    let text = rerendered(&dir, "s.json", &["knee: ", "(found)", "exit 0"]);
    let lines = text
        .lines()
        .filter(|l| l.trim_end().ends_with("pass"))
        .count();
    assert_eq!(
        lines,
        steps.len() - 1,
        "every step but the last passed:\n{text}"
    );
    let Some(n) = check_page(
        "steps_report_marks_the_knee_in_chromium",
        &dir,
        Path::new(&h),
        "load-steps.png",
        2,
    ) else {
        return;
    };
    assert_eq!(n, 2);
}

#[test]
fn run_report_charts_threads_workers_and_marked_seconds() {
    if !require_root("run_report_charts_threads_workers_and_marked_seconds") {
        return;
    }
    // One worker asleep 40 ms per request, offered 80/s: a pool ceiling of 25/s, the worker's
    // time all in `sleep`.
    let cwd = TempDir::new("reports-run-cwd");
    let stack = PhpStack::start(cwd.path(), 1, "<?php usleep(40000); echo \"ok\\n\";");
    let dir = TempDir::new("reports-run");
    let pid = stack.fpm.pid().to_string();
    let url = stack.url();
    let (j, h) = (p(&dir, "r.json"), p(&dir, "r.html"));
    let mut args = vec![
        "run",
        "--pid",
        &pid,
        "--url",
        &url,
        "--rate",
        "80",
        "--duration",
        "5s",
        "--timeout",
        "10s",
        "--quiet",
        "--json-out",
        &j,
        "--html",
        &h,
    ];
    args.extend(IGNORE_NET);
    let out = trapdetect(&args, Duration::from_secs(120));
    let v: Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(v["command"], "run");
    assert_eq!(
        out.status.code().unwrap() as i64,
        v["exit_code"].as_i64().unwrap()
    );
    let html = std::fs::read_to_string(&h).unwrap();
    for t in [
        "Offered vs delivered vs errors",
        "2xx latency per second",
        "In flight",
        "Latency histogram per status class",
        "Where the traced threads were (stacked)",
        "Busy workers",
        "CPU: host cores busy",
    ] {
        assert!(html.contains(t), "chart {t:?} missing");
    }
    // The stacked chart has the sleep class, as the JSON's totals do.
    assert!(
        r_sleep(&v) > 0.0 && html.contains("off CPU: sleep"),
        "{}",
        v["run"]["thread_seconds"]
    );
    // Seconds the timeline marks are shaded with their count in every time chart's legend.
    let mut marked: Vec<(String, usize)> = vec![];
    for t in v["run"]["timeline"].as_array().unwrap() {
        for m in t["marks"].as_array().unwrap() {
            let label = match m.as_str().unwrap() {
                "generator-lag" => "generator lagged".to_string(),
                "lost-events" => "events lost".to_string(),
                o => o.replace('-', " "),
            };
            match marked.iter_mut().find(|(l, _)| *l == label) {
                Some(e) => e.1 += 1,
                None => marked.push((label, 1)),
            }
        }
    }
    for (label, n) in &marked {
        assert!(
            html.contains(&format!("{label} ({n} s)")),
            "{label} ({n} s) not in the legends"
        );
    }
    let text = rerendered(
        &dir,
        "r.json",
        &["pool.too-small", "RUN", "Per second", "LOAD"],
    );
    assert!(text.contains("sleep"), "{text}");
    same_as_live(&dir, "r.json", &out.stdout, "r.html");
    let Some(n) = check_page(
        "run_report_charts_threads_workers_and_marked_seconds",
        &dir,
        Path::new(&h),
        "run.png",
        8,
    ) else {
        return;
    };
    assert!(n >= 8, "{n}");
}

fn r_sleep(v: &Value) -> f64 {
    v["run"]["thread_seconds"]["off_cpu"]["sleep"]
        .as_f64()
        .unwrap_or(0.0)
}

#[test]
fn net_census_and_wait_drain_outputs_re_render() {
    // A listener of ours with nothing in TIME_WAIT: the census lists it, wait-drain returns
    // at once.
    let s = Server::start(Behaviour::Status(200));
    let port = s
        .url("/")
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let dir = TempDir::new("reports-net");
    let out = trapdetect(&["net-census", "--json"], LIMIT);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.path().join("n.json"), &out.stdout).unwrap();
    let v = json(&out);
    let local = format!(":{port}");
    assert!(
        v["network"]["listeners"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["local"].as_str().unwrap().ends_with(&local)),
        "{}",
        v["network"]["listeners"]
    );
    let text = rerendered(&dir, "n.json", &["net-census", "NETWORK", "listeners ("]);
    assert!(text.contains(&local), "{text}");
    let out = trapdetect(
        &[
            "wait-drain",
            "--port",
            &port,
            "--below",
            "1",
            "--timeout",
            "2s",
            "--json",
        ],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.path().join("w.json"), &out.stdout).unwrap();
    let w = json(&out);
    assert_eq!(w["schema"], "trapdetect.wait-drain/1");
    rerendered(
        &dir,
        "w.json",
        &[&format!("port {port}"), "drained: 0 TIME_WAIT sockets"],
    );
}
