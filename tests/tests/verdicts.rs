//! One verdict per run, on any server (issue 22): every cause verdict on a second family
//! beside php-fpm (whose tests are in run.rs), with its ground truth measured here — the
//! trapped server's closed-loop capacity from wrk, its twin without the trap, the FUSE
//! daemon's own counters, nginx's error log, a ceiling fixed by construction (a lock or a
//! sleep held so many ms) — and clean servers at half their capacity, alone and beside a CPU
//! hog, which must get no cause. The same trap under the built-in load, under `-- wrk` and
//! from a hey CSV gets the same verdict.
//!
//! The tests run one at a time (the verdicts read how busy the CPUs were), each run 5 s.

use std::{
    path::Path,
    process::Command,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir,
    bindfs::Bindfs,
    cgroup::CpuCgroup,
    gocryptfs::Gocryptfs,
    json, require_root,
    servers::{Apache, PhpOptions, PhpStack, StaticNginx, StaticOptions, children_of},
    slowfs::SlowFs,
    sshfs::Sshfs,
    trapdetect, url_port,
    zoo::{
        AppServer, CpuHog, GoBinary, Gunicorn, JavaPool, Lighttpd, PyHttpServer, SplitFamily,
        SplitWriter, Uwsgi, Work, cpus_allowed, pin_threads_but_main, pin_threads_in_futex,
        pin_tree, tree, wrk_capacity,
    },
};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The measured window of every run.
const WINDOW: &str = "5s";

/// One `trapdetect run`: its JSON report and exit code.
#[derive(Clone)]
struct Run {
    r: Value,
    code: i32,
}

impl Run {
    fn verdict(&self) -> &Value {
        &self.r["verdict"]
    }

    /// Asserts the verdict says the load was capped as `how` (one of its `capped_by`).
    fn assert_capped_by(&self, how: &str, what: &str) {
        let by = &self.verdict()["capped_by"];
        assert!(
            by.as_array().is_some_and(|a| a.contains(&how.into())),
            "{what}: not capped by {how}: {}",
            self.verdict()
        );
    }

    fn cause(&self) -> Option<&str> {
        self.verdict()["cause"].as_str()
    }

    fn ids(&self) -> Vec<String> {
        self.r["findings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| f["id"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn finding(&self, id: &str) -> &Value {
        self.r["findings"]
            .as_array()
            .and_then(|a| a.iter().find(|f| f["id"] == id))
            .unwrap_or_else(|| panic!("no {id}: {:?}", self.ids()))
    }

    /// No gen.budget above info: the generator's budget did not cap the run.
    fn assert_not_the_budget(&self) {
        for f in self.r["findings"].as_array().unwrap() {
            if f["id"] == "gen.budget" {
                assert_eq!(f["severity"], "info", "{f}");
            }
        }
    }

    /// The host this test ran on spoiled the run, not what the test planted beside the server:
    /// its verdict is host.noise and the noise was mostly the hypervisor's steal, or, whatever
    /// the verdict, the hypervisor took a tenth of the CPUs or more over the loaded seconds
    /// (host.noise's own line): the run measured that host at that moment. A pass of the
    /// verdict tests here read Node's serialized mount at 139/s under 0.8 of 2 CPUs stolen,
    /// 302/s and 318/s measured before and after it, and a gunicorn app refusing beyond 200/s
    /// `cpu.one-core` and `host.noise` under 0.27 stolen.
    fn stolen(&self) -> bool {
        let t = self.r["run"]["timeline"].as_array().unwrap();
        let sum = |k: &str| t.iter().filter_map(|s| s[k].as_f64()).sum::<f64>();
        if self.cause() == Some("host.noise") && sum("steal_cores") >= 0.5 * sum("noise_cores") {
            return true;
        }
        let loaded: Vec<f64> = t
            .iter()
            .filter(|s| s["offered"].as_u64().unwrap_or(0) > 0)
            .filter_map(|s| s["steal_cores"].as_f64())
            .collect();
        let cores = self.r["run"]["cores"].as_f64().unwrap_or(2.0);
        !loaded.is_empty() && loaded.iter().sum::<f64>() / loaded.len() as f64 >= 0.1 * cores
    }

    /// One column of the timeline's loaded seconds (those the generator offered in), as
    /// integers.
    fn loaded(&self, key: &str) -> Vec<u64> {
        self.r["run"]["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["offered"].as_u64() > Some(0))
            .map(|t| t[key].as_u64().unwrap())
            .collect()
    }

    fn trusted_measurement(&self) -> bool {
        self.r["measurement"]["trusted"].as_bool().unwrap()
    }

    /// The predicted ceiling of the verdict.
    fn ceiling(&self) -> f64 {
        self.verdict()["predicted_ceiling_per_s"]
            .as_f64()
            .unwrap_or_else(|| panic!("no predicted ceiling: {}", self.verdict()))
    }

    fn delivered(&self) -> f64 {
        self.verdict()["delivered_per_s"].as_f64().unwrap()
    }

    /// The verdict names `cause` (one of `causes`), the load was capped, and a failing cause
    /// exits 1 (3 when the generator could not keep its schedule on this machine).
    fn assert_cause(&self, causes: &[&str]) -> &str {
        let c = self
            .cause()
            .unwrap_or_else(|| panic!("no cause: {}\n{:?}", self.verdict(), self.ids()));
        assert!(causes.contains(&c), "cause {c}, wanted {causes:?}");
        assert_eq!(self.verdict()["capped"], true, "{}", self.verdict());
        let want = if self.trusted_measurement() { 1 } else { 3 };
        assert_eq!(self.code, want, "{}", self.verdict());
        c
    }

    /// The findings `keep` selects.
    fn findings_where(&self, keep: impl Fn(&Value) -> bool) -> Vec<&Value> {
        self.r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| keep(f))
            .collect()
    }

    /// No cause: the server kept up, nothing fails, the run is trusted.
    fn assert_clean(&self) {
        assert_eq!(self.cause(), None, "{}\n{:?}", self.verdict(), self.ids());
        assert_eq!(self.verdict()["capped"], false, "{}", self.verdict());
        assert_eq!(self.verdict()["trusted"], true, "{}", self.verdict());
        let failing = self.findings_where(|f| f["severity"] == "fail");
        assert!(failing.is_empty(), "{failing:?}");
        // Exit 0, or 3 when the built-in generator says it fell behind its own schedule (at
        // 6,000 new connections a second on two cores it shares with the server and the
        // tracer): then that, and nothing else, is why.
        if self.trusted_measurement() {
            assert_eq!(self.code, 0, "{}", self.verdict());
        } else {
            assert_eq!(self.code, 3, "{}", self.r["measurement"]);
            for p in self.r["measurement"]["problems"].as_array().unwrap() {
                assert!(
                    p.as_str().unwrap().contains("generator"),
                    "{}",
                    self.r["measurement"]
                );
            }
        }
    }
}

/// `trapdetect run --pid PID --json --quiet` + `args`, printing what a failure needs.
fn run(pid: u32, args: &[&str]) -> Run {
    let pid = pid.to_string();
    let mut all = vec!["run", "--pid", &pid, "--json", "--quiet"];
    all.extend(args);
    let started = std::time::Instant::now();
    let out = trapdetect(&all, Duration::from_secs(120));
    let r = json(&out);
    eprintln!(
        "trapdetect {} ({:.1} s)",
        all.join(" "),
        started.elapsed().as_secs_f64()
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "verdict: {}",
        serde_json::to_string_pretty(&r["verdict"]).unwrap()
    );
    for f in r["findings"].as_array().into_iter().flatten() {
        eprintln!("  {} {}: {}", f["severity"], f["id"], f["title"]);
    }
    eprintln!("measurement: {}", r["measurement"]);
    eprintln!("thread seconds: {}", r["run"]["thread_seconds"]);
    if let Ok(dir) = std::env::var("VERDICT_DUMP") {
        let n = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        let _ = std::fs::write(format!("{dir}/{n}.json"), r.to_string());
    }
    for t in r["run"]["timeline"].as_array().into_iter().flatten() {
        eprintln!(
            "  t={} offered={} 2xx={} cpus={} target={} charged={} runq={} noise={} steal={} threads={} busy={} acceptq={} in_flight={}",
            t["t_s"],
            t["offered"],
            t["ok_2xx"],
            t["target_cpus_busy"],
            t["target_cores"],
            t["charged_cores"],
            t["run_queue"],
            t["noise_cores"],
            t["steal_cores"],
            t["threads"],
            t["busy_threads"],
            t["accept_queue"],
            t["in_flight"]
        );
    }
    Run {
        r,
        code: out.status.code().unwrap_or(-1),
    }
}

/// The built-in open loop at `rate` for [`WINDOW`]. A run whose measurement trapdetect itself
/// says cannot be trusted although its verdict's cause is the server's (the generator fell
/// behind its schedule: this host stalled, as a benchmarker would see and run again) is run
/// again, up to three runs in all, once the server has drained its backlog and `trapdetect
/// wait-drain` says the TIME_WAIT the run before left on the server's port is below
/// net.time-wait's warning level (1,000, `TIME_WAIT_WARN`): a run at 2,600 new connections a
/// second leaves 13,000, and the third run of CI's stop 34 failed on the 12,974 its two
/// predecessors left there. The same when the verdict is host.noise and the noise was mostly
/// what the hypervisor stole (this host's neighbours, not what the test planted: this 2-CPU
/// VM's host took 0.4-0.8 of its CPUs in some runs that saturated both). The last run is
/// returned, or, when the hypervisor decided it, the first one it did not. A verdict that blames the measurement otherwise (host noise, the generator's
/// budget) is returned as it is.
fn builtin(pid: u32, url: &str, rate: f64, extra: &[&str]) -> Run {
    let rate = format!("{}", rate.round().max(1.0));
    let mut a = vec!["--url", url, "--rate", &rate, "--duration", WINDOW];
    a.extend(extra);
    let mut r = run(pid, &a);
    // The first run the hypervisor did not decide, kept should every later one be stolen.
    let mut unstolen: Option<Run> = None;
    for _ in 0..2 {
        let spoiled = !r.trusted_measurement() && r.verdict()["trusted"] == true;
        if !spoiled && !r.stolen() {
            break;
        }
        if unstolen.is_none() && !r.stolen() {
            unstolen = Some(r.clone());
        }
        eprintln!(
            "untrusted ({}, the hypervisor's steal deciding: {}): once more after the backlog drains",
            r.r["measurement"]["problems"],
            r.stolen()
        );
        std::thread::sleep(Duration::from_secs(8));
        // trapdetect's own wait-drain, as net.time-wait's remedy tells a benchmarker.
        let port = url_port(url).to_string();
        let out = trapdetect(
            &[
                "wait-drain",
                "--port",
                &port,
                "--below",
                "1000",
                "--timeout",
                "65s",
                "-q",
            ],
            Duration::from_secs(90),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "TIME_WAIT on {url} still at 1,000 or more after 65 s: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        r = run(pid, &a);
    }
    match unstolen {
        Some(earlier) if r.stolen() => earlier,
        _ => r,
    }
}

/// `-- wrk -t1 -cN -d5s URL` as the user's own closed-loop generator.
fn under_wrk(pid: u32, url: &str, conns: u32) -> Run {
    under_wrk_threads(pid, url, 1, conns)
}

/// The same with `-tN`: N generator threads.
fn under_wrk_threads(pid: u32, url: &str, threads: u32, conns: u32) -> Run {
    let (t, c) = (format!("-t{threads}"), format!("-c{conns}"));
    run(
        pid,
        &[
            "--duration",
            "7s",
            "--",
            "wrk",
            &t,
            &c,
            "-d5s",
            "--timeout",
            "5s",
            url,
        ],
    )
}

/// hey's CSV (`hey -z 5s -c N -o csv URL`) as the results of the user's generator.
fn under_hey(pid: u32, url: &str, conns: u32, dir: &Path) -> Run {
    let file = dir.join("hey.csv");
    let sh = format!(
        "exec hey -z 5s -c {conns} -o csv {url} > {}",
        file.display()
    );
    run(
        pid,
        &[
            "--duration",
            "7s",
            "--load-results",
            file.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &sh,
        ],
    )
}

/// N copies of the built-in generator, as N hosts would run them (`trapdetect load --shard
/// I/N --start-at T`, each its own process writing its own JSON), `rate` offered in all for
/// 5 s from a second after the command starts, their files merged by `run --load-results`
/// repeated. The window ends when the copies have exited, their drain done (an interrupt
/// at the window's end would have them wait up to their timeout for the requests in flight,
/// longer than the grace `run` gives a command before it kills it, and no JSON written).
fn under_shards(pid: u32, url: &str, rate: f64, n: usize, dir: &Path) -> Run {
    let bin = trapdetect_e2e::bin();
    let mut sh = "t=$(date +%s.%N | awk '{printf \"%.3f\", $1 + 1}'); ".to_string();
    let mut args: Vec<String> = ["--duration", "30s"].map(String::from).to_vec();
    for i in 1..=n {
        let file = dir.join(format!("shard-{i}.json"));
        sh.push_str(&format!(
            "{} load --url {url} --rate {rate} --duration 5s --shard {i}/{n} --start-at $t --quiet --json-out {} > /dev/null & ",
            bin.display(),
            file.display()
        ));
        args.extend(["--load-results".into(), file.to_str().unwrap().into()]);
    }
    sh.push_str("wait");
    args.extend(["--", "sh", "-c", &sh].map(String::from));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    run(pid, &a)
}

/// Measures a server's capacity on one instance, then starts a fresh one (on its own port) for
/// the run: the measurement's TIME_WAIT sockets must not be the run's (they would be a trap of
/// their own, and trapdetect says so).
fn measured_then_fresh<S, T>(
    start: impl Fn() -> S,
    url: impl Fn(&S) -> String,
    measure: impl FnOnce(&str) -> T,
) -> (S, T) {
    let first = start();
    let t = measure(&url(&first));
    drop(first);
    (start(), t)
}

/// `got` within ±30 % of `truth`.
fn near(what: &str, got: f64, truth: f64) {
    assert!(
        (got - truth).abs() <= 0.3 * truth,
        "{what}: {got:.1} vs ground truth {truth:.1}"
    );
}

/// `got` within ±30 % of the band two measurements of the capacity span (before and after the
/// run: the same host measures a CPU-bound server's capacity differently minutes apart).
fn in_band(what: &str, got: f64, before: f64, after: f64) {
    reaches_capacity(what, got, before, after);
    assert!(
        got <= 1.3 * before.max(after),
        "{what}: {got:.1} vs ground truth {before:.1} before, {after:.1} after"
    );
}

/// A CPU-bound server's capacity measured again once its run's backlog has drained (5 s: the
/// queued requests are served for as long after the load stops).
fn capacity_after(url: &str, conns: u32) -> f64 {
    std::thread::sleep(Duration::from_secs(5));
    wrk_capacity(url, conns, 3).rps
}

/// A CPU-bound server `at its capacity`: `got` reaches the capacity wrk measured before and
/// after its run, less 30 %. One-sided: that is the claim (`cpu.saturated`: at its capacity,
/// not held below it), and wrk's closed loop on this host measures low at times (191/s
/// delivered by the run between 143/s and 138/s measured); the capacity also drifts with the
/// host's speed over minutes (gunicorn's CPU loop on one CPU read 172, 202 and 282/s within an
/// hour), so both measurements bound it.
fn reaches_capacity(what: &str, got: f64, before: f64, after: f64) {
    let lo = before.min(after);
    assert!(
        got >= 0.7 * lo,
        "{what}: {got:.1} vs ground truth {before:.1} before, {after:.1} after"
    );
}

/// FUSE requests the daemon has served so far, every opcode.
fn fuse_requests(fs: &SlowFs) -> u64 {
    fs.stats()
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

/// A template the request reads (by a path relative to the server's working directory).
fn template(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("templates/page.html"), "<p>page</p>\n".repeat(40)).unwrap();
}

/// The closed-loop capacity (wrk, 8 connections, 3 s) with the daemon's FUSE requests per
/// request over it: the better of two measurements, since anything else on the host can only
/// lower one (one measurement in ten here read a third of the capacity the server then
/// delivered, and the trapped server "kept up" with twice that).
fn capacity_on(fs: &SlowFs, url: &str) -> (f64, f64) {
    let once = || {
        let a = fuse_requests(fs);
        let w = wrk_capacity(url, 8, 3);
        let b = fuse_requests(fs);
        assert_eq!(w.errors, 0, "{}", w.output);
        (w.rps, (b - a) as f64 / w.requests.max(1) as f64)
    };
    let (x, y) = (once(), once());
    eprintln!("capacity on the mount: {:.0}/s and {:.0}/s", x.0, y.0);
    if x.0 >= y.0 { x } else { y }
}

/// [`capacity_on`] again once the run's backlog has drained (as [`capacity_after`]).
fn capacity_on_after(fs: &SlowFs, url: &str) -> (f64, f64) {
    std::thread::sleep(Duration::from_secs(5));
    capacity_on(fs, url)
}

/// The slow mount's verdict: an `fs.*` cause on `mount`, its ceiling the server's capacity
/// there and its operations per request what the daemon counted, measured before and after
/// the run (`truth`, each (capacity, FUSE requests per request)): within 30 % of the band the
/// two span, as [`in_band`] (on a virtual machine whose host steals time, the same mount's
/// capacity moves between measurements seconds apart: stop 51's CI read nginx's at 79/s and
/// 86/s, its daemon's 400 µs sleeps lasting 1.6 ms).
fn assert_fs_cause(r: &Run, mount: &Path, truth: [(f64, f64); 2]) {
    let [(cap_before, per_before), (cap_after, per_after)] = truth;
    let c = r.assert_cause(&["fs.serialized", "fs.slow-ops"]);
    let e = &r.finding(c)["evidence"];
    assert_eq!(e["mount"], mount.to_str().unwrap());
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["ops_kind"], "FUSE requests");
    r.assert_capped_by("offered-above-delivered", "the mount");
    in_band("predicted ceiling", r.ceiling(), cap_before, cap_after);
    in_band(
        "FUSE requests per request",
        e["ops_per_request"].as_f64().unwrap(),
        per_before,
        per_after,
    );
    // One ceiling figure in the report: the verdict's.
    for f in r.r["findings"].as_array().unwrap() {
        if f["id"] != c {
            assert!(
                f["evidence"]["predicted_ceiling_per_s"].is_null(),
                "{}: {}",
                f["id"],
                f["evidence"]
            );
        }
    }
}

/// gunicorn (4 sync workers reading a template by relative path, started 7 directories deep
/// in a FUSE mount that takes 400 µs per request, one at a time, whatever the host's load),
/// nginx serving a file from 4 directories deep there, and Node.js reading the template with
/// `fs.readFile` from the same working directory: the mount is the cause, its ceiling the
/// capacity wrk measured on the same server, the operations per request what the daemon
/// counted; the twin on ext4 at the same offered rate has no cause.
#[test]
fn a_slow_mount_caps_gunicorn_nginx_and_node_at_the_capacity_measured_there() {
    if !require_root("a_slow_mount_caps_gunicorn_nginx_and_node_at_the_capacity_measured_there") {
        return;
    }
    let _s = serial();
    let fs = SlowFs::mount_remote(400, |b| {
        template(&b.join("d1/d2/d3/d4"));
        template(&b.join("d1/d2/d3/d4/d5/d6/d7"));
    });
    let ext4 = TempDir::new("verdict-fs-twin");
    template(ext4.path());

    // gunicorn, working directory on the mount.
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let work = Work::ReadFile("templates/page.html".into());
    let (g, (cap, per)) = measured_then_fresh(
        || Gunicorn::start(&deep, 4, work.clone()),
        Gunicorn::url,
        |u| capacity_on(&fs, u),
    );
    let (twin, twin_cap) = measured_then_fresh(
        || Gunicorn::start(ext4.path(), 4, work.clone()),
        Gunicorn::url,
        |u| wrk_capacity(u, 8, 3).rps,
    );
    // The trap is real: the same server on ext4 serves twice as much or more.
    eprintln!("capacity on ext4: {twin_cap:.0}/s");
    assert!(twin_cap >= 2.0 * cap, "twin {twin_cap} vs trapped {cap}");
    let rate = 2.0 * cap;
    let r = builtin(g.master.pid(), &g.url(), rate, &[]);
    let after = capacity_on_after(&fs, &g.url());
    assert_fs_cause(&r, &fs.mount, [(cap, per), after]);
    assert_eq!(
        r.finding(r.cause().unwrap())["evidence"]["cause"],
        "working directory"
    );
    // Where each FUSE request is timed, the queue is measured: four workers wait on one
    // daemon thread, and each request ahead adds a departure interval.
    if fuse_timed(&r) {
        assert_eq!(r.cause(), Some("fs.serialized"), "{}", r.verdict());
        let g = r.finding("fs.serialized")["evidence"]["queue_growth"]
            .as_f64()
            .unwrap();
        assert!(g >= 0.5, "queue growth {g}");
    }
    drop(g);
    builtin(twin.master.pid(), &twin.url(), rate, &[]).assert_clean();
    drop(twin);

    // nginx, docroot on the mount (started elsewhere: the files are what the requests use).
    let docroot = SlowFs::deep_dir(&fs.backing, &fs.mount, 4);
    let opts = |d: &Path| StaticOptions {
        docroot: Some(d.to_path_buf()),
        ..Default::default()
    };
    let (n, (cap, per)) = measured_then_fresh(
        || StaticNginx::start_with(&[("templates/page.html", b"")], opts(&docroot)),
        |n| n.url("/templates/page.html"),
        |u| capacity_on(&fs, u),
    );
    let url = n.url("/templates/page.html");
    let r = builtin(n.nginx.pid(), &url, 2.0 * cap, &[]);
    let after = capacity_on_after(&fs, &url);
    assert_fs_cause(&r, &fs.mount, [(cap, per), after]);
    assert_eq!(
        r.finding(r.cause().unwrap())["evidence"]["cause"],
        "files the requests use"
    );
    drop(n);

    // Node.js, `fs.readFile` by relative path from the working directory on the mount: libuv's
    // four threads queue there while V8's idle platform threads sit on futexes beside them
    // (as many thread-seconds: ranked by share alone, "a futex in user space" was the verdict
    // or a second FAIL). The mount is the cause; a lock is at most a warning under it.
    let work = Work::ReadFileAsync("templates/page.html".into());
    let (a, (cap, per)) = measured_then_fresh(
        || AppServer::node(&deep, work.clone()),
        AppServer::url,
        |u| capacity_on(&fs, u),
    );
    let r = builtin(a.proc.pid(), &a.url(), 2.0 * cap, &[]);
    let after = capacity_on_after(&fs, &a.url());
    assert_fs_cause(&r, &fs.mount, [(cap, per), after]);
    assert_eq!(
        r.finding(r.cause().unwrap())["evidence"]["cause"],
        "working directory"
    );
    for f in r.r["findings"].as_array().unwrap() {
        if f["id"] == "lock.contention" {
            assert_eq!(f["severity"], "warn", "{f}");
            assert_eq!(f["evidence"]["consequence_of"], r.cause().unwrap(), "{f}");
        }
    }
}

/// Whether the run timed FUSE requests one by one (`fuse_request_end`, Linux 6.13+).
fn fuse_timed(r: &Run) -> bool {
    r.r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["program"] == "fuse_request_end" && p["attached"] == true)
}

