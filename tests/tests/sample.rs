//! `--backend sample`: the planted traps of tests/tests/run.rs judged without eBPF, by a
//! trapdetect whose every capability is dropped but CAP_SYS_PTRACE (the targets here run as
//! root with every capability, and reading another process's `/proc/PID/syscall` and `mem`
//! needs either its user and no more capabilities than ours, or CAP_SYS_PTRACE). The same
//! cause verdicts as the eBPF backend; sampled figures state their samples; what needs exact
//! counts is marked unavailable; `auto` without CAP_BPF samples and says why.

use std::{process::Command, time::Duration};

use serde_json::Value;
use trapdetect_e2e::{
    IGNORE_NET, TempDir, bin, json, require_root, run_bounded,
    servers::{PhpStack, php_site},
    slowfs::SlowFs,
};

/// `trapdetect run` under `setpriv`: no capability but CAP_SYS_PTRACE, none inheritable.
fn run_without_bpf(pid: u32, url: &str, rate: &str, backend: &str) -> (Value, i32) {
    run_with(pid, url, rate, backend, true, &[])
}

/// `trapdetect run`, capabilities dropped or not.
fn run_with(
    pid: u32,
    url: &str,
    rate: &str,
    backend: &str,
    drop_caps: bool,
    extra: &[&str],
) -> (Value, i32) {
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
        "4s",
        "--timeout",
        "5s",
        "--backend",
        backend,
        "--json",
        "--quiet",
    ];
    args.extend(IGNORE_NET);
    args.extend(extra);
    let mut cmd = if drop_caps {
        let mut c = Command::new("setpriv");
        c.args([
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all,+sys_ptrace",
            "--",
        ])
        .arg(bin());
        c
    } else {
        Command::new(bin())
    };
    let out = run_bounded(cmd.args(&args), Duration::from_secs(60));
    let v = json(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "findings: {}\nverdict: {}\nthread_seconds: {}\nsample: {}",
        serde_json::to_string_pretty(&v["findings"]).unwrap(),
        v["verdict"],
        v["run"]["thread_seconds"],
        v["sample"]
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

/// The report says it sampled, at the default rate, because it was asked to.
fn assert_sampled(r: &Value) {
    let b = &r["measurement"]["backend"];
    assert_eq!(b["name"], "sample", "{b}");
    assert_eq!(b["sample_hz"], 200);
    assert!(b["samples"].as_u64().unwrap() > 1000, "{b}");
    assert_eq!(r["run"]["classes_method"], "sampled");
    assert!(
        r["probes"].as_array().is_none_or(|p| p.is_empty()),
        "{}",
        r["probes"]
    );
}

/// A sampled finding states the samples behind it and their 95 % interval.
fn assert_sampling_stated(f: &Value) {
    let e = &f["evidence"];
    assert!(e["samples"].as_u64().unwrap() > 100, "{e}");
    assert!(e["thread_samples"].as_u64().unwrap() >= e["samples"].as_u64().unwrap());
    let ci = e["sample_share_ci95_pct"].as_f64().unwrap();
    assert!(ci > 0.0 && ci < 5.0, "{e}");
}

/// php-fpm started 7 levels deep in a serialized 200 µs FUSE mount, flooded: the verdict is the
/// mount, with the working directory as the cause, as under eBPF; operations per request are
/// unavailable.
#[test]
fn sampled_cwd_deep_in_fuse_is_the_mount_verdict() {
    if !require_root("sampled_cwd_deep_in_fuse_is_the_mount_verdict") {
        return;
    }
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let stack = PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";");
    let (r, code) = run_without_bpf(stack.fpm.pid(), &stack.url(), "700", "sample");
    assert_sampled(&r);
    let mount = fs.mount.to_str().unwrap();
    let cause = r["verdict"]["cause"].as_str().unwrap_or("");
    assert!(
        cause == "fs.slow-ops" || cause == "fs.serialized",
        "{cause}: {:?}",
        ids(&r)
    );
    let f = finding(&r, cause).unwrap();
    let e = &f["evidence"];
    assert_eq!(f["severity"], "fail");
    assert_eq!(e["mount"], mount);
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["cause"], "working directory");
    assert!(e["mean_threads"].as_f64().unwrap() > 2.0, "{e}");
    assert!(
        e["share_of_busy_thread_time_pct"].as_f64().unwrap() >= 60.0,
        "{e}"
    );
    assert!(
        e["ops_per_request"]
            .as_str()
            .unwrap()
            .starts_with("unavailable"),
        "{e}"
    );
    assert!(e.get("predicted_ceiling_per_s").is_none(), "{e}");
    assert_sampling_stated(f);
    assert!(finding(&r, "pool.too-small").is_none(), "{:?}", ids(&r));
    assert!(finding(&r, "cpu.saturated").is_none(), "{:?}", ids(&r));
    assert_eq!(
        code,
        if r["measurement"]["trusted"] == true {
            1
        } else {
            3
        }
    );
}

