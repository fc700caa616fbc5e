//! `trapdetect run`: open-loop load and off-CPU tracing at once, on real php-fpm + nginx, with
//! one planted cause per test. Each asserts the verdict and its numbers: the predicted ceiling
//! beside the delivered one, the share of the threads' time the cause explains.

use std::time::Duration;

use serde_json::Value;
use trapdetect_e2e::{
    IGNORE_NET, TempDir,
    cgroup::{CpuCgroup, Version},
    json, kernel_version, probe_row, require_root,
    servers::{PhpOptions, PhpStack},
    skip,
    slowfs::SlowFs,
    trapdetect,
};

/// One run at a time: the verdicts read how busy the CPUs were, and another test's server
/// under load beside this one is other processes on them (host.noise), which is what the
/// tool would rightly say.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(pid: u32, url: &str, rate: &str, duration: &str, extra: &[&str]) -> (Value, i32) {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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
            "t={} offered={} 2xx={} cores={} tgt={} runq={} off={} fs={} busy={} acceptq={} thr={}/{} marks={}",
            t["t_s"],
            t["offered"],
            t["ok_2xx"],
            t["cores_busy"],
            t["target_cores"],
            t["run_queue"],
            t["off_cpu"],
            t["fs_ops"],
            t["busy_threads"],
            t["accept_queue"],
            t["throttled_periods"],
            t["throttled_ms"],
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

/// No `fail` finding exits 0, unless the generator could not keep its schedule (3).
fn ok_code(r: &Value) -> i32 {
    if r["measurement"]["trusted"].as_bool().unwrap() {
        0
    } else {
        3
    }
}

/// Loaded seconds of the timeline (the drain after the window excluded).
fn loaded(r: &Value) -> Vec<&Value> {
    r["run"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["offered"].as_u64().unwrap() > 0)
        .collect()
}

/// The fs ceiling verdict on `mount`, by the rule's own criterion recomputed from the report
/// (docs/run.md): where FUSE requests were timed (Linux 6.13+), latency flat with the requests
/// ahead by least squares and end to end alike is `fs.slow-ops` (a daemon thread starved of
/// CPU on these two cores reads so: 1,219 µs with none ahead, 1,833 µs with three, at 515 µs
/// a departure), and growing by half a departure interval per request ahead is
/// `fs.serialized`; otherwise more than 1.2 threads waiting on it on average while its
/// per-second FUSE rate stayed flat is `fs.serialized`, else `fs.slow-ops`.
fn fs_verdict<'a>(r: &'a Value, mount: &str) -> &'a Value {
    let e = &["fs.serialized", "fs.slow-ops"]
        .iter()
        .filter_map(|id| finding(r, id))
        .find(|f| f["evidence"]["mount"] == mount)
        .unwrap_or_else(|| panic!("no fs verdict on {mount}: {:?}", ids(r)))["evidence"];
    let waiters = e["mean_threads"].as_f64().unwrap();
    let (growth, end_to_end) = (
        e["queue_growth"].as_f64(),
        e["queue_growth_end_to_end"].as_f64(),
    );
    if let (Some(g), Some(s)) = (growth, end_to_end) {
        let want = if g < 0.5 && s < 0.5 {
            Some("fs.slow-ops")
        } else if g >= 0.5 && waiters > 1.2 {
            Some("fs.serialized")
        } else {
            None
        };
        if let Some(want) = want {
            return finding(r, want).unwrap_or_else(|| panic!("{want}: {:?} {e}", ids(r)));
        }
    }
    let rates: Vec<f64> = loaded(r)
        .into_iter()
        .filter(|t| !t["fs_ops"].as_object().unwrap().is_empty())
        .skip(1)
        .map(|t| t["fs_ops"][mount].as_f64().unwrap_or(0.0))
        .collect();
    let mut sorted = rates.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    let spread = rates.iter().map(|x| (x - median).abs()).sum::<f64>() / rates.len() as f64;
    let want = if waiters > 1.2 && spread <= 0.4 * median {
        "fs.serialized"
    } else {
        "fs.slow-ops"
    };
    finding(r, want).unwrap_or_else(|| panic!("{want}: {:?} {waiters} {rates:?}", ids(r)))
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
    // A 40 ms service time: a generator late by up to 50 ms still offers the same load.
    let (r, code) = run(
        stack.fpm.pid(),
        &stack.url(),
        "80",
        "6s",
        &["--lag-budget", "50ms"],
    );
    assert_eq!(r["command"], "run");
    assert!(r["run"]["classified"].as_bool().unwrap(), "{}", r["probes"]);
    let f = finding(&r, "pool.too-small").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["workers"], 1);
    assert_eq!(r["verdict"]["cause"], "pool.too-small", "{}", r["verdict"]);
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
    // Requests queue in the FastCGI listener's accept queue while the worker sleeps: the
    // arrivals not served yet (offered minus delivered, second by second) pile up there, up
    // to php-fpm's backlog.
    let lt = loaded(&r);
    let unserved: u64 = lt
        .iter()
        .map(|t| t["offered"].as_u64().unwrap() - t["ok_2xx"].as_u64().unwrap())
        .sum();
    let last = lt.last().unwrap()["accept_queue"].as_u64().unwrap();
    assert!(
        (last as f64 - unserved as f64).abs() <= 0.3 * unserved as f64,
        "accept queue {last} at the end vs {unserved} arrivals not served"
    );
    // It grows every second, and the verdict's maximum is one of the seconds it judged.
    let qs: Vec<u64> = lt
        .iter()
        .map(|t| t["accept_queue"].as_u64().unwrap())
        .collect();
    assert!(qs.windows(2).all(|w| w[1] > w[0]), "{qs:?}");
    let q = f["evidence"]["accept_queue_max"].as_u64().unwrap();
    assert!(qs.contains(&q) && q >= qs[qs.len() - 2], "{q} of {qs:?}");
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
    let f = fs_verdict(&r, mount);
    assert_eq!(f["severity"], "fail");
    assert_eq!(r["verdict"]["cause"], f["id"], "{}", r["verdict"]);
    let e = &f["evidence"];
    assert_eq!(e["mount"], fs.mount.to_str().unwrap());
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["ops_kind"], "FUSE requests");
    // Started there: the remedy is the start directory.
    assert_eq!(e["cause"], "working directory");
    assert!(
        f["remedy"]
            .as_str()
            .unwrap()
            .starts_with("start the server from a directory on a native filesystem"),
        "{}",
        f["remedy"]
    );
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
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "1500", "6s", &[]);
    let f = finding(&r, "cpu.saturated").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(r["verdict"]["cause"], "cpu.saturated", "{}", r["verdict"]);
    // At capacity is no trap: nothing fails.
    assert_eq!(code, ok_code(&r), "{:?}", ids(&r));
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
    assert_eq!(r["verdict"]["cause"], "lock.contention", "{}", r["verdict"]);
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
    // Why the threads blocked: read from their registers where the kernel has
    // bpf_task_pt_regs (5.15), else kept from syscall entry (issue 26: the kernel matrix's
    // 5.10 guest runs this test); the flock waits are file_lock either way, and almost nothing
    // is left unknown.
    let want = if kernel_version() >= (5, 15) {
        "exact"
    } else {
        "syscall-entry"
    };
    assert_eq!(r["run"]["classes_method"], want, "{}", r["run"]);
    let off = &r["run"]["thread_seconds"]["off_cpu"];
    let class = |c: &str| off[c].as_f64().unwrap_or(0.0);
    assert!(
        class("unknown") <= 0.02 * class("file_lock"),
        "unknown beside file_lock: {off}"
    );
}

