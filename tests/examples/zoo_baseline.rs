//! Issue 22's baseline: runs one scenario of the server zoo against today's `trapdetect run`
//! and measures its ground truth in the same run (a twin without the trap, wrk's closed-loop
//! capacity, slowfs' own counters, `ss`, /proc limits and descriptors of every process, the
//! CPUs' busy time). Writes `<out>/<name>.json` (trapdetect's report), `<name>.cmd` (the exact
//! command line) and `<name>.truth` (the ground truth, JSON) for each run.
//!
//!     cargo build --release -p trapdetect-e2e --example zoo_baseline
//!     sudo target/release/examples/zoo_baseline OUT_DIR SCENARIO...
//!
//! Scenarios: a1 a4 b c d e f g h i j (issue 22's eleven, `all`), and k (a pool of one under
//! the built-in load, wrk and hey), l (flock contention).
//!
//! Not a test: it asserts nothing and writes what it measured, for a person (or the e2e tests
//! made from it) to judge. Figures move with whatever else runs on the machine: every truth
//! file has the CPUs' busy share during its run.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use trapdetect_e2e::{
    TempDir, bin,
    servers::{PhpOptions, PhpStack, StaticNginx, StaticOptions},
    slowfs::SlowFs,
    zoo::{
        AppServer, CpuHog, GoBinary, Gunicorn, Work, fd_count, nofile_limit, pin_tree, sqlite_db,
        tcp_states, tree, wrk_capacity,
    },
};

const DURATION: &str = "8s";

struct Out {
    dir: PathBuf,
}

/// What was sampled while one trapdetect run went on.
#[derive(Default)]
struct Samples {
    /// Per pid: (most descriptors seen, soft RLIMIT_NOFILE, comm).
    fds: BTreeMap<u32, (usize, Option<u64>, String)>,
    /// Per CPU: busy fraction over the run.
    cpu_busy: Vec<f64>,
    /// TIME-WAIT sockets on the watched ports, most seen.
    time_wait_max: BTreeMap<u16, usize>,
}

fn cpu_times() -> Vec<(u64, u64)> {
    std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            let idle = v[3] + v[4];
            (v.iter().take(8).sum::<u64>(), idle)
        })
        .collect()
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// wrk's closed-loop capacity, as truth-file JSON.
fn capacity(url: &str, conns: u32, secs: u32) -> Value {
    let w = wrk_capacity(url, conns, secs);
    json!({"wrk": format!("wrk -t1 -c{conns} -d{secs}s {url}"), "rps": w.rps, "requests": w.requests, "errors": w.errors})
}

/// Starts a server twice: the first instance's closed-loop capacity (wrk with `conns`
/// connections for 5 s; with `fs`, slowfs' counters around it), then a fresh instance on its
/// own port for the run, so the run's port starts without the capacity run's TIME_WAIT.
fn after_capacity<S>(
    start: impl Fn() -> S,
    url: impl Fn(&S) -> String,
    conns: u32,
    fs: Option<&SlowFs>,
) -> (S, Value) {
    let first = start();
    let cap = match fs {
        Some(fs) => capacity_on(fs, &url(&first), conns, 5),
        None => capacity(&url(&first), conns, 5),
    };
    drop(first);
    (start(), cap)
}

fn fuse_total(fs: &SlowFs) -> (u64, Value) {
    let s = fs.stats();
    let t = s
        .as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    (t, s)
}

fn fuse_delta(a: &Value, b: &Value) -> Value {
    let mut m = serde_json::Map::new();
    if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
        for (k, v) in b {
            let d = v.as_u64().unwrap_or(0) - a.get(k).and_then(Value::as_u64).unwrap_or(0);
            if d > 0 {
                m.insert(k.clone(), d.into());
            }
        }
    }
    Value::Object(m)
}

/// wrk's capacity with slowfs' counters around it: FUSE requests per request.
fn capacity_on(fs: &SlowFs, url: &str, conns: u32, secs: u32) -> Value {
    let (a, sa) = fuse_total(fs);
    let mut c = capacity(url, conns, secs);
    let (b, sb) = fuse_total(fs);
    let reqs = c["requests"].as_u64().unwrap_or(1).max(1);
    c["fuse_requests"] = (b - a).into();
    c["fuse_per_request"] = ((b - a) as f64 / reqs as f64).into();
    c["fuse_by_op"] = fuse_delta(&sa, &sb);
    c
}