/// gunicorn's 4 sync workers started 7 directories deep in a FUSE mount that answers eight
/// requests at once, 3 ms each: every worker waits on the mount most of its time and the rate
/// is flat, as on a serialized one, but nothing queues there. The ground truth: the same
/// server with 8 workers serves a quarter more or better (measured: x1.8). The verdict: the mount's slow
/// operations, the pool of 4 the ceiling, no queue on the mount, more workers named.
#[test]
fn a_slow_mount_that_answers_side_by_side_leaves_the_pool_as_the_ceiling() {
    if !require_root("a_slow_mount_that_answers_side_by_side_leaves_the_pool_as_the_ceiling") {
        return;
    }
    let _s = serial();
    // 3 ms per operation: the mount, not the CPUs, bounds 8 workers too (at 1 ms, 8 workers
    // needed 1.3 of this host's 2 CPUs and read 349/s against 4 workers' 340/s once, when
    // the host was slow).
    let fs = SlowFs::mount_parallel(3000, 8, |b| {
        template(&b.join("d1/d2/d3/d4/d5/d6/d7"));
    });
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let work = Work::ReadFile("templates/page.html".into());
    let (_, eight) = measured_then_fresh(
        || Gunicorn::start(&deep, 8, work.clone()),
        Gunicorn::url,
        |u| capacity_on(&fs, u).0,
    );
    let (g, (cap, per)) = measured_then_fresh(
        || Gunicorn::start(&deep, 4, work.clone()),
        Gunicorn::url,
        |u| capacity_on(&fs, u),
    );
    eprintln!("capacity with 8 workers: {eight:.0}/s, with 4: {cap:.0}/s");
    // A mount that queued them would give 8 workers what it gives 4 (x1.0); one with room, up
    // to twice. 1.25: two wrk readings of the same server differ by up to x1.39 on this host
    // (257 and 356/s), the better of two is taken on each side.
    assert!(eight >= 1.25 * cap, "8 workers {eight} vs 4 {cap}");
    let r = builtin(g.master.pid(), &g.url(), 2.0 * cap, &[]);
    if !fuse_timed(&r) {
        // Without per-request latency the flat rate decides (docs/run.md): either id.
        trapdetect_e2e::skip(
            "a_slow_mount_that_answers_side_by_side_leaves_the_pool_as_the_ceiling",
            "no fuse_request_end tracepoint on this kernel",
        );
        return;
    }
    assert_eq!(r.assert_cause(&["fs.slow-ops"]), "fs.slow-ops");
    let f = r.finding("fs.slow-ops");
    let e = &f["evidence"];
    assert_eq!(e["mount"], fs.mount.to_str().unwrap());
    assert!(e["mean_threads"].as_f64().unwrap() > 2.0, "{e}");
    let g = e["queue_growth"].as_f64().unwrap();
    assert!(g < 0.5, "queue growth {g}");
    assert!(e["mount_ceiling_per_s"].is_null(), "{e}");
    near("predicted ceiling", r.ceiling(), cap);
    near(
        "FUSE requests per request",
        e["ops_per_request"].as_f64().unwrap(),
        per,
    );
    let basis = r.verdict()["ceiling_basis"].as_str().unwrap();
    assert!(
        basis.starts_with("ceiling ≈ 4 workers") && basis.contains("more workers raise"),
        "{basis}"
    );
}

