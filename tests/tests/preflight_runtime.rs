//! `trapdetect preflight`'s runtime-mode traps (issue 23) on real servers, each with and
//! without its trap: Debian's php-fpm with and without Xdebug (php8.2-xdebug, loaded with
//! `-d zend_extension=xdebug.so`: setup leaves it disabled) and with OPcache disabled by its
//! pool; an Express app (Debian's node-express) with and without NODE_ENV=production;
//! `python3 -m http.server` with and without PYTHONDEVMODE; a stdlib Go server built with and
//! without `-race` (Debian's golang-go, offline).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, free_port, json, require_root, run_bounded,
    servers::{Proc, children_of, http_get},
    trapdetect, wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

fn preflight(pid: u32) -> (Output, Value) {
    let out = trapdetect(
        &[
            "preflight",
            "--json",
            "--no-sample",
            "--pid",
            &pid.to_string(),
        ],
        LIMIT,
    );
    let j = json(&out);
    (out, j)
}

fn with_id<'a>(j: &'a Value, id: &str) -> Vec<&'a Value> {
    j["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == id)
        .collect()
}

fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

/// php-fpm8.2 on a unix socket with `extra` command-line flags and `pool` lines; waits for
/// its two workers.
fn fpm(dir: &Path, extra: &[&str], pool: &str) -> Proc {
    let conf = dir.join("fpm.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nerror_log = {d}/fpm.log\npid = {d}/fpm.pid\ndaemonize = no\n\n[www]\nlisten = {d}/www.sock\npm = static\npm.max_children = 2\n{pool}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let master = Proc::spawn(
        "php-fpm",
        quiet(
            Command::new("php-fpm8.2")
                .args(["-R", "-F", "-y"])
                .arg(&conf)
                .args(extra),
        ),
    );
    let pid = master.pid();
    wait_until("php-fpm workers", Duration::from_secs(10), || {
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_ok(),
            "php-fpm exited: {}",
            std::fs::read_to_string(dir.join("fpm.log")).unwrap_or_default()
        );
        children_of(pid).len() == 2
    });
    master
}

#[test]
fn php_fpm_with_xdebug_fails_and_without_it_passes() {
    if !require_root("php_fpm_with_xdebug_fails_and_without_it_passes") {
        return;
    }
    let so = Path::new("/usr/lib/php/20220829/xdebug.so");
    assert!(
        so.exists(),
        "php8.2-xdebug is installed by `cargo xtask setup`"
    );
    let dir = TempDir::new("xdebug");
    let master = fpm(dir.path(), &["-d", "zend_extension=xdebug.so"], "");
    let (_, j) = preflight(master.pid());
    let f = with_id(&j, "runtime.xdebug");
    assert_eq!(f.len(), 1, "{j:#}");
    assert_eq!(f[0]["severity"], "fail");
    assert_eq!(f[0]["evidence"]["xdebug_mode"], "develop");
    assert_eq!(f[0]["evidence"]["pid"], master.pid());
    assert!(
        f[0]["remedy"]
            .as_str()
            .unwrap()
            .contains("phpdismod xdebug"),
        "{f:#?}"
    );
    assert_eq!(j["exit_code"], 1);
    drop(master);
    // Without Xdebug (Debian's default after setup): no finding, OPcache on.
    let dir = TempDir::new("no-xdebug");
    let plain = fpm(dir.path(), &[], "");
    let (_, j) = preflight(plain.pid());
    assert!(with_id(&j, "runtime.xdebug").is_empty(), "{j:#}");
    assert!(with_id(&j, "runtime.opcache").is_empty(), "{j:#}");
}

#[test]
fn php_fpm_with_opcache_disabled_by_its_pool_fails_at_that_line() {
    if !require_root("php_fpm_with_opcache_disabled_by_its_pool_fails_at_that_line") {
        return;
    }
    let dir = TempDir::new("opcache");
    let master = fpm(dir.path(), &[], "php_admin_value[opcache.enable] = 0");
    let (out, j) = preflight(master.pid());
    assert_eq!(out.status.code(), Some(1), "{j:#}");
    let f = with_id(&j, "runtime.opcache");
    assert_eq!(f.len(), 1, "{j:#}");
    assert_eq!(f[0]["severity"], "fail");
    assert_eq!(f[0]["evidence"]["opcache_loaded"], true);
    assert_eq!(f[0]["evidence"]["opcache_enable"], "0");
    assert_eq!(
        f[0]["evidence"]["set_at"],
        format!("{}:10", dir.path().join("fpm.conf").display())
    );
}

