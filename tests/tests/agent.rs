//! `trapdetect agent` against a real Prometheus (Debian's `prometheus`, started by the test on
//! a free loopback port, scraping every second): two php-fpm stacks, one whose working
//! directory is 7 levels deep in a slow FUSE mount (the planted trap) and a clean twin on
//! ext4, each under light load and watched by its own agent. What Prometheus stored is what
//! the agent's own report of the same window says: the findings, the exit code, lookups per
//! request on each filesystem, the request rate; and `--once` names the same trap.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::Value;
use trapdetect_e2e::{
    IGNORE_NET, TempDir, bin, ci, free_port, require_root, run_bounded,
    servers::{PhpStack, Proc, http_get},
    skip,
    slowfs::SlowFs,
    trapdetect, wait_until,
};

/// Percent-encodes a PromQL query for a URL.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus's instant query at `time` (Unix s): each series' labels and value.
fn query(port: u16, q: &str, time: f64) -> Vec<(BTreeMap<String, String>, f64)> {
    let path = format!("/api/v1/query?query={}&time={time:.3}", encode(q));
    let (status, body) = http_get(port, &path).expect("query Prometheus");
    let v: Value = serde_json::from_slice(&body).expect("Prometheus answers JSON");
    assert_eq!(status, 200, "{q}: {v}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            let value = r["value"][1].as_str().unwrap().parse().unwrap();
            (labels, value)
        })
        .collect()
}

/// One value of a query that must give exactly one series.
fn single(port: u16, q: &str, time: f64) -> f64 {
    let r = query(port, q, time);
    assert_eq!(r.len(), 1, "{q}: {r:?}");
    r[0].1
}

/// Every report an agent serves, by its window number, gathered until `done`.
fn collect_reports(
    port: u16,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<u64, Value>> {
    std::thread::spawn(move || {
        let mut seen = BTreeMap::new();
        while !done.load(Ordering::SeqCst) {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = s.write_all(b"GET /report HTTP/1.0\r\n\r\n");
                let mut raw = vec![];
                let _ = s.read_to_end(&mut raw);
                let text = String::from_utf8_lossy(&raw);
                if let Some((head, body)) = text.split_once("\r\n\r\n")
                    && let Some(n) = head
                        .lines()
                        .find_map(|l| l.strip_prefix("X-Trapdetect-Window: "))
                        .and_then(|n| n.trim().parse::<u64>().ok())
                {
                    seen.entry(n)
                        .or_insert_with(|| serde_json::from_str(body).expect("report JSON"));
                }
            }
            std::thread::sleep(Duration::from_millis(150));
        }
        seen
    })
}

fn agent(pid: u32, port: u16, test_id: &str, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(bin());
    cmd.args(["agent", "--pid", &pid.to_string(), "--window", "3s"])
        .args(extra)
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--test-id",
            test_id,
        ])
        .args(IGNORE_NET)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    Proc::spawn("trapdetect agent", &mut cmd)
}

fn prometheus(dir: &Path, port: u16, agents: &[u16]) -> Proc {
    let targets: Vec<String> = agents
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: trapdetect\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let data = dir.join("data");
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--web.enable-remote-write-receiver")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let p = Proc::spawn("prometheus", &mut cmd);
    wait_until("Prometheus ready", Duration::from_secs(30), || {
        matches!(http_get(port, "/-/ready"), Ok((200, _)))
    });
    p
}

