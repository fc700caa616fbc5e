//! `trapdetect trace --from-strace FILE`: a real `strace -f -tt -T -y` log of php-fpm whose
//! working directory is 7 levels deep in the slow FUSE mount, read without eBPF: the same
//! exact per-request figures as the eBPF tracer (tests/tests/trace.rs), from the log alone.
//! `trapdetect run --from-strace FILE`: real logs of the planted traps of run.rs and sample.rs
//! (a working directory deep in the FUSE mount, code on it started from ext4, one worker, one
//! flock, on php-fpm and gunicorn) captured while wrk floods them, and a clean twin: the same
//! cause verdicts as the eBPF backend, from the threads' calls alone.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, json, require_root,
    servers::{PhpStack, http_get, php_site},
    slowfs::SlowFs,
    trapdetect, wait_until,
    zoo::{Gunicorn, Work},
};

const N: u32 = 37;

/// The php-fpm master and its workers.
fn tree(master: u32) -> Vec<u32> {
    let mut out = vec![master];
    let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
        .unwrap_or_default();
    out.extend(
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok()),
    );
    out
}

/// The one-line capture docs/sample.md gives (`strace -f -tt -T -y -o LOG -p …`) on `master`
/// and its running children, returned once the log shows `attached`.
fn strace_tree(
    master: u32,
    log: &std::path::Path,
    attached: impl Fn(&str) -> bool,
) -> std::process::Child {
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-tt", "-T", "-y", "-o"]).arg(log);
    for p in tree(master) {
        cmd.args(["-p", &p.to_string()]);
    }
    let strace = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace (cargo xtask setup installs it)");
    wait_until("strace attached", Duration::from_secs(10), || {
        std::fs::read_to_string(log).is_ok_and(|t| attached(&t))
    });
    strace
}

#[test]
fn a_real_strace_log_of_php_fpm_on_fuse_gives_the_exact_lookups() {
    if !require_root("a_real_strace_log_of_php_fpm_on_fuse_gives_the_exact_lookups") {
        return;
    }
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let stack = PhpStack::start(&deep, 2, "<?php echo \"ok\\n\";");
    let dir = TempDir::new("strace");
    let log = dir.path().join("fpm.strace");
    let mountinfo = dir.path().join("mountinfo");
    std::fs::copy(format!("/proc/{}/mountinfo", stack.fpm.pid()), &mountinfo).unwrap();
    // Attached once the workers' blocked accept shows in the log.
    let mut strace = strace_tree(stack.fpm.pid(), &log, |t| t.contains("accept"));
    for i in 0..N {
        let (status, _) = http_get(stack.port, "/").unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(status, 200);
    }
    // SAFETY: kill(2) on the strace this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(strace.id() as i32, libc::SIGINT) }, 0);
    strace.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    // A real log has what the parser must join: split calls and several pids.
    assert!(text.contains("<unfinished ...>") && text.contains("resumed>"));

    let out = trapdetect(
        &[
            "trace",
            "--from-strace",
            log.to_str().unwrap(),
            "--mountinfo",
            mountinfo.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    let r: Value = json(&out);
    eprintln!("{}", serde_json::to_string_pretty(&r["findings"]).unwrap());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The workers accepted one FastCGI connection per request.
    assert_eq!(r["requests"]["count"], N);
    assert_eq!(r["requests"]["basis"], "accepted-connections");
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "fs.cwd-slow")
        .unwrap_or_else(|| panic!("{}", r["findings"]));
    assert_eq!(f["severity"], "fail");
    let e = &f["evidence"];
    assert_eq!(e["mount_point"], fs.mount.to_str().unwrap());
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["cwd_depth_below_mount"], 7);
    // NTS php-fpm chdirs back to its cwd once per request: 7 lookups, exactly, as under eBPF.
    assert_eq!(e["lookups_per_request"], 7.0);
    assert_eq!(e["walk_syscalls"], "chdir:1");
    let row = r["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fs_type"] == "fuse.slowfs")
        .unwrap();
    assert_eq!(row["lookups"], 7 * N as u64);
    // strace's -T times each chdir back: 7 lookups at 200 µs at least.
    assert!(e["walk_latency_mean_us"].as_f64().unwrap() >= 1400.0, "{e}");
    assert_eq!(r["measurement"]["unknown_path_calls"], Value::Null);
    assert_eq!(r["measurement"]["counters"]["unknown_path_calls"], 0);
}

