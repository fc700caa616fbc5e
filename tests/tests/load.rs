//! `trapdetect load` against real servers that misbehave on purpose (loopback only, bounded in
//! count and time): every arrival must land in exactly one bucket, and the bucket must be the
//! one the socket behaviour implies.

use std::{process::Command, time::Duration};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, free_port, json,
    misbehave::{Behaviour, Server},
    run_bounded, trapdetect,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Runs `trapdetect load --json -q` with `args`; returns (exit code, report).
fn load(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["load", "--json", "-q"];
    // These tests check the taxonomy, not the generator's punctuality: on a loaded 2-core CI
    // box (the tests run in parallel) a 10 ms lag budget could turn exit 0/1 into 3. The
    // untrusted path has its own test with a budget no generator can meet.
    if !args.contains(&"--lag-budget") {
        a.extend_from_slice(&["--lag-budget", "5s"]);
    }
    a.extend_from_slice(args);
    // The same taxonomy holds for either HTTP/1.1 client (`--engine`, hidden): the bench
    // that chose between them runs these tests with TRAPDETECT_E2E_ENGINE=hyper.
    let engine = std::env::var("TRAPDETECT_E2E_ENGINE").ok();
    if let Some(e) = &engine {
        a.extend_from_slice(&["--engine", e]);
    }
    let out = trapdetect(&a, LIMIT);
    let v = json(&out);
    let code = out.status.code().expect("exit code");
    assert_eq!(v["exit_code"], code, "exit code matches the report");
    validate(&schema(), &v, "$");
    (code, v)
}

fn errors(v: &Value) -> Vec<(String, u64)> {
    v["errors"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

fn series_sum(v: &Value, f: impl Fn(&Value) -> u64) -> u64 {
    v["series"].as_array().unwrap().iter().map(f).sum()
}

fn finding<'a>(v: &'a Value, id: &str) -> Option<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
}

/// Every measured arrival ended in exactly one bucket, and the series adds up.
fn check_accounting(v: &Value) {
    let sched = v["scheduled"].as_u64().unwrap();
    let ok = v["ok_2xx"].as_u64().unwrap();
    let non = v["non_2xx"].as_u64().unwrap();
    let errs = v["errors_total"].as_u64().unwrap();
    let dropped = v["dropped"].as_u64().unwrap();
    assert_eq!(v["completed"], sched);
    assert_eq!(ok + non + errs + dropped, sched, "one bucket per arrival");
    assert_eq!(v["queue"]["dropped"], dropped);
    assert_eq!(series_sum(v, |p| p["dropped"].as_u64().unwrap()), dropped);
    // The headline is the 2xx that ended inside the window; the rest is the drain.
    let window = v["window"]["measured_s"].as_f64().unwrap();
    if window.fract() == 0.0 {
        let inside: u64 = v["series"].as_array().unwrap()[..window as usize]
            .iter()
            .map(|p| p["ok_2xx"].as_u64().unwrap() + p["warmup_ok_2xx"].as_u64().unwrap())
            .sum();
        let headline = v["delivered_rate_per_s"].as_f64().unwrap();
        assert!(
            (headline * window - inside as f64).abs() < 0.01,
            "headline {headline}/s × {window}s = in-window per-second 2xx {inside}"
        );
        assert_eq!(
            inside + v["drain"]["ok_2xx"].as_u64().unwrap(),
            ok + v["warmup"]["ok_2xx_in_window"].as_u64().unwrap()
        );
    }
    let by_status: u64 = v["status"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(by_status, ok + non);
    assert_eq!(
        series_sum(v, |p| p["ok_2xx"].as_u64().unwrap()),
        ok,
        "2xx series sums to the total"
    );
    assert_eq!(series_sum(v, |p| p["non_2xx"].as_u64().unwrap()), non);
    assert_eq!(series_sum(v, |p| p["scheduled"].as_u64().unwrap()), sched);
    let series_errs = series_sum(v, |p| {
        p["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum()
    });
    assert_eq!(series_errs, errs);
    assert_eq!(v["schema"], "trapdetect.load/1");
}

#[test]
fn answers_200_all_succeed() {
    let s = Server::start(Behaviour::Status(200));
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "200", "--duration", "2s"]);
    check_accounting(&v);
    assert_eq!(
        v["scheduled"], 400,
        "const 200/s for 2 s is exactly 400 arrivals"
    );
    assert_eq!(v["ok_2xx"], 400);
    assert_eq!(v["status"]["200"], 400);
    assert!(errors(&v).is_empty(), "{:?}", errors(&v));
    assert_eq!(v["latency_2xx"]["count"], 400);
    assert!(v["latency_non_2xx"].is_null());
    assert_eq!(v["body_bytes"], 800);
    assert_eq!(v["success_ratio"], 1.0);
    assert_eq!(v["offered_rate_per_s"], 200.0);
    // The headline counts the 2xx that ended inside the 2 s window; any answered after it
    // (on a loaded machine, the last few) are in the drain.
    let drained = v["drain"]["ok_2xx"].as_u64().unwrap();
    assert_eq!(
        v["delivered_rate_per_s"].as_f64().unwrap(),
        (400 - drained) as f64 / 2.0
    );
    // Keep-alive: far fewer connections than requests.
    assert!(v["connections"]["opened"].as_u64().unwrap() < 50);
    assert_eq!(code, 0, "{}", v["findings"]);
}