/// What Prometheus holds at `at` for the series `sel` (scraped from the agent at `instance`,
/// or pushed by it) is the agent's own report of that window, `served[n]`, `n` being the
/// window count Prometheus holds: the findings, the exit code, the request rate, the lookups
/// per request on each filesystem, the threads on average in each state. Returns that report.
fn same_as_report<'a>(
    port: u16,
    sel: &str,
    instance: Option<u16>,
    at: f64,
    served: &'a BTreeMap<u64, Value>,
) -> &'a Value {
    let n = single(port, &format!("trapdetect_agent_windows{sel}"), at) as u64;
    let r = served
        .get(&n)
        .unwrap_or_else(|| panic!("{sel}: window {n} not served (saw {:?})", served.keys()));
    let stored: BTreeSet<(String, String)> = query(port, &format!("trapdetect_finding{sel}"), at)
        .into_iter()
        .map(|(l, v)| {
            assert_eq!(v, 1.0);
            assert_eq!(l["target"], r["target"]["comm"].as_str().unwrap());
            match instance {
                Some(p) => assert_eq!(l["instance"], format!("127.0.0.1:{p}")),
                None => assert!(!l.contains_key("instance"), "pushed: {l:?}"),
            }
            (l["id"].clone(), l["severity"].clone())
        })
        .collect();
    assert_eq!(stored, findings(r), "{sel}: window {n}");
    let one = |m: &str| single(port, &format!("{m}{sel}"), at);
    assert_eq!(
        one("trapdetect_exit_code"),
        r["exit_code"].as_f64().unwrap(),
        "{sel}"
    );
    assert_eq!(
        one("trapdetect_requests_per_second"),
        r["requests"]["rate_per_s"].as_f64().unwrap(),
        "{sel}"
    );
    assert_eq!(one("trapdetect_agent_up"), 1.0, "{sel}");
    let lookups: BTreeMap<String, f64> =
        query(port, &format!("trapdetect_lookups_per_request{sel}"), at)
            .into_iter()
            .map(|(l, v)| (l["mount_point"].clone(), v))
            .collect();
    let want: BTreeMap<String, f64> = r["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| {
            Some((
                f["mount_point"].as_str()?.to_string(),
                f["lookups_per_request"].as_f64()?,
            ))
        })
        .collect();
    assert!(!want.is_empty(), "{sel}: {r}");
    assert_eq!(lookups, want, "{sel}: window {n}");
    let states: BTreeMap<String, f64> = query(port, &format!("trapdetect_threads{sel}"), at)
        .into_iter()
        .map(|(l, v)| (l["state"].clone(), v))
        .collect();
    let t = &r["threads"];
    let w = t["window_s"].as_f64().unwrap();
    let want: BTreeMap<String, f64> = t["thread_seconds"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), (v.as_f64().unwrap() / w * 1e3).round() / 1e3))
        .collect();
    // The syscall latency on each filesystem, bucket by bucket (le compared as a number:
    // Prometheus may write it its own way).
    let le = |s: &str| -> u64 {
        if s == "+Inf" {
            f64::INFINITY.to_bits()
        } else {
            s.parse::<f64>().unwrap().to_bits()
        }
    };
    let buckets: BTreeMap<(String, u64), f64> = query(
        port,
        &format!("trapdetect_syscall_duration_seconds_bucket{sel}"),
        at,
    )
    .into_iter()
    .map(|(l, v)| ((l["mount_point"].clone(), le(&l["le"])), v))
    .collect();
    let mut want_buckets = BTreeMap::new();
    for f in r["filesystems"].as_array().unwrap() {
        let h = &f["syscall_latency"];
        let Some(calls) = h["calls"].as_f64() else {
            continue;
        };
        let m = f["mount_point"].as_str().unwrap().to_string();
        for b in h["le_us"].as_array().unwrap() {
            let ns = (b[0].as_f64().unwrap() * 1e3).round();
            want_buckets.insert((m.clone(), (ns / 1e9).to_bits()), b[1].as_f64().unwrap());
        }
        want_buckets.insert((m, f64::INFINITY.to_bits()), calls);
    }
    assert!(!want_buckets.is_empty(), "{sel}: {r}");
    assert_eq!(buckets, want_buckets, "{sel}: window {n}");
    // On a CPU, waiting for one, and the nine classes of blocking.
    assert_eq!(want.len(), 11, "{sel}: {t}");
    assert_eq!(states, want, "{sel}: window {n}");
    r
}