/// nginx proxying to one gunicorn sync worker that holds a flock no one else wants for 40 ms
/// per request (the upstream serves 25/s), flooded at twice that through nginx, with nginx
/// traced: no rule of nginx's own threads explains the cap (they wait for work), so the
/// verdict names no cause, says what caps it lies outside the traced processes, and names the
/// processes that woke them: the gunicorn worker (the ground truth: its pid). One worker, not
/// two on a shared lock: the lock's holder keeps winning it, and the other worker woke nginx
/// under the 10 times a second a peer must (CI, stop 37's run: one of two named). The same
/// with Apache's event MPM as the proxy (mod_proxy_http): its idle threads take each request
/// from its listener through a condition variable, a futex wait a request, and it read
/// `lock.contention` ("3.6 threads on average wait on futexes", 1.3 % of its threads' time,
/// behind php-fpm by hand) while its threads waited for the upstream 98 % of their time.
#[test]
fn a_proxy_waiting_on_its_upstream_points_past_itself_to_the_workers() {
    if !require_root("a_proxy_waiting_on_its_upstream_points_past_itself_to_the_workers") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-proxy");
    for family in ["nginx", "apache"] {
        // A fresh upstream for each: the first flood's backlog stays behind the first.
        let g = Gunicorn::start(cwd.path(), 1, Work::Flock(cwd.path().join("up.lock"), 40));
        let (pid, url, _proxy): (u32, String, Box<dyn std::any::Any>) = if family == "nginx" {
            let p = StaticNginx::start_with(
                &[],
                StaticOptions {
                    proxy_to: Some(g.port),
                    ..Default::default()
                },
            );
            (p.nginx.pid(), p.url("/"), Box::new(p))
        } else {
            let p = Apache::event_proxy(g.port);
            (p.apache.pid(), p.url("/"), Box::new(p))
        };
        let r = builtin(pid, &url, 50.0, &[]);
        eprintln!("{family} in front of gunicorn");
        assert_proxy_points_past_itself(&r, &g);
    }
}

/// A proxy's verdict with its upstream at its capacity: no cause among its own threads,
/// capped at the upstream's 25/s, the sentence pointing past it to the upstream's workers.
fn assert_proxy_points_past_itself(r: &Run, g: &Gunicorn) {
    assert_eq!(r.cause(), None, "{}\n{:?}", r.verdict(), r.ids());
    assert_eq!(r.verdict()["capped"], true, "{}", r.verdict());
    near("delivered", r.delivered(), 25.0);
    let summary = r.verdict()["summary"].as_str().unwrap();
    assert!(
        summary.contains("waited for work") && summary.contains("outside the traced processes"),
        "{summary}"
    );
    for w in g.workers() {
        assert!(
            summary.contains(&format!("(pid {w})")),
            "gunicorn worker {w} not named: {summary}"
        );
    }
    assert!(
        r.ids()
            .iter()
            .all(|i| !i.starts_with("cpu.") && !i.starts_with("fs.")),
        "{:?}",
        r.ids()
    );
}

/// gunicorn (4 sync workers) and Node reading a template from a working directory 4 deep on
/// Debian's sshfs, served by a private sshd on this host. Each lookup and read the kernel hands
/// sshfs goes through ssh, sshd and sftp-server, which spend about half a core of this host's
/// two between them at these rates (0.45-0.64 measured): the mount's work, done for the
/// server. They are the benchmark's own processes, found link by link from who wakes whom
/// (sshfs wakes the server's threads, ssh wakes sshfs, sshd wakes ssh, sftp-server wakes
/// sshd), never the host's noise: before, `host.noise` said "other processes took 0.52 of the
/// 2 CPUs (sshd 0.21, ssh 0.19, sftp-server 0.11): the ceiling is what they left it" and
/// decided gunicorn's verdict (exit 3); then `cpu.saturated` ("no trap") did, while those
/// processes held 0.7 of the 1.8 busy cores. The mount is the cause (it costs gunicorn 2.2x and
/// Node 10x of their capacity from ext4 here), with the processes that serve it named.
#[test]
fn a_remote_filesystems_daemon_and_its_transport_are_the_benchmark_not_noise() {
    if !require_root("a_remote_filesystems_daemon_and_its_transport_are_the_benchmark_not_noise") {
        return;
    }
    let _s = serial();
    let fs = Sshfs::mount(|b| template(&b.join("d1/d2/d3/d4")));
    let cwd = fs.path("d1/d2/d3/d4");
    let work = Work::ReadFile("templates/page.html".into());
    for family in ["gunicorn", "node"] {
        // Flooded at 1.5 times what wrk measured there, on a fresh instance (wrk's TIME_WAIT
        // stays on the port it measured): a fixed 3,000/s was a flood on the machines before
        // and 93 % of gunicorn's capacity on a faster one.
        let ((pid, url, _server), there) = measured_then_fresh(
            || serve(family, &cwd, &work, None),
            |s| s.1.clone(),
            |u| wrk_capacity(u, 8, 3).rps,
        );
        let rate = format!("{:.0}", 1.5 * there);
        eprintln!("{family}: {there:.0}/s on sshfs, offered {rate}/s");
        // 8 s: the chain is four links and each joins one second after the one it wakes.
        let r = run(pid, &["--url", &url, "--rate", &rate, "--duration", "8s"]);
        // The daemon and its transport are the mount's, never noise. The hypervisor's steal
        // can raise a host.noise of its own on a shared host (0.34 of 2 CPUs once here, every
        // process besides it 0.01): then it names none of them, their CPU is not in it and it
        // decides nothing.
        if r.ids().iter().any(|i| i == "host.noise") {
            let e = &r.finding("host.noise")["evidence"];
            assert_eq!(e["decides_verdict"], false, "{family}: {e}");
            let others = e["busiest_others"].as_str().unwrap();
            for comm in ["sshfs", "ssh (", "sftp-server", "sshd"] {
                assert!(!others.contains(comm), "{family}: {comm} in {others}");
            }
            let beside_steal =
                e["noise_cores"].as_f64().unwrap() - e["steal_cores"].as_f64().unwrap_or(0.0);
            assert!(beside_steal < 0.1, "{family}: {e}");
        }
        assert_eq!(r.verdict()["trusted"], true, "{family}: {}", r.verdict());
        let stack: Vec<String> = r.r["run"]["stack"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["comm"].as_str().unwrap().to_string())
            .collect();
        for comm in ["sshfs", "ssh", "sftp-server"] {
            assert!(
                stack.iter().any(|c| c == comm),
                "{family}: {comm} not in {stack:?}"
            );
        }
        assert!(
            stack.iter().any(|c| c.starts_with("sshd")),
            "{family}: no sshd in {stack:?}"
        );
        // The mount is the verdict: its daemon and transport held the CPUs the server waited
        // for (their share of that wait is the mount's), named in its evidence.
        let cause = r.assert_cause(&["fs.slow-ops", "fs.serialized"]);
        let e = &r.finding(cause)["evidence"];
        assert_eq!(e["mount"], fs.mount.to_str().unwrap(), "{family}");
        let serving = e["serving"]
            .as_str()
            .unwrap_or_else(|| panic!("{family}: {e}"));
        for comm in ["sshfs (pid", "ssh (pid", "sftp-server (pid"] {
            assert!(serving.contains(comm), "{family}: {comm} not in {serving}");
        }
        assert!(e["serving_cores"].as_f64().unwrap() > 0.0, "{family}: {e}");
    }
}

/// Starts `family` ("gunicorn": four sync workers; "node"; "go", built as `go`) in `cwd`
/// doing `work` per request: its pid, its URL and what keeps it running.
fn serve(
    family: &str,
    cwd: &Path,
    work: &Work,
    go: Option<&GoBinary>,
) -> (u32, String, Box<dyn std::any::Any>) {
    match family {
        "gunicorn" => {
            let g = Gunicorn::start(cwd, 4, work.clone());
            (g.master.pid(), g.url(), Box::new(g))
        }
        "node" => {
            let n = AppServer::node(cwd, work.clone());
            (n.proc.pid(), n.url(), Box::new(n))
        }
        "go" => {
            let g = AppServer::go(go.expect("a built Go server"), cwd, work.clone());
            (g.proc.pid(), g.url(), Box::new(g))
        }
        other => panic!("no family {other}"),
    }
}

/// bindfs (Debian's multithreaded FUSE passthrough) under the working directory, each request
/// reading a template through it: the daemon answers at once, but every lookup and read is a
/// round trip through user space that costs CPU. By hand, gunicorn (4 sync workers) served
/// 3,900/s there and 5,000/s from the ext4 directory beneath, Node 4,500-6,400/s and 16,000/s.
/// Flooded, gunicorn's verdict was `cpu.saturated` "no trap ... nothing to fix in the
/// environment" while bindfs held 0.30 of the 1.95 busy cores, and Node's "capped, no rule
/// explains" (its event loop busy all the time, a fifth of it in the mount's calls); Go (6,900/s
/// there, 14,000/s beneath) "cheaply now, 0 % of request time". Whatever the cause, it names
/// the mount: the CPU the daemon takes, the one thread's time on it, or the mount's own
/// finding.
#[test]
fn a_fuse_daemon_that_costs_cpu_is_named_by_the_cause() {
    if !require_root("a_fuse_daemon_that_costs_cpu_is_named_by_the_cause") {
        return;
    }
    let _s = serial();
    let fs = Bindfs::mount(|b| template(&b.join("d1/d2")));
    let work = Work::ReadFile("templates/page.html".into());
    let mount = fs.mount.to_str().unwrap();
    let go = GoBinary::build();
    for family in ["gunicorn", "node", "go"] {
        // Ground truth: the mount costs the server capacity (the better of two wrk runs on
        // each side).
        let best = |url: &str| wrk_capacity(url, 8, 3).rps.max(wrk_capacity(url, 8, 3).rps);
        let native = {
            let native_dir = fs.backing.join("d1/d2");
            let native = best(&serve(family, &native_dir, &work, Some(&go)).1);
            // The clean twin, fresh (wrk's TIME_WAIT stays on the port it measured): a quarter
            // of its capacity (half what one CPU leaves it) beside a CPU hog taking the other:
            // no cause, no wait for a CPU beyond what that load makes.
            let (pid, url, _server) = serve(family, &native_dir, &work, Some(&go));
            let _hog = CpuHog::start(20, None);
            builtin(pid, &url, native / 4.0, &[]).assert_clean();
            native
        };
        let (pid, url, _server) = serve(family, &fs.path("d1/d2"), &work, Some(&go));
        let there = best(&url);
        eprintln!("{family}: {there:.0}/s on bindfs, {native:.0}/s on ext4");
        assert!(
            native >= 1.1 * there,
            "{family}: bindfs cost nothing here ({there:.0}/s, {native:.0}/s from ext4)"
        );
        let rate = format!("{:.0}", 2.0 * there);
        let r = run(pid, &["--url", &url, "--rate", &rate, "--duration", "5s"]);
        // The walk of the working directory is the mount's cost, not "cheaply now" (Go's
        // runtime opened a file in /sys once in the flood and set the local baseline at
        // 1.6 ms a lookup: "0 % of request time"): its share at its failing line or over, a
        // failure, or a warning where it is a consequence of the cause (the mount's own).
        let cwd = r.finding("fs.cwd-slow");
        let e = &cwd["evidence"];
        assert!(
            e["share_of_request_time"].as_f64().unwrap() >= e["share_limit"].as_f64().unwrap(),
            "{family}: {cwd}"
        );
        let consequence = r.verdict()["consequences"]
            .as_array()
            .unwrap()
            .contains(&"fs.cwd-slow".into());
        let want = if consequence { "warn" } else { "fail" };
        assert_eq!(cwd["severity"], want, "{family}: {cwd}");
        assert_cause_names_mount(&r, family, mount);
    }
}

/// The cause of a run flooded beside a FUSE daemon that costs CPU names the mount, whichever
/// it is: the CPU the daemon takes (`cpu.saturated`, not "no trap"), the one thread's time on
/// it (`cpu.one-core`), or the mount's own (`fs.*`).
fn assert_cause_names_mount(r: &Run, family: &str, mount: &str) {
    let cause = r.assert_cause(&[
        "cpu.saturated",
        "cpu.one-core",
        "fs.slow-ops",
        "fs.serialized",
    ]);
    let f = r.finding(cause);
    eprintln!("{family}: {cause}: {}", f["title"]);
    match cause {
        "cpu.saturated" => {
            let title = f["title"].as_str().unwrap();
            assert!(!title.starts_with("no trap"), "{family}: {title}");
            assert!(
                title.contains(&format!("the daemons serving its files on {mount}")),
                "{family}: {title}"
            );
            assert!(
                f["evidence"]["filesystem_serving_cores"].as_f64().unwrap() > 0.0,
                "{family}: {f}"
            );
            assert!(
                f["remedy"].as_str().unwrap().starts_with(&format!(
                    "move what the requests use (working directory, code, files) off {mount}"
                )),
                "{family}: {f}"
            );
        }
        "cpu.one-core" => {
            let on = f["evidence"]["share_of_work_on_slow_mounts"]
                .as_str()
                .unwrap_or_else(|| panic!("{family}: {f}"));
            assert!(on.starts_with(&format!("{mount} ")), "{family}: {on}");
            assert!(
                f["remedy"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("move the files its requests use off {mount} ")),
                "{family}: {f}"
            );
        }
        _ => assert_eq!(f["evidence"]["mount"], mount, "{family}: {f}"),
    }
}