/// `strace -f -tt -T -y` on `master`'s tree (the one-line capture of docs/sample.md) while
/// `wrk -t1 -cCONNS -d3s URL` runs; the log and the tree's mount table.
fn capture(master: u32, url: &str, conns: u32, dir: &std::path::Path) -> (String, String) {
    let log = dir.join("run.strace");
    let mountinfo = dir.join("mountinfo");
    std::fs::copy(format!("/proc/{master}/mountinfo"), &mountinfo).unwrap();
    // Attached once every process's blocked accept (or poll) shows in the log.
    let n = tree(master).len();
    let mut strace = strace_tree(master, &log, |t| t.lines().count() >= n);
    let c = format!("-c{conns}");
    let wrk = Command::new("wrk")
        .args(["-t1", &c, "-d3s", "--timeout", "5s", url])
        .stdin(Stdio::null())
        .output()
        .expect("wrk (cargo xtask setup installs it)");
    assert!(
        wrk.status.success(),
        "{}",
        String::from_utf8_lossy(&wrk.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&wrk.stdout));
    // SAFETY: kill(2) on the strace this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(strace.id() as i32, libc::SIGINT) }, 0);
    strace.wait().unwrap();
    // STRACE_KEEP=DIR keeps each log and its mount table there (the docs' side-by-side
    // figures are read from them).
    if let Ok(keep) = std::env::var("STRACE_KEEP") {
        let name = format!("{master}-c{conns}");
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&log, format!("{keep}/{name}.strace")).unwrap();
        std::fs::copy(&mountinfo, format!("{keep}/{name}.mountinfo")).unwrap();
    }
    (
        log.to_str().unwrap().to_string(),
        mountinfo.to_str().unwrap().to_string(),
    )
}

/// `trapdetect run --from-strace LOG --mountinfo FILE --json`: the report and exit code.
fn run_log(log: &str, mountinfo: &str) -> (Value, i32) {
    let out = trapdetect(
        &[
            "run",
            "--from-strace",
            log,
            "--mountinfo",
            mountinfo,
            "--json",
            "--ignore",
            "net.time-wait",
        ],
        Duration::from_secs(60),
    );
    let r: Value = json(&out);
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "verdict: {}\nthread_seconds: {}\nfindings: {}",
        r["verdict"],
        r["run"]["thread_seconds"],
        serde_json::to_string_pretty(&r["findings"]).unwrap()
    );
    (r, out.status.code().unwrap_or(-1))
}

fn finding<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id}: {}", r["findings"]))
}

/// The report is a run judged from a log: every thread's time split by the log's calls, the
/// delivered rate the connections accepted, no offered rate, and exit 1 for a cause.
fn assert_from_log(r: &Value, code: i32, cause: Option<&str>) {
    assert_eq!(r["command"], "run");
    assert_eq!(r["run"]["classes_method"], "strace");
    assert_eq!(r["run"]["delivered_basis"], "accepted-connections");
    assert_eq!(r["run"]["thread_seconds"]["run_queue"], 0.0);
    assert_eq!(r["run"]["thread_seconds"]["off_cpu"]["unknown"], 0.0);
    assert!(
        r["verdict"].get("offered_per_s").is_none(),
        "{}",
        r["verdict"]
    );
    assert_eq!(r["verdict"]["cause"].as_str(), cause, "{}", r["verdict"]);
    assert_eq!(r["verdict"]["capped"], cause.is_some(), "{}", r["verdict"]);
    assert_eq!(code, if cause.is_some() { 1 } else { 0 });
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !f["id"].as_str().unwrap().starts_with("cpu.")),
        "no CPU verdict from a log: {}",
        r["findings"]
    );
}