/// Where the threads' time went adds up. No more thread-seconds than the window's threads
/// had (php-fpm's master and two workers: each thread's time counted once), and no less but
/// for the time before each one's first switch. Blocked in path
/// lookups and file I/O no longer than those calls took on the mounts, as the syscall probes
/// timed them: on the slow mount at least half of it (a FUSE round trip blocks the caller
/// while the daemon sleeps), on the clean twin's ext4 under a thread-hundredth.
fn threads_add_up(r: &Value, slow: bool) {
    let t = &r["threads"];
    let w = t["window_s"].as_f64().unwrap();
    assert_eq!(t["threads"], 3, "{t}");
    let ts = |k: &str| t["thread_seconds"][k].as_f64().unwrap();
    let total: f64 = t["thread_seconds"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(
        total <= 3.0 * w * 1.01,
        "{total} thread-seconds in {w} s: {t}"
    );
    // A thread counts from its first switch after the probes attached: the workers serve
    // every 50 ms, the master wakes for its timer at least once a second.
    assert!(
        total >= 3.0 * w - 1.0,
        "{total} thread-seconds in {w} s: {t}"
    );
    let requests = r["requests"]["count"].as_f64().unwrap();
    let on_mounts: f64 = r["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["syscall_ms_per_request"].as_f64())
        .sum::<f64>()
        * requests
        / 1e3
        * (w / r["window_s"].as_f64().unwrap());
    let blocked = ts("path") + ts("file_io");
    if slow {
        assert!(
            blocked <= on_mounts * 1.05 && blocked >= 0.5 * on_mounts,
            "blocked on the mounts {blocked} thread-s, their calls took {on_mounts}: {t}"
        );
    } else {
        assert!(blocked < 0.01 * w, "{blocked}: {t}");
    }
}

/// The findings of a report as (id, severity).
fn findings(r: &Value) -> BTreeSet<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn prometheus_stores_what_the_agents_report_of_the_same_window_says() {
    if !require_root("prometheus_stores_what_the_agents_report_of_the_same_window_says") {
        return;
    }
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            !ci(),
            "prometheus is not installed (cargo xtask setup installs it)"
        );
        skip("agent", "no prometheus binary");
        return;
    }
    let dir = TempDir::new("agent");
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let slow = PhpStack::start(&deep, 2, "<?php echo \"ok\\n\";");
    let clean_dir = TempDir::new("agent-clean");
    let clean = PhpStack::start(clean_dir.path(), 2, "<?php echo \"ok\\n\";");
    // 40 requests a second on each until the end of the test (at most 90 s).
    let stop = Arc::new(AtomicBool::new(false));
    let loads = [
        steady(slow.port, stop.clone()),
        steady(clean.port, stop.clone()),
    ];
    // `--once`: one window printed as JSON, the trap named.
    let once = trapdetect(
        &[
            &[
                "agent",
                "--pid",
                &slow.fpm.pid().to_string(),
                "--once",
                "--json",
            ],
            &["--window", "3s"][..],
            &IGNORE_NET[..],
        ]
        .concat(),
        Duration::from_secs(30),
    );
    let once_json: Value = serde_json::from_slice(&once.stdout).expect("--once prints JSON");
    assert_eq!(once.status.code(), Some(1), "{once_json}");
    assert_eq!(once_json["schema"], "trapdetect.report/1");
    assert!(
        findings(&once_json).contains(&("fs.cwd-slow".into(), "fail".into())),
        "{once_json}"
    );
    let (a_slow, a_clean, prom_port) = (free_port(), free_port(), free_port());
    // The trap's agent also pushes each window to Prometheus's remote-write receiver.
    let write = format!("http://127.0.0.1:{prom_port}/api/v1/write");
    let _agents = [
        agent(slow.fpm.pid(), a_slow, "slow", &["--remote-write", &write]),
        agent(clean.fpm.pid(), a_clean, "clean", &[]),
    ];
    let done = Arc::new(AtomicBool::new(false));
    let collectors = [
        collect_reports(a_slow, done.clone()),
        collect_reports(a_clean, done.clone()),
    ];
    let _prom = prometheus(dir.path(), prom_port, &[a_slow, a_clean]);
    // Until Prometheus holds each agent's second window, scraped (the first window starts
    // before it scrapes) and, from the trap's agent, pushed.
    let windows = |sel: &str| {
        query(
            prom_port,
            &format!("trapdetect_agent_windows{sel}"),
            unix_now(),
        )
        .iter()
        .filter(|(_, v)| *v >= 2.0)
        .count()
    };
    wait_until(
        "two windows of each agent in Prometheus",
        Duration::from_secs(45),
        || windows("{job=\"trapdetect\"}") == 2 && windows("{job=\"\"}") == 1,
    );
    let at = unix_now();
    // Let the collectors see the window Prometheus holds, then stop them.
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::SeqCst);
    let reports: Vec<BTreeMap<u64, Value>> =
        collectors.into_iter().map(|c| c.join().unwrap()).collect();
    let scraped = |id: &str| format!("{{test_id=\"{id}\",job=\"trapdetect\"}}");
    let pushed = "{test_id=\"slow\",job=\"\"}".to_string();
    for (sel, instance, served, slow) in [
        (scraped("slow"), Some(a_slow), &reports[0], true),
        (scraped("clean"), Some(a_clean), &reports[1], false),
        (pushed, None, &reports[0], true),
    ] {
        threads_add_up(same_as_report(prom_port, &sel, instance, at, served), slow);
    }
    // The planted trap is found, and only there; the clean twin's window passes.
    let fs_found = |test_id: &str| -> BTreeSet<(String, String)> {
        query(
            prom_port,
            &format!(
                "trapdetect_finding{{test_id=\"{test_id}\",job=\"trapdetect\",id=~\"fs\\\\..*\"}}"
            ),
            at,
        )
        .into_iter()
        .map(|(l, _)| (l["id"].clone(), l["severity"].clone()))
        .collect()
    };
    assert!(
        fs_found("slow").contains(&("fs.cwd-slow".into(), "fail".into())),
        "{:?}",
        fs_found("slow")
    );
    assert!(fs_found("clean").is_empty(), "{:?}", fs_found("clean"));
    assert_eq!(
        single(
            prom_port,
            "trapdetect_exit_code{test_id=\"clean\",job=\"trapdetect\"}",
            at
        ),
        0.0
    );
    let slow_mount = fs.mount.to_str().unwrap().to_string();
    let on_mount = query(
        prom_port,
        "trapdetect_lookups_per_request{test_id=\"slow\",job=\"trapdetect\",fs_type=\"fuse.slowfs\"}",
        at,
    );
    assert_eq!(on_mount.len(), 1, "{on_mount:?}");
    assert_eq!(on_mount[0].0["mount_point"], slow_mount);
    drop(_agents);
    stop.store(true, Ordering::SeqCst);
    for l in loads {
        assert!(l.join().unwrap() > 0, "the load reached nothing");
    }
}

