//! `trapdetect run`: open-loop load and off-CPU tracing at once, on real php-fpm + nginx, with
//! one planted cause per test. Each asserts the verdict and its numbers: the predicted ceiling
//! beside the delivered one, the share of the threads' time the cause explains.

use std::time::Duration;

use serde_json::Value;
use trapdetect_e2e::{IGNORE_NET, TempDir, json, require_root, servers::PhpStack, trapdetect};

fn run(pid: u32, url: &str, rate: &str, duration: &str, extra: &[&str]) -> (Value, i32) {
    let pid = pid.to_string();
    let mut args = vec![
        "run",
        "--pid",
        &pid,
        "--url",
        url,
        "--rate",
        rate,
        "--duration",
        duration,
        "--timeout",
        "3s",
        "--json",
        "--quiet",
    ];
    args.extend(extra);
    args.extend(IGNORE_NET);
    let out = trapdetect(&args, Duration::from_secs(120));
    let v = json(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "findings: {}\nrun: {}",
        serde_json::to_string_pretty(&v["findings"]).unwrap(),
        serde_json::to_string(&v["run"]["thread_seconds"]).unwrap()
    );
    (v, out.status.code().unwrap_or(-1))
}

fn finding<'a>(r: &'a Value, id: &str) -> Option<&'a Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
}

fn ids(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn delivered(r: &Value) -> f64 {
    r["load"]["delivered_rate_per_s"].as_f64().unwrap()
}

/// Scenario 6: one worker, a 40 ms sleep per request, offered far more than 25 req/s.
#[test]
fn one_sleeping_worker_is_a_pool_ceiling() {
    if !require_root("one_sleeping_worker_is_a_pool_ceiling") {
        return;
    }
    let cwd = TempDir::new("run-pool");
    let stack = PhpStack::start(cwd.path(), 1, "<?php usleep(40000); echo \"ok\\n\";");
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "80", "6s", &[]);
    assert_eq!(r["command"], "run");
    assert!(r["run"]["classified"].as_bool().unwrap(), "{}", r["probes"]);
    let f = finding(&r, "pool.too-small").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["workers"], 1);
    let d = delivered(&r);
    // One worker, 40 ms each: 25 req/s at most, and the load got about that.
    assert!((15.0..=26.0).contains(&d), "delivered {d}");
    let p = f["evidence"]["predicted_ceiling_per_s"].as_f64().unwrap();
    assert!((p - d).abs() <= 0.3 * d, "predicted {p} vs delivered {d}");
    // The worker's busy time is the sleep.
    let sleep = r["run"]["thread_seconds"]["off_cpu"]["sleep"]
        .as_f64()
        .unwrap();
    let window = r["run"]["window_s"].as_f64().unwrap();
    assert!(sleep >= 0.8 * window, "sleep {sleep} s of {window} s");
    assert!(
        ids(&r).iter().all(|i| !i.starts_with("fs.")),
        "{:?}",
        ids(&r)
    );
    assert_eq!(code, 1);
}