/// The verdict is the mount's (`fs.serialized`, or `fs.slow-ops` where its rate was not flat),
/// from a log; the cause's evidence.
fn fs_cause<'a>(r: &'a Value, code: i32, mount: &str) -> &'a Value {
    let cause = r["verdict"]["cause"].as_str().unwrap_or("none");
    assert!(["fs.serialized", "fs.slow-ops"].contains(&cause), "{cause}");
    assert_from_log(r, code, Some(cause));
    let e = &finding(r, cause)["evidence"];
    assert_eq!(e["mount"], mount);
    e
}

/// The share of the threads' time in `class`, of their time not waiting for work.
fn busy_share(r: &Value, class: &str) -> f64 {
    let t = &r["run"]["thread_seconds"];
    let off = t["off_cpu"].as_object().unwrap();
    let busy: f64 = t["on_cpu"].as_f64().unwrap()
        + off
            .iter()
            .filter(|(k, _)| *k != "wait_work")
            .map(|(_, v)| v.as_f64().unwrap())
            .sum::<f64>();
    off[class].as_f64().unwrap() / busy
}

/// A working directory 7 levels deep in the serialized 200 µs FUSE mount, and then code on
/// that mount under a server started on ext4: both are the mount's verdict, as under eBPF
/// (run.rs), with what a request costs there counted from the log.
#[test]
fn a_log_of_php_fpm_on_a_slow_mount_is_the_mount_s_verdict() {
    if !require_root("a_log_of_php_fpm_on_a_slow_mount_is_the_mount_s_verdict") {
        return;
    }
    let fs = SlowFs::mount(200, php_site);
    let mount = fs.mount.to_str().unwrap();
    let dir = TempDir::new("strace-run-fs");
    {
        let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
        let stack = PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";");
        let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 8, dir.path());
        let (r, code) = run_log(&log, &mi);
        let e = fs_cause(&r, code, mount);
        assert_eq!(e["fs_type"], "fuse.slowfs");
        assert_eq!(e["cause"], "working directory");
        // NTS php-fpm chdirs back into its working directory once per request: 7 lookups
        // there, nothing else (the script is on ext4); a request cut by the window's edge
        // moves the mean by a few hundredths.
        let per = e["ops_per_request"].as_f64().unwrap();
        assert!((per - 7.0).abs() < 0.1, "{e}");
        assert!(
            busy_share(&r, "path") >= 0.5,
            "{}",
            r["run"]["thread_seconds"]
        );
        assert_eq!(
            finding(&r, "fs.cwd-slow")["evidence"]["lookups_per_request"]
                .as_f64()
                .map(f64::round),
            Some(7.0)
        );
    }
    {
        let cwd = TempDir::new("strace-run-code");
        let stack = PhpStack::start_in_docroot(cwd.path(), 4, fs.mount.join("www"));
        let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 8, dir.path());
        let (r, code) = run_log(&log, &mi);
        let e = fs_cause(&r, code, mount);
        assert_eq!(e["cause"], "files the requests use");
        // The chdir into the docroot, the script's and the template's lookups, and the file
        // I/O on both (fstat, read, close): more than the lookups alone.
        let lookups = finding(&r, "fs.hot-path-slow")["evidence"]["lookups_per_request"]
            .as_f64()
            .unwrap();
        assert!(
            e["ops_per_request"].as_f64().unwrap() >= lookups + 2.0,
            "{e}"
        );
        assert!(
            r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["id"] != "fs.cwd-slow")
        );
    }
}