/// php-fpm started on ext4 with its code (the docroot) on the serialized 200 µs FUSE mount:
/// sampled, the verdict is the mount, with the files the requests use as the cause (not the
/// working directory), as under eBPF (run.rs); and `--backend auto` with every capability
/// picks eBPF, says so, and gives the same cause with the FUSE requests counted.
#[test]
fn sampled_code_on_fuse_is_the_mount_verdict_and_auto_with_cap_bpf_traces() {
    if !require_root("sampled_code_on_fuse_is_the_mount_verdict_and_auto_with_cap_bpf_traces") {
        return;
    }
    let fs = SlowFs::mount(200, php_site);
    let cwd = TempDir::new("sample-code");
    let stack = PhpStack::start_in_docroot(cwd.path(), 4, fs.mount.join("www"));
    let mount = fs.mount.to_str().unwrap();
    let (s, code) = run_without_bpf(stack.fpm.pid(), &stack.url(), "400", "sample");
    let (e, _) = run_with(stack.fpm.pid(), &stack.url(), "400", "auto", false, &[]);
    assert_sampled(&s);
    let b = &e["measurement"]["backend"];
    assert_eq!(b["name"], "ebpf", "{b}");
    assert_eq!(e["run"]["classes_method"], "exact");
    for (r, what) in [(&s, "sampled"), (&e, "auto")] {
        let cause = r["verdict"]["cause"].as_str().unwrap_or("");
        assert!(
            cause == "fs.slow-ops" || cause == "fs.serialized",
            "{what}: {cause}: {:?}",
            ids(r)
        );
        let ev = &finding(r, cause).unwrap()["evidence"];
        assert_eq!(ev["mount"], mount, "{what}");
        assert_eq!(ev["cause"], "files the requests use", "{what}");
        assert!(finding(r, "fs.cwd-slow").is_none(), "{what}: {:?}", ids(r));
    }
    assert!(
        finding(&s, s["verdict"]["cause"].as_str().unwrap()).unwrap()["evidence"]
            ["ops_per_request"]
            .as_str()
            .unwrap()
            .starts_with("unavailable")
    );
    let ev = &finding(&e, e["verdict"]["cause"].as_str().unwrap()).unwrap()["evidence"];
    assert_eq!(ev["ops_kind"], "FUSE requests");
    assert_eq!(
        code,
        if s["measurement"]["trusted"] == true {
            1
        } else {
            3
        }
    );
}