fn quote(a: &str) -> String {
    if a.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
    {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

impl Out {
    /// Runs `trapdetect args`, sampling `root`'s tree and `ports` meanwhile; writes the
    /// report, the command line, and `truth` with the samples added.
    fn run(
        &self,
        name: &str,
        root: u32,
        ports: &[u16],
        args: &[String],
        mut truth: Value,
    ) -> Value {
        let cmdline = std::iter::once(bin().display().to_string())
            .chain(args.iter().cloned())
            .map(|a| quote(&a))
            .collect::<Vec<_>>()
            .join(" ");
        std::fs::write(self.dir.join(format!("{name}.cmd")), format!("{cmdline}\n")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Samples::default()));
        let (stop2, samples2, ports2) = (stop.clone(), samples.clone(), ports.to_vec());
        let sampler = std::thread::spawn(move || {
            let c0 = cpu_times();
            while !stop2.load(Ordering::Relaxed) {
                {
                    let mut s = samples2.lock().unwrap();
                    for p in tree(root) {
                        let n = fd_count(p);
                        let e = s.fds.entry(p).or_insert((0, nofile_limit(p), comm(p)));
                        e.0 = e.0.max(n);
                    }
                    for &port in &ports2 {
                        let tw = tcp_states(port).get("TIME-WAIT").copied().unwrap_or(0);
                        let e = s.time_wait_max.entry(port).or_insert(0);
                        *e = (*e).max(tw);
                    }
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            let c1 = cpu_times();
            samples2.lock().unwrap().cpu_busy = c0
                .iter()
                .zip(&c1)
                .map(|(a, b)| {
                    let tot = (b.0 - a.0) as f64;
                    if tot > 0.0 {
                        1.0 - (b.1 - a.1) as f64 / tot
                    } else {
                        0.0
                    }
                })
                .collect();
        });
        let t0 = Instant::now();
        let out = Command::new(bin()).args(args).output().expect("trapdetect");
        let secs = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        std::fs::write(self.dir.join(format!("{name}.json")), &out.stdout).unwrap();
        std::fs::write(self.dir.join(format!("{name}.stderr")), &out.stderr).unwrap();
        let code = out.status.code().unwrap_or(-1);
        let s = samples.lock().unwrap();
        truth["trapdetect_exit"] = code.into();
        truth["trapdetect_wall_s"] = format!("{secs:.1}").into();
        truth["processes"] = s
            .fds
            .iter()
            .map(|(p, (n, lim, c))| json!({"pid": p, "comm": c, "fds_max": n, "nofile": lim}))
            .collect();
        truth["cpu_busy_during_run"] = s
            .cpu_busy
            .iter()
            .map(|b| format!("{:.0}%", b * 100.0))
            .collect();
        truth["time_wait_max_during_run"] = s
            .time_wait_max
            .iter()
            .map(|(p, n)| (p.to_string(), Value::from(*n)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        for &port in ports {
            truth[format!("tcp_states_after_port_{port}")] = json!(tcp_states(port));
        }
        std::fs::write(
            self.dir.join(format!("{name}.truth")),
            serde_json::to_string_pretty(&truth).unwrap() + "\n",
        )
        .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        println!("== {name} (exit {code}, {secs:.1} s): {cmdline}");
        for f in r["findings"].as_array().into_iter().flatten() {
            let nums: Vec<String> = f["evidence"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| {
                    k.contains("ceiling") || k.contains("delivered") || k.contains("observed_rps")
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            println!(
                "   {} {} [{}] | {}",
                f["severity"].as_str().unwrap_or(""),
                f["id"].as_str().unwrap_or(""),
                nums.join(" "),
                f["title"].as_str().unwrap_or("")
            );
        }
        if r.is_null() {
            println!("   stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        println!("   truth: {}", serde_json::to_string(&truth).unwrap());
        r
    }

    /// Sets `key` in the truth file of run `name` (a figure known only after the run).
    fn amend(&self, name: &str, key: &str, value: Value) {
        let p = self.dir.join(format!("{name}.truth"));
        let mut t: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        t[key] = value;
        std::fs::write(&p, serde_json::to_string_pretty(&t).unwrap() + "\n").unwrap();
    }

    /// The built-in open loop at `rate`.
    // One call per run, each with its own target, rate, ports and flags: a struct would only
    // rename the arguments.
    #[allow(clippy::too_many_arguments)]
    fn builtin(
        &self,
        name: &str,
        pid: u32,
        url: &str,
        rate: f64,
        ports: &[u16],
        extra: &[&str],
        truth: Value,
    ) -> Value {
        let mut args: Vec<String> = [
            "run",
            "--pid",
            &pid.to_string(),
            "--url",
            url,
            "--rate",
            &format!("{}", rate.round() as u64),
            "--duration",
            DURATION,
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut truth = truth;
        truth["offered_per_s"] = (rate.round() as u64).into();
        self.run(name, pid, ports, &args, truth)
    }

    /// `-- wrk -t1 -cN -d7s URL`.
    fn wrk(
        &self,
        name: &str,
        pid: u32,
        url: &str,
        conns: u32,
        ports: &[u16],
        truth: Value,
    ) -> Value {
        let args: Vec<String> = [
            "run",
            "--pid",
            &pid.to_string(),
            "--duration",
            "10s",
            "--json",
            "--",
            "wrk",
            "-t1",
            &format!("-c{conns}"),
            "-d7s",
            url,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.run(name, pid, ports, &args, truth)
    }

    /// `--load-results hey.csv -- sh -c 'exec hey -z 7s -c N -o csv URL > hey.csv'`.
    fn hey(
        &self,
        name: &str,
        pid: u32,
        url: &str,
        conns: u32,
        ports: &[u16],
        truth: Value,
    ) -> Value {
        let file = self.dir.join(format!("{name}.hey.csv"));
        std::fs::write(&file, "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n").unwrap();
        let sh = format!(
            "exec hey -z 7s -c {conns} -o csv {url} > {}",
            file.display()
        );
        let args: Vec<String> = [
            "run",
            "--pid",
            &pid.to_string(),
            "--duration",
            "10s",
            "--load-results",
            file.to_str().unwrap(),
            "--json",
            "--",
            "sh",
            "-c",
            &sh,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        self.run(name, pid, ports, &args, truth)
    }
}

/// A server under test: its pid as given to trapdetect, the URL loaded, its port.
struct Target {
    pid: u32,
    url: String,
    port: u16,
}

/// Which load drives a run.
#[derive(Clone, Copy)]
enum Load {
    /// The built-in open loop at this rate.
    Builtin(f64),
    /// `-- wrk -t1 -c8 -d7s`.
    Wrk,
    /// A `hey -c 8 -o csv` file (`--load-results`).
    Hey,
}

impl Out {
    /// One run of `load` at `t`, with slowfs' counters around it when `fs` is given.
    fn drive(
        &self,
        name: &str,
        t: &Target,
        load: Load,
        fs: Option<&SlowFs>,
        truth: Value,
    ) -> Value {
        let before = fs.map(fuse_total);
        let r = match load {
            Load::Builtin(rate) => self.builtin(name, t.pid, &t.url, rate, &[t.port], &[], truth),
            Load::Wrk => self.wrk(name, t.pid, &t.url, 8, &[t.port], truth),
            Load::Hey => self.hey(name, t.pid, &t.url, 8, &[t.port], truth),
        };
        if let (Some(fs), Some(before)) = (fs, before) {
            add_fuse(self, name, &r, before, fuse_total(fs));
        }
        r
    }
}

/// The built-in load at `rate`, then `-- wrk` and a hey file: `prefix`, `prefix-wrk`,
/// `prefix-hey`.
fn every_load(o: &Out, prefix: &str, t: &Target, rate: f64, fs: Option<&SlowFs>, truth: &Value) {
    for (suffix, load) in [
        ("", Load::Builtin(rate)),
        ("-wrk", Load::Wrk),
        ("-hey", Load::Hey),
    ] {
        o.drive(&format!("{prefix}{suffix}"), t, load, fs, truth.clone());
    }
}

/// The truth of a server trapped on slowfs (200 µs per operation): its capacity with slowfs'
/// counters, its twin's on ext4, and the ceiling the daemon's delay alone would allow.
fn slow_truth(scenario: String, cap: Value, twin_cap: Value) -> Value {
    let per_request = cap["fuse_per_request"].as_f64().unwrap_or(0.0);
    json!({
        "scenario": scenario,
        "capacity_trapped_wrk": cap, "capacity_twin_ext4_wrk": twin_cap,
        "theoretical_ceiling_per_s": 1e6 / 200.0 / per_request.max(1e-9),
    })
}

fn template(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("templates/page.html"), "<p>page</p>\n".repeat(40)).unwrap();
}

fn nginx_pid(dir: &Path) -> u32 {
    std::fs::read_to_string(dir.join("nginx.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// (a) gunicorn sync, `workers` workers, a template read by relative path, cwd 7 deep in
/// slowfs (200 µs per op); twin on ext4.
fn scenario_a(o: &Out, workers: u32) {
    let name = format!("a{workers}");
    let fs = SlowFs::mount(200, |b| template(&b.join("d1/d2/d3/d4/d5/d6/d7")));
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let work = Work::ReadFile("templates/page.html".into());
    let ext4 = TempDir::new("zoo-a-twin");
    template(ext4.path());
    let twin = Gunicorn::start(ext4.path(), workers, work.clone());
    let twin_cap = capacity(&twin.url(), 2 * workers, 5);
    drop(twin);
    // Capacity on a separate instance (its own port), so the run's target port starts
    // without the capacity run's TIME_WAIT.
    let (g, cap) = after_capacity(
        || Gunicorn::start(&deep, workers, work.clone()),
        |s| s.url(),
        2 * workers,
        Some(&fs),
    );
    let rate = 2.0 * cap["rps"].as_f64().unwrap();
    let base = slow_truth(
        format!(
            "gunicorn sync {workers} worker(s), template read by relative path, cwd 7 deep in slowfs 200 us/op"
        ),
        cap,
        twin_cap,
    );
    let t = Target {
        pid: g.master.pid(),
        url: g.url(),
        port: g.port,
    };
    if workers == 4 {
        every_load(o, &name, &t, rate, Some(&fs), &base);
    } else {
        o.drive(&name, &t, Load::Builtin(rate), Some(&fs), base.clone());
    }
    drop(g);
    let twin = Gunicorn::start(ext4.path(), workers, work);
    o.builtin(
        &format!("{name}-twin"),
        twin.master.pid(),
        &twin.url(),
        rate,
        &[twin.port],
        &[],
        json!({"scenario": "twin of a on ext4 at the same rate"}),
    );
}

/// Adds the FUSE requests counted by slowfs during a run to its truth file.
fn add_fuse(o: &Out, name: &str, r: &Value, (a, sa): (u64, Value), (b, sb): (u64, Value)) {
    let window = r["run"]["window_s"].as_f64().unwrap_or(8.0);
    o.amend(name, "fuse_requests_during_run", (b - a).into());
    o.amend(name, "fuse_by_op_during_run", fuse_delta(&sa, &sb));
    let per_s = format!("{:.0}", (b - a) as f64 / window);
    o.amend(name, "fuse_per_s_during_run", per_s.into());
    println!(
        "   fuse during run: {} ({:.0}/s)",
        b - a,
        (b - a) as f64 / window
    );
}

/// (b) nginx serving a file from slowfs (docroot 4 deep).
fn scenario_b(o: &Out) {
    let fs = SlowFs::mount(200, |b| template(&b.join("d1/d2/d3/d4")));
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 4);
    let ext4 = TempDir::new("zoo-b-twin");
    template(ext4.path());
    let opts = |d: &Path| StaticOptions {
        docroot: Some(d.to_path_buf()),
        ..Default::default()
    };
    let twin = StaticNginx::start_with(&[("templates/page.html", b"")], opts(ext4.path()));
    let url_twin = twin.url("/templates/page.html");
    let twin_cap = capacity(&url_twin, 8, 5);
    drop(twin);
    let (n, cap) = after_capacity(
        || StaticNginx::start_with(&[("templates/page.html", b"")], opts(&deep)),
        |s| s.url("/templates/page.html"),
        8,
        Some(&fs),
    );
    let url = n.url("/templates/page.html");
    let rate = 2.0 * cap["rps"].as_f64().unwrap();
    let base = slow_truth(
        "nginx static, file read from slowfs (docroot 4 deep, 200 us/op)".into(),
        cap,
        twin_cap,
    );
    let t = Target {
        pid: n.nginx.pid(),
        url: url.clone(),
        port: n.port,
    };
    every_load(o, "b", &t, rate, Some(&fs), &base);
    drop(n);
    let twin = StaticNginx::start_with(&[("templates/page.html", b"")], opts(ext4.path()));
    let url_twin = twin.url("/templates/page.html");
    o.builtin(
        "b-twin",
        twin.nginx.pid(),
        &url_twin,
        rate,
        &[twin.port],
        &[],
        json!({"scenario": "twin of b on ext4 at the same rate"}),
    );
}

/// (c) nginx -> php-fpm over TCP, no upstream keep-alive, at a high rate.
fn scenario_c(o: &Out) {
    let cwd = TempDir::new("zoo-c");
    let tcp = PhpOptions {
        listen_tcp: true,
        ..Default::default()
    };
    let (stack, cap) = after_capacity(
        || PhpStack::start_with(cwd.path(), 4, "<?php echo \"ok\\n\";", tcp.clone()),
        |s| s.url(),
        16,
        None,
    );
    let fpm_port = stack.fpm_port.unwrap();
    let rate = 0.7 * cap["rps"].as_f64().unwrap();
    let before = json!({"fpm_port": fpm_port, "nginx_port": stack.port, "tcp_states_before_fpm_port": tcp_states(fpm_port)});
    let mut base = json!({
        "scenario": "nginx -> php-fpm over TCP 127.0.0.1 without upstream keep-alive (4 workers), 0.7 x capacity",
        "capacity_wrk": cap,
    });
    base["before"] = before;
    let nginx = nginx_pid(stack.dir.path());
    o.builtin(
        "c",
        nginx,
        &stack.url(),
        rate,
        &[fpm_port, stack.port],
        &[],
        base.clone(),
    );
    o.builtin(
        "c-fpm",
        stack.fpm.pid(),
        &stack.url(),
        rate,
        &[fpm_port, stack.port],
        &[],
        base,
    );
    drop(stack);
    let cwd2 = TempDir::new("zoo-c-twin");
    let twin = PhpStack::start(cwd2.path(), 4, "<?php echo \"ok\\n\";");
    o.builtin(
        "c-twin",
        nginx_pid(twin.dir.path()),
        &twin.url(),
        rate,
        &[twin.port],
        &[],
        json!({"scenario": "twin of c: php-fpm on a unix socket"}),
    );
}

/// (d) nginx whose worker may open 64 descriptors.
fn scenario_d(o: &Out) {
    let n = StaticNginx::start_with(
        &[("index.html", b"hi\n")],
        StaticOptions {
            worker_rlimit_nofile: Some(64),
            ..Default::default()
        },
    );
    let url = n.url("/index.html");
    let emfile = |n: &StaticNginx| n.error_log().matches("(24: Too many open files)").count();
    let base = json!({
        "scenario": "nginx static, worker_rlimit_nofile 64 (master keeps its limit)",
        "master": {"pid": n.nginx.pid(), "nofile": nofile_limit(n.nginx.pid()), "fds": fd_count(n.nginx.pid())},
        "workers": n.workers().iter().map(|w| json!({"pid": w, "nofile": nofile_limit(*w), "fds": fd_count(*w)})).collect::<Vec<_>>(),
    });
    let pid = n.nginx.pid();
    for name in ["d", "d-noka", "d-wrk"] {
        let e0 = emfile(&n);
        let truth = base.clone();
        match name {
            "d" => o.builtin(name, pid, &url, 5000.0, &[n.port], &[], truth),
            "d-noka" => o.builtin(
                name,
                pid,
                &url,
                3000.0,
                &[n.port],
                &["--no-keepalive"],
                truth,
            ),
            _ => o.wrk(name, pid, &url, 200, &[n.port], truth),
        };
        let logged = emfile(&n) - e0;
        o.amend(name, "emfile_logged_during_run", logged.into());
        println!("   EMFILE logged: {logged}");
    }
}

/// (e) a CPU-bound gunicorn (4 workers) pinned to CPU 1, a hog on CPU 0.
fn scenario_e(o: &Out) {
    let cwd = TempDir::new("zoo-e");
    let c = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
    let free = capacity(&c.url(), 8, 5);
    pin_tree(c.master.pid(), &[1]);
    let pinned_alone = capacity(&c.url(), 8, 5);
    let _hog = CpuHog::start(120, Some(0));
    std::thread::sleep(Duration::from_millis(300));
    let pinned_hog = capacity(&c.url(), 8, 5);
    drop(c);
    let g = Gunicorn::start(cwd.path(), 4, Work::Cpu(100_000));
    pin_tree(g.master.pid(), &[1]);
    let rate = 2.0 * pinned_hog["rps"].as_f64().unwrap();
    let base = json!({
        "scenario": "gunicorn 4 sync workers, CPU loop 100k iterations, pinned to CPU 1 of 0-1, busy loop pinned on CPU 0",
        "capacity_unpinned_no_hog_wrk": free, "capacity_pinned_no_hog_wrk": pinned_alone,
        "capacity_pinned_with_hog_wrk": pinned_hog,
    });
    o.builtin("e", g.master.pid(), &g.url(), rate, &[g.port], &[], base);
}

/// (f) clean servers at half their capacity, then with a CPU hog beside them.
fn scenario_f(o: &Out) {
    let cwd = TempDir::new("zoo-f");
    let (g, cap) = after_capacity(
        || Gunicorn::start(cwd.path(), 4, Work::Plain),
        |s| s.url(),
        8,
        None,
    );
    let rate = 0.5 * cap["rps"].as_f64().unwrap();
    let base = json!({"scenario": "gunicorn 4 sync workers, plain answer, ext4, half capacity", "capacity_wrk": cap});
    o.builtin(
        "f-gunicorn",
        g.master.pid(),
        &g.url(),
        rate,
        &[g.port],
        &[],
        base.clone(),
    );
    // The same rate with the generator's connect pacing lifted: does its default bind?
    let mut t = base.clone();
    t["scenario"] = "as f-gunicorn, --max-connect-rate 100000".into();
    o.builtin(
        "f-gunicorn-lifted",
        g.master.pid(),
        &g.url(),
        rate,
        &[g.port],
        &["--max-connect-rate", "100000"],
        t,
    );
    {
        let _hog = CpuHog::start(60, None);
        let mut t = base.clone();
        t["scenario"] = "as f-gunicorn, with an unpinned busy loop on the host".into();
        o.builtin(
            "f-gunicorn-hog",
            g.master.pid(),
            &g.url(),
            rate,
            &[g.port],
            &[],
            t,
        );
    }
    drop(g);
    let (n, cap) = after_capacity(
        || StaticNginx::start(&[("index.html", b"hello\n")]),
        |s| s.url("/index.html"),
        8,
        None,
    );
    let url = n.url("/index.html");
    let rate = 0.5 * cap["rps"].as_f64().unwrap();
    let base = json!({"scenario": "nginx static on ext4, half capacity", "capacity_wrk": cap});
    o.builtin(
        "f-nginx",
        n.nginx.pid(),
        &url,
        rate,
        &[n.port],
        &[],
        base.clone(),
    );
    let _hog = CpuHog::start(60, None);
    let mut t = base;
    t["scenario"] = "as f-nginx, with an unpinned busy loop on the host".into();
    o.builtin("f-nginx-hog", n.nginx.pid(), &url, rate, &[n.port], &[], t);
}

/// (g) gunicorn (4 workers) querying an SQLite database on slowfs.
fn scenario_g(o: &Out) {
    let fs = SlowFs::mount(200, |b| {
        std::fs::create_dir_all(b.join("data")).unwrap();
        sqlite_db(&b.join("data/app.db"), 1000);
    });
    let db = fs.mount.join("data/app.db");
    let ext4 = TempDir::new("zoo-g");
    sqlite_db(&ext4.path().join("app.db"), 1000);
    let twin = Gunicorn::start(ext4.path(), 4, Work::Sqlite(ext4.path().join("app.db")));
    let twin_cap = capacity(&twin.url(), 8, 5);
    drop(twin);
    let (g, cap) = after_capacity(
        || Gunicorn::start(ext4.path(), 4, Work::Sqlite(db.clone())),
        |s| s.url(),
        8,
        Some(&fs),
    );
    let rate = 2.0 * cap["rps"].as_f64().unwrap();
    let base = slow_truth("gunicorn 4 sync workers, SQLite SELECT per request on a db file in slowfs (200 us/op), cwd on ext4".into(), cap, twin_cap);
    let t = Target {
        pid: g.master.pid(),
        url: g.url(),
        port: g.port,
    };
    o.drive("g", &t, Load::Builtin(rate), Some(&fs), base);
}

/// (h) php-fpm (4 workers, unix socket behind nginx) with its cwd 7 deep in slowfs, under the
/// built-in load, `-- wrk` and a hey CSV.
fn scenario_h(o: &Out) {
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let ext4 = TempDir::new("zoo-h");
    let twin = PhpStack::start(ext4.path(), 4, "<?php echo \"ok\\n\";");
    let twin_cap = capacity(&twin.url(), 8, 5);
    drop(twin);
    let (stack, cap) = after_capacity(
        || PhpStack::start(&deep, 4, "<?php echo \"ok\\n\";"),
        |s| s.url(),
        8,
        Some(&fs),
    );
    let rate = 2.0 * cap["rps"].as_f64().unwrap();
    let base = slow_truth(
        "php-fpm 4 workers on a unix socket behind nginx, cwd 7 deep in slowfs (200 us/op)".into(),
        cap,
        twin_cap,
    );
    let t = Target {
        pid: stack.fpm.pid(),
        url: stack.url(),
        port: stack.port,
    };
    every_load(o, "h", &t, rate, Some(&fs), &base);
}

/// (i) gunicorn sync (closes every connection) above 2,048 new connections/s, below capacity.
fn scenario_i(o: &Out) {
    let cwd = TempDir::new("zoo-i");
    let (g, cap) = after_capacity(
        || Gunicorn::start(cwd.path(), 4, Work::Plain),
        |s| s.url(),
        8,
        None,
    );
    let c = cap["rps"].as_f64().unwrap();
    let rate = (0.8 * c).max(2300.0);
    let base = json!({
        "scenario": "gunicorn 4 sync workers, plain (closes every connection), offered above 2,048/s and below capacity",
        "capacity_wrk": cap, "capacity_allows": c > 2048.0 * 1.15,
    });
    o.builtin(
        "i",
        g.master.pid(),
        &g.url(),
        rate,
        &[g.port],
        &[],
        base.clone(),
    );
    // Ground truth for the generator's share: the same rate with connect pacing lifted.
    let mut t = base;
    t["scenario"] =
        "as i, --max-connect-rate 100000 (the generator's connect pacing lifted)".into();
    o.builtin(
        "i-pacing-lifted",
        g.master.pid(),
        &g.url(),
        rate,
        &[g.port],
        &["--max-connect-rate", "100000"],
        t,
    );
}

/// (k) the pool case: one gunicorn sync worker holding an uncontended flock 40 ms per request
/// (busy, not on a CPU), and php-fpm with one worker sleeping 40 ms; under the built-in load,
/// `-- wrk` and a hey CSV.
fn scenario_k(o: &Out) {
    let cwd = TempDir::new("zoo-k");
    let work = Work::Flock(cwd.path().join("k.lock"), 40);
    let (g, cap) = after_capacity(
        || Gunicorn::start(cwd.path(), 1, work.clone()),
        |s| s.url(),
        8,
        None,
    );
    let rate = 2.0 * cap["rps"].as_f64().unwrap();
    let base = json!({
        "scenario": "gunicorn 1 sync worker, 40 ms per request off CPU (an uncontended flock held 40 ms): the pool of one is the ceiling (25/s)",
        "capacity_wrk": cap, "ceiling_by_construction_per_s": 25.0,
    });
    let t = Target {
        pid: g.master.pid(),
        url: g.url(),
        port: g.port,
    };
    every_load(o, "k-gunicorn", &t, rate, None, &base);
    drop(g);
    let php = "<?php usleep(40000); echo \"ok\\n\";";
    let stack = PhpStack::start(cwd.path(), 1, php);
    let base = json!({
        "scenario": "php-fpm 1 worker (unix socket behind nginx), usleep 40 ms: the pool of one is the ceiling (25/s)",
        "ceiling_by_construction_per_s": 25.0,
    });
    let t = Target {
        pid: stack.fpm.pid(),
        url: stack.url(),
        port: stack.port,
    };
    every_load(o, "k-php", &t, 60.0, None, &base);
}

/// (l) lock contention: gunicorn, 4 sync workers, one exclusive flock held 20 ms per request.
fn scenario_l(o: &Out) {
    let cwd = TempDir::new("zoo-l");
    let g = Gunicorn::start(cwd.path(), 4, Work::Flock(cwd.path().join("l.lock"), 20));
    let base = json!({
        "scenario": "gunicorn 4 sync workers, one exclusive flock held 20 ms per request: 50/s at most",
        "ceiling_by_construction_per_s": 50.0,
    });
    o.builtin(
        "l",
        g.master.pid(),
        &g.url(),
        150.0,
        &[g.port],
        &[],
        base.clone(),
    );
    o.wrk("l-wrk", g.master.pid(), &g.url(), 8, &[g.port], base);
}

/// Starts one server of the zoo.
type Starter<'a> = Box<dyn Fn() -> AppServer + 'a>;

/// (j) Node and Go, clean, at half capacity.
fn scenario_j(o: &Out) {
    let cwd = TempDir::new("zoo-j");
    let bin = GoBinary::build();
    let servers: [(&str, &str, Starter); 2] = [
        (
            "j-node",
            "Node http, plain, half capacity",
            Box::new(|| AppServer::node(cwd.path(), Work::Plain)),
        ),
        (
            "j-go",
            "Go net/http, plain, half capacity",
            Box::new(|| AppServer::go(&bin, cwd.path(), Work::Plain)),
        ),
    ];
    for (name, what, start) in servers {
        let (s, cap) = after_capacity(start, |s| s.url(), 8, None);
        let rate = 0.5 * cap["rps"].as_f64().unwrap();
        let truth = json!({"scenario": what, "capacity_wrk": cap});
        o.builtin(name, s.proc.pid(), &s.url(), rate, &[s.port], &[], truth);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = Out {
        dir: PathBuf::from(&args[0]),
    };
    std::fs::create_dir_all(&o.dir).unwrap();
    // `all` stands for issue 22's eleven, in order; other names run as given.
    let list: Vec<&str> = args[1..]
        .iter()
        .flat_map(|a| match a.as_str() {
            "all" => vec!["a1", "a4", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
            one => vec![one],
        })
        .collect();
    for s in list {
        let t0 = Instant::now();
        match s {
            "a1" => scenario_a(&o, 1),
            "a4" => scenario_a(&o, 4),
            "b" => scenario_b(&o),
            "c" => scenario_c(&o),
            "d" => scenario_d(&o),
            "e" => scenario_e(&o),
            "f" => scenario_f(&o),
            "g" => scenario_g(&o),
            "h" => scenario_h(&o),
            "i" => scenario_i(&o),
            "j" => scenario_j(&o),
            "k" => scenario_k(&o),
            "l" => scenario_l(&o),
            other => panic!("unknown scenario {other}"),
        }
        println!("## scenario {s} took {:.0} s", t0.elapsed().as_secs_f64());
    }
}