/// One php-fpm worker, and one gunicorn sync worker, each sleeping 40 ms per request: the
/// pool is the ceiling, one worker at 1 ÷ 40 ms = 25/s at most, as under eBPF and sampling.
#[test]
fn a_log_of_one_sleeping_worker_is_the_pool_s_verdict() {
    if !require_root("a_log_of_one_sleeping_worker_is_the_pool_s_verdict") {
        return;
    }
    let dir = TempDir::new("strace-run-pool");
    let cwd = TempDir::new("strace-run-pool-cwd");
    for family in ["php-fpm", "gunicorn"] {
        let (r, code) = if family == "php-fpm" {
            let stack = PhpStack::start(cwd.path(), 1, "<?php usleep(40000); echo \"ok\\n\";");
            let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 8, dir.path());
            run_log(&log, &mi)
        } else {
            // A lock no other worker wants, held 40 ms (sleeping): verdicts.rs's pool of one.
            let g = Gunicorn::start(cwd.path(), 1, Work::Flock(cwd.path().join("pool.lock"), 40));
            let (log, mi) = capture(g.master.pid(), &g.url(), 8, dir.path());
            run_log(&log, &mi)
        };
        assert_from_log(&r, code, Some("pool.too-small"));
        let f = finding(&r, "pool.too-small");
        assert_eq!(f["evidence"]["workers"], 1, "{family}");
        let d = f["evidence"]["delivered_per_s"].as_f64().unwrap();
        assert!((10.0..=25.5).contains(&d), "{family}: delivered {d}");
        let p = f["evidence"]["predicted_ceiling_per_s"].as_f64().unwrap();
        assert!(
            (p - d).abs() <= 0.3 * d,
            "{family}: predicted {p} vs delivered {d}"
        );
        assert!(
            busy_share(&r, "sleep") >= 0.7,
            "{family}: {}",
            r["run"]["thread_seconds"]
        );
        assert!(
            r["verdict"]["capped_by"]
                .as_array()
                .unwrap()
                .contains(&"workers-busy".into())
        );
    }
}

/// Four php-fpm workers, and four gunicorn workers, taking one exclusive flock for 20 ms per
/// request: lock.contention naming the file, as under eBPF; and php-fpm's clean twin (the
/// same pool answering at once, one connection at a time): no cause, exit 0.
#[test]
fn a_log_of_workers_on_one_flock_names_the_file_and_the_clean_twin_passes() {
    if !require_root("a_log_of_workers_on_one_flock_names_the_file_and_the_clean_twin_passes") {
        return;
    }
    let dir = TempDir::new("strace-run-lock");
    let cwd = TempDir::new("strace-run-lock-cwd");
    let lock = cwd.path().join("app.lock");
    for family in ["php-fpm", "gunicorn"] {
        let (r, code) = if family == "php-fpm" {
            let stack = PhpStack::start(
                cwd.path(),
                4,
                &format!(
                    "<?php $f = fopen('{}', 'c'); flock($f, LOCK_EX); usleep(20000); flock($f, LOCK_UN); fclose($f); echo \"ok\\n\";",
                    lock.display()
                ),
            );
            let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 8, dir.path());
            run_log(&log, &mi)
        } else {
            let g = Gunicorn::start(cwd.path(), 4, Work::Flock(lock.clone(), 20));
            let (log, mi) = capture(g.master.pid(), &g.url(), 8, dir.path());
            run_log(&log, &mi)
        };
        assert_from_log(&r, code, Some("lock.contention"));
        let f = finding(&r, "lock.contention");
        assert_eq!(f["evidence"]["object"], lock.to_str().unwrap(), "{family}");
        assert!(
            busy_share(&r, "file_lock") >= 0.4,
            "{family}: {}",
            r["run"]["thread_seconds"]
        );
        // One holder at a time for 20 ms: 50/s at most.
        let d = r["verdict"]["delivered_per_s"].as_f64().unwrap();
        assert!(d <= 51.0, "{family}: delivered {d}");
    }
    let stack = PhpStack::start(cwd.path(), 4, "<?php echo \"ok\\n\";");
    let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 1, dir.path());
    let (r, code) = run_log(&log, &mi);
    assert_from_log(&r, code, None);
    // One connection at a time: at most one worker busy half its time or more, and that one
    // short of full (how busy depends on how much strace slows it on this machine).
    let workers = r["run"]["workers"].as_u64().unwrap();
    assert!(workers <= 1, "{}", r["run"]);
    if workers == 1 {
        assert!(
            r["run"]["workers_busy"].as_f64().unwrap() < 0.9,
            "{}",
            r["run"]
        );
    }
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "fail"),
        "{}",
        r["findings"]
    );
}