/// An Express app (Debian's node-express) that renders a view from a file through a minimal
/// engine: in development Express reads and compiles the view on every request, with
/// NODE_ENV=production it caches it.
fn express(dir: &Path, node_env: Option<&str>) -> (Proc, u16) {
    std::fs::create_dir_all(dir.join("views")).unwrap();
    std::fs::write(dir.join("views/index.tpl"), "hello {{name}}\n").unwrap();
    std::fs::write(
        dir.join("app.js"),
        "const express = require('express');\nconst fs = require('fs');\nconst app = express();\n\
         app.engine('tpl', (p, o, cb) => fs.readFile(p, 'utf8', (e, s) => e ? cb(e) : cb(null, s.replace('{{name}}', o.name))));\n\
         app.set('views', __dirname + '/views');\napp.set('view engine', 'tpl');\n\
         app.get('/', (req, res) => res.render('index', { name: 'bench' }));\n\
         app.listen(Number(process.argv[2]), '127.0.0.1');\n",
    )
    .unwrap();
    let port = free_port();
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("app.js"))
        .arg(port.to_string())
        .env("NODE_PATH", "/usr/share/nodejs")
        .env_remove("NODE_ENV");
    if let Some(v) = node_env {
        cmd.env("NODE_ENV", v);
    }
    let mut p = Proc::spawn("node express", quiet(&mut cmd));
    wait_until("express to answer", Duration::from_secs(20), || {
        assert!(p.running(), "node exited");
        matches!(http_get(port, "/"), Ok((200, _)))
    });
    (p, port)
}

#[test]
fn express_without_node_env_production_warns_and_with_it_passes() {
    if !require_root("express_without_node_env_production_warns_and_with_it_passes") {
        return;
    }
    let dir = TempDir::new("express-dev");
    let (dev, port) = express(dir.path(), None);
    let (_, body) = http_get(port, "/").unwrap();
    assert_eq!(String::from_utf8_lossy(&body), "hello bench\n");
    let (_, j) = preflight(dev.pid());
    let f = with_id(&j, "runtime.dev-mode");
    assert_eq!(f.len(), 1, "{j:#}");
    assert_eq!(f[0]["severity"], "warn");
    assert_eq!(f[0]["evidence"]["variable"], "NODE_ENV");
    assert_eq!(f[0]["evidence"]["value"], "(unset)");
    assert_eq!(f[0]["remedy"], "start the server with NODE_ENV=production");
    drop(dev);
    let dir = TempDir::new("express-prod");
    let (prod, _) = express(dir.path(), Some("production"));
    let (_, j) = preflight(prod.pid());
    assert!(with_id(&j, "runtime.dev-mode").is_empty(), "{j:#}");
}

#[test]
fn python_http_server_with_pythondevmode_fails_and_without_it_passes() {
    if !require_root("python_http_server_with_pythondevmode_fails_and_without_it_passes") {
        return;
    }
    for dev in [true, false] {
        let dir = TempDir::new("pydev");
        let port = free_port();
        let mut cmd = Command::new("/usr/bin/python3");
        cmd.args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .current_dir(dir.path())
        .env_remove("PYTHONDEVMODE");
        if dev {
            cmd.env("PYTHONDEVMODE", "1");
        }
        let mut p = Proc::spawn("python3 http.server", quiet(&mut cmd));
        wait_until("python to answer", Duration::from_secs(20), || {
            assert!(p.running(), "python exited");
            http_get(port, "/").is_ok()
        });
        let (out, j) = preflight(p.pid());
        let f = with_id(&j, "runtime.dev-mode");
        if dev {
            assert_eq!(f.len(), 1, "{j:#}");
            assert_eq!(f[0]["severity"], "fail");
            assert_eq!(f[0]["evidence"]["variable"], "PYTHONDEVMODE");
            assert_eq!(f[0]["evidence"]["value"], "1");
            assert_eq!(out.status.code(), Some(1));
        } else {
            assert!(f.is_empty(), "{j:#}");
        }
    }
}