/// Issue 15: offered twice what the server can answer, the generator keeps to its connection
/// budget (counted on the server's side), queues and then drops what cannot be sent, and
/// reports the server's ceiling as the delivered rate.
#[test]
fn twice_the_capacity_shows_the_ceiling_within_the_budget() {
    // 4 workers × 25 ms = 160 answers/s.
    let s = Server::start(Behaviour::Capacity {
        workers: 4,
        service: Duration::from_millis(25),
    });
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "320",
        "--duration",
        "5s",
        "--timeout",
        "5s",
        "--max-connections",
        "12",
        "--max-wait",
        "400ms",
    ]);
    check_accounting(&v);
    let sched = v["scheduled"].as_u64().unwrap();
    let dropped = v["dropped"].as_u64().unwrap();
    assert_eq!(sched, 1600);
    // Every arrival not dropped reached the server and was answered; none twice.
    assert_eq!(s.requests(), sched - dropped, "sent = scheduled - dropped");
    assert_eq!(v["ok_2xx"].as_u64().unwrap(), sched - dropped);
    assert_eq!(v["errors_total"], 0);
    // Never more connections than the budget, seen from the server; no reconnects.
    assert!(s.open_max() <= 12, "server saw {} open", s.open_max());
    assert_eq!(v["connections"]["opened"].as_u64().unwrap(), s.accepted());
    assert!(s.accepted() <= 12, "{} accepted", s.accepted());
    assert_eq!(v["connections"]["budget"], 12);
    assert_eq!(v["connections"]["busy_max"], 12);
    // The server's ceiling, within 10 %.
    let delivered = v["delivered_rate_per_s"].as_f64().unwrap();
    assert!(
        (144.0..=176.0).contains(&delivered),
        "delivered {delivered}/s, capacity 160/s"
    );
    // Half the offer could not be served: it queued, then was dropped after 400 ms.
    assert!(dropped > 400, "dropped {dropped}");
    let waited = v["queue"]["waited"].as_u64().unwrap();
    assert!(waited >= dropped, "waited {waited} >= dropped {dropped}");
    let wait = &v["queue"]["wait"];
    assert_eq!(
        wait["count"].as_u64().unwrap() + dropped,
        waited,
        "every arrival that waited either got a connection or was dropped"
    );
    // The queueing is inside the latency from the intended instant.
    let (lat_max, wait_max) = (
        v["latency_2xx"]["max_us"].as_f64().unwrap(),
        wait["max_us"].as_f64().unwrap(),
    );
    assert!(lat_max >= wait_max * 0.999, "{lat_max} >= {wait_max}");
    let f = finding(&v, "load.ceiling").expect("load.ceiling");
    assert_eq!(f["severity"], "warn");
    assert_eq!(f["evidence"]["dropped"], dropped);
    // The server was the bottleneck, not the generator: no gen.* finding, no error finding.
    let ids: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.iter()
            .all(|id| !id.starts_with("gen.") || *id == "gen.lag"),
        "{ids:?}"
    );
    assert!(finding(&v, "load.errors").is_none());
    // A ceiling is a result, not a failure: exit 0 (1 with --strict).
    assert_eq!(code, 0, "{}", v["findings"]);
}

