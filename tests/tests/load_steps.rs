//! `trapdetect load --rate FROM..TO --step N`: steps to the knee against a server whose
//! capacity the test plants (2 workers × 20 ms per request = 100/s). The knee must land within
//! one step of it, each step must be judged on what was delivered inside it, and the report
//! must match docs/load.schema.json's `steps` definition.

use std::time::Duration;

use serde_json::{Value, json};
use trapdetect_e2e::{
    misbehave::{Behaviour, Server},
    trapdetect,
};

const LIMIT: Duration = Duration::from_secs(120);

fn validate_steps(v: &Value) {
    let schema = trapdetect_e2e::schema::load("load.schema.json");
    let root = json!({"$defs": schema["$defs"], "$ref": "#/$defs/steps"});
    trapdetect_e2e::schema::validate(&root, v, "$");
}

#[test]
fn steps_find_a_planted_knee_within_one_step() {
    let srv = Server::start(Behaviour::Capacity {
        workers: 2,
        service: Duration::from_millis(20),
    });
    let capacity = 100.0;
    let url = srv.url("/");
    // The lag budget and the SLO are wide: the box is shared by parallel tests (a thread
    // waiting for a core there waits tens of ms), and this test checks the server's knee,
    // which its capacity bounds through the delivered share, not the generator's
    // punctuality (unit tests cover invalid steps).
    let out = trapdetect(
        &[
            "load",
            "--url",
            &url,
            "--rate",
            "20..200",
            "--step",
            "20",
            "--step-duration",
            "2s",
            "--slo-p99",
            "1s",
            "--lag-budget",
            "200ms",
            "--json",
            "-q",
        ],
        LIMIT,
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    validate_steps(&v);
    assert_eq!(v["schema"], "trapdetect.load-steps/1");
    assert_eq!(out.status.code(), Some(0), "{:#}", v["knee"]);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["knee"]["verdict"], "found", "{:#}", v["knee"]);
    let knee = v["knee"]["rate_per_s"].as_f64().unwrap();
    assert!(
        (capacity - 20.0..=capacity).contains(&knee),
        "knee {knee}/s, planted {capacity}/s: {}",
        v["knee"]["text"]
    );
    let steps = v["steps"].as_array().unwrap();
    let (last, passed) = steps.split_last().unwrap();
    assert_eq!(steps[0]["rate_per_s"], 20.0);
    for (i, s) in passed.iter().enumerate() {
        assert_eq!(s["passed"], true, "{s:#}");
        assert_eq!(s["rate_per_s"].as_f64().unwrap(), 20.0 + 20.0 * i as f64);
        assert!(s["delivered_ratio"].as_f64().unwrap() >= 0.99);
        assert_eq!(s["errors_total"], 0);
    }
    assert_eq!(passed.last().unwrap()["rate_per_s"].as_f64(), Some(knee));
    assert_eq!(last["passed"], false);
    assert_eq!(last["valid"], true, "{last:#}");
    // Inside the failing step the server delivered no more than its capacity; what it owed
    // at the end was answered in the drain and is reported apart, not as delivered.
    let delivered = last["delivered_per_s"].as_f64().unwrap();
    assert!(delivered <= capacity * 1.02, "{delivered}/s > {capacity}/s");
    assert!(last["ok_2xx_after_step"].as_u64().unwrap() > 0, "{last:#}");
    let series_2xx: u64 = last["series"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["t_s"].as_u64().unwrap() < 2)
        .map(|p| p["ok_2xx"].as_u64().unwrap())
        .sum();
    assert_eq!(last["delivered_in_step"].as_u64(), Some(series_2xx));
    // The server's own count: every request the steps accounted for (2xx inside and after
    // each step, other statuses, requests that ended without one) reached it exactly once,
    // over no more connections at once than the budget the report echoes.
    let sum = |k: &str| -> u64 { steps.iter().map(|s| s[k].as_u64().unwrap()).sum() };
    assert_eq!(
        srv.requests(),
        sum("delivered_in_step") + sum("ok_2xx_after_step") + sum("non_2xx") + sum("errors_total"),
        "requests the server read vs those the report accounts for"
    );
    let budget = v["plan"]["max_connections"].as_u64().unwrap();
    assert!(
        (1..=budget).contains(&srv.open_max()),
        "server saw {} connections open at most, budget {budget}",
        srv.open_max()
    );
}

#[test]
fn bad_step_flags_are_one_line_exit_2() {
    for (args, says) in [
        (&["--rate", "100..50", "--step", "10"][..], "must rise"),
        (&["--rate", "100", "--step", "10"], "--rate FROM..TO"),
        (&["--rate", "10..100"], "--step"),
        (&["--rate", "10..100", "--step", "0"], "greater than 0"),
        (&["--rate", "1..100000", "--step", "1"], "at most 1000"),
        (
            &[
                "--rate",
                "10..100",
                "--step",
                "10",
                "--step-duration",
                "100ms",
            ],
            "at least 2s",
        ),
        (
            &[
                "--rate",
                "10..100",
                "--step",
                "10",
                "--closed-loop",
                "-c",
                "2",
            ],
            "open loop",
        ),
        (
            &["--rate", "10..100", "--step", "10", "--drain-below", "0"],
            "at least 1",
        ),
    ] {
        let mut a = vec!["load", "--url", "http://127.0.0.1:9/"];
        a.extend_from_slice(args);
        let out = trapdetect(&a, LIMIT);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing started");
        assert!(err.contains(says), "{args:?}: {err}");
        // clap's own parse errors are clap's format; ours are one line.
        if !err.starts_with("error:") {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
            assert!(err.starts_with("trapdetect: "), "{err}");
        }
    }
}