/// Builds the stdlib Go server (with `-race` or not) into the target directory, once, offline.
fn go_server(race: bool) -> PathBuf {
    let target = trapdetect_e2e::target_file("trapdetect")
        .parent()
        .unwrap()
        .join("go-servers");
    std::fs::create_dir_all(&target).unwrap();
    let src = target.join("main.go");
    std::fs::write(
        &src,
        "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {\n\thttp.HandleFunc(\"/\", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, \"ok\") })\n\tif err := http.ListenAndServe(\"127.0.0.1:\"+os.Args[1], nil); err != nil {\n\t\tpanic(err)\n\t}\n}\n",
    )
    .unwrap();
    let out = target.join(if race { "srv-race" } else { "srv" });
    let mut cmd = Command::new("go");
    cmd.arg("build");
    if race {
        cmd.arg("-race");
    }
    let r = run_bounded(
        cmd.arg("-o")
            .arg(&out)
            .arg(&src)
            .current_dir(&target)
            .env("GO111MODULE", "off")
            .env("GOFLAGS", "")
            .env("GOPROXY", "off")
            .env("CGO_ENABLED", "1")
            .env("GOCACHE", target.join("cache"))
            .env("HOME", &target),
        Duration::from_secs(600),
    );
    assert!(
        r.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    out
}

/// The release build, started with GOMAXPROCS=1, warns that Go runs on one thread of the CPUs
/// the process may use (all of the machine's here).
#[test]
fn go_server_built_with_race_fails_and_without_passes() {
    if !require_root("go_server_built_with_race_fails_and_without_passes") {
        return;
    }
    for race in [true, false] {
        let bin = go_server(race);
        let port = free_port();
        let mut cmd = Command::new(&bin);
        cmd.arg(port.to_string()).env_remove("GOMAXPROCS");
        if !race {
            cmd.env("GOMAXPROCS", "1");
        }
        let mut p = Proc::spawn("go server", quiet(&mut cmd));
        wait_until("the Go server to answer", Duration::from_secs(20), || {
            assert!(p.running(), "the Go server exited");
            matches!(http_get(port, "/"), Ok((200, _)))
        });
        let (_, j) = preflight(p.pid());
        let g = with_id(&j, "runtime.gomaxprocs");
        let cpus = std::thread::available_parallelism().unwrap().get();
        if race || cpus < 2 {
            assert!(g.is_empty(), "{j:#}");
        } else {
            assert_eq!(g.len(), 1, "{j:#}");
            assert_eq!(g[0]["severity"], "warn");
            assert_eq!(g[0]["evidence"]["gomaxprocs"], 1);
            assert_eq!(g[0]["evidence"]["cpus"], cpus as f64);
        }
        let f = with_id(&j, "runtime.debug-build");
        if race {
            assert_eq!(f.len(), 1, "{j:#}");
            assert_eq!(f[0]["severity"], "fail");
            assert_eq!(f[0]["evidence"]["build"], "go -race");
            assert!(
                f[0]["evidence"]["go_version"]
                    .as_str()
                    .unwrap()
                    .starts_with("go1.")
            );
            assert!(
                f[0]["evidence"]["go_build_settings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s == "-race=true")
            );
        } else {
            assert!(f.is_empty(), "{j:#}");
        }
    }
}

/// Debian's nginx serving a file, with `error_log` at `level`.
fn nginx(dir: &Path, level: &str) -> (Proc, u16) {
    let d = dir.display();
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    std::fs::write(dir.join("www/index.html"), "ok\n").unwrap();
    let port = free_port();
    let conf = dir.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\n\
             error_log {d}/error.log {level};\nevents {{ worker_connections 64; }}\n\
             http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/tmp/body;\n  proxy_temp_path {d}/tmp/proxy;\n\
               fastcgi_temp_path {d}/tmp/fcgi;\n  uwsgi_temp_path {d}/tmp/uwsgi;\n  scgi_temp_path {d}/tmp/scgi;\n\
               server {{ listen 127.0.0.1:{port}; root {d}/www; }}\n}}\n"
        ),
    )
    .unwrap();
    let mut p = Proc::spawn(
        "nginx",
        quiet(
            Command::new("nginx")
                .arg("-p")
                .arg(dir)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(dir.join("error.log")),
        ),
    );
    wait_until("nginx to answer", Duration::from_secs(20), || {
        assert!(p.running(), "nginx exited");
        matches!(http_get(port, "/index.html"), Ok((200, _)))
    });
    (p, port)
}

#[test]
fn nginx_logging_at_debug_fails_and_at_error_passes() {
    if !require_root("nginx_logging_at_debug_fails_and_at_error_passes") {
        return;
    }
    let dir = TempDir::new("nginx-debug");
    let (n, port) = nginx(dir.path(), "debug");
    // The debug level is real: one request writes many lines.
    let before = std::fs::read_to_string(dir.path().join("error.log"))
        .unwrap_or_default()
        .lines()
        .count();
    http_get(port, "/index.html").unwrap();
    let after = std::fs::read_to_string(dir.path().join("error.log"))
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        after - before > 20,
        "{before} -> {after} lines for one request"
    );
    let (_, j) = preflight(n.pid());
    let f = with_id(&j, "runtime.nginx-log");
    assert_eq!(f.len(), 1, "{j:#}");
    assert_eq!(f[0]["severity"], "fail");
    assert_eq!(f[0]["evidence"]["directive"], "error_log");
    assert_eq!(
        f[0]["evidence"]["at"],
        format!("{}:6", dir.path().join("nginx.conf").display())
    );
    drop(n);
    let dir = TempDir::new("nginx-error");
    let (n, _) = nginx(dir.path(), "error");
    let (_, j) = preflight(n.pid());
    assert!(with_id(&j, "runtime.nginx-log").is_empty(), "{j:#}");
}