/// Scenario 2: php-fpm started from a directory on ext4, its code (the docroot) on the slow
/// serialized FUSE mount. Every request chdirs into the docroot and opens, stats and reads the
/// script there: the code's hot path, not the working directory.
#[test]
fn code_on_serialized_fuse_is_a_hot_path_with_its_ceiling_and_no_cwd_remedy() {
    if !require_root("code_on_serialized_fuse_is_a_hot_path_with_its_ceiling_and_no_cwd_remedy") {
        return;
    }
    // The script reads a template and a config file next to it per request (opcache keeps
    // the script itself from being reread).
    let fs = SlowFs::mount(200, |b| {
        std::fs::create_dir_all(b.join("www")).unwrap();
        std::fs::write(b.join("www/tpl.html"), "<p>hello</p>\n").unwrap();
        std::fs::write(b.join("www/conf.ini"), "debug = 0\n").unwrap();
        std::fs::write(
            b.join("www/index.php"),
            "<?php $t = file_get_contents(__DIR__ . '/tpl.html'); $c = file_get_contents(__DIR__ . '/conf.ini'); echo strlen($t) + strlen($c), \"\\n\";",
        )
        .unwrap();
    });
    let cwd = TempDir::new("run-hot");
    let stack = PhpStack::start_with(
        cwd.path(),
        4,
        "",
        PhpOptions {
            docroot: Some(fs.mount.join("www")),
            ..Default::default()
        },
    );
    // About 20 FUSE requests per request at 0.2 ms each, one at a time: near 200 req/s at
    // most. 400/s is well above it, so the mount, not the offered rate, sets the pace.
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "400", "6s", &[]);
    assert_eq!(code, fail_code(&r));
    let mount = fs.mount.to_str().unwrap();
    let f = fs_verdict(&r, mount);
    let e = &f["evidence"];
    assert_eq!(f["severity"], "fail");
    assert_eq!(r["verdict"]["cause"], f["id"], "{}", r["verdict"]);
    assert_eq!(e["mount"], mount);
    assert_eq!(e["ops_kind"], "FUSE requests");
    assert_eq!(e["cause"], "files the requests use");
    let d = delivered(f);
    assert!(d < 1000.0, "the mount caps the run: delivered {d}");
    let p = e["predicted_ceiling_per_s"].as_f64().unwrap();
    assert!((p - d).abs() <= 0.3 * d, "predicted {p} vs delivered {d}");
    // Everything a request costs there, not only its lookups: the chdir into the docroot,
    // the script's lookup, open, fstat, read and close each reach the daemon.
    let per = e["ops_per_request"].as_f64().unwrap();
    assert!(
        e["share_of_busy_thread_time_pct"].as_f64().unwrap() >= 60.0,
        "{e}"
    );
    // The tracer's verdict names the mount as the hot path, and no one is told to start
    // the server elsewhere: it was started on ext4.
    let h = finding(&r, "fs.hot-path-slow").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(h["evidence"]["mount_point"], mount);
    // Beyond the lookups the tracer counts, each of the two files costs at least an open, a
    // read and a release at the daemon.
    let lookups = h["evidence"]["lookups_per_request"].as_f64().unwrap();
    assert!(
        per >= lookups + 6.0,
        "FUSE requests per request {per}, lookups {lookups}"
    );
    assert!(finding(&r, "fs.cwd-slow").is_none(), "{:?}", ids(&r));
    for f in r["findings"].as_array().unwrap() {
        let remedy = f["remedy"].as_str().unwrap_or("");
        assert!(
            !remedy.contains("start the server from"),
            "{}: {remedy}",
            f["id"]
        );
    }
    assert!(finding(&r, "pool.too-small").is_none(), "{:?}", ids(&r));
    assert!(finding(&r, "cpu.saturated").is_none(), "{:?}", ids(&r));
}

