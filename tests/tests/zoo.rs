//! The server zoo's fixtures, exercised (issue 22): every family starts from Debian's packages,
//! answers 200 with what its work says, and its knobs do what they claim (the worker's
//! descriptor limit, TCP to php-fpm, pinning, the template read through the slow mount). No
//! tracing here: these are the servers the verdict tests run against.

use std::{path::Path, time::Duration};

use trapdetect_e2e::{
    TempDir, require_root,
    servers::{PhpOptions, PhpStack, StaticNginx, StaticOptions, http_get},
    slowfs::SlowFs,
    wait_until,
    zoo::{
        AppServer, CpuHog, GoBinary, Gunicorn, PyHttpServer, Work, cpus_allowed, fd_count,
        nofile_limit, pin_tree, sqlite_db, tcp_states, tree, wrk_capacity,
    },
};

/// `sum(i % 7 for i < n)`, what the CPU loop answers.
fn loop_sum(n: u64) -> u64 {
    (0..n).map(|i| i % 7).sum()
}

fn get(port: u16) -> String {
    let (status, body) = http_get(port, "/").expect("GET /");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    String::from_utf8(body).unwrap()
}

fn template(dir: &Path) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("templates/page.html"), "<p>page</p>\n").unwrap();
}

#[test]
fn gunicorn_sync_workers_serve_each_work() {
    let cwd = TempDir::new("zoo-gunicorn");
    template(cwd.path());
    sqlite_db(&cwd.path().join("app.db"), 42);

    let one = Gunicorn::start(cwd.path(), 1, Work::Plain);
    assert_eq!(get(one.port), "ok\n");
    assert_eq!(one.workers().len(), 1);
    // Sync workers close every connection: one request per connection, whatever was asked.
    let w = wrk_capacity(&one.url(), 2, 1);
    assert!(w.rps > 10.0 && w.requests > 10, "{}", w.output);
    assert_eq!(w.errors, 0, "{}", w.output);
    drop(one);

    let cases = [
        (
            Work::ReadFile("templates/page.html".into()),
            "<p>page</p>\n".to_string(),
        ),
        (Work::Cpu(10_007), format!("{}\n", loop_sum(10_007))),
        (
            Work::Flock(cwd.path().join("app.lock"), 3),
            "ok\n".to_string(),
        ),
        (Work::Sqlite("app.db".into()), "42\n".to_string()),
    ];
    for (work, want) in cases {
        let g = Gunicorn::start(cwd.path(), 3, work.clone());
        assert_eq!(g.workers().len(), 3, "{work:?}");
        assert_eq!(get(g.port), want, "{work:?}");
        if matches!(work, Work::Flock(..)) {
            assert!(cwd.path().join("app.lock").exists());
        }
    }
}

#[test]
fn gunicorn_pinned_to_one_cpu_beside_a_cpu_hog() {
    let cwd = TempDir::new("zoo-pin");
    let g = Gunicorn::start(cwd.path(), 2, Work::Cpu(1_000));
    let procs = tree(g.master.pid());
    assert_eq!(procs.len(), 3, "master and 2 workers: {procs:?}");
    assert!(pin_tree(g.master.pid(), &[1]) >= 3);
    for p in &procs {
        assert_eq!(cpus_allowed(*p), "1", "pid {p}");
    }
    assert_eq!(get(g.port), format!("{}\n", loop_sum(1_000)));

    let mut hog = CpuHog::start(30, Some(0));
    let spinner = wait_for_child(hog.proc.pid());
    assert_eq!(cpus_allowed(spinner), "0");
    // It spins: never blocked, and its CPU time grows (how fast depends on who else runs).
    let t0 = cpu_ticks(spinner);
    wait_until("the hog to use CPU", Duration::from_secs(10), || {
        cpu_ticks(spinner) > t0
    });
    assert!(state(spinner) == 'R', "the hog is {}", state(spinner));
    assert!(hog.proc.running());
    drop(hog);
    assert!(!Path::new(&format!("/proc/{spinner}")).exists() || zombie(spinner));
}

/// A CPU hog stops by itself after its time.
#[test]
fn cpu_hog_is_bounded() {
    let mut hog = CpuHog::start(1, None);
    wait_until("the hog to stop by itself", Duration::from_secs(10), || {
        !hog.proc.running()
    });
}