/// php-fpm (4 workers) behind nginx with its docroot on a gocryptfs mount (Debian's encrypted
/// FUSE filesystem: the daemon costs CPU per round trip), its code cached by opcache: the
/// workers only walk the mount (a chdir to the docroot, stats of the scripts), no read there
/// tells which device they waited on, and the daemon woke them from path walks alone. By hand
/// flooded at 12,000/s it held 0.31 of the 2 busy cores while the verdict read `cpu.saturated`
/// "no trap" (6,900/s there by wrk, 9,100/s from ext4). Ground truth: the ext4 twin serves a
/// tenth more or better; flooded at 1.2 times its capacity there, the cause names the mount.
#[test]
fn a_fuse_daemon_woken_only_by_path_walks_is_named_under_php_fpm() {
    if !require_root("a_fuse_daemon_woken_only_by_path_walks_is_named_under_php_fpm") {
        return;
    }
    let _s = serial();
    let site = |d: &Path| {
        std::fs::create_dir_all(d.join("www/inc")).unwrap();
        std::fs::write(
            d.join("www/index.php"),
            "<?php require __DIR__ . '/inc/a.php'; require __DIR__ . '/inc/b.php'; echo f(), g(), \"\\n\";",
        )
        .unwrap();
        std::fs::write(
            d.join("www/inc/a.php"),
            "<?php function f() { return 'a'; }",
        )
        .unwrap();
        std::fs::write(
            d.join("www/inc/b.php"),
            "<?php function g() { return 'b'; }",
        )
        .unwrap();
    };
    let fs = Gocryptfs::mount(|m| site(m));
    let ext4 = TempDir::new("verdict-gocryptfs-twin");
    site(ext4.path());
    let cwd = TempDir::new("verdict-gocryptfs-cwd");
    // Both measured in turn, three times each, the best of each kept: one measurement each
    // read 7,152/s there and 7,405/s from ext4 once (the host stealing time from one of
    // them), where the others read a quarter to a third more from ext4.
    let php = PhpStack::start_in_docroot(cwd.path(), 4, fs.mount.join("www"));
    let (mut there, mut native) = (0.0f64, 0.0f64);
    {
        let twin = PhpStack::start_in_docroot(cwd.path(), 4, ext4.path().join("www"));
        for _ in 0..3 {
            native = native.max(wrk_capacity(&twin.url(), 8, 3).rps);
            there = there.max(wrk_capacity(&php.url(), 8, 3).rps);
        }
    }
    eprintln!("php-fpm: {there:.0}/s on gocryptfs, {native:.0}/s on ext4");
    assert!(
        native >= 1.1 * there,
        "gocryptfs cost nothing here ({there:.0}/s, {native:.0}/s from ext4)"
    );
    // Flooded: a fifth over what wrk's kept-alive connections measured is over what the
    // stack serves the generator, whose connections it closes (12,100-13,700/s delivered of
    // 20,300 offered, wrk 16,900/s: a fresh CI machine served 2.4 times the stop before it,
    // where the old fixed offer of 8,000/s was no flood). The generator shares the CPUs the
    // flood saturates: its lanes run at nice -10 (`--nice`), as a user keeps its schedule.
    let r = builtin(php.fpm.pid(), &php.url(), 1.2 * there, &["--nice", "-10"]);
    assert_cause_names_mount(&r, "php-fpm", fs.mount.to_str().unwrap());
}

/// nginx (traced) in front of php-fpm (4 workers), whose script asks a Node server that spends
/// its one core per request: flooded at twice the capacity wrk measured, nginx's threads wait
/// for work and all 512 of the generator's connections are busy. That was `gen.budget` ("the
/// generator capped the run, not the server ... the server had capacity to spare", exit 3):
/// nginx had, its stack had not — php-fpm's socket held ~509 connections. Node joins the stack
/// two links out (it wakes php-fpm, which wakes nginx); php-fpm's listener full every second
/// says the stack is at its capacity: capped, no cause in nginx, Node and php-fpm named.
#[test]
fn a_full_stack_behind_a_proxy_is_not_the_generators_budget() {
    if !require_root("a_full_stack_behind_a_proxy_is_not_the_generators_budget") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-stack");
    let node = AppServer::node(cwd.path(), Work::Cpu(400_000));
    let stack = PhpStack::start(
        cwd.path(),
        4,
        &format!("<?php echo file_get_contents('{}');", node.url()),
    );
    let url = format!("http://127.0.0.1:{}/index.php", stack.port);
    // The better of two readings: the first of a cold stack (Node's JIT, PHP's opcache) read
    // 511/s once, and the stack then delivered all of twice that (CI at d53585f: "no
    // ceiling, the server kept up"), so the flood was no flood.
    let cap = wrk_capacity(&url, 8, 3)
        .rps
        .max(wrk_capacity(&url, 8, 3).rps);
    eprintln!("the stack's capacity: {cap:.0}/s");
    let mut r = builtin(stack.nginx.pid(), &url, 2.0 * cap, &[]);
    if r.verdict()["capped"] == false && r.delivered() >= 1.5 * cap {
        // The flood was none: wrk read the stack at a quarter of what it then served (242/s
        // twice, then all of 484/s delivered, in CI's run at 08982f0), so the capacity read
        // was not the stack's. Twice what it served, then.
        eprintln!("not a flood: {:.0}/s delivered; twice that", r.delivered());
        r = builtin(stack.nginx.pid(), &url, 2.0 * r.delivered(), &[]);
    }
    assert_eq!(r.cause(), None, "{}\n{:?}", r.verdict(), r.ids());
    assert_eq!(r.verdict()["capped"], true, "{}", r.verdict());
    assert!(
        !r.ids()
            .iter()
            .any(|i| i == "gen.budget" || i == "host.noise"),
        "{:?}",
        r.ids()
    );
    let summary = r.verdict()["summary"].as_str().unwrap();
    assert!(
        summary.contains(&format!("node (pid {})", node.proc.pid()))
            && summary.contains("that stack is at its capacity"),
        "{summary}"
    );
    let stack_pids: Vec<u64> = r.r["run"]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    assert!(
        stack_pids.contains(&(node.proc.pid() as u64)),
        "{stack_pids:?}"
    );
    for w in tree(stack.fpm.pid())
        .into_iter()
        .filter(|p| *p != stack.fpm.pid())
    {
        assert!(
            stack_pids.contains(&(w as u64)),
            "php-fpm worker {w} not in {stack_pids:?}"
        );
    }
}