/// One worker sleeping 40 ms per request: pool.too-small with one worker, as under eBPF.
#[test]
fn sampled_one_sleeping_worker_is_a_pool_ceiling() {
    if !require_root("sampled_one_sleeping_worker_is_a_pool_ceiling") {
        return;
    }
    let cwd = TempDir::new("sample-pool");
    let stack = PhpStack::start(cwd.path(), 1, "<?php usleep(40000); echo \"ok\\n\";");
    let (r, _) = run_without_bpf(stack.fpm.pid(), &stack.url(), "80", "sample");
    assert_sampled(&r);
    assert_eq!(r["verdict"]["cause"], "pool.too-small", "{:?}", ids(&r));
    let f = finding(&r, "pool.too-small").unwrap();
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["workers"], 1);
    let d = f["evidence"]["delivered_per_s"].as_f64().unwrap();
    // One worker, 40 ms each: 25 req/s at most (less when this file's other stacks and the
    // machine's other work take the CPUs: seen 15-25 here).
    assert!((10.0..=26.0).contains(&d), "delivered {d}");
    let p = f["evidence"]["predicted_ceiling_per_s"].as_f64().unwrap();
    assert!((p - d).abs() <= 0.3 * d, "predicted {p} vs delivered {d}");
    assert_sampling_stated(f);
    let sleep = r["run"]["thread_seconds"]["off_cpu"]["sleep"]
        .as_f64()
        .unwrap();
    let window = r["run"]["window_s"].as_f64().unwrap();
    assert!(sleep >= 0.7 * window, "sleep {sleep} s of {window} s");
    assert!(
        ids(&r).iter().all(|i| !i.starts_with("fs.")),
        "{:?}",
        ids(&r)
    );
}

/// Every request holds one exclusive flock for 20 ms: lock.contention on that file, named.
#[test]
fn sampled_workers_on_one_flock_name_the_file() {
    if !require_root("sampled_workers_on_one_flock_name_the_file") {
        return;
    }
    let cwd = TempDir::new("sample-lock");
    let lock = cwd.path().join("session.lock");
    let script = format!(
        "<?php $f = fopen('{}', 'c'); flock($f, LOCK_EX); usleep(20000); flock($f, LOCK_UN); fclose($f); echo \"ok\\n\";",
        lock.display()
    );
    let stack = PhpStack::start(cwd.path(), 4, &script);
    let (r, _) = run_without_bpf(stack.fpm.pid(), &stack.url(), "150", "sample");
    assert_sampled(&r);
    assert_eq!(r["verdict"]["cause"], "lock.contention", "{:?}", ids(&r));
    let f = finding(&r, "lock.contention").unwrap();
    assert_eq!(f["evidence"]["object"], lock.to_str().unwrap());
    let t = f["evidence"]["mean_threads"].as_f64().unwrap();
    assert!((2.0..=3.5).contains(&t), "mean waiting threads {t}");
    assert!(
        f["evidence"]["share_of_busy_thread_time_pct"]
            .as_f64()
            .unwrap()
            >= 50.0,
        "{f}"
    );
    assert_sampling_stated(f);
    assert!(finding(&r, "pool.too-small").is_none(), "{:?}", ids(&r));
}

/// The FUSE test's clean twin (the same stack on ext4, offered what it serves) under `auto`
/// without CAP_BPF: sampled, and the report says why; no fs finding, nothing fails.
#[test]
fn auto_without_cap_bpf_samples_and_the_clean_twin_passes() {
    if !require_root("auto_without_cap_bpf_samples_and_the_clean_twin_passes") {
        return;
    }
    let cwd = TempDir::new("sample-clean");
    let deep = cwd.path().join("a/b/c/d/e/f/g");
    std::fs::create_dir_all(&deep).unwrap();
    let stack = PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";");
    let (r, code) = run_without_bpf(stack.fpm.pid(), &stack.url(), "200", "auto");
    let b = &r["measurement"]["backend"];
    assert_eq!(b["name"], "sample", "{b}");
    let why = b["reason"].as_str().unwrap();
    assert!(
        why.starts_with("auto: eBPF could not attach") && why.contains("CAP_BPF"),
        "{why}"
    );
    assert!(
        r["measurement"]["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("backend: /proc sampling at 200 Hz"),
        "{}",
        r["measurement"]["notes"]
    );
    assert!(r["verdict"]["cause"].is_null(), "{}", r["verdict"]);
    assert!(
        ids(&r).iter().all(|i| !i.starts_with("fs.")),
        "{:?}",
        ids(&r)
    );
    assert_eq!(
        code,
        if r["measurement"]["trusted"] == true {
            0
        } else {
            3
        }
    );
}