fn wait_for_child(pid: u32) -> u32 {
    let mut child = 0;
    wait_until("the hog's loop", Duration::from_secs(10), || {
        child = tree(pid).get(1).copied().unwrap_or(0);
        child != 0
    });
    child
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = s.rsplit(')').next().unwrap();
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The one-letter state of `pid` (`R`, `S`, `Z`...).
fn state(pid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    s.rsplit(')')
        .next()
        .and_then(|r| r.trim_start().chars().next())
        .unwrap_or('?')
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

#[test]
fn node_and_go_serve_each_work() {
    let cwd = TempDir::new("zoo-apps");
    template(cwd.path());
    let go = GoBinary::build();
    let works = [
        (Work::Plain, "ok\n".to_string()),
        (
            Work::ReadFile("templates/page.html".into()),
            "<p>page</p>\n".to_string(),
        ),
        (Work::Cpu(100_003), format!("{}\n", loop_sum(100_003))),
    ];
    for (work, want) in works {
        let node = AppServer::node(cwd.path(), work.clone());
        assert_eq!(get(node.port), want, "node {work:?}");
        let g = AppServer::go(&go, cwd.path(), work.clone());
        assert_eq!(get(g.port), want, "go {work:?}");
        // Both keep connections alive: wrk's closed loop gets answers without errors.
        for url in [node.url(), g.url()] {
            let w = wrk_capacity(&url, 4, 1);
            assert!(w.rps > 10.0, "{url}: {}", w.output);
            assert_eq!(w.errors, 0, "{url}: {}", w.output);
        }
    }
}

#[test]
fn python_http_server_serves_its_directory() {
    let root = TempDir::new("zoo-pyhttp");
    std::fs::write(root.path().join("index.html"), "hello\n").unwrap();
    let s = PyHttpServer::start(root.path());
    assert_eq!(get(s.port), "hello\n");
}

/// nginx's worker gets `worker_rlimit_nofile`, its master keeps its own; flooded with more
/// connections than that, the worker logs EMFILE on accept.
#[test]
fn nginx_worker_with_64_descriptors_logs_emfile() {
    let n = StaticNginx::start_with(
        &[("index.html", b"hi\n")],
        StaticOptions {
            worker_rlimit_nofile: Some(64),
            ..Default::default()
        },
    );
    let workers = n.workers();
    assert_eq!(workers.len(), 1);
    assert_eq!(nofile_limit(workers[0]), Some(64));
    assert_ne!(nofile_limit(n.nginx.pid()), Some(64));
    assert!(fd_count(workers[0]) < 64);
    let _ = wrk_capacity(&n.url("/index.html"), 200, 1);
    assert!(
        n.error_log().contains("(24: Too many open files)"),
        "{}",
        n.error_log()
    );
}

#[test]
fn nginx_passes_to_php_fpm_over_tcp() {
    if !require_root("nginx_passes_to_php_fpm_over_tcp") {
        return;
    }
    let cwd = TempDir::new("zoo-fpm-tcp");
    let stack = PhpStack::start_with(
        cwd.path(),
        2,
        "<?php echo \"ok\\n\";",
        PhpOptions {
            listen_tcp: true,
            ..Default::default()
        },
    );
    let fpm = stack.fpm_port.expect("php-fpm on TCP");
    assert_eq!(get(stack.port), "ok\n");
    // No upstream keep-alive: every request is a new connection to php-fpm's port, and its
    // closed ones wait in TIME_WAIT there.
    for _ in 0..20 {
        assert_eq!(get(stack.port), "ok\n");
    }
    let states = tcp_states(fpm);
    assert_eq!(states.get("LISTEN"), Some(&1), "{states:?}");
    assert!(
        states.get("TIME-WAIT").copied().unwrap_or(0) >= 20,
        "{states:?}"
    );
}

/// The template read by relative path goes through the slow mount when the working directory
/// is there: slowfs counts an open per request.
#[test]
fn gunicorn_with_cwd_on_slowfs_reads_through_it() {
    if !require_root("gunicorn_with_cwd_on_slowfs_reads_through_it") {
        return;
    }
    let fs = SlowFs::mount(200, |b| {
        template(&b.join("d1/d2/d3"));
    });
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 3);
    let g = Gunicorn::start(&deep, 1, Work::ReadFile("templates/page.html".into()));
    let before = fs.stats()["open"].as_u64().unwrap();
    for _ in 0..7 {
        assert_eq!(get(g.port), "<p>page</p>\n");
    }
    let opens = fs.stats()["open"].as_u64().unwrap() - before;
    assert_eq!(opens, 7);
    // nginx serving files from the mount.
    let n = StaticNginx::start_with(
        &[("templates/page.html", b"")],
        StaticOptions {
            docroot: Some(deep.clone()),
            ..Default::default()
        },
    );
    let before = fs.stats()["open"].as_u64().unwrap();
    for _ in 0..5 {
        let (s, body) = http_get(n.port, "/templates/page.html").unwrap();
        assert_eq!((s, body.as_slice()), (200, &b"<p>page</p>\n"[..]));
    }
    assert_eq!(fs.stats()["open"].as_u64().unwrap() - before, 5);
}