/// 40 requests a second on fresh connections to `port` until `stop` (or 90 s); the 200s.
fn steady(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut ok = 0;
        for i in 0..3_600u32 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let due = start + Duration::from_secs_f64(f64::from(i) / 40.0);
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            if matches!(http_get(port, "/"), Ok((200, _))) {
                ok += 1;
            }
        }
        ok
    })
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A target that is never found: the window is counted as tracing nothing, waited out, and
/// the agent ends with 3 (nothing measured), saying why; SIGTERM ends a serving agent at once
/// with 0 and its port closed.
#[test]
fn no_target_is_said_and_sigterm_stops_at_once() {
    if !require_root("no_target_is_said_and_sigterm_stops_at_once") {
        return;
    }
    let t = Instant::now();
    let out = trapdetect(
        &[
            "agent",
            "--comm",
            "no-such-srv-td",
            "--window",
            "1s",
            "--windows",
            "2",
        ],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].starts_with("trapdetect agent: window 1: no trace: "),
        "{err}"
    );
    assert!(lines[0].contains("no-such-srv-td"), "{err}");
    assert!(
        lines[1].starts_with("trapdetect agent: window 2: no trace: "),
        "{err}"
    );
    assert_eq!(
        lines[2],
        "trapdetect agent: no window traced the target (2 tried): nothing was measured"
    );
    // Each window that found nothing was waited out: 2 s at least.
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());

    let stack = PhpStack::start(TempDir::new("agent-term").path(), 1, "<?php echo 1;");
    let port = free_port();
    let mut a = agent(stack.fpm.pid(), port, "term", &[]);
    wait_until("the agent serving", Duration::from_secs(10), || {
        matches!(http_get(port, "/metrics"), Ok((200, _)))
    });
    // Mid-window (the agent's windows are 3 s): the window ends, the agent stops.
    std::thread::sleep(Duration::from_millis(1_500));
    // SIGTERM, and 5 s for it to exit before SIGKILL (which would leave no exit code).
    let status = a.terminate().expect("running");
    assert_eq!(status.code(), Some(0), "stopped after a window traced");
    assert!(
        http_get(port, "/metrics").is_err(),
        "still serving after it stopped"
    );
}