/// Each class's share of the traced threads' wall time, %.
fn shares(r: &Value) -> std::collections::BTreeMap<String, f64> {
    let t = &r["run"]["thread_seconds"];
    let mut parts: Vec<(String, f64)> = vec![
        ("on_cpu".into(), t["on_cpu"].as_f64().unwrap()),
        ("run_queue".into(), t["run_queue"].as_f64().unwrap()),
    ];
    for (c, v) in t["off_cpu"].as_object().unwrap() {
        parts.push((c.clone(), v.as_f64().unwrap()));
    }
    let wall: f64 = parts.iter().map(|p| p.1).sum();
    parts
        .into_iter()
        .map(|(c, v)| (c, v / wall.max(1e-9) * 100.0))
        .collect()
}

/// The figures side by side (docs/sample.md): each planted trap on php-fpm, its requests
/// arriving at random (Poisson: they overlap and queue on what holds them, about 60 % busy, so
/// nothing queues past the window), sampled without capabilities, then traced with eBPF:
/// every class's share of the threads' wall time within 10 points. Four workers taking one
/// flock for 10 ms per request at 60/s; four workers whose working directory is 7 levels deep
/// in the serialized 200 µs FUSE mount at 250/s; one worker sleeping 40 ms at 15/s.
#[test]
fn sampled_shares_are_within_ten_points_of_ebpf() {
    if !require_root("sampled_shares_are_within_ten_points_of_ebpf") {
        return;
    }
    let cwd = TempDir::new("sample-vs-ebpf");
    let lock = cwd.path().join("session.lock");
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let flock = format!(
        "<?php $f = fopen('{}', 'c'); flock($f, LOCK_EX); usleep(10000); flock($f, LOCK_UN); fclose($f); echo \"ok\\n\";",
        lock.display()
    );
    let plain = "<?php echo \"ok\\n\";".to_string();
    let sleep = "<?php usleep(40000); echo \"ok\\n\";".to_string();
    let traps = [
        ("one flock", cwd.path(), 4, flock, "60", "file_lock"),
        ("cwd on the mount", deep.as_path(), 4, plain, "250", "path"),
        ("one sleeping worker", cwd.path(), 1, sleep, "15", "sleep"),
    ];
    let poisson = ["--arrival", "poisson"];
    for (what, at, workers, script, rate, class) in &traps {
        let stack = PhpStack::start(at, *workers, script);
        let (s, _) = run_with(
            stack.fpm.pid(),
            &stack.url(),
            rate,
            "sample",
            true,
            &poisson,
        );
        let (e, _) = run_with(stack.fpm.pid(), &stack.url(), rate, "ebpf", false, &poisson);
        assert_sampled(&s);
        assert_eq!(e["measurement"]["backend"]["name"], "ebpf");
        let (a, b) = (shares(&s), shares(&e));
        let mut bad = vec![];
        let classes: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        for c in classes {
            let (x, y) = (
                a.get(c).copied().unwrap_or(0.0),
                b.get(c).copied().unwrap_or(0.0),
            );
            eprintln!("{what}: {c:<12} sample {x:5.1} %  ebpf {y:5.1} %");
            if (x - y).abs() > 10.0 {
                bad.push(format!("{c}: sample {x:.1} %, ebpf {y:.1} %"));
            }
        }
        assert!(bad.is_empty(), "{what}: {bad:?}");
        // The trap held the threads: the comparison covers the class that matters.
        assert!(b[*class] >= 5.0, "{what}: {b:?}");
    }
}