/// Scenario 5: php-fpm in a cgroup of its own with 0.2 CPU (cgroup v1 here; v2 where the
/// cpu controller is delegated), a CPU-heavy script, offered far more than 0.2 CPU serves.
#[test]
fn a_cpu_quota_is_the_verdict_with_the_quota_and_its_throttling() {
    const TEST: &str = "a_cpu_quota_is_the_verdict_with_the_quota_and_its_throttling";
    if !require_root(TEST) {
        return;
    }
    let Some(cg) = CpuCgroup::create(20_000, 100_000) else {
        skip(TEST, "no usable cpu controller");
        return;
    };
    let cwd = TempDir::new("run-quota");
    let stack = PhpStack::start_with(
        cwd.path(),
        4,
        "<?php $x = 0; for ($i = 0; $i < 800000; $i++) { $x += $i % 7; } echo $x, \"\\n\";",
        PhpOptions {
            cgroup_procs: Some(cg.procs_file()),
            ..Default::default()
        },
    );
    assert!(
        cg.pids().contains(&(stack.fpm.pid() as i32)),
        "php-fpm is in {}",
        cg.path().display()
    );
    let (r, code) = run(stack.fpm.pid(), &stack.url(), "150", "6s", &[]);
    assert_eq!(code, fail_code(&r));
    let f = finding(&r, "cpu.quota").unwrap_or_else(|| panic!("{:?}", ids(&r)));
    assert_eq!(r["verdict"]["cause"], "cpu.quota", "{}", r["verdict"]);
    let e = &f["evidence"];
    assert_eq!(f["severity"], "fail");
    assert_eq!(
        e["cgroup_version"],
        if cg.version == Version::V1 {
            "v1"
        } else {
            "v2"
        }
    );
    assert_eq!(e["cgroup_dir"], cg.path().to_str().unwrap());
    assert_eq!(e["quota_us"], 20_000);
    assert_eq!(e["period_us"], 100_000);
    assert_eq!(e["quota_cpus"], 0.2);
    // The quota is a hard cap: the server's threads got at most 0.2 CPU, plus what the
    // kernel's bandwidth granularity allows (a slice per CPU per period, as per second below:
    // 0.23 was a fitted bound, exceeded once).
    let window = r["run"]["window_s"].as_f64().unwrap();
    let tgt = e["target_cores"].as_f64().unwrap();
    let bound = trapdetect_e2e::cgroup::most_cores(0.2, 100_000.0);
    assert!(tgt <= bound, "target cores {tgt}, at most {bound}");
    // Flooded: the group was runnable in every 100 ms period of the window and used its
    // quota to the full (Linux 6.18 counts throttled periods sparsely: 59 of 62 in one run,
    // 3 of 59 in the next, with the same usage; the counts are cross-checked with cpu.stat).
    let periods = e["nr_periods"].as_u64().unwrap() as f64;
    let throttled = e["nr_throttled"].as_u64().unwrap();
    assert!(
        periods >= 0.8 * window * 10.0,
        "{periods} periods in {window} s"
    );
    assert!(cg.nr_throttled() >= throttled, "cpu.stat now vs the window");
    let used = e["quota_used_share"].as_f64().unwrap();
    // Used to the full, up to the same granularity (1.385 was read once).
    assert!((0.85..=bound / 0.2).contains(&used), "quota used {used}");
    // The rest of the four workers' time is run-queue delay.
    assert!(e["run_queue_threads"].as_f64().unwrap() >= 3.0, "{e}");
    let d = delivered(f);
    let p = e["predicted_ceiling_per_s"].as_f64().unwrap();
    assert!((p - d).abs() <= 0.3 * d, "predicted {p} vs delivered {d}");
    assert!(d < 0.5 * 150.0, "the quota caps the run: delivered {d}");
    // Per second, the timeline shows the cap and the throttling counters.
    // Held to the quota, give or take the kernel's granularity: it hands the quota to each
    // CPU in slices (kernel.sched_cfs_bandwidth_slice_us), so a group can run up to a slice per
    // CPU past it in a period (0.26 cores was read once). Charged CPU, the task clock the
    // quota is charged in: on-CPU wall time also counts what the hypervisor stole (0.36 cores
    // in a second with 7-12 % of this VM's CPU time stolen).
    let most = trapdetect_e2e::cgroup::most_cores(0.2, 100_000.0);
    for t in loaded(&r).iter().skip(1) {
        assert!(t["throttled_periods"].is_u64(), "{t}");
        let c = t["charged_cores"].as_f64().unwrap();
        assert!((0.15..=most).contains(&c), "{t} (at most {most})");
    }
    for id in ["cpu.saturated", "cpu.run-queue", "pool.too-small"] {
        assert!(finding(&r, id).is_none(), "{:?}", ids(&r));
    }
    drop(stack);
    drop(cg);
}