/// The share of the threads' busy time (all but waiting for work and futex parking) in each
/// class and on a CPU, in points; on a CPU counts the run queue's time too, as a log cannot
/// tell a thread waiting for a CPU from one on it (its `run_queue` is 0).
fn busy_split(r: &Value) -> Vec<(String, f64)> {
    let t = &r["run"]["thread_seconds"];
    let off = t["off_cpu"].as_object().unwrap();
    let mut v: Vec<(String, f64)> = off
        .iter()
        .filter(|(k, _)| *k != "wait_work" && *k != "futex")
        .map(|(k, x)| (k.clone(), x.as_f64().unwrap()))
        .collect();
    v.push((
        "on_cpu".into(),
        t["on_cpu"].as_f64().unwrap() + t["run_queue"].as_f64().unwrap(),
    ));
    let busy: f64 = v.iter().map(|(_, x)| x).sum();
    v.into_iter().map(|(k, x)| (k, 100.0 * x / busy)).collect()
}

/// `trapdetect run --pid PID --json -- wrk -t1 -cCONNS -d3s URL` under eBPF.
fn run_ebpf(pid: u32, url: &str, conns: u32) -> Value {
    let p = pid.to_string();
    let c = format!("-c{conns}");
    let out = trapdetect(
        &[
            "run",
            "--pid",
            &p,
            "--backend",
            "ebpf",
            "--json",
            "--ignore",
            "net.time-wait",
            "--",
            "wrk",
            "-t1",
            &c,
            "-d3s",
            "--timeout",
            "5s",
            url,
        ],
        Duration::from_secs(60),
    );
    let r: Value = json(&out);
    eprintln!(
        "eBPF verdict: {}\nthread_seconds: {}",
        r["verdict"], r["run"]["thread_seconds"]
    );
    r
}

/// The side by side: each planted trap on php-fpm (a working directory 7 levels deep
/// in the serialized 200 µs FUSE mount, one worker sleeping 40 ms, four workers taking turns
/// on one flock held 20 ms) under the same wrk, once traced by eBPF and once captured by
/// strace: the same cause, and every class's share of the threads' busy time (and the on-CPU
/// share) within 10 points of eBPF's, strace's own stops taken out of the log's times.
#[test]
fn a_log_splits_the_threads_time_as_ebpf_does_within_ten_points() {
    if !require_root("a_log_splits_the_threads_time_as_ebpf_does_within_ten_points") {
        return;
    }
    let fs = SlowFs::mount(200, php_site);
    let dir = TempDir::new("strace-side");
    let cwd = TempDir::new("strace-side-cwd");
    let lock = cwd.path().join("app.lock");
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let traps = [
        (
            "working directory on the mount",
            deep.clone(),
            "<?php echo \"ok\\n\";".to_string(),
        ),
        (
            "one sleeping worker",
            cwd.path().to_path_buf(),
            "<?php usleep(40000); echo \"ok\\n\";".to_string(),
        ),
        (
            "one flock",
            cwd.path().to_path_buf(),
            format!(
                "<?php $f = fopen('{}', 'c'); flock($f, LOCK_EX); usleep(20000); flock($f, LOCK_UN); fclose($f); echo \"ok\\n\";",
                lock.display()
            ),
        ),
    ];
    for (what, at, script) in &traps {
        let workers = if *what == "one sleeping worker" { 1 } else { 4 };
        let stack = PhpStack::start(at, workers, script);
        let e = run_ebpf(stack.fpm.pid(), &stack.url(), 8);
        drop(stack);
        let stack = PhpStack::start(at, workers, script);
        let (log, mi) = capture(stack.fpm.pid(), &stack.url(), 8, dir.path());
        let (s, _) = run_log(&log, &mi);
        assert_eq!(s["verdict"]["cause"], e["verdict"]["cause"], "{what}");
        let (be, bs) = (busy_split(&e), busy_split(&s));
        eprintln!("{what}: eBPF {be:?}\n{what}: strace {bs:?}");
        for (class, pe) in &be {
            let ps = bs.iter().find(|(k, _)| k == class).map_or(0.0, |(_, x)| *x);
            assert!(
                (pe - ps).abs() <= 10.0,
                "{what}: {class} {pe:.1} % under eBPF, {ps:.1} % from the log\neBPF {be:?}\nlog {bs:?}"
            );
        }
    }
}