/// Issue 15: a server that closes every connection unanswered does not get a reconnect storm:
/// new connections are paced by --max-connect-rate (bursts up to the budget), and the
/// arrivals that could not get one in time are dropped, counted.
#[test]
fn reconnects_are_paced_not_a_storm() {
    let s = Server::start(Behaviour::CloseAfterRequest);
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "200",
        "--duration",
        "1s",
        "--max-connections",
        "10",
        "--max-connect-rate",
        "50",
        "--max-wait",
        "500ms",
    ]);
    check_accounting(&v);
    assert_eq!(v["scheduled"], 200);
    let opened = v["connections"]["opened"].as_u64().unwrap();
    // Tokens by the last possible connect (window end + max wait = 1.5 s): burst 10 + 50/s.
    assert!(opened <= 10 + 75 + 1, "{opened} connections opened");
    let dropped = v["dropped"].as_u64().unwrap();
    // Each arrival sent opened one connection (a fresh one is never retried): exact.
    assert_eq!(opened + dropped, 200, "dropped {dropped}, opened {opened}");
    // Every request sent went on its own fresh connection and got EOF: the server's refusal.
    assert_eq!(v["errors"]["eof"].as_u64().unwrap(), 200 - dropped);
    assert_eq!(
        v["connections"]["refused_fresh"].as_u64().unwrap(),
        200 - dropped
    );
    assert!(finding(&v, "load.refusal").is_some());
    assert_eq!(code, 1, "errors above --max-errors");
}

/// Issue 13: errors above --max-errors fail the run (exit 1), below it they do not.
#[test]
fn errors_above_the_threshold_fail() {
    let s = Server::start(Behaviour::CloseAfterRequest);
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "100", "--duration", "1s"]);
    check_accounting(&v);
    let f = finding(&v, "load.errors").expect("load.errors");
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["errors_pct"], 100.0);
    assert_eq!(f["evidence"]["max_errors_pct"], 1.0);
    // Fresh connections closed before any answer: named as the server's refusal.
    let r = finding(&v, "load.refusal").expect("load.refusal");
    assert_eq!(r["evidence"]["refused"], 100);
    assert_eq!(code, 1);
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "100",
        "--duration",
        "1s",
        "--max-errors",
        "100",
        "--ignore",
        "load.status-mix",
    ]);
    assert!(finding(&v, "load.errors").is_none());
    assert_eq!(code, 0, "{}", v["findings"]);
}

#[test]
fn fast_503_is_the_server_saying_no() {
    let s = Server::start(Behaviour::Status(503));
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "150", "--duration", "2s"]);
    check_accounting(&v);
    assert_eq!(v["scheduled"], 300);
    assert_eq!(v["ok_2xx"], 0);
    assert_eq!(v["non_2xx"], 300);
    assert_eq!(v["status"]["503"], 300);
    assert!(errors(&v).is_empty());
    assert!(v["latency_2xx"].is_null(), "percentiles are over 2xx only");
    assert_eq!(v["latency_non_2xx"]["count"], 300);
    assert_eq!(v["delivered_rate_per_s"], 0.0);
    let drained = v["drain"]["non_2xx"].as_u64().unwrap();
    assert_eq!(
        v["answered_rate_per_s"].as_f64().unwrap(),
        (300 - drained) as f64 / 2.0
    );
    let f = finding(&v, "load.status-mix").expect("load.status-mix");
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["status_503"], 300);
    assert!(f["predicted"].as_str().unwrap().contains("said no"));
    assert_eq!(code, 1);
}

#[test]
fn answers_429() {
    let s = Server::start(Behaviour::Status(429));
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "100", "--duration", "1s"]);
    check_accounting(&v);
    assert_eq!(v["status"]["429"], 100);
    assert_eq!(v["non_2xx"], 100);
    let f = finding(&v, "load.status-mix").expect("load.status-mix");
    assert!(f["predicted"].as_str().unwrap().contains("rate limit"));
    assert_eq!(code, 1);
}

#[test]
fn never_answers_all_time_out_and_in_flight_climbs_to_rate_times_timeout() {
    let s = Server::start(Behaviour::Never);
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "200",
        "--duration",
        "3s",
        "--timeout",
        "2s",
    ]);
    check_accounting(&v);
    assert_eq!(v["scheduled"], 600);
    assert_eq!(errors(&v), [("timeout".to_string(), 600)]);
    assert_eq!(v["in_flight"]["rate_x_timeout"], 400.0);
    let max = v["in_flight"]["max"].as_u64().unwrap();
    // Arrivals in any 2 s window of a 200/s schedule: 400 (+1 at the edge, + a few for the
    // 1 ms granularity of the timeout timer).
    assert!((395..=410).contains(&max), "in-flight max {max}");
    // The generator kept firing into a server that said nothing: no gen.closed-loop.
    assert!(finding(&v, "gen.closed-loop").is_none());
    let f = finding(&v, "load.status-mix").expect("load.status-mix");
    assert!(f["predicted"].as_str().unwrap().contains("said nothing"));
    // Every timeout took the full 2 s: they end in seconds 2..5 of the series.
    let late: u64 = v["series"].as_array().unwrap()[2..]
        .iter()
        .map(|p| p["errors"]["timeout"].as_u64().unwrap())
        .sum();
    assert_eq!(late, 600);
    assert_eq!(code, 1);
}