/// The kernel's request count under `run`'s own load (issue 28): the load's answers are the
/// delivered rate, so `tcp_probe`, which runs for every TCP segment of the host, waits for a
/// connection on the target's ports that stays open. php-fpm over TCP behind nginx (one
/// FastCGI connection per request) never gets it: its accepts are the timeline's `served`.
/// nginx serving a file itself, over the load's kept-alive connections to the target's own
/// port: attached from the start (waiting for them to stay open lost 0.2 s of them, 29 of the
/// first second's 150). Either way the kernel's count over the window is the load's answers,
/// less what the last sample cut off (the same 7-8 with the counter attached from the start,
/// measured with the binary before this change).
#[test]
fn the_request_counter_waits_for_a_connection_that_stays_open_under_run() {
    if !require_root("the_request_counter_waits_for_a_connection_that_stays_open_under_run") {
        return;
    }
    let cwd = TempDir::new("run-served");
    let stack = PhpStack::start_with(
        cwd.path(),
        4,
        "<?php echo \"ok\\n\";",
        PhpOptions {
            listen_tcp: true,
            ..Default::default()
        },
    );
    let (r, _) = run(stack.fpm.pid(), &stack.url(), "150", "3s", &[]);
    let (served, ok) = served_and_2xx(&r);
    let row = probe_row(&r, "tcp_probe");
    assert_eq!(row["attached"], false, "{row}");
    assert!(
        row["note"].as_str().unwrap().starts_with("held back:"),
        "{row}"
    );
    assert!((440..=451).contains(&ok), "150/s for 3 s: {ok}");
    assert!(served <= ok && served + 15 >= ok, "{served} {ok}");

    let nginx = trapdetect_e2e::servers::StaticNginx::start(&[("f.txt", b"hello\n")]);
    let (r, _) = run(nginx.nginx.pid(), &nginx.url("/f.txt"), "150", "3s", &[]);
    let (served, ok) = served_and_2xx(&r);
    let row = probe_row(&r, "tcp_probe");
    assert_eq!(row["attached"], true, "{row}");
    assert!(
        !row["note"].as_str().unwrap().contains("stayed open"),
        "{row}"
    );
    assert!(served <= ok && served + 15 >= ok, "{served} {ok}");
}

/// The kernel's `served` and the load's 2xx over the loaded seconds (printed per second).
fn served_and_2xx(r: &Value) -> (i64, i64) {
    let secs = loaded(r);
    assert_eq!(secs.len(), 3, "{}", r["run"]["timeline"]);
    let pairs: Vec<(i64, i64)> = secs
        .iter()
        .map(|t| (t["served"].as_i64().unwrap(), t["ok_2xx"].as_i64().unwrap()))
        .collect();
    println!("served, 2xx per second: {pairs:?}");
    pairs.iter().fold((0, 0), |(a, b), (s, o)| (a + s, b + o))
}