/// One gunicorn sync worker that spends 40 ms per request off the CPU (an uncontended flock
/// held 40 ms): the pool of one is the ceiling, 25/s by construction, whichever generator
/// drives it — the built-in open loop, `-- wrk`, hey's CSV, or two copies of the built-in one
/// (`load --shard 1/2` and `2/2` on a common start) whose JSONs the run merges.
#[test]
fn a_pool_of_one_is_the_cause_under_the_builtin_load_wrk_and_hey() {
    if !require_root("a_pool_of_one_is_the_cause_under_the_builtin_load_wrk_and_hey") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-pool");
    let g = Gunicorn::start(cwd.path(), 1, Work::Flock(cwd.path().join("pool.lock"), 40));
    let pid = g.master.pid();
    let runs = [
        ("built-in", builtin(pid, &g.url(), 60.0, &[])),
        ("wrk", under_wrk(pid, &g.url(), 8)),
        ("hey", under_hey(pid, &g.url(), 8, cwd.path())),
        (
            "two built-in copies",
            under_shards(pid, &g.url(), 60.0, 2, cwd.path()),
        ),
    ];
    for (what, r) in &runs {
        assert_eq!(
            r.assert_cause(&["pool.too-small"]),
            "pool.too-small",
            "{what}"
        );
        let e = &r.finding("pool.too-small")["evidence"];
        assert_eq!(e["workers"], 1, "{what}");
        near(&format!("{what}: predicted"), r.ceiling(), 25.0);
        near(&format!("{what}: delivered"), r.delivered(), 25.0);
    }
    // The open loop saw it from its offered rate, the closed loops from the kernel: the
    // connections waiting in gunicorn's accept queue.
    runs[0]
        .1
        .assert_capped_by("offered-above-delivered", runs[0].0);
    for (what, r) in &runs[1..3] {
        r.assert_capped_by("accept-queue", what);
    }
    // Two copies at 30/s each, merged on wall-clock seconds: 60 offered in every second both
    // sent in, as the one built-in generator offered; each copy's 150 arrivals listed.
    let shards = &runs[3].1;
    shards.assert_capped_by("offered-above-delivered", runs[3].0);
    let load = &shards.r["load"];
    assert_eq!(load["format"], "merged", "{load}");
    let parts = load["generators"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{load}");
    for p in parts {
        assert_eq!(p["format"], "trapdetect-load", "{p}");
        assert_eq!(p["totals"]["requests"], 150, "{p}");
        assert_eq!(p["totals"]["offered_per_s"], 30.0, "{p}");
    }
    assert_eq!(load["totals"]["requests"], 300, "{load}");
    // Each copy kept its seconds' latencies: the merged run has a p99, every second too.
    assert_eq!(load["missing_columns"], serde_json::json!([]), "{load}");
    assert!(load["totals"]["p99_us"].as_f64().unwrap() > 0.0, "{load}");
    assert_eq!(load["totals"]["offered_per_s"], 60.0, "{load}");
    let offered = shards.loaded("offered");
    assert_eq!(offered.iter().sum::<u64>(), 300, "{offered:?}");
    assert!(
        offered.iter().filter(|o| **o == 60).count() >= 4,
        "{offered:?}"
    );
}

/// A pool that grows under load: Apache's prefork children running mod_php and php-fpm's
/// `pm = dynamic` children behind nginx, each starting with a few and spawning children while
/// none is idle, up to 8; every request sleeps 20 ms, so N workers serve N ÷ 20 ms, at
/// 700/s offered. Judged over the whole window against its final size, a pool that was full
/// every second read part idle (Apache growing from 4 to 8: 7.1 busy of 8, under the 90 % a
/// full pool is held to; php-fpm from 2 to 7: 5 of 7) and the run had no cause; judged at the
/// size it had each second, it is the pool.
#[test]
fn a_pool_that_grows_under_load_is_judged_at_its_full_size() {
    if !require_root("a_pool_that_grows_under_load_is_judged_at_its_full_size") {
        return;
    }
    let _s = serial();
    let script = "<?php usleep(20000); echo \"ok\\n\";";
    let apache = Apache::prefork_php(script, 4, 8);
    let r = builtin(apache.apache.pid(), &apache.url("/index.php"), 700.0, &[]);
    assert_grown_pool(&r, "apache");
    drop(apache);
    let cwd = TempDir::new("verdict-dynamic");
    // php-fpm's dynamic pool forks at most `min_spare_servers - idle` children a second (1
    // here): from 3 at the window's start to 6 by its fourth second, full before the last. Up
    // to 8 it was still growing in the last second, and the child forked then had not served
    // yet (CI rehearsal of stop 49: threads 4, 5, 6, 7, 8 and 305 responses in that second, 6
    // children's worth; the verdict said 6 workers, the pool's 7th never worked in it).
    let fpm = PhpStack::start_with(
        cwd.path(),
        6,
        script,
        PhpOptions {
            dynamic_start: Some(2),
            ..Default::default()
        },
    );
    let url = format!("http://127.0.0.1:{}/index.php", fpm.port);
    let r = builtin(fpm.fpm.pid(), &url, 700.0, &[]);
    assert_grown_pool(&r, "php-fpm dynamic");
}

/// A pool offered a little more than it serves: gunicorn's four sync workers, and php-fpm's
/// four behind nginx, each request sleeping 10 ms (at most 400/s), offered 1.06 × the capacity
/// wrk measured on an instance of their own. They deliver over 90 % of it, which an open
/// loop's shortfall alone read as "kept up" (gunicorn by hand at 380/s: 362/s delivered, 95 %,
/// the requests in flight 25 → 145 in 7 s), while their backlog grows every second: capped,
/// seen as the backlog that grew, and the pool is the cause, its ceiling what was delivered.
#[test]
fn a_pool_offered_a_little_more_than_it_serves_is_capped_by_its_growing_backlog() {
    if !require_root("a_pool_offered_a_little_more_than_it_serves_is_capped_by_its_growing_backlog")
    {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-backlog");
    let (g, cap) = measured_then_fresh(
        || Gunicorn::start(cwd.path(), 4, Work::Sleep(10)),
        |g| g.url(),
        |url| wrk_capacity(url, 8, 3).rps,
    );
    let r = builtin(g.master.pid(), &g.url(), 1.06 * cap, &[]);
    assert_backlog_grew_to_the_pool(&r, 1.06 * cap, "gunicorn");
    drop(g);
    let script = "<?php usleep(10000); echo \"ok\\n\";";
    let (fpm, cap) = measured_then_fresh(
        || PhpStack::start_with(cwd.path(), 4, script, PhpOptions::default()),
        |s| format!("http://127.0.0.1:{}/index.php", s.port),
        |url| wrk_capacity(url, 8, 3).rps,
    );
    let url = format!("http://127.0.0.1:{}/index.php", fpm.port);
    let r = builtin(fpm.fpm.pid(), &url, 1.06 * cap, &[]);
    assert_backlog_grew_to_the_pool(&r, 1.06 * cap, "php-fpm");
}

/// Over 90 % of `offered` delivered (the plant), the run capped only by its growing backlog,
/// the requests in flight rising every loaded second, and pool.too-small of the four workers
/// the cause, predicting what was delivered.
fn assert_backlog_grew_to_the_pool(r: &Run, offered: f64, what: &str) {
    let delivered = r.delivered();
    assert!(
        delivered >= 0.9 * offered.round() && delivered <= 0.98 * offered.round(),
        "{what}: the plant: {delivered:.1} delivered of {offered:.1} offered"
    );
    assert_eq!(
        r.verdict()["capped_by"],
        serde_json::json!(["backlog-grew"]),
        "{what}: {}",
        r.verdict()
    );
    assert_eq!(
        r.assert_cause(&["pool.too-small"]),
        "pool.too-small",
        "{what}"
    );
    assert_eq!(
        r.finding("pool.too-small")["evidence"]["workers"],
        4,
        "{what}"
    );
    let in_flight = r.loaded("in_flight");
    assert!(
        in_flight.windows(2).filter(|w| w[1] > w[0]).count() >= 3,
        "{what}: in flight {in_flight:?}"
    );
    near(&format!("{what}: predicted"), r.ceiling(), delivered);
}

/// pool.too-small over the pool at its largest (its threads less the one parent), grown
/// inside the window and said so, its ceiling that many workers ÷ 20 ms; what was delivered
/// over the window, while it grew, is no more.
fn assert_grown_pool(r: &Run, what: &str) {
    assert_eq!(
        r.assert_cause(&["pool.too-small"]),
        "pool.too-small",
        "{what}"
    );
    let threads = r.loaded("threads");
    let full = *threads.iter().max().unwrap();
    let e = &r.finding("pool.too-small")["evidence"];
    assert_eq!(e["workers"], full - 1, "{what}: threads {threads:?}, {e}");
    assert_eq!(
        e["pool_grew_from"],
        threads[0] - 1,
        "{what}: {threads:?}, {e}"
    );
    assert!(
        threads[0] < full,
        "{what}: the pool did not grow: {threads:?}"
    );
    let ceiling = (full - 1) as f64 / 0.02;
    near(&format!("{what}: predicted"), r.ceiling(), ceiling);
    assert!(
        r.delivered() <= ceiling,
        "{what}: delivered {}",
        r.delivered()
    );
}

/// Workers that call an upstream per request block in a read on the connection they opened,
/// which the kernel's classes cannot tell from a wait for a client: gunicorn's four sync
/// workers calling an upstream that answers in 20 ms (at most 200/s) were "waiting for work
/// 97 % of their time: what caps it is outside the traced processes" while 508 connections
/// waited in their own listener. Work waiting for them, their reads are their calls: the pool
/// is the ceiling, the upstream (answering side by side, no queue of its own) named by its
/// wakeups. The same for php-fpm's four workers behind nginx.
#[test]
fn workers_held_by_their_calls_to_an_upstream_are_the_pool_not_waits_for_work() {
    if !require_root("workers_held_by_their_calls_to_an_upstream_are_the_pool_not_waits_for_work") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-upstream");
    // Sixteen threads, 20 ms each: 800/s, four times what the pools below can ask of it.
    let up = Gunicorn::start_with(cwd.path(), 1, Some(16), Work::Sleep(20));
    let up_worker = children_of(up.master.pid())[0];
    let check = |r: &Run| {
        r.assert_cause(&["pool.too-small"]);
        let e = &r.finding("pool.too-small")["evidence"];
        assert!(
            e["calls_answered_by"]
                .as_str()
                .is_some_and(|w| w.contains(&format!("(pid {up_worker})"))),
            "{e}"
        );
        assert!(e["accept_queue_mean"].as_f64().unwrap() >= 1.0, "{e}");
        assert!(
            e["wait_in_reads_share_pct"].as_f64().unwrap() >= 50.0,
            "{e}"
        );
        // Four workers, 20 ms a call at least.
        assert!(
            r.delivered() <= 4.0 / 0.020 * 1.05,
            "delivered {}",
            r.delivered()
        );
        assert!(r.delivered() >= 50.0, "delivered {}", r.delivered());
    };
    let g = Gunicorn::start(cwd.path(), 4, Work::Call(up.url()));
    check(&builtin(g.master.pid(), &g.url(), 400.0, &[]));
    // The clean twin: half the pool's 200/s, beside a CPU hog taking one of the two CPUs.
    {
        let _hog = CpuHog::start(40, None);
        builtin(g.master.pid(), &g.url(), 100.0, &[]).assert_clean();
    }
    drop(g);
    let stack = PhpStack::start(
        cwd.path(),
        4,
        &format!("<?php echo file_get_contents('{}');", up.url()),
    );
    let url = format!("http://127.0.0.1:{}/index.php", stack.port);
    check(&builtin(stack.fpm.pid(), &url, 400.0, &[]));
}

/// A server that answers the arrivals it does not admit with refusals (nginx's `limit_req`:
/// 503 at once; a gunicorn app's token bucket: 429) delivers its limit in 2xx while its
/// threads wait for work: capped, but by a limit of its own, not a resource, and not
/// "outside the traced processes" (the sentence named the load generator as what woke them).
#[test]
fn a_server_refusing_what_it_does_not_admit_is_capped_by_its_own_limit() {
    if !require_root("a_server_refusing_what_it_does_not_admit_is_capped_by_its_own_limit") {
        return;
    }
    let _s = serial();
    let check = |r: &Run, limit: f64| {
        assert_eq!(r.cause(), None, "{}\n{:?}", r.verdict(), r.ids());
        assert_eq!(r.verdict()["capped"], true, "{}", r.verdict());
        let summary = r.verdict()["summary"].as_str().unwrap();
        assert!(
            summary.contains("it refused what it did not serve"),
            "{summary}"
        );
        assert!(
            !summary.contains("outside the traced processes"),
            "{summary}"
        );
        assert_eq!(r.finding("load.status-mix")["severity"], "fail");
        near("delivered", r.delivered(), limit);
    };
    let nginx = StaticNginx::start_with(
        &[("index.html", b"ok\n")],
        StaticOptions {
            limit_req_per_s: Some(200),
            ..Default::default()
        },
    );
    check(
        &builtin(nginx.nginx.pid(), &nginx.url("/index.html"), 1_000.0, &[]),
        200.0,
    );
    // The clean twin: half the limit, beside a CPU hog taking one of the two CPUs.
    {
        let _hog = CpuHog::start(40, None);
        builtin(nginx.nginx.pid(), &nginx.url("/index.html"), 100.0, &[]).assert_clean();
    }
    drop(nginx);
    let cwd = TempDir::new("verdict-limit");
    let g = Gunicorn::start(cwd.path(), 2, Work::Limit(100));
    check(&builtin(g.master.pid(), &g.url(), 800.0, &[]), 200.0);
}

/// gunicorn's gthread worker (one process, four threads) keeps connections in its poller while
/// its threads are busy: a full server shows no accept queue, and the built-in generator's 512
/// connections fill with requests the server holds. The verdict was `gen.budget` ("the
/// generator capped the run ... the server had capacity to spare", exit 3) for both traps here,
/// though the rate was flat from the first second, long before the budget filled. One
/// `threading.Lock` held 20 ms: lock.contention on futexes, at most 50/s, and not the GIL (its
/// waits end every 5 ms; these last about 20; and its holders would have run on a CPU while
/// the waits lasted, these threads barely ran); four threads each waiting 20 ms on an event
/// nobody sets (a futex wait with a timeout, as Ruby's `sleep` is): the pool, about 200/s —
/// the waits ran out their timeout, so they are sleeps, not a lock (they were read as
/// lock.contention, "3.9 threads wait on futexes", before the call's result was read).
#[test]
fn a_threaded_worker_holding_its_connections_is_the_ceiling_not_the_generator() {
    if !require_root("a_threaded_worker_holding_its_connections_is_the_ceiling_not_the_generator") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-gthread");
    let g = Gunicorn::start_with(cwd.path(), 1, Some(4), Work::Mutex(20));
    let r = builtin(g.master.pid(), &g.url(), 150.0, &[]);
    r.assert_cause(&["lock.contention"]);
    r.assert_not_the_budget();
    let e = &r.finding("lock.contention")["evidence"];
    assert_eq!(
        e["object"],
        "futexes in user space (one lock or several: not told apart)"
    );
    assert!(e["runtime_lock"].is_null(), "{e}");
    let why = e["runtime_lock_ruled_out"].as_str().unwrap();
    assert!(
        why.starts_with("CPython's global interpreter lock (GIL): a wait for it ends within 5 ms"),
        "{e}"
    );
    // And by its holders' time (the rule Ruby's GVL, with no wait bound, is judged by): the
    // GIL is the worker's, five threads (its poller and four workers), and a thread waits for
    // it only while one of the other four holds it, on a CPU or queued for one. The threads
    // sleep under the lock, but the poller's work grows with the connections it holds (0.14
    // cores with 100, 0.33 with 500, more on a slower host), so whether their time rules the
    // GIL out is the report's own arithmetic: twice four times it against the waits.
    let ts = &r.r["run"]["thread_seconds"];
    let held = ts["on_cpu"].as_f64().unwrap() + ts["run_queue"].as_f64().unwrap();
    let waited = e["waits"].as_f64().unwrap() * e["mean_wait_ms"].as_f64().unwrap() / 1e3;
    let clause = "; a thread waits for it only while another of its process holds it, on a CPU or queued for one: 5 threads in one process with ";
    eprintln!("held {held:.3} s, waited {waited:.3} s");
    if waited > 2.0 * 4.0 * held * 1.01 {
        assert!(why.contains(clause), "{e}");
    } else if waited < 2.0 * 4.0 * held * 0.99 {
        assert!(!why.contains("a thread waits for it only while"), "{e}");
    }
    assert!(r.delivered() <= 50.0 * 1.05, "delivered {}", r.delivered());
    near("delivered", r.delivered(), 50.0);
    drop(g);
    let g = Gunicorn::start_with(cwd.path(), 1, Some(4), Work::TimedWait(20));
    let r = builtin(g.master.pid(), &g.url(), 400.0, &[]);
    r.assert_cause(&["pool.too-small"]);
    r.assert_not_the_budget();
    assert_eq!(r.finding("pool.too-small")["evidence"]["workers"], 4);
    near("predicted", r.ceiling(), 4.0 / 0.02);
    near("delivered", r.delivered(), 4.0 / 0.02);
    // The four threads' waits are sleeps, the futexes nearly silent (the GIL's handoffs).
    let off = &r.r["run"]["thread_seconds"]["off_cpu"];
    let window = r.r["run"]["window_s"].as_f64().unwrap();
    let (sleep, futex) = (
        off["sleep"].as_f64().unwrap(),
        off["futex"].as_f64().unwrap(),
    );
    // Each request served waited its 20 ms, counted as a sleep: the thread-seconds of sleep
    // are the requests served in the window times 20 ms (not "most of each thread's window":
    // what else a thread does per request grows on a slower host).
    let served = r.delivered() * window;
    assert!(
        (sleep - 0.020 * served).abs() <= 0.15 * 0.020 * served,
        "sleep {sleep} s in {window} s for {served:.0} requests"
    );
    assert!(
        futex <= 0.05 * sleep,
        "futex {futex} s beside sleep {sleep} s"
    );
}

/// The same queue in a second family: Go's net/http takes every connection and parks its
/// goroutines on one `sync.Mutex` held 20 ms, in the runtime, where no thread waits: the rate
/// is flat at 50/s from the first second while the generator's 512 connections fill with
/// requests the server holds. Nothing the kernel sees names the lock, and the run must not
/// blame the generator for it.
#[test]
fn a_go_server_holding_its_connections_is_not_the_generators_budget() {
    if !require_root("a_go_server_holding_its_connections_is_not_the_generators_budget") {
        return;
    }
    let _s = serial();
    let bin = GoBinary::build();
    let cwd = TempDir::new("verdict-go-mutex");
    let a = AppServer::go(&bin, cwd.path(), Work::Mutex(20));
    let r = builtin(a.proc.pid(), &a.url(), 300.0, &[]);
    assert_eq!(r.verdict()["capped"], true, "{}", r.verdict());
    assert_ne!(r.cause(), Some("gen.budget"), "{}", r.verdict());
    r.assert_not_the_budget();
    // The budget did fill: what this test is about.
    let in_flight = r.r["run"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["in_flight"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(in_flight >= 512, "most in flight {in_flight}");
    assert!(r.delivered() <= 50.0 * 1.05, "delivered {}", r.delivered());
}

/// Four gunicorn workers taking one exclusive flock held 20 ms per request: the lock is the
/// cause, named by its file, 50/s at most by construction.
#[test]
fn one_flock_serializes_gunicorn_workers_and_is_named() {
    if !require_root("one_flock_serializes_gunicorn_workers_and_is_named") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-lock");
    let lock = cwd.path().join("app.lock");
    let g = Gunicorn::start(cwd.path(), 4, Work::Flock(lock.clone(), 20));
    let r = builtin(g.master.pid(), &g.url(), 150.0, &[]);
    r.assert_cause(&["lock.contention"]);
    let e = &r.finding("lock.contention")["evidence"];
    assert_eq!(e["object"], lock.to_str().unwrap());
    near("delivered", r.delivered(), 50.0);
    let t = e["mean_threads"].as_f64().unwrap();
    assert!((2.0..=3.5).contains(&t), "mean waiting threads {t}");
    // The generator giving up (a 2 s timeout at three times the lock's rate): from the first
    // second a timeout ends an arrival the 2xx fall while the workers keep the lock's pace, so
    // the per-request figures and the lock's rate are over the requests served at the rate
    // before (the lock's 50/s by construction), not over the window's 2xx.
    let r = builtin(g.master.pid(), &g.url(), 150.0, &["--timeout", "2s"]);
    r.assert_cause(&["lock.contention"]);
    let v = r.verdict();
    let gave_up = &v["given_up"];
    let served = gave_up["served_estimate"]
        .as_f64()
        .unwrap_or_else(|| panic!("no given_up: {v}"));
    let before = gave_up["delivered_before_per_s"].as_f64().unwrap();
    let window = r.r["run"]["window_s"].as_f64().unwrap();
    assert!(r.delivered() < before, "{v}");
    // The rate before over the whole window (that rate is rounded to a tenth in the JSON).
    assert!(
        (served - before * window).abs() <= 0.05 * window + 0.5,
        "{v}"
    );
    near("served per second", served / window, 50.0);
    let p = r.finding("lock.contention")["predicted"].as_str().unwrap();
    assert!(
        p.contains(&format!(
            "throughput stays near {:.0} req/s",
            served / window
        )),
        "{p}"
    );
}

/// A CPU-bound server on one thread (Node's event loop; one gunicorn sync worker) with two
/// CPUs to use: `cpu.one-core`, the runtime named, its ceiling the capacity wrk measured.
/// Node also started by a shell that does not exec it, the shell's pid given: the runtime is
/// the serving process's (it was read from the pid's executable, the shell, and the verdict
/// said "one worker thread serves every request"). Node again under `-- wrk`: the same verdict.
#[test]
fn one_thread_at_a_time_is_one_core_on_node_and_a_single_gunicorn_worker() {
    if !require_root("one_thread_at_a_time_is_one_core_on_node_and_a_single_gunicorn_worker") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-one-core");
    for family in ["node", "node under sh", "gunicorn"] {
        let start = || -> (u32, String, Box<dyn std::any::Any>) {
            match family {
                "node" => {
                    let s = AppServer::node(cwd.path(), Work::Cpu(2_000_000));
                    (s.proc.pid(), s.url(), Box::new(s))
                }
                "node under sh" => {
                    let s = AppServer::node_under_shell(cwd.path(), Work::Cpu(2_000_000));
                    (s.proc.pid(), s.url(), Box::new(s))
                }
                _ => {
                    let s = Gunicorn::start(cwd.path(), 1, Work::Cpu(200_000));
                    (s.master.pid(), s.url(), Box::new(s))
                }
            }
        };
        // The same instance, warmed (Node's JIT) for a second first: it keeps connections
        // alive or closes a few hundred, no TIME_WAIT of note.
        let (pid, url, _keep) = start();
        wrk_capacity(&url, 4, 1);
        let cap = wrk_capacity(&url, 4, 3).rps;
        let r = builtin(pid, &url, 2.0 * cap, &[]);
        assert_eq!(
            r.assert_cause(&["cpu.one-core"]),
            "cpu.one-core",
            "{family}"
        );
        let e = &r.finding("cpu.one-core")["evidence"];
        let runtime = e["runtime"].as_str().unwrap_or("");
        assert!(
            runtime.contains(if family.starts_with("node") {
                "Node.js"
            } else {
                "one worker thread"
            }),
            "{family}: runtime {runtime:?}"
        );
        // The capacity measured again once the run's backlog has drained: a CPU-bound
        // server's capacity moves with the host's speed (what the hypervisor steals) within
        // minutes; wrk read Node at 127/s before a run that delivered 166/s once. Both
        // measurements bound it.
        let after = capacity_after(&url, 4);
        in_band(&format!("{family}: delivered"), r.delivered(), cap, after);
        if family != "node" {
            continue;
        }
        // The same under the user's closed loop (`-- wrk -c8`): its connections kept alive,
        // no accept queue forms and one core of two is not saturated; the one thread busy
        // with no other to serve is the cap, and the verdict is the open loop's (it read "no
        // ceiling" beside a cpu.one-core warning).
        let w = under_wrk(pid, &url, 8);
        assert_eq!(w.assert_cause(&["cpu.one-core"]), "cpu.one-core");
        w.assert_capped_by("one-thread-busy", "node under wrk");
        in_band("node under wrk: delivered", w.delivered(), cap, after);
    }
}

/// A CPU-bound gunicorn (4 workers) pinned to CPU 1 while a busy loop spins on CPU 0: its
/// capacity is the one CPU it may use, and it is at it — `cpu.saturated`, no trap, the run
/// trusted (the loop ran on a CPU the server may not use).
#[test]
fn a_pinned_cpu_bound_server_is_saturated_on_the_cpu_it_may_use() {
    if !require_root("a_pinned_cpu_bound_server_is_saturated_on_the_cpu_it_may_use") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-pinned");
    let _hog = CpuHog::start(60, Some(0));
    let start = || {
        let g = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
        assert!(pin_tree(g.master.pid(), &[1]) >= 5);
        g
    };
    let (g, cap) = measured_then_fresh(start, Gunicorn::url, |u| wrk_capacity(u, 8, 3).rps);
    let r = builtin(g.master.pid(), &g.url(), 2.0 * cap, &[]);
    assert_eq!(r.cause(), Some("cpu.saturated"), "{}", r.verdict());
    assert_eq!(r.verdict()["capped"], true);
    assert_eq!(r.verdict()["trusted"], true);
    let f = r.finding("cpu.saturated");
    assert_eq!(f["severity"], "info");
    assert_eq!(
        f["evidence"]["allowed_cpus"].as_f64(),
        Some(1.0),
        "{}",
        f["evidence"]
    );
    assert!(
        f["title"].as_str().unwrap().starts_with("no trap"),
        "{}",
        f["title"]
    );
    reaches_capacity("delivered", r.delivered(), cap, capacity_after(&g.url(), 8));
    assert_eq!(r.code, if r.trusted_measurement() { 0 } else { 3 });
}

/// Worker threads pinned one by one to CPU 1 (`taskset -p -c 1 TID`, a server's per-thread
/// CPU map), the process's main thread left free: OpenJDK's HttpServer, four pool threads, a
/// CPU loop a request, offered twice what wrk measured so pinned. The process's own mask (its
/// main thread's) still says both CPUs; the threads doing the work may use one.
/// `cpu.saturated` on that one CPU, as for pinned processes (it read `cpu.run-queue`, "3.06
/// runnable ... behind the server's own threads", on two).
#[test]
fn threads_pinned_one_by_one_under_a_free_main_thread_are_saturated_on_their_cpu() {
    if !require_root(
        "threads_pinned_one_by_one_under_a_free_main_thread_are_saturated_on_their_cpu",
    ) {
        return;
    }
    let _s = serial();
    let j = JavaPool::start_cpu(4, 3);
    let (pid, url) = (j.proc.pid(), j.url());
    // Warmed (the JIT; the pool's threads exist once requests came), then pinned.
    wrk_capacity(&url, 8, 2);
    assert!(pin_threads_but_main(pid, &[1]) >= 4);
    assert_eq!(cpus_allowed(pid), "0-1", "the main thread stays free");
    let cap = wrk_capacity(&url, 8, 3).rps;
    let r = builtin(pid, &url, 2.0 * cap, &[]);
    assert_eq!(r.cause(), Some("cpu.saturated"), "{}", r.verdict());
    let f = r.finding("cpu.saturated");
    assert_eq!(f["evidence"]["allowed_cpus"].as_f64(), Some(1.0), "{f:#}");
    assert!(!r.ids().contains(&"cpu.run-queue".to_string()));
    reaches_capacity("delivered", r.delivered(), cap, capacity_after(&url, 8));
}

/// A pool of more threads than CPUs, pinned and flooded: Apache's event MPM (Debian's
/// settings, 25 threads a process) serving a static file from CPU 1, offered a quarter more
/// than wrk measured there. No thread is at work half its time — each waits its turn among
/// many, idle on its condition variable most of it — but its threads want the one CPU 14
/// times over: `cpu.saturated` on the CPU it may use, no trap (it read "no rule explains" when
/// only a thread at work half its time made a server CPU-bound).
#[test]
fn a_thread_pool_larger_than_its_cpu_is_saturated_on_it() {
    if !require_root("a_thread_pool_larger_than_its_cpu_is_saturated_on_it") {
        return;
    }
    let _s = serial();
    let start = || {
        let a = Apache::event_static(&[("index.html", b"hello\n")]);
        assert!(pin_tree(a.apache.pid(), &[1]) >= 50);
        a
    };
    let url = |a: &Apache| a.url("/index.html");
    let (a, cap) = measured_then_fresh(start, url, |u| wrk_capacity(u, 8, 3).rps);
    let r = builtin(a.apache.pid(), &url(&a), 1.25 * cap, &[]);
    assert_eq!(r.cause(), Some("cpu.saturated"), "{}", r.verdict());
    assert_eq!(r.verdict()["capped"], true);
    let f = r.finding("cpu.saturated");
    assert_eq!(f["evidence"]["allowed_cpus"].as_f64(), Some(1.0), "{f:#}");
    assert!(f["title"].as_str().unwrap().starts_with("no trap"), "{f:#}");
    // Its threads wanted the CPU more than once over (on it or runnable, per second).
    let t = &r.r["run"]["thread_seconds"];
    let window = r.r["run"]["window_s"].as_f64().unwrap();
    let demand = (t["on_cpu"].as_f64().unwrap() + t["run_queue"].as_f64().unwrap()) / window;
    assert!(demand >= 1.0, "{t}");
    reaches_capacity("delivered", r.delivered(), cap, capacity_after(&url(&a), 8));
    assert_eq!(r.code, if r.trusted_measurement() { 0 } else { 3 });
}

/// The same pool with only its workers pinned: Apache's event MPM (two processes of 25
/// threads that stay), each worker thread pinned to CPU 1 one by one (`taskset -p`) while each
/// process's listener and main threads may use both (a tenth of the work under wrk: 34 ticks
/// of 328). Flooded at a quarter over what wrk measured: `cpu.saturated` on the one CPU the
/// work may use (it read `cpu.run-queue` FAIL "beyond what the CPUs' 83 % use makes" when
/// every CPU a working thread may use counted). One run, its verdict whatever the generator
/// says of itself: offered 20,000/s on the CPU the listeners share with it, it falls behind
/// most runs. Beside it, the same at half what the flood delivered while a busy loop spins on
/// CPU 0, where the workers may not run: no cause, the loop no noise that matters.
#[test]
fn a_pools_workers_pinned_under_free_listeners_are_saturated_on_their_cpu() {
    if !require_root("a_pools_workers_pinned_under_free_listeners_are_saturated_on_their_cpu") {
        return;
    }
    let _s = serial();
    let start = || {
        let a = Apache::event_static_fixed(&[("index.html", b"hello\n")], 2);
        assert_eq!(pin_threads_in_futex(a.apache.pid(), &[1]), 50);
        a
    };
    let url = |a: &Apache| a.url("/index.html");
    let (a, cap) = measured_then_fresh(start, url, |u| wrk_capacity(u, 8, 3).rps);
    let rate = format!("{:.0}", 1.25 * cap);
    let r = run(
        a.apache.pid(),
        &["--url", &url(&a), "--rate", &rate, "--duration", WINDOW],
    );
    assert_eq!(r.cause(), Some("cpu.saturated"), "{}", r.verdict());
    assert_eq!(r.verdict()["capped"], true);
    let f = r.finding("cpu.saturated");
    assert_eq!(f["evidence"]["allowed_cpus"].as_f64(), Some(1.0), "{f:#}");
    assert!(!r.ids().contains(&"cpu.run-queue".to_string()));
    drop(a);
    // Half of what the flood delivered: the capacity under this generator's 512 connections
    // (8,600-10,500/s), not wrk's eight (16,000-22,000/s), half of which was a ceiling.
    let half = r.delivered() / 2.0;
    let a = start();
    let _hog = CpuHog::start(20, Some(0));
    let r = builtin(a.apache.pid(), &url(&a), half, &[]);
    r.assert_clean();
    // At most said: the first second's new connections can give the listeners, free on CPU 0,
    // half the work (that second judged on both CPUs, the loop 1.0 of them), never a warning.
    let noise = r.findings_where(|f| f["id"] == "host.noise" && f["severity"] != "info");
    assert!(noise.is_empty(), "{noise:?}");
}

/// The same with only the workers pinned (to CPU 1, each by `taskset -p`, as nginx's
/// `worker_cpu_affinity` does) under a master that may use both CPUs, while a busy loop spins
/// on CPU 0: gunicorn (4 CPU-bound sync workers) and php-fpm behind nginx (4 workers, a
/// CPU-heavy script). The CPUs the server's work may use are its workers', not its idle
/// master's: `cpu.saturated` on one CPU, no trap, the loop not noise.
#[test]
fn workers_pinned_under_a_free_master_are_saturated_on_their_cpu() {
    if !require_root("workers_pinned_under_a_free_master_are_saturated_on_their_cpu") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-pinned-workers");
    let _hog = CpuHog::start(90, Some(0));
    let pin_workers = |master: u32| {
        let workers = trapdetect_e2e::servers::children_of(master);
        assert_eq!(workers.len(), 4, "{workers:?}");
        for w in workers {
            assert!(pin_tree(w, &[1]) >= 1);
        }
    };
    for family in ["gunicorn", "php-fpm"] {
        let start = || -> (u32, String, Box<dyn std::any::Any>) {
            match family {
                "gunicorn" => {
                    let g = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
                    pin_workers(g.master.pid());
                    (g.master.pid(), g.url(), Box::new(g))
                }
                _ => {
                    let s = PhpStack::start(
                        cwd.path(),
                        4,
                        "<?php $x = 0; for ($i = 0; $i < 400000; $i++) { $x += $i % 7; } echo $x, \"\\n\";",
                    );
                    pin_workers(s.fpm.pid());
                    (s.fpm.pid(), s.url(), Box::new(s))
                }
            }
        };
        let ((pid, url, _keep), cap) =
            measured_then_fresh(start, |s| s.1.clone(), |u| wrk_capacity(u, 8, 3).rps);
        eprintln!("{family}: capacity with its workers on CPU 1: {cap:.0}/s");
        let r = builtin(pid, &url, 2.0 * cap, &[]);
        assert_eq!(
            r.cause(),
            Some("cpu.saturated"),
            "{family}: {}",
            r.verdict()
        );
        assert_eq!(r.verdict()["trusted"], true, "{family}");
        let f = r.finding("cpu.saturated");
        assert_eq!(
            f["evidence"]["allowed_cpus"].as_f64(),
            Some(1.0),
            "{family}: {}",
            f["evidence"]
        );
        assert!(
            f["remedy"].as_str().unwrap().contains("widen its affinity"),
            "{family}: {}",
            f["remedy"]
        );
        let after = capacity_after(&url, 8);
        reaches_capacity(&format!("{family}: delivered"), r.delivered(), cap, after);
    }
}

/// CPU-bound servers that may use both CPUs while a busy loop takes one of them (gunicorn
/// with 4 workers; Go's net/http beside `yes > /dev/null`): the loop decides the ceiling —
/// `host.noise`, the run untrusted (exit 3), never "no trap". `yes` spends much of its time in
/// system calls, where the timer interrupts that wake Go's threads (its sleeps ran out) found
/// it: 1,085 wakeups counted as its doing made it a peer of the server, and the verdict was
/// `cpu.saturated`, "no trap", exit 0, at 5,221/s of a server that serves 8,268.
#[test]
fn a_cpu_hog_beside_a_cpu_bound_server_is_noise_that_decides() {
    if !require_root("a_cpu_hog_beside_a_cpu_bound_server_is_noise_that_decides") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-noise");
    let go = GoBinary::build();
    for family in ["gunicorn", "go"] {
        let start = || -> (u32, String, Box<dyn std::any::Any>) {
            match family {
                "gunicorn" => {
                    let s = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
                    (s.master.pid(), s.url(), Box::new(s))
                }
                _ => {
                    let s = AppServer::go(&go, cwd.path(), Work::Cpu(3_000_000));
                    (s.proc.pid(), s.url(), Box::new(s))
                }
            }
        };
        let ((pid, url, _keep), cap) =
            measured_then_fresh(start, |s| s.1.clone(), |u| wrk_capacity(u, 8, 3).rps);
        let (hog, comm) = match family {
            "gunicorn" => (CpuHog::start(30, None), "sh"),
            _ => (CpuHog::in_syscalls(30), "yes"),
        };
        let r = builtin(pid, &url, 2.0 * cap, &[]);
        drop(hog);
        assert_eq!(r.cause(), Some("host.noise"), "{family}: {}", r.verdict());
        assert_eq!(r.verdict()["trusted"], false, "{family}");
        let e = &r.finding("host.noise")["evidence"];
        assert_eq!(e["decides_verdict"], true, "{family}: {e}");
        assert!(
            e["busiest_others"].to_string().contains(comm),
            "{family}: the loop is named: {e}"
        );
        let stack = r.r["run"]["stack"].to_string();
        assert!(
            !stack.contains(comm),
            "{family}: the hog is no peer: {stack}"
        );
        assert_eq!(r.code, 3, "{family}");
    }
}

/// Worker descriptor limits: nginx's worker may open 64 descriptors, a Go server 64 (set on
/// the running process); 200 connections at once: the accepts fail with EMFILE, the worker
/// that failed is named with its table, and that is the cause.
#[test]
fn a_worker_out_of_descriptors_is_the_cause_on_nginx_and_go() {
    if !require_root("a_worker_out_of_descriptors_is_the_cause_on_nginx_and_go") {
        return;
    }
    let _s = serial();
    let n = StaticNginx::start_with(
        &[("index.html", b"hi\n")],
        StaticOptions {
            worker_rlimit_nofile: Some(64),
            ..Default::default()
        },
    );
    let worker = n.workers()[0];
    let r = under_wrk(n.nginx.pid(), &n.url("/index.html"), 200);
    let emfile = n.error_log().matches("(24: Too many open files)").count();
    assert!(emfile > 0, "nginx logged no EMFILE");
    r.assert_cause(&["net.fd-limit"]);
    let e = &r.finding("net.fd-limit")["evidence"];
    assert!(e["accept_emfile"].as_u64().unwrap() > 0, "{e}");
    assert_eq!(e["pid"], worker, "{e}");
    assert_eq!(e["soft_limit_fds"], 64, "{e}");
    drop(n);

    let go = GoBinary::build();
    let cwd = TempDir::new("verdict-fd");
    let s = AppServer::go(&go, cwd.path(), Work::Plain);
    let st = Command::new("prlimit")
        .args(["--pid", &s.proc.pid().to_string(), "--nofile=64:64"])
        .status()
        .unwrap();
    assert!(st.success());
    let r = under_wrk(s.proc.pid(), &s.url(), 200);
    r.assert_cause(&["net.fd-limit"]);
    let e = &r.finding("net.fd-limit")["evidence"];
    assert!(e["accept_emfile"].as_u64().unwrap() > 0, "{e}");
    assert_eq!(e["pid"], s.proc.pid(), "{e}");
    assert_eq!(e["soft_limit_fds"], 64, "{e}");
}

/// A generator that may open only 100 connections a second against servers that close every
/// connection (gunicorn's sync workers; `python3 -m http.server`), offered 400/s, far below
/// their capacity: the generator's budget is the cause, named with its flag, and the run is
/// untrusted (exit 3).
#[test]
fn the_generators_connect_pacing_is_never_the_servers_ceiling() {
    if !require_root("the_generators_connect_pacing_is_never_the_servers_ceiling") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-gen");
    std::fs::write(cwd.path().join("index.html"), "hi\n").unwrap();
    let g = Gunicorn::start(cwd.path(), 4, Work::Plain);
    let p = PyHttpServer::start(cwd.path());
    let targets = [
        (g.master.pid(), g.url()),
        (
            p.proc.pid(),
            format!("http://127.0.0.1:{}/index.html", p.port),
        ),
    ];
    for (pid, url) in targets {
        // A budget of 64 connections: the default's first burst (the whole budget, ~500 new
        // connections at once) is more concurrency than `python3 -m http.server` (a thread per
        // connection, a listen backlog of 5) serves with CPU to spare: one run in ten it spent
        // 1.4 cores on 175 req/s and the CPU was rightly the verdict. The pacing, which this
        // test is about, binds the same way with either budget.
        let r = builtin(
            pid,
            &url,
            400.0,
            &["--max-connect-rate", "100", "--max-connections", "64"],
        );
        assert_eq!(r.cause(), Some("gen.budget"), "{url}: {}", r.verdict());
        assert_eq!(r.verdict()["trusted"], false);
        let f = r.finding("gen.budget");
        assert!(
            f["remedy"].as_str().unwrap().contains("--max-connect-rate"),
            "{}",
            f["remedy"]
        );
        assert_eq!(f["evidence"]["flag"], "--max-connect-rate");
        assert_eq!(r.code, 3);
        // 100 new connections a second after a first burst of the whole budget: the
        // delivered rate is the pacing's.
        let burst = f["evidence"]["max_connections"].as_f64().unwrap();
        near("delivered", r.delivered(), 100.0 + burst / 5.0);
    }
}

/// Clean servers of every family at half the capacity wrk measured: no cause, exit 0 — and
/// the same with a CPU hog beside them, which takes CPU but does not decide anything (the
/// load was delivered).
/// A server that keeps connections alive (nginx, Node, Go; gunicorn's sync workers and
/// php-fpm's FastCGI close theirs) under the built-in generator's kept-alive pool builds up no
/// TIME_WAIT: the pool's connections, closed once (by the server's idle timeout, by the
/// generator at its end), are a burst counted as what it leaves, never a warning at half the
/// capacity (a clean Node server once warned "63.8 new per second, settling near 3,830").
fn no_time_wait_alarm_when_kept_alive(r: &Run, family: &str) {
    if !matches!(family, "nginx" | "node" | "go") {
        return;
    }
    let alarms = r.findings_where(|f| f["id"] == "net.time-wait" && f["severity"] != "info");
    assert!(alarms.is_empty(), "{family}: {alarms:#?}");
}

/// net.nagle: no server here writes a response in pieces on a socket with Nagle's algorithm
/// on (nginx, Node and Go set TCP_NODELAY; gunicorn and php-fpm close each connection).
fn no_held_tails(r: &Run, family: &str) {
    let held = r.findings_where(|f| f["id"] == "net.nagle");
    assert!(held.is_empty(), "{family}: {held:#?}");
}

/// A keep-alive server that writes each response's headers and body in two calls, Nagle's
/// algorithm on: the body waits unsent until the client acknowledges the headers, which the
/// client's kernel delays (Linux's delayed-ACK timer, 40 ms at least). Named on Java's
/// built-in HttpServer and on Python's http.server speaking HTTP/1.1, from the server's own
/// sockets (sock_diag's tcp_info: a tail under one segment unsent, a segment unacknowledged,
/// room in the window) in every second of the window, with the generator's service time at
/// the timer; the same servers with TCP_NODELAY hold nothing and answer in under a quarter of
/// it. 100 req/s is far below either server's capacity: the server is idle while it waits.
#[test]
fn a_response_held_for_the_clients_ack_is_named_on_java_and_python_and_not_with_nodelay() {
    const TEST: &str =
        "a_response_held_for_the_clients_ack_is_named_on_java_and_python_and_not_with_nodelay";
    if !require_root(TEST) {
        return;
    }
    let _s = serial();
    // Linux's TCP_DELACK_MIN (HZ/25 jiffies), µs.
    const DELACK_MIN_US: f64 = 40_000.0;
    for family in [SplitFamily::Java, SplitFamily::Python] {
        for nodelay in [false, true] {
            let s = SplitWriter::start(family, nodelay);
            let r = builtin(s.proc.pid(), &s.url(), 100.0, &[]);
            let p50 = r.r["load"]["service_time_2xx"]["p50_us"].as_f64().unwrap();
            eprintln!("{family:?} nodelay={nodelay}: service time p50 {p50:.0} µs");
            assert_eq!(
                r.cause(),
                None,
                "{family:?} nodelay={nodelay}: {:#}",
                r.verdict()
            );
            let said = r.verdict()["summary"]
                .as_str()
                .unwrap()
                .ends_with("until the client acknowledged (net.nagle)");
            assert_eq!(said, !nodelay, "{family:?}: {}", r.verdict()["summary"]);
            if nodelay {
                no_held_tails(&r, &format!("{family:?} with TCP_NODELAY"));
                assert!(p50 < DELACK_MIN_US / 4.0, "{family:?}: p50 {p50} µs");
                continue;
            }
            // Once: `run`'s sampler looks at the connections, the trace under it does not.
            let found = r.findings_where(|f| f["id"] == "net.nagle");
            assert_eq!(found.len(), 1, "{family:?}: {:#}", r.r["findings"]);
            let f = found[0];
            assert_eq!(f["severity"], "warn");
            let e = &f["evidence"];
            let read = e["seconds_read"].as_u64().unwrap();
            assert!(read >= 4, "{family:?}: {e:#}");
            assert_eq!(
                e["seconds_with_held_connections"], read,
                "{family:?}: {e:#}"
            );
            assert!(e["held_connections_max"].as_u64().unwrap() >= 1);
            assert!(
                e["held_connections_mean"].as_f64().unwrap()
                    <= e["connections_mean"].as_f64().unwrap()
            );
            // A timer set part way through a jiffy fires up to one jiffy early (10 ms at HZ=100).
            assert!(p50 >= 0.75 * DELACK_MIN_US, "{family:?}: p50 {p50} µs");
        }
    }
}

/// A JVM runs a dozen threads of its own beside the server's: JIT compiler threads woken
/// when a method is queued (a futex wait, as a worker queued on a lock makes), a periodic task
/// thread whose waits end as a request's `Thread.sleep` does, G1's and the JDK's service
/// threads. Counted as the server's, they were a pool of one's "9 workers" and "2.6 threads
/// waiting on a lock" (lock.contention, wrong). OpenJDK 17's HttpServer with one handler
/// thread sleeping 20 ms (50/s by construction) is a pool of one, under eBPF and under the
/// /proc sampling backend; eight threads sleeping
/// 20 ms inside one monitor are a lock (50/s as well); eight sleeping alone at 100/s (a
/// quarter of their 400/s) are clean.
#[test]
fn a_jvms_own_threads_are_neither_workers_nor_waiters() {
    if !require_root("a_jvms_own_threads_are_neither_workers_nor_waiters") {
        return;
    }
    let _s = serial();
    let s = JavaPool::start(1, 20, false);
    // One worker under eBPF and under the /proc sampling backend (there the launcher's two
    // threads, parked on a futex for the process's life, are no lock's waiters either).
    let pool_of_one = |extra: &[&str]| {
        let r = builtin(s.proc.pid(), &s.url(), 100.0, extra);
        assert_eq!(r.assert_cause(&["pool.too-small"]), "pool.too-small");
        assert_eq!(r.finding("pool.too-small")["evidence"]["workers"], 1);
        assert!(
            !r.ids().contains(&"lock.contention".to_string()),
            "{:?}",
            r.ids()
        );
        r
    };
    let r = pool_of_one(&[]);
    near("predicted", r.ceiling(), 50.0);
    near("delivered", r.delivered(), 50.0);
    JavaPool::assert_own_threads_named(&r.r["run"]["runtime_threads"]);
    let r = pool_of_one(&["--backend", "sample"]);
    assert_eq!(r.r["run"]["classes_method"], "sampled");
    drop(s);
    let s = JavaPool::start(8, 20, true);
    let r = builtin(s.proc.pid(), &s.url(), 100.0, &[]);
    assert_eq!(r.assert_cause(&["lock.contention"]), "lock.contention");
    near("delivered", r.delivered(), 50.0);
    drop(s);
    let s = JavaPool::start(8, 20, false);
    let r = builtin(s.proc.pid(), &s.url(), 100.0, &[]);
    r.assert_clean();
    assert!(
        r.findings_where(|f| f["severity"] != "info").is_empty(),
        "{:#}",
        r.r["findings"]
    );
}

/// lighttpd serving its docroot from a gocryptfs mount (Debian's encrypted FUSE filesystem;
/// the kernel caches its entries for a second): lighttpd's stat cache looks each file up about
/// once a second, not per request, so the mount costs the requests nothing however often the
/// kernel's cache expires. The mount is named as information, nothing warns, no cause, at
/// 3,000 req/s (a twentieth of wrk's capacity here, what the built-in generator keeps its
/// schedule at beside the server on two cores). It warned "cheaply now" before: a third of
/// its 35 lookups in 50,000 requests answered by the kernel's cache.
#[test]
fn a_server_caching_its_stats_on_a_caching_fuse_mount_is_not_warned() {
    if !require_root("a_server_caching_its_stats_on_a_caching_fuse_mount_is_not_warned") {
        return;
    }
    let _s = serial();
    let fs = Gocryptfs::mount(|m| {
        std::fs::create_dir_all(m.join("a/b/c")).unwrap();
        std::fs::write(m.join("a/b/c/page.html"), "<p>page</p>\n".repeat(40)).unwrap();
    });
    let l = Lighttpd::start(&fs.mount, "/a/b/c/page.html");
    let r = builtin(l.proc.pid(), &l.url("/a/b/c/page.html"), 3000.0, &[]);
    r.assert_clean();
    let on_mount = r.findings_where(|f| f["id"].as_str().unwrap().starts_with("fs."));
    assert!(!on_mount.is_empty(), "{:#}", r.r["findings"]);
    for f in on_mount {
        assert_eq!(f["severity"], "info", "{f:#}");
        assert_eq!(f["evidence"]["fs_type"], "fuse.gocryptfs", "{f:#}");
        assert_eq!(
            f["evidence"]["mount_point"],
            fs.mount.to_str().unwrap(),
            "{f:#}"
        );
        assert!(f["title"].as_str().unwrap().contains("negligible"), "{f:#}");
    }
}

#[test]
fn clean_servers_at_half_capacity_have_no_cause_even_beside_a_cpu_hog() {
    if !require_root("clean_servers_at_half_capacity_have_no_cause_even_beside_a_cpu_hog") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-clean");
    std::fs::write(cwd.path().join("index.html"), "hello\n").unwrap();
    let go = GoBinary::build();
    for family in [
        "gunicorn", "nginx", "node", "go", "php-fpm", "uwsgi", "apache",
    ] {
        let start = || -> (u32, String, Box<dyn std::any::Any>) {
            match family {
                "gunicorn" => {
                    let s = Gunicorn::start(cwd.path(), 4, Work::Plain);
                    (s.master.pid(), s.url(), Box::new(s))
                }
                "uwsgi" => {
                    let s = Uwsgi::start(cwd.path(), 4, Work::Plain);
                    (s.master.pid(), s.url(), Box::new(s))
                }
                "nginx" => {
                    let s = StaticNginx::start(&[("index.html", b"hello\n")]);
                    (s.nginx.pid(), s.url("/index.html"), Box::new(s))
                }
                "apache" => {
                    let s = Apache::event_static(&[("index.html", b"hello\n")]);
                    (s.apache.pid(), s.url("/index.html"), Box::new(s))
                }
                "node" => {
                    let s = AppServer::node(cwd.path(), Work::Plain);
                    (s.proc.pid(), s.url(), Box::new(s))
                }
                "go" => {
                    let s = AppServer::go(&go, cwd.path(), Work::Plain);
                    (s.proc.pid(), s.url(), Box::new(s))
                }
                _ => {
                    let s = PhpStack::start(cwd.path(), 4, "<?php echo \"ok\\n\";");
                    (s.fpm.pid(), s.url(), Box::new(s))
                }
            }
        };
        let ((pid, url, _keep), cap) =
            measured_then_fresh(start, |s| s.1.clone(), |u| wrk_capacity(u, 8, 3).rps);
        // Half the capacity, and no more than the built-in generator keeps its schedule at on
        // these two cores beside the server and the tracer, a new connection per request
        // (gunicorn's half is 6,000/s, nginx's 42,000/s: there the generator says it shaped
        // the load, rightly, exit 3, or the CPUs it shares with the server run out).
        let rate = (0.5 * cap).min(3_000.0);
        let r = builtin(pid, &url, rate, &[]);
        eprintln!("{family}: capacity {cap:.0}/s, offered {rate:.0}/s");
        r.assert_clean();
        no_time_wait_alarm_when_kept_alive(&r, family);
        no_held_tails(&r, family);
        if matches!(family, "gunicorn" | "node") {
            // Half the capacity measured beside the hog (it takes one of the two CPUs), on a
            // fresh instance on its own port: the first run's TIME_WAIT stays behind.
            drop(_keep);
            let hog = CpuHog::start(40, None);
            let ((pid, url, _keep), cap) =
                measured_then_fresh(start, |s| s.1.clone(), |u| wrk_capacity(u, 8, 3).rps);
            let rate = (0.5 * cap).min(3_000.0);
            let r = builtin(pid, &url, rate, &[]);
            drop(hog);
            eprintln!("{family} beside a CPU hog");
            r.assert_clean();
            no_time_wait_alarm_when_kept_alive(&r, family);
            no_held_tails(&r, family);
        }
    }
}

/// Kept-alive connections the server itself ends after N requests (nginx with
/// `keepalive_requests 50`): the built-in generator keeps alive, so TIME_WAIT builds up from the
/// server's limit, and the remedy names it with the requests per connection measured, not "use
/// keep-alive in the load generator". A clean server otherwise: no cause; and the same beside a
/// CPU hog. Apache prefork + mod_php (its default MaxKeepAliveRequests of 100) names it the
/// same by hand, but not reliably in a test: in 4 runs of 13, a few requests at the load's end
/// waited 7.9 s (most likely for a prefork child, each holding an idle kept-alive connection up
/// to its 5 s KeepAliveTimeout), the trace's window ran to 13 s, and the TIME_WAIT rate over
/// it (161 in 13 s) fell under the warning.
#[test]
fn kept_alive_connections_ended_by_the_servers_limit_are_named_alone_and_beside_a_hog() {
    if !require_root(
        "kept_alive_connections_ended_by_the_servers_limit_are_named_alone_and_beside_a_hog",
    ) {
        return;
    }
    let _s = serial();
    let limit = 50.0;
    // Beside a CPU hog taking one of the two CPUs too: still clean, still the limit (3,000/s is
    // far under half nginx's capacity beside it).
    for hog in [false, true] {
        let _hog = hog.then(|| CpuHog::start(40, None));
        let family = if hog {
            "nginx beside a CPU hog"
        } else {
            "nginx"
        };
        let s = StaticNginx::start_with(
            &[("index.html", b"hello\n")],
            StaticOptions {
                keepalive_requests: Some(50),
                ..Default::default()
            },
        );
        let r = builtin(s.nginx.pid(), &s.url("/index.html"), 3_000.0, &[]);
        r.assert_clean();
        let f = r.finding("net.time-wait");
        let e = &f["evidence"];
        let conns = e["new_connections_during_trace"].as_f64().unwrap();
        let reqs = e["requests_during_trace"].as_f64().unwrap();
        // Each connection served `limit` requests, but the window cuts those at its ends: one
        // still open at its end had not served them all yet, one accepted before it (the
        // generator's first connections, opened as the trace starts) served some uncounted
        // accept (Apache by hand: 15,000 requests on 149 connections, 100.7). Within
        // a tenth of the limit, on average.
        let each = reqs / conns;
        assert!(
            (each - limit).abs() <= 0.1 * limit,
            "{family}: {reqs} requests on {conns} connections"
        );
        let remedy = f["remedy"].as_str().unwrap();
        assert!(
            remedy.starts_with(&format!(
                "connections are kept alive but end after about {} requests each",
                each.round()
            )),
            "{family}: {remedy}"
        );
        assert!(
            !remedy.contains("use keep-alive in the load generator"),
            "{remedy}"
        );
    }
}

/// gunicorn (4 sync workers, a CPU loop per request) moved with its whole tree into a cgroup
/// of its own with 0.2 CPU: the quota is the cause (php-fpm's twin is in run.rs), with the
/// quota read back and the server's threads held to it.
#[test]
fn a_cpu_quota_caps_gunicorn_and_is_the_cause() {
    const TEST: &str = "a_cpu_quota_caps_gunicorn_and_is_the_cause";
    if !require_root(TEST) {
        return;
    }
    let _s = serial();
    let Some(cg) = CpuCgroup::create(20_000, 100_000) else {
        trapdetect_e2e::skip(TEST, "no usable cpu controller");
        return;
    };
    let cwd = TempDir::new("verdict-quota");
    let g = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
    for p in tree(g.master.pid()) {
        std::fs::write(cg.procs_file(), p.to_string()).unwrap();
    }
    assert!(cg.pids().contains(&(g.master.pid() as i32)));
    let r = builtin(g.master.pid(), &g.url(), 150.0, &[]);
    r.assert_cause(&["cpu.quota"]);
    let e = &r.finding("cpu.quota")["evidence"];
    assert_eq!(e["quota_cpus"], 0.2, "{e}");
    assert_eq!(e["cgroup_dir"], cg.path().to_str().unwrap(), "{e}");
    // Held to the quota: the kernel hands it to each CPU in slices
    // (kernel.sched_cfs_bandwidth_slice_us), so a group can run up to a slice per CPU past it
    // in a period (0.237 cores here once, 119 % of 0.2); unthrottled, the four CPU-bound
    // workers would take both CPUs. The CPU time is the task clock's, which the quota is
    // charged in: on-CPU wall time less what the hypervisor stole (that time counted, this
    // group read 0.318-0.343 cores with 7-12 % of the host's CPU time stolen).
    let bound = trapdetect_e2e::cgroup::most_cores(0.2, 100_000.0);
    let tgt = e["target_cores"].as_f64().unwrap();
    assert!(tgt <= bound, "target cores {tgt} > {bound}: {e}");
    // The ceiling is what the quota granted: the quota, or once at its cap what the group
    // used, over the CPU time a request took.
    let granted = e["granted_cpus"].as_f64().unwrap();
    let throttled = e["throttled_share"].as_f64().unwrap();
    let expect = if throttled >= 0.5 || tgt >= 0.2 {
        tgt
    } else {
        0.2
    };
    assert!(
        (granted - expect).abs() <= 0.01,
        "granted {granted} vs {expect}: {e}"
    );
    let cpu_ms = e["cpu_ms_per_request"].as_f64().unwrap();
    near("predicted ceiling", r.ceiling(), granted * 1e3 / cpu_ms);
    near("delivered", r.delivered(), r.ceiling());
    drop(g);
    drop(cg);
}

/// The user's own `wrk -t2 -c64` on the two CPUs the server uses: against nginx (2 workers,
/// `reuseport`: without it one worker took all 64 connections once in four runs, and the
/// verdict was rightly `cpu.one-core`) serving a static file and Go's net/http, wrk spends a large share of those CPUs, and the
/// server's capacity is what it leaves: `cpu.saturated` says so (the generator's cores in its
/// evidence, the remedy to give it CPUs of its own), where it read "no trap ... nothing to fix
/// in the environment". Against gunicorn's CPU-bound workers the same wrk takes a few
/// hundredths of a CPU: no trap, as before.
#[test]
fn a_load_generator_on_the_servers_cpus_takes_its_share_of_the_capacity() {
    if !require_root("a_load_generator_on_the_servers_cpus_takes_its_share_of_the_capacity") {
        return;
    }
    let _s = serial();
    let cwd = TempDir::new("verdict-generator-share");
    let go = GoBinary::build();
    for family in ["nginx", "go", "gunicorn"] {
        let (pid, url, _server): (u32, String, Box<dyn std::any::Any>) = match family {
            "nginx" => {
                let s = StaticNginx::start_with(
                    &[("index.html", b"hello\n")],
                    StaticOptions {
                        workers: 2,
                        reuseport: true,
                        ..Default::default()
                    },
                );
                (s.nginx.pid(), s.url("/index.html"), Box::new(s))
            }
            "go" => {
                let s = AppServer::go(&go, cwd.path(), Work::Plain);
                (s.proc.pid(), s.url(), Box::new(s))
            }
            _ => {
                let s = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
                (s.master.pid(), s.url(), Box::new(s))
            }
        };
        // Two wrk threads: one beside nginx's two workers left the CPUs 1.67-1.72 of 2
        // busy (CI rehearsal of 2026-12-07), at the 85 % that reads them saturated, and the
        // verdict, rightly, said only that wrk had starved; two keep them full.
        let r = under_wrk_threads(pid, &url, 2, 64);
        eprintln!("{family}: {}", r.verdict());
        let f = r.finding("cpu.saturated");
        let e = &f["evidence"];
        let taken = e["generator_cores"].as_f64().unwrap();
        let allowed = e["allowed_cpus"].as_f64().unwrap();
        let title = f["title"].as_str().unwrap();
        if family == "gunicorn" {
            assert!(taken < 0.1 * allowed, "{family}: {e}");
            assert!(title.starts_with("no trap"), "{family}: {title}");
            assert_eq!(r.cause(), Some("cpu.saturated"), "{}", r.verdict());
            continue;
        }
        assert!(taken >= 0.1 * allowed, "{family}: {e}");
        assert!(
            title.contains(&format!("{taken:.2} of them the load generator's"))
                && title.ends_with("the server is at the capacity the generator leaves it"),
            "{family}: {title}"
        );
        assert!(
            f["remedy"]
                .as_str()
                .unwrap()
                .starts_with("run the load generator on CPUs of its own"),
            "{family}: {f}"
        );
        assert_eq!(f["severity"], "info", "{family}");
    }
}