#[test]
fn close_without_response_is_eof() {
    let s = Server::start(Behaviour::CloseAfterRequest);
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "100", "--duration", "2s"]);
    check_accounting(&v);
    assert_eq!(errors(&v), [("eof".to_string(), 200)]);
    assert_eq!(
        v["connections"]["opened"], 200,
        "closed connections are never reused"
    );
    assert_eq!(code, 1);
}

#[test]
fn reset_without_response_is_conn_reset() {
    let s = Server::start(Behaviour::ResetAfterRequest);
    let (code, v) = load(&["--url", &s.url("/"), "--rate", "100", "--duration", "2s"]);
    check_accounting(&v);
    assert_eq!(errors(&v), [("conn_reset".to_string(), 200)]);
    assert_eq!(code, 1);
}

#[test]
fn not_listening_is_conn_refused() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, v) = load(&["--url", &url, "--rate", "100", "--duration", "1s"]);
    check_accounting(&v);
    assert_eq!(errors(&v), [("conn_refused".to_string(), 100)]);
    let f = finding(&v, "load.status-mix").unwrap();
    assert!(
        f["predicted"]
            .as_str()
            .unwrap()
            .contains("nothing listening")
    );
    assert_eq!(code, 1);
}

#[test]
fn dies_mid_run_then_refused() {
    // Start the server just before the generator so its clock and the window's roughly agree.
    let s = Server::start(Behaviour::DieAfter(Duration::from_millis(1500)));
    let (_, v) = load(&["--url", &s.url("/"), "--rate", "100", "--duration", "3s"]);
    check_accounting(&v);
    assert_eq!(v["scheduled"], 300);
    let ok = v["ok_2xx"].as_u64().unwrap();
    let refused = v["errors"]["conn_refused"].as_u64().unwrap();
    let died_mid_request =
        v["errors"]["eof"].as_u64().unwrap() + v["errors"]["conn_reset"].as_u64().unwrap();
    assert_eq!(ok + refused + died_mid_request, 300, "{:?}", errors(&v));
    assert!(
        died_mid_request <= 3,
        "only requests in flight at the crash: {died_mid_request}"
    );
    assert!((120..=160).contains(&ok), "served ~1.5 s of 100/s: {ok}");
    assert!(refused >= 135, "refused after the crash: {refused}");
    // In the series: no 2xx after the first refused second, no refused before the last 2xx one.
    let series = v["series"].as_array().unwrap();
    let last_ok = series
        .iter()
        .rposition(|p| p["ok_2xx"].as_u64() > Some(0))
        .unwrap();
    let first_refused = series
        .iter()
        .position(|p| p["errors"]["conn_refused"].as_u64() > Some(0))
        .unwrap();
    assert!(
        first_refused >= last_ok,
        "refused at {first_refused}, 2xx until {last_ok}"
    );
    let f = finding(&v, "load.status-mix").unwrap();
    assert!(
        f["predicted"].as_str().unwrap().contains("probably gone"),
        "{}",
        f["predicted"]
    );
}

#[test]
fn no_keepalive_opens_one_connection_per_request() {
    let s = Server::start(Behaviour::Status(200));
    let (code, v) = load(&[
        "--url",
        &s.url("/x"),
        "--rate",
        "100",
        "--duration",
        "1s",
        "--no-keepalive",
    ]);
    check_accounting(&v);
    assert_eq!(v["ok_2xx"], 100);
    assert_eq!(v["connections"]["opened"], 100);
    assert_eq!(v["connections"]["reused_requests"], 0);
    assert_eq!(v["plan"]["keepalive"], false);
    assert_eq!(code, 0);
}

#[test]
fn closed_loop_reports_the_same_fields_and_says_what_it_cannot_show() {
    let s = Server::start(Behaviour::Status(200));
    let (_, v) = load(&[
        "--url",
        &s.url("/"),
        "--closed-loop",
        "-c",
        "4",
        "--duration",
        "1s",
        "--threads",
        "1",
    ]);
    check_accounting(&v);
    assert_eq!(v["plan"]["mode"], "closed");
    assert!(v["plan"]["rate_per_s"].is_null());
    assert!(v["in_flight"]["max"].as_u64().unwrap() <= 4);
    assert!(
        v["ok_2xx"].as_u64().unwrap() > 100,
        "a closed loop runs as fast as it can"
    );
    assert!(finding(&v, "gen.closed-loop").is_some());
}