/// A server named by `--comm` that restarts is followed: the agent's windows trace the first
/// process, the window it dies in or the next finds no target (counted, not hidden), and the
/// windows after trace the new process; the time not covered is exported.
#[test]
fn a_restarted_server_is_followed_by_name() {
    if !require_root("a_restarted_server_is_followed_by_name") {
        return;
    }
    let dir = TempDir::new("agent-restart");
    // A name no other process has: python3 run through a symlink (its comm is the link's
    // name; it finds its library through the link's target).
    // The interpreter itself, not a wrapper script (pyenv's shims are shell scripts).
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap()
        .stdout;
    let python = std::fs::canonicalize(String::from_utf8(exe).unwrap().trim()).unwrap();
    let name = "tdrestartsrv";
    let link = dir.path().join(name);
    std::os::unix::fs::symlink(&python, &link).unwrap();
    let http = free_port();
    let start = || {
        let c = Proc::spawn(
            name,
            Command::new(&link)
                .args([
                    "-m",
                    "http.server",
                    &http.to_string(),
                    "--bind",
                    "127.0.0.1",
                ])
                .current_dir(dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_until("the server up", Duration::from_secs(10), || {
            http_get(http, "/").is_ok()
        });
        c
    };
    let mut first = start();
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args(["agent", "--comm", name, "--window", "1s", "-q"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(IGNORE_NET)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let _agent = Proc::spawn("trapdetect agent", &mut cmd);
    let traced_pid = || -> Option<u32> {
        let (status, body) = http_get(port, "/report").ok()?;
        let v: Value = serde_json::from_slice(&body)
            .ok()
            .filter(|_| status == 200)?;
        v["target"]["pid"].as_u64().map(|p| p as u32)
    };
    let p1 = first.pid();
    wait_until(
        "a window of the first server",
        Duration::from_secs(20),
        || traced_pid() == Some(p1),
    );
    first.stop();
    std::thread::sleep(Duration::from_millis(1_500));
    let second = start();
    let p2 = second.pid();
    assert_ne!(p1, p2);
    wait_until(
        "a window of the restarted server",
        Duration::from_secs(20),
        || traced_pid() == Some(p2),
    );
    let (_, m) = http_get(port, "/metrics").unwrap();
    let m = String::from_utf8_lossy(&m);
    let value = |metric: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(&format!("{metric}{{")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{metric} in\n{m}"))
    };
    assert_eq!(value("trapdetect_agent_up"), 1.0, "{m}");
    assert!(m.contains(&format!("target=\"{name}\"")), "{m}");
    // The 1.5 s without a server: a window found none (or ended with it), and the time
    // between the two processes' windows was not covered.
    assert!(value("trapdetect_agent_windows_failed") >= 1.0, "{m}");
    assert!(value("trapdetect_agent_unobserved_seconds") >= 1.0, "{m}");
    assert!(value("trapdetect_agent_windows") >= 2.0, "{m}");
}

/// deploy/daemonset.yaml validates against Kubernetes' own schemas (kubernetes-validate from
/// PyPI, strict: an unknown field fails, as a misspelt one here does), and the capabilities it
/// adds are enough: the agent run with exactly those in its bounding set, every other one
/// dropped, traces the planted trap with eBPF.
#[test]
fn the_daemonset_validates_and_its_capabilities_suffice() {
    if !require_root("the_daemonset_validates_and_its_capabilities_suffice") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest = root.join("deploy/daemonset.yaml");
    let tool = root.join("target/kubeval/bin/kubernetes-validate");
    if !tool.exists() {
        assert!(
            !ci(),
            "{} missing (cargo xtask setup installs it)",
            tool.display()
        );
        skip("agent", "no kubernetes-validate (cargo xtask setup)");
        return;
    }
    let validate = |file: &Path| {
        run_bounded(
            Command::new(&tool).arg("--strict").arg(file),
            Duration::from_secs(60),
        )
    };
    let out = validate(&manifest);
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("passed for resource daemonset/trapdetect-agent"),
        "{said}"
    );
    let text = std::fs::read_to_string(&manifest).unwrap();
    let dir = TempDir::new("agent-manifest");
    let typo = dir.path().join("typo.yaml");
    std::fs::write(
        &typo,
        text.replace("readOnlyRootFilesystem", "readOnlyRootFilesytem"),
    )
    .unwrap();
    assert_eq!(
        validate(&typo).status.code(),
        Some(1),
        "a misspelt field must fail"
    );
    // The capabilities the container adds, as setpriv names them.
    let add = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("add: ["))
        .and_then(|l| l.strip_suffix(']'))
        .expect("capabilities: add: [...]");
    let caps: Vec<String> = add
        .split(',')
        .map(|c| format!("+{}", c.trim().to_ascii_lowercase()))
        .collect();
    assert_eq!(caps, ["+bpf", "+perfmon", "+sys_ptrace"]);
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let slow = PhpStack::start(&deep, 2, "<?php echo \"ok\\n\";");
    let stop = Arc::new(AtomicBool::new(false));
    let load = steady(slow.port, stop.clone());
    let pid = slow.fpm.pid().to_string();
    // The container's view: the node's tracefs mounted (the manifest's hostPath; a node
    // mounts it at boot, as systemd does; this machine's init does not), in a mount namespace
    // of its own so nothing stays mounted here; then only the manifest's capabilities.
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(
            "mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing \
             || exit 97; exec \"$@\"",
        )
        .args(["sh", "setpriv", "--bounding-set"])
        .arg(format!("-all,{}", caps.join(",")))
        .arg("--")
        .arg(bin())
        .args(["agent", "--pid", &pid, "--once", "--json", "--window", "3s"])
        .args(IGNORE_NET);
    let out = run_bounded(&mut cmd, Duration::from_secs(30));
    stop.store(true, Ordering::SeqCst);
    assert!(load.join().unwrap() > 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(97), "mounting tracefs: {err}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(r["measurement"]["backend"]["name"], "ebpf", "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        findings(&r).contains(&("fs.cwd-slow".into(), "fail".into())),
        "{}",
        r["findings"]
    );
}
