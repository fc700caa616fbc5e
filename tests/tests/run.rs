//! `trapdetect run`: open-loop load and off-CPU tracing at once, on real php-fpm + nginx, with
//! one planted cause per test. Each asserts the verdict and its numbers: the predicted ceiling
//! beside the delivered one, the share of the threads' time the cause explains.

use std::time::Duration;

use serde_json::Value;
use trapdetect_e2e::{
    IGNORE_NET, TempDir, json, require_root, servers::PhpStack, slowfs::SlowFs, trapdetect,
};

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
        "10s",
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
    for t in v["run"]["timeline"].as_array().into_iter().flatten() {
        eprintln!(
            "t={} offered={} 2xx={} cores={} off={} fs={} busy={} marks={}",
            t["t_s"],
            t["offered"],
            t["ok_2xx"],
            t["cores_busy"],
            t["off_cpu"],
            t["fs_ops"],
            t["busy_threads"],
            t["marks"]
        );
    }
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

/// A `fail` verdict exits 1, unless the generator could not keep its schedule on this machine
/// (then the run is untrusted: 3).
fn fail_code(r: &Value) -> i32 {
    if r["measurement"]["trusted"].as_bool().unwrap() {
        1
    } else {
        3
    }
}

/// 2xx per second during the traced window, as the verdict states it.
fn delivered(f: &Value) -> f64 {
    f["evidence"]["delivered_per_s"].as_f64().unwrap()
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
    let d = delivered(f);
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

/// Scenario 1: php-fpm's working directory 7 levels deep in a serialized FUSE mount (200 µs
/// per operation), flooded above what the mount can serve.
#[test]
fn cwd_deep_in_serialized_fuse_predicts_the_ceiling_it_hits() {
    if !require_root("cwd_deep_in_serialized_fuse_predicts_the_ceiling_it_hits") {
        return;
    }
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let stack = PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";");
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "700", "6s", &[]);
    assert_eq!(code, fail_code(&r));
    // The ceiling verdict on the mount: `fs.serialized` when its per-second rate stayed flat
    // while threads queued on it (on a machine shared with other loads the FUSE daemon's own
    // CPU starvation can make the rate jitter: then `fs.slow-ops`, same numbers).
    let mount = fs.mount.to_str().unwrap();
    let rates: Vec<f64> = r["run"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["offered"].as_u64().unwrap() > 0 && !t["fs_ops"].as_object().unwrap().is_empty()
        })
        .skip(1)
        .map(|t| t["fs_ops"][mount].as_f64().unwrap_or(0.0))
        .collect();
    let mut sorted = rates.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    let spread = rates.iter().map(|x| (x - median).abs()).sum::<f64>() / rates.len() as f64;
    let want = if spread <= 0.4 * median {
        "fs.serialized"
    } else {
        "fs.slow-ops"
    };
    let f = finding(&r, want).unwrap_or_else(|| panic!("{want}: {:?} {rates:?}", ids(&r)));
    assert_eq!(f["severity"], "fail");
    let e = &f["evidence"];
    assert_eq!(e["mount"], fs.mount.to_str().unwrap());
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["ops_kind"], "FUSE requests");
    // Four workers, all queued on the one FUSE thread.
    let threads = e["mean_threads"].as_f64().unwrap();
    assert!(threads > 2.0, "mean threads in it {threads}");
    assert!(
        e["share_of_busy_thread_time_pct"].as_f64().unwrap() >= 60.0,
        "{e}"
    );
    let d = delivered(f);
    assert!(d < 1000.0, "the mount caps the run: delivered {d}");
    let p = e["predicted_ceiling_per_s"].as_f64().unwrap();
    assert!((p - d).abs() <= 0.3 * d, "predicted {p} vs delivered {d}");
    assert!(finding(&r, "pool.too-small").is_none(), "{:?}", ids(&r));
    assert!(finding(&r, "cpu.saturated").is_none(), "{:?}", ids(&r));
}

/// Scenario 3: the same stack on ext4 with a CPU-heavy script: at capacity, no trap.
#[test]
fn cpu_heavy_script_on_ext4_is_cpu_saturated_not_a_trap() {
    if !require_root("cpu_heavy_script_on_ext4_is_cpu_saturated_not_a_trap") {
        return;
    }
    let cwd = TempDir::new("run-cpu");
    let stack = PhpStack::start(
        cwd.path(),
        4,
        "<?php $x = 0; for ($i = 0; $i < 400000; $i++) { $x += $i % 7; } echo $x, \"\\n\";",
    );
    let (r, _code) = run(stack.fpm.pid(), &stack.url(), "1500", "6s", &[]);
    let f = finding(&r, "cpu.saturated").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(f["severity"], "info");
    assert!(f["title"].as_str().unwrap().starts_with("no trap"));
    assert!(f["evidence"]["cores_busy"].as_f64().unwrap() >= 1.7);
    assert!(
        f["evidence"]["share_of_busy_thread_time_pct"]
            .as_f64()
            .unwrap()
            >= 50.0,
        "{f}"
    );
    let bad: Vec<String> = ids(&r)
        .into_iter()
        .filter(|i| i.starts_with("fs.") || i.starts_with("pool.") || i.starts_with("lock."))
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// Scenario 4: every request takes one exclusive flock on the same file and holds it 20 ms.
#[test]
fn workers_serialized_on_one_flock_name_the_file() {
    if !require_root("workers_serialized_on_one_flock_name_the_file") {
        return;
    }
    let cwd = TempDir::new("run-lock");
    let lock = cwd.path().join("session.lock");
    let script = format!(
        "<?php $f = fopen('{}', 'c'); flock($f, LOCK_EX); usleep(20000); flock($f, LOCK_UN); fclose($f); echo \"ok\\n\";",
        lock.display()
    );
    let stack = PhpStack::start(cwd.path(), 4, &script);
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "150", "6s", &[]);
    assert_eq!(code, fail_code(&r));
    let f = finding(&r, "lock.contention").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(f["evidence"]["object"], lock.to_str().unwrap());
    // Three of four workers wait while one holds it.
    let t = f["evidence"]["mean_threads"].as_f64().unwrap();
    assert!((2.0..=3.5).contains(&t), "mean waiting threads {t}");
    let d = delivered(f);
    assert!(d <= 51.0, "20 ms under the lock: at most 50 req/s, got {d}");
    assert!(
        f["evidence"]["share_of_busy_thread_time_pct"]
            .as_f64()
            .unwrap()
            >= 50.0,
        "{f}"
    );
    assert!(finding(&r, "cpu.saturated").is_none(), "{:?}", ids(&r));
    assert!(finding(&r, "pool.too-small").is_none(), "{:?}", ids(&r));
}