#[test]
fn warmup_is_sent_but_not_counted_and_samples_cover_every_request() {
    let s = Server::start(Behaviour::Status(200));
    let dir = TempDir::new("load-samples");
    let samples = dir.path().join("s.jsonl");
    let json_out = dir.path().join("r.json");
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "100",
        "--warmup",
        "1s",
        "--duration",
        "1s",
        "--samples-out",
        samples.to_str().unwrap(),
        "--json-out",
        json_out.to_str().unwrap(),
        "--host-header",
        "site-{01..04}",
        "--path-mix",
        "/a=3,/b=1",
    ]);
    check_accounting(&v);
    assert_eq!(v["scheduled"], 100);
    assert_eq!(v["warmup"]["scheduled"], 100);
    assert_eq!(v["warmup"]["completed"], 100);
    assert_eq!(v["plan"]["hosts"], 4);
    assert_eq!(code, 0);
    let lines: Vec<Value> = std::fs::read_to_string(&samples)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 200, "one line per request, warm-up included");
    assert_eq!(lines.iter().filter(|l| l["measured"] == true).count(), 100);
    for l in &lines {
        assert_eq!(l["status"], 200);
        let (i, st, se, e) = (
            l["intended_ns"].as_u64().unwrap(),
            l["start_ns"].as_u64().unwrap(),
            l["sent_ns"].as_u64().unwrap(),
            l["end_ns"].as_u64().unwrap(),
        );
        assert!(i <= st && st <= se && se <= e, "{l}");
        assert!(l["target"].as_u64().unwrap() < 8);
    }
    // Const arrivals 10 ms apart, from the start instant.
    let mut t: Vec<u64> = lines
        .iter()
        .map(|l| l["intended_ns"].as_u64().unwrap())
        .collect();
    t.sort();
    assert!(
        t.windows(2)
            .all(|w| (w[1] - w[0]).abs_diff(10_000_000) <= 1)
    );
    let written: Value = serde_json::from_slice(&std::fs::read(&json_out).unwrap()).unwrap();
    assert_eq!(written["scheduled"], v["scheduled"]);
}

#[test]
fn poisson_is_seeded() {
    let s = Server::start(Behaviour::Status(200));
    let run = |seed: &str| {
        load(&[
            "--url",
            &s.url("/"),
            "--rate",
            "200",
            "--duration",
            "1s",
            "--arrival",
            "poisson",
            "--seed",
            seed,
        ])
        .1
    };
    let (a, b) = (run("7"), run("7"));
    check_accounting(&a);
    assert_eq!(a["scheduled"], b["scheduled"], "same seed, same arrivals");
    let n = a["scheduled"].as_u64().unwrap();
    assert!((140..=260).contains(&n), "Poisson(200) count {n}");
    assert_eq!(a["plan"]["arrival"], "poisson");
}

#[test]
fn lag_beyond_budget_is_untrusted_exit_3() {
    let s = Server::start(Behaviour::Status(200));
    // No generator keeps a schedule to the nanosecond: this budget must be exceeded.
    let (code, v) = load(&[
        "--url",
        &s.url("/"),
        "--rate",
        "100",
        "--duration",
        "1s",
        "--lag-budget",
        "1ns",
    ]);
    assert_eq!(code, 3);
    assert_eq!(v["measurement"]["trusted"], false);
    assert_eq!(finding(&v, "gen.lag").unwrap()["severity"], "warn");
}

/// The lanes run as started by default, at the nice value asked for when permitted (root
/// here), and stay as started when not (every capability dropped): the summary says which.
#[test]
fn lanes_run_at_the_nice_value_asked_when_permitted() {
    if !trapdetect_e2e::require_root("lanes_run_at_the_nice_value_asked_when_permitted") {
        return;
    }
    let s = Server::start(Behaviour::Status(200));
    let url = s.url("/");
    let common = ["--url", &url, "--rate", "50", "--duration", "1s"];
    let (code, v) = load(&common);
    assert_eq!(code, 0);
    // By default the lanes run as the process started (the harness's own nice value).
    let started = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    assert_eq!(v["generator"]["lanes_nice"], started, "default");
    let mut a = common.to_vec();
    a.extend(["--nice", "-10"]);
    assert_eq!(load(&a).1["generator"]["lanes_nice"], -10);
    let mut a = common.to_vec();
    a.extend(["--nice", "-3"]);
    assert_eq!(load(&a).1["generator"]["lanes_nice"], -3);
    // Without CAP_SYS_NICE the kernel refuses -10: the lanes keep the nice they started with
    // (5 under `nice -n 5`).
    let out = std::process::Command::new("setpriv")
        .args([
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--",
        ])
        .args(["nice", "-n", "5"])
        .arg(trapdetect_e2e::bin())
        .args([
            "load",
            "--json",
            "-q",
            "--lag-budget",
            "5s",
            "--nice",
            "-10",
        ])
        .args(common)
        .output()
        .expect("setpriv");
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["generator"]["lanes_nice"], 5);
}

#[test]
fn interrupt_stops_early_and_still_reports() {
    let s = Server::start(Behaviour::Status(200));
    let mut child = Command::new(trapdetect_e2e::bin())
        .args([
            "load",
            "--json",
            "-q",
            "--url",
            &s.url("/"),
            "--rate",
            "100",
            "--duration",
            "60s",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let v = json(&out);
    assert_eq!(v["window"]["stopped_early"], true);
    let w = v["window"]["measured_s"].as_f64().unwrap();
    assert!((1.0..3.0).contains(&w), "window {w}");
    check_accounting(&v);
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let refused_remote = "http://192.0.2.1:8080/";
    for (args, says) in [
        (vec!["--url", "http://", "--rate", "1"], "no host"),
        (vec!["--url", "ftp://127.0.0.1/", "--rate", "1"], "https://"),
        (
            vec!["--url", "http://127.0.0.1:1/", "--rate", "0"],
            "greater than 0",
        ),
        (vec!["--url", "http://127.0.0.1:1/", "--rate", "-5"], ""),
        (
            vec![
                "--url",
                "http://127.0.0.1:1/",
                "--rate",
                "1",
                "--duration",
                "0s",
            ],
            "positive",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1/",
                "--rate",
                "1",
                "--duration",
                "3d",
            ],
            "",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:1/",
                "--rate",
                "1",
                "--timeout",
                "2h",
            ],
            "1 h",
        ),
        (
            vec!["--url", "http://no-such-host.invalid/", "--rate", "1"],
            "cannot resolve",
        ),
        (
            vec!["--url", refused_remote, "--rate", "1"],
            "--allow-remote",
        ),
        (vec!["--url", "http://127.0.0.1:1/"], "--rate is required"),
    ] {
        let mut a = vec!["load"];
        a.extend_from_slice(&args);
        let out = trapdetect(&a, LIMIT);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing started, nothing printed"
        );
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(!lines.is_empty() && err.contains(says), "{args:?}: {err}");
        if !says.is_empty() && !err.starts_with("error:") {
            assert_eq!(lines.len(), 1, "{args:?}: one line: {err}");
            assert!(lines[0].starts_with("trapdetect: "), "{err}");
        }
    }
}

#[test]
fn fd_limit_too_low_is_refused_before_starting() {
    use std::os::unix::process::CommandExt;
    let s = Server::start(Behaviour::Status(200));
    let mut cmd = Command::new(trapdetect_e2e::bin());
    cmd.args([
        "load",
        "--url",
        &s.url("/"),
        "--rate",
        "10",
        "--duration",
        "1s",
    ]);
    // SAFETY: setrlimit is async-signal-safe; runs in the child before exec.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit {
                rlim_cur: 32,
                rlim_max: 32,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run_bounded(&mut cmd, LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("trapdetect: the file descriptor limit is too low"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    assert!(out.stdout.is_empty());
}

#[test]
fn text_report_reads_like_the_json() {
    let s = Server::start(Behaviour::Status(503));
    let out = trapdetect(
        &[
            "load",
            "-q",
            "--url",
            &s.url("/"),
            "--rate",
            "50",
            "--duration",
            "1s",
            // This test reads the text; lag on a loaded box has its own exit-3 test.
            "--lag-budget",
            "5s",
        ],
        LIMIT,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    for want in [
        "scheduled",
        "503: 50",
        "FAIL load.status-mix",
        "per second",
        "scheduling lag",
    ] {
        assert!(text.contains(want), "missing {want:?}:\n{text}");
    }
}

fn schema() -> Value {
    trapdetect_e2e::schema::load("load.schema.json")
}

fn validate(root: &Value, v: &Value, at: &str) {
    trapdetect_e2e::schema::validate(root, v, at);
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let s = schema();
    let bad = serde_json::json!({"schema": "trapdetect.load/2"});
    let r = std::panic::catch_unwind(|| validate(&s, &bad, "$"));
    assert!(r.is_err(), "a wrong schema string must not validate");
}

/// Issue 24: two copies, `--shard 1/2` and `--shard 2/2`, started together by `--start-at`:
/// each waits for the same wall-clock instant, offers half the rate, and says when its window
/// started on the wall clock.
#[test]
fn two_shards_start_together_at_the_given_time() {
    let s = Server::start(Behaviour::Status(200));
    let url = s.url("/");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = format!("{:.3}", now + 2.0);
    let at_s: f64 = at.parse().unwrap();
    let copy = |shard: &'static str| {
        let (url, at) = (url.clone(), at.clone());
        move || {
            let out = trapdetect(
                &[
                    "load",
                    "--json",
                    "--url",
                    &url,
                    "--rate",
                    "200",
                    "--duration",
                    "2s",
                    "--shard",
                    shard,
                    "--start-at",
                    &at,
                    // This test checks the start instant and the counts, not punctuality.
                    "--lag-budget",
                    "5s",
                ],
                LIMIT,
            );
            let v = json(&out);
            (out, v)
        }
    };
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(copy("1/2"));
        let b = sc.spawn(copy("2/2"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut starts = vec![];
    for ((out, v), i) in [(a, 1), (b, 2)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {v}\n{err}");
        validate(&schema(), &v, "$");
        check_accounting(&v);
        assert!(
            err.lines().any(|l| l.starts_with("waiting until ")
                && l.ends_with(&format!(" to start (shard {i}/2)"))),
            "shard {i}: {err}"
        );
        assert_eq!(
            v["plan"]["shard"],
            serde_json::json!({"index": i, "count": 2})
        );
        assert_eq!(v["plan"]["rate_per_s"], 100.0);
        assert_eq!(v["scheduled"], 200, "shard {i}: 2 s × 100/s");
        assert_eq!(v["ok_2xx"], 200, "shard {i}");
        let start = v["window"]["start_unix_s"].as_f64().unwrap();
        assert!(
            (start - at_s).abs() <= 0.05,
            "shard {i}: window started at {start}, asked for {at_s}"
        );
        let clock = &v["window"]["clock"];
        assert!(clock["synchronized"].is_boolean(), "{clock}");
        assert!(clock["esterror_us"].is_i64(), "{clock}");
        starts.push(start);
    }
    assert!(
        (starts[0] - starts[1]).abs() <= 0.05,
        "the two windows started {starts:?}"
    );
}

#[test]
fn start_at_in_the_past_is_one_line_exit_2() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = (now - 10).to_string();
    let out = trapdetect(
        &[
            "load",
            "--url",
            "http://127.0.0.1:1/",
            "--rate",
            "10",
            "--duration",
            "1s",
            "--start-at",
            &at,
        ],
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    let ago: f64 = err
        .trim_end()
        .strip_prefix(&format!("trapdetect: --start-at {at}: that time passed "))
        .and_then(|r| r.strip_suffix(" s ago"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"));
    assert!((10.0..12.0).contains(&ago), "{err}");
}

/// Issue 24: two copies of the built-in generator in two network namespaces (two "hosts"),
/// each on its own link to a server in a third, offer 100/s each on one schedule; `trapdetect
/// report` merges their JSONs on wall-clock seconds into the figures one generator offering
/// 200/s from one of them measures: the same requests each second, the same 2xx, a p99 each
/// second from the merged latencies, and the merged document reads back to the same text.
#[test]
fn two_generators_in_two_namespaces_merge_to_one_at_the_full_rate() {
    if !trapdetect_e2e::require_root(
        "two_generators_in_two_namespaces_merge_to_one_at_the_full_rate",
    ) {
        return;
    }
    use trapdetect_e2e::netns::NetNs;
    let (srv, a, b) = (NetNs::new("ms"), NetNs::new("ma"), NetNs::new("mb"));
    srv.veth_named(&a, "tda", "10.79.1.1/24", "10.79.1.2/24");
    srv.veth_named(&b, "tdb", "10.79.2.1/24", "10.79.2.2/24");
    let dir = TempDir::new("merge-ns");
    std::fs::write(dir.path().join("index.html"), "merged\n").unwrap();
    srv.spawn(
        Command::new("python3")
            .args(["-m", "http.server", "8080", "--bind", "0.0.0.0"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    for (ns, addr) in [(&a, "10.79.1.1:8080"), (&b, "10.79.2.1:8080")] {
        trapdetect_e2e::wait_until(
            "the server in its namespace",
            Duration::from_secs(10),
            || ns.run(|| std::net::TcpStream::connect(addr).is_ok()),
        );
    }
    let load_in = |ns: &NetNs, host: &str, rate: &str, extra: &[&str], out: &str| {
        let mut cmd = Command::new(trapdetect_e2e::bin());
        cmd.args(["load", "-q", "--allow-remote", "--lag-budget", "5s"])
            .args(["--url", &format!("http://{host}:8080/"), "--rate", rate])
            .args(["--duration", "3s", "--json-out", out])
            .args(extra);
        let o = run_bounded(ns.enter_on_exec(&mut cmd), LIMIT);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice::<Value>(&std::fs::read(out).unwrap()).unwrap()
    };
    let file = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    // One generator at the full rate, from the first namespace.
    let one = load_in(&a, "10.79.1.1", "200", &[], &file("one.json"));
    // Two at half each, on one schedule.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = format!("{:.3}", now + 2.0);
    std::thread::scope(|sc| {
        let x = sc.spawn(|| {
            load_in(
                &a,
                "10.79.1.1",
                "200",
                &["--shard", "1/2", "--start-at", &at],
                &file("a.json"),
            )
        });
        let y = sc.spawn(|| {
            load_in(
                &b,
                "10.79.2.1",
                "200",
                &["--shard", "2/2", "--start-at", &at],
                &file("b.json"),
            )
        });
        for v in [x.join().unwrap(), y.join().unwrap()] {
            assert_eq!(
                (v["scheduled"].as_u64(), v["ok_2xx"].as_u64()),
                (Some(300), Some(300)),
                "{v}"
            );
        }
    });
    let out = trapdetect(
        &["report", &file("a.json"), &file("b.json"), "--json"],
        LIMIT,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = json(&out);
    assert_eq!(m["schema"], "trapdetect.merged-load/1");
    let gens = m["load"]["generators"].as_array().unwrap();
    assert_eq!(gens.len(), 2, "{m}");
    for g in gens {
        assert_eq!(
            (
                g["totals"]["requests"].as_u64(),
                g["totals"]["ok_2xx"].as_u64()
            ),
            (Some(300), Some(300)),
            "{g}"
        );
    }
    let totals = &m["load"]["totals"];
    assert_eq!(totals["requests"], one["scheduled"], "{totals}");
    assert_eq!(totals["ok_2xx"], one["ok_2xx"], "{totals}");
    assert_eq!(totals["requests"], 600);
    // Second by second: the two copies offered together what the one did, exactly (constant
    // arrivals, 100 each a second); their 2xx end where the one's did, give or take the
    // requests in flight across either edge of the second: at most the rate times the slowest
    // 2xx latency of that second in either run at each edge, and one request for rounding.
    let merged = m["series"].as_array().unwrap();
    let single = one["series"].as_array().unwrap();
    for t in 0..3 {
        let s = merged
            .iter()
            .find(|s| s["t_s"] == t)
            .unwrap_or_else(|| panic!("no second {t}: {m}"));
        let o = &single[t as usize];
        assert_eq!(s["offered"], o["scheduled"], "second {t}: {s}");
        assert_eq!(s["offered"], 200, "second {t}: {s}");
        let p99_s = |v: &Value| v.as_f64().unwrap_or(0.0) / 1e6;
        let slowest = p99_s(&s["p99_us"]).max(p99_s(&o["lat_2xx_p99_us"]));
        let edge = 2 * (200.0 * slowest).ceil() as i64 + 1;
        let (two, one_ok) = (s["ok_2xx"].as_i64().unwrap(), o["ok_2xx"].as_i64().unwrap());
        assert!(
            (two - one_ok).abs() <= edge,
            "second {t}: merged {two} 2xx, one generator {one_ok} (in flight at an edge: {edge})"
        );
        assert!(
            s["p99_us"].as_f64().is_some_and(|p| p > 0.0),
            "second {t}: {s}"
        );
        assert_eq!(s["generator_lag"], false, "second {t}: {s}");
    }
    assert_eq!(
        merged
            .iter()
            .map(|s| s["ok_2xx"].as_u64().unwrap())
            .sum::<u64>(),
        600
    );
    // The text, live and read back from the merged document, is one.
    let text = trapdetect(&["report", &file("a.json"), &file("b.json")], LIMIT);
    eprintln!("{}", String::from_utf8_lossy(&text.stdout));
    std::fs::write(file("m.json"), &out.stdout).unwrap();
    let back = trapdetect(&["report", &file("m.json")], LIMIT);
    assert_eq!(back.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&back.stdout),
        String::from_utf8_lossy(&text.stdout)
    );
    assert!(String::from_utf8_lossy(&text.stdout).starts_with("MERGED LOAD: 2 generators"));
    // A summary without wall-clock times beside them cannot be placed: refused by name.
    std::fs::write(
        file("wrk.txt"),
        include_str!("../../loader/fixtures/load_results/wrk.txt"),
    )
    .unwrap();
    let out = trapdetect(&["report", &file("a.json"), &file("wrk.txt")], LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("wrk.txt: wrk text summary has no wall-clock times"),
        "{err}"
    );
}
