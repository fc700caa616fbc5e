//! Real servers under test: Debian's php-fpm behind nginx on loopback, started from a working
//! directory the test chooses; and a small non-PHP server that walks its working directory
//! per request. Everything is torn down in `Drop` (and the masters get SIGTERM through
//! PR_SET_PDEATHSIG if the test process dies).

use std::{
    io::{Read, Write},
    net::TcpStream,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{TempDir, free_port, wait_until};

/// A child process killed (SIGTERM, then SIGKILL) and reaped on drop.
pub struct Proc {
    child: Option<Child>,
    name: String,
}

impl Proc {
    /// Spawns `cmd` with PR_SET_PDEATHSIG.
    pub fn spawn(name: &str, cmd: &mut Command) -> Proc {
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc {
            child: Some(child),
            name: name.to_string(),
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Stops it now (SIGTERM, bounded wait, SIGKILL).
    pub fn stop(&mut self) {
        self.terminate();
    }

    /// SIGTERM, up to 5 s for it to exit, then SIGKILL; how it ended (`None` if it had
    /// already been stopped).
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = c.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("{} ignored SIGTERM; killing", self.name);
        let _ = c.kill();
        c.wait().ok()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One HTTP/1.0 GET on a fresh connection; returns (status, body).
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut buf = vec![];
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match buf.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => buf[i + 4..].to_vec(),
        None => vec![],
    };
    Ok((status, body))
}

/// php-fpm (static pool, unix socket) behind nginx on 127.0.0.1.
pub struct PhpStack {
    /// nginx's port on 127.0.0.1.
    pub port: u16,
    /// php-fpm master.
    pub fpm: Proc,
    /// php-fpm's port on 127.0.0.1 when it listens on TCP ([`PhpOptions::listen_tcp`]).
    pub fpm_port: Option<u16>,
    /// nginx master in front.
    pub nginx: Proc,
    /// Where configs, sockets and logs live.
    pub dir: TempDir,
    /// The docroot (on ext4).
    pub docroot: PathBuf,
}

/// Where php-fpm's code lives and which cgroup it starts in.
#[derive(Clone, Debug, Default)]
pub struct PhpOptions {
    /// A docroot that already holds `index.php` (e.g. on a slow mount); default: a fresh one
    /// on ext4 with the given script.
    pub docroot: Option<PathBuf>,
    /// A `cgroup.procs` file php-fpm's master joins before it execs (its workers follow).
    pub cgroup_procs: Option<PathBuf>,
    /// `pm.max_requests`: a worker exits and is replaced after this many (0: never; worker
    /// churn for the soak).
    pub max_requests: u32,
    /// php-fpm listens on 127.0.0.1 (a free port) instead of a unix socket, and nginx passes
    /// to it over TCP with a new connection per request (no upstream keep-alive).
    pub listen_tcp: bool,
    /// `pm = dynamic` starting this many children (and keeping one spare) up to the workers
    /// given, instead of `pm = static`: the pool grows under load, php-fpm spawning 1, 2, 4…
    /// children a second while none is idle.
    pub dynamic_start: Option<u32>,
}

/// A PHP site in `dir/www`: `index.php` reads the template `tpl.html` beside it (by `__DIR__`)
/// on every request: code and a file it uses, for a docroot on a slow mount.
pub fn php_site(dir: &Path) {
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/tpl.html"), "<p>hello</p>\n").unwrap();
    std::fs::write(
        dir.join("www/index.php"),
        "<?php echo strlen(file_get_contents(__DIR__ . '/tpl.html')), \"\\n\";",
    )
    .unwrap();
}

impl PhpStack {
    /// Starts php-fpm with its working directory at `cwd` and its code in `docroot` (which
    /// holds `index.php`: [`php_site`]).
    pub fn start_in_docroot(cwd: &Path, workers: u32, docroot: PathBuf) -> PhpStack {
        PhpStack::start_with(
            cwd,
            workers,
            "",
            PhpOptions {
                docroot: Some(docroot),
                ..Default::default()
            },
        )
    }

    /// Starts php-fpm with its working directory at `cwd`, `workers` static children, and an
    /// nginx in front. `index.php` is the script every request runs.
    pub fn start(cwd: &Path, workers: u32, index_php: &str) -> PhpStack {
        PhpStack::start_with(cwd, workers, index_php, PhpOptions::default())
    }

    /// As [`PhpStack::start`], with the code elsewhere or php-fpm in a cgroup.
    pub fn start_with(cwd: &Path, workers: u32, index_php: &str, opts: PhpOptions) -> PhpStack {
        let dir = TempDir::new("php");
        let d = dir.path().to_path_buf();
        std::fs::create_dir_all(d.join("nginx-tmp")).unwrap();
        let docroot = match &opts.docroot {
            Some(r) => r.clone(),
            None => {
                let r = d.join("www");
                std::fs::create_dir_all(&r).unwrap();
                std::fs::write(r.join("index.php"), index_php).unwrap();
                r
            }
        };
        let sock = d.join("fpm.sock");
        let fpm_port = opts.listen_tcp.then(free_port);
        let (listen, pass) = match fpm_port {
            Some(p) => (format!("127.0.0.1:{p}"), format!("127.0.0.1:{p}")),
            None => (
                sock.display().to_string(),
                format!("unix:{}", sock.display()),
            ),
        };
        let fpm_conf = d.join("fpm.conf");
        std::fs::write(
            &fpm_conf,
            format!(
                "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\n\
                 [www]\nuser = root\ngroup = root\nlisten = {listen}\nlisten.mode = 0666\n\
                 {pm}\npm.max_children = {workers}\npm.max_requests = {max_requests}\n\
                 catch_workers_output = yes\nclear_env = no\n",
                d = d.display(),
                max_requests = opts.max_requests,
                pm = match opts.dynamic_start {
                    None => "pm = static".to_string(),
                    Some(n) => format!(
                        "pm = dynamic\npm.start_servers = {n}\npm.min_spare_servers = 1\npm.max_spare_servers = {n}"
                    ),
                }
            ),
        )
        .unwrap();
        let mut cmd = Command::new("php-fpm8.2");
        cmd.args(["-R", "-F", "-y"])
            .arg(&fpm_conf)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(procs) = &opts.cgroup_procs {
            let path = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes()).unwrap();
            // Join the group between fork and exec (only async-signal-safe calls), so the
            // master and every worker it forks run under the quota.
            unsafe {
                cmd.pre_exec(move || {
                    let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // "0" names the writing process itself.
                    let r = libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                    if r != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let fpm = Proc::spawn("php-fpm", &mut cmd);
        let port = free_port();
        let nginx_conf = d.join("nginx.conf");
        std::fs::write(
            &nginx_conf,
            format!(
                "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\n\
                 error_log {d}/nginx-error.log;\nevents {{ worker_connections 4096; }}\n\
                 http {{\n  access_log off;\n  client_body_temp_path {d}/nginx-tmp/body;\n  fastcgi_temp_path {d}/nginx-tmp/fcgi;\n\
                   proxy_temp_path {d}/nginx-tmp/proxy;\n  uwsgi_temp_path {d}/nginx-tmp/uwsgi;\n  scgi_temp_path {d}/nginx-tmp/scgi;\n\
                   server {{\n    listen 127.0.0.1:{port} backlog=4096;\n    root {root};\n\
                     location / {{\n      include /etc/nginx/fastcgi_params;\n      fastcgi_param SCRIPT_FILENAME $document_root/index.php;\n\
                       fastcgi_pass {pass};\n    }}\n  }}\n}}\n",
                d = d.display(),
                root = docroot.display(),
            ),
        )
        .unwrap();
        let nginx = Proc::spawn(
            "nginx",
            Command::new("nginx")
                .arg("-p")
                .arg(&d)
                .arg("-c")
                .arg(&nginx_conf)
                .arg("-e")
                .arg(d.join("nginx-error.log"))
                .current_dir(&d)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let mut stack = PhpStack {
            port,
            fpm,
            fpm_port,
            nginx,
            dir,
            docroot,
        };
        let log = stack.dir.path().join("fpm.log");
        wait_until(
            "php-fpm and nginx to answer 200",
            // Generous: in the kernel matrix's TCG guests (three side by side) php-fpm loads its
            // extensions over 9p; a bound on startup, not a timing.
            Duration::from_secs(300),
            || {
                assert!(
                    stack.fpm.running(),
                    "php-fpm exited: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                assert!(stack.nginx.running(), "nginx exited");
                matches!(http_get(port, "/"), Ok((200, _)))
            },
        );
        stack
    }

    /// The URL nginx serves.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Pids of the php-fpm master's children (the workers).
    pub fn workers(&self) -> Vec<u32> {
        children_of(self.fpm.pid())
    }
}

/// `pid` and its descendants.
pub fn tree_of(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let kids = children_of(tree[i]);
        tree.extend(kids);
        i += 1;
    }
    tree
}

/// Direct children of `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(e.path().join("stat"))
            && let Some(rest) = stat.rsplit(')').next()
            && rest
                .split_whitespace()
                .nth(1)
                .and_then(|x| x.parse::<u32>().ok())
                == Some(pid)
        {
            out.push(p);
        }
    }
    out
}

/// Sends `n` requests at about `rate` per second on fresh connections from a background
/// thread; joins to the count of 200s.
pub fn drive(port: u16, n: u32, rate: f64) -> std::thread::JoinHandle<u32> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut ok = 0;
        for i in 0..n {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
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

/// nginx alone, serving static files from its docroot on 127.0.0.1 with keep-alive on (as
/// shipped): the server a benchmark floods over kept-alive connections.
pub struct StaticNginx {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The nginx master.
    pub nginx: Proc,
    /// Config, logs and docroot.
    pub dir: TempDir,
}

/// How [`StaticNginx::start_with`] serves: where the files are and what the worker may open.
#[derive(Clone, Debug, Default)]
pub struct StaticOptions {
    /// A docroot that already holds the files (e.g. on a slow mount); default: a fresh one on
    /// ext4 holding the files given.
    pub docroot: Option<PathBuf>,
    /// `worker_rlimit_nofile`: the descriptor limit of the worker (the master keeps its own),
    /// so a load above it makes the worker log EMFILE on accept.
    pub worker_rlimit_nofile: Option<u32>,
    /// `worker_processes` (default 1).
    pub workers: u32,
    /// `listen ... reuseport`: a listening socket per worker, the kernel spreading new
    /// connections among them (without it, one worker can take every connection a
    /// generator opens at once, and the others idle).
    pub reuseport: bool,
    /// A reverse proxy to `http://127.0.0.1:PORT` (a new upstream connection per request)
    /// instead of serving files.
    pub proxy_to: Option<u16>,
    /// `keepalive_requests`: requests a kept-alive connection serves before nginx ends it
    /// (default here: 1,000,000, none ends within a test).
    pub keepalive_requests: Option<u32>,
    /// `limit_req` at this many requests a second (burst 50, nodelay): nginx answers the
    /// arrivals beyond it 503 at once.
    pub limit_req_per_s: Option<u32>,
}

impl StaticNginx {
    /// Starts nginx (one worker) serving `files` (name, content) from a fresh docroot.
    pub fn start(files: &[(&str, &[u8])]) -> StaticNginx {
        StaticNginx::start_with(files, StaticOptions::default())
    }

    /// As [`StaticNginx::start`], with the docroot elsewhere or a low descriptor limit; waits
    /// until the first file answers 200 (`/` when `files` is empty).
    pub fn start_with(files: &[(&str, &[u8])], opts: StaticOptions) -> StaticNginx {
        let dir = TempDir::new("nginx");
        let d = dir.path().to_path_buf();
        let docroot = match &opts.docroot {
            Some(r) => r.clone(),
            None => {
                let r = d.join("www");
                std::fs::create_dir_all(&r).unwrap();
                for (name, body) in files {
                    std::fs::write(r.join(name), body).unwrap();
                }
                r
            }
        };
        std::fs::create_dir_all(d.join("nginx-tmp")).unwrap();
        let rlimit = opts
            .worker_rlimit_nofile
            .map(|n| format!("worker_rlimit_nofile {n};\n"))
            .unwrap_or_default();
        let (limit_zone, limit) = match opts.limit_req_per_s {
            Some(n) => (
                format!("  limit_req_zone $server_port zone=limit:1m rate={n}r/s;\n"),
                "limit_req zone=limit burst=50 nodelay;\n    ",
            ),
            None => (String::new(), ""),
        };
        let port = free_port();
        let conf = d.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nmaster_process on;\nworker_processes {workers};\nuser root;\npid {d}/nginx.pid;\n\
                 {rlimit}error_log {d}/nginx-error.log;\nevents {{ worker_connections 1024; }}\n\
                 http {{\n  access_log off;\n  keepalive_requests {keepalive};\n  client_body_temp_path {d}/nginx-tmp/body;\n\
                   fastcgi_temp_path {d}/nginx-tmp/fcgi;\n  proxy_temp_path {d}/nginx-tmp/proxy;\n\
                   uwsgi_temp_path {d}/nginx-tmp/uwsgi;\n  scgi_temp_path {d}/nginx-tmp/scgi;\n\
                 {limit_zone}  server {{\n    listen 127.0.0.1:{port} backlog=1024{reuseport};\n    {limit}{serve}\n  }}\n}}\n",
                reuseport = if opts.reuseport { " reuseport" } else { "" },
                workers = opts.workers.max(1),
                keepalive = opts.keepalive_requests.unwrap_or(1_000_000),
                d = d.display(),
                serve = match opts.proxy_to {
                    Some(p) => format!("location / {{ proxy_pass http://127.0.0.1:{p}; }}"),
                    None => format!("root {};", docroot.display()),
                }
            ),
        )
        .unwrap();
        let mut nginx = Proc::spawn(
            "nginx",
            Command::new("nginx")
                .arg("-p")
                .arg(&d)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(d.join("nginx-error.log"))
                .current_dir(&d)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let first = format!("/{}", files.first().map(|f| f.0).unwrap_or(""));
        let log = d.join("nginx-error.log");
        wait_until("nginx to answer 200", Duration::from_secs(20), || {
            assert!(
                nginx.running(),
                "nginx exited: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            matches!(http_get(port, &first), Ok((200, _)))
        });
        StaticNginx { port, nginx, dir }
    }

    /// The URL of `path` (starting with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Pids of the nginx master's children (the workers).
    pub fn workers(&self) -> Vec<u32> {
        children_of(self.nginx.pid())
    }

    /// nginx's error log.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("nginx-error.log")).unwrap_or_default()
    }
}

/// A bounded keep-alive flood from `wrk` (1 thread, `connections` connections, `seconds`
/// long) on loopback; stopped on drop.
pub fn wrk_flood(url: &str, connections: u32, seconds: u32) -> Proc {
    Proc::spawn(
        "wrk",
        Command::new("wrk")
            .args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
            .args(["--timeout", "2s"])
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
}

/// Debian's nginx answering every request with a fixed 200 (`ok`), on every transport the load
/// generator speaks: cleartext TCP, TLS (a CA and a leaf for `localhost`/127.0.0.1 made here
/// with the openssl CLI), TLS with HTTP/2, cleartext HTTP/2 (h2c) and a unix socket. The TLS
/// answers carry the SNI name the client sent (`sni=NAME`), so a test can see it arrived.
pub struct Nginx {
    /// HTTP/1.1 on 127.0.0.1.
    pub port: u16,
    /// HTTP/1.1 over TLS.
    pub tls_port: u16,
    /// TLS with ALPN h2 and http/1.1.
    pub h2_port: u16,
    /// Cleartext HTTP/2 (prior knowledge).
    pub h2c_port: u16,
    /// HTTP/1.1 on a unix socket.
    pub unix_socket: PathBuf,
    /// The CA that signed the server's certificate (PEM).
    pub ca: PathBuf,
    /// A CA that signed nothing here (PEM): trusting it alone must fail the handshake.
    pub other_ca: PathBuf,
    nginx: Proc,
    /// Configs, keys, socket and logs.
    pub dir: TempDir,
}

/// Runs `openssl` with the whitespace-separated `args` in `dir`.
fn openssl(dir: &Path, args: &str) {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &format!(
            "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
             -subj /CN={name} -keyout {name}.key -out {name}.pem"
        ),
    );
}

impl Nginx {
    /// Starts it with one worker; waits until it answers.
    pub fn start() -> Nginx {
        let dir = TempDir::new("nginx");
        let d = dir.path().to_path_buf();
        std::fs::create_dir_all(d.join("tmp")).unwrap();
        make_ca(&d, "ca");
        make_ca(&d, "other-ca");
        std::fs::write(
            d.join("leaf.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            &d,
            "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
             -keyout leaf.key -out leaf.csr",
        );
        openssl(
            &d,
            "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
             -extfile leaf.ext -out leaf.pem",
        );
        let (port, tls_port, h2_port, h2c_port) =
            (free_port(), free_port(), free_port(), free_port());
        let sock = d.join("nginx.sock");
        let conf = d.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\n\
                 error_log {d}/error.log;\nevents {{ worker_connections 16384; }}\n\
                 http {{\n  access_log off;\n  client_body_temp_path {d}/tmp/body;\n  proxy_temp_path {d}/tmp/proxy;\n\
                   fastcgi_temp_path {d}/tmp/fcgi;\n  uwsgi_temp_path {d}/tmp/uwsgi;\n  scgi_temp_path {d}/tmp/scgi;\n\
                   keepalive_requests 1000000;\n  http2_max_concurrent_streams 1024;\n\
                   ssl_certificate {d}/leaf.pem;\n  ssl_certificate_key {d}/leaf.key;\n\
                   ssl_session_cache shared:SSL:4m;\n\
                   server {{\n    listen 127.0.0.1:{port} backlog=4096;\n    listen unix:{sock} backlog=4096;\n\
                     location / {{ return 200 \"ok\"; }}\n  }}\n\
                   server {{\n    listen 127.0.0.1:{tls_port} ssl backlog=4096;\n\
                     location / {{ return 200 \"sni=$ssl_server_name\"; }}\n  }}\n\
                   server {{\n    listen 127.0.0.1:{h2_port} ssl http2 backlog=4096;\n\
                     location / {{ return 200 \"ok\"; }}\n  }}\n\
                   server {{\n    listen 127.0.0.1:{h2c_port} http2 backlog=4096;\n\
                     location / {{ return 200 \"ok\"; }}\n  }}\n}}\n",
                d = d.display(),
                sock = sock.display()
            ),
        )
        .unwrap();
        let nginx = Proc::spawn(
            "nginx",
            Command::new("nginx")
                .arg("-p")
                .arg(&d)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(d.join("error.log"))
                .current_dir(&d)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let mut n = Nginx {
            port,
            tls_port,
            h2_port,
            h2c_port,
            unix_socket: sock,
            ca: d.join("ca.pem"),
            other_ca: d.join("other-ca.pem"),
            nginx,
            dir,
        };
        let log = n.dir.path().join("error.log");
        wait_until("nginx to answer 200", Duration::from_secs(20), || {
            assert!(
                n.nginx.running(),
                "nginx exited: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            matches!(http_get(port, "/"), Ok((200, _)))
                && TcpStream::connect(("127.0.0.1", tls_port)).is_ok()
        });
        n
    }
}

/// Debian's Apache, in one of two shapes. With the prefork MPM and mod_php
/// (`libapache2-mod-php`, [`Apache::prefork_php`]): the other classic PHP deployment, PHP
/// running inside the web server's own pre-forked children. Its pool grows under load from
/// `start` children to `max` (`MaxRequestWorkers`), Apache spawning 1, 2, 4… a second while
/// none is idle. With the event MPM serving static files ([`Apache::event_static`]): Debian's
/// default, processes of 25 threads each that a listener thread hands connections to. The
/// children run as `www-data` (Apache will not serve as root), so the docroot and the
/// directories above it are world-readable.
pub struct Apache {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The Apache parent.
    pub apache: Proc,
    /// Config, logs and docroot.
    pub dir: TempDir,
}

impl Apache {
    /// Starts Apache prefork + mod_php serving `index_php` as `/index.php` from a fresh docroot.
    pub fn prefork_php(index_php: &str, start: u32, max: u32) -> Apache {
        let modules = "/usr/lib/apache2/modules";
        Apache::start(
            &[("index.php", index_php.as_bytes())],
            &format!(
                "LoadModule mpm_prefork_module {modules}/mod_mpm_prefork.so\n\
                 LoadModule php_module {modules}/libphp8.2.so\n\
                 StartServers {start}\nMinSpareServers 1\nMaxSpareServers {start}\n\
                 ServerLimit {max}\nMaxRequestWorkers {max}\n\
                 DirectoryIndex index.php\nAddHandler application/x-httpd-php .php\n"
            ),
            "/index.php",
        )
    }

    /// Starts Apache with the event MPM (Debian's own settings: 2 processes at start, 25
    /// threads each, up to 150 workers) serving `files` (name, content) from a fresh docroot.
    pub fn event_static(files: &[(&str, &[u8])]) -> Apache {
        Apache::event_serving(
            files,
            "StartServers 2\nMinSpareThreads 25\nMaxSpareThreads 75\n\
             ThreadsPerChild 25\nMaxRequestWorkers 150\n",
        )
    }

    /// Apache with the event MPM serving `files` from `children` processes of 25 threads that
    /// stay (`ServerLimit`, the spare threads at the pool's size: none started or stopped under
    /// load, so threads pinned one by one stay pinned).
    pub fn event_static_fixed(files: &[(&str, &[u8])], children: u32) -> Apache {
        let threads = 25 * children;
        Apache::event_serving(
            files,
            &format!(
                "StartServers {children}\nServerLimit {children}\nThreadsPerChild 25\n\
                 MinSpareThreads {threads}\nMaxSpareThreads {threads}\nMaxRequestWorkers {threads}\n"
            ),
        )
    }

    /// The event MPM with its `pool` settings, serving `files`, probed at the first.
    fn event_serving(files: &[(&str, &[u8])], pool: &str) -> Apache {
        let modules = "/usr/lib/apache2/modules";
        Apache::start(
            files,
            &format!("LoadModule mpm_event_module {modules}/mod_mpm_event.so\n{pool}"),
            &format!("/{}", files[0].0),
        )
    }

    /// Apache with the event MPM as a reverse proxy (mod_proxy_http) of everything to
    /// `127.0.0.1:upstream`, a new upstream connection per request (its default).
    pub fn event_proxy(upstream: u16) -> Apache {
        let modules = "/usr/lib/apache2/modules";
        Apache::start(
            &[],
            &format!(
                "LoadModule mpm_event_module {modules}/mod_mpm_event.so\n\
                 LoadModule proxy_module {modules}/mod_proxy.so\n\
                 LoadModule proxy_http_module {modules}/mod_proxy_http.so\n\
                 ProxyPass / http://127.0.0.1:{upstream}/\n"
            ),
            "/",
        )
    }

    /// Writes the docroot and a config of the shared lines plus `mpm` (the MPM and what goes
    /// with it), starts Apache and waits for `probe` to answer 200.
    fn start(files: &[(&str, &[u8])], mpm: &str, probe: &str) -> Apache {
        let dir = TempDir::new("apache");
        let d = dir.path().to_path_buf();
        let docroot = d.join("www");
        std::fs::create_dir_all(&docroot).unwrap();
        for (name, content) in files {
            std::fs::write(docroot.join(name), content).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        for p in [&d, &docroot] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let port = free_port();
        let conf = d.join("httpd.conf");
        let modules = "/usr/lib/apache2/modules";
        std::fs::write(
            &conf,
            format!(
                "ServerRoot /etc/apache2\nServerName localhost\nListen 127.0.0.1:{port}\n\
                 PidFile {d}/httpd.pid\nErrorLog {d}/error.log\n\
                 LoadModule authz_core_module {modules}/mod_authz_core.so\n\
                 LoadModule dir_module {modules}/mod_dir.so\n\
                 LoadModule mime_module {modules}/mod_mime.so\n\
                 {mpm}User www-data\nGroup www-data\nListenBacklog 1024\n\
                 DocumentRoot {root}\n<Directory {root}>\n  Require all granted\n</Directory>\n\
                 TypesConfig /etc/mime.types\n",
                d = d.display(),
                root = docroot.display(),
            ),
        )
        .unwrap();
        // Its own process group: stopping, Apache signals its whole group (prefork's
        // `unixd_killpg`), which would otherwise be the test's.
        let mut apache = Proc::spawn(
            "apache2",
            Command::new("/usr/sbin/apache2")
                .process_group(0)
                .arg("-f")
                .arg(&conf)
                .arg("-DFOREGROUND")
                .env("APACHE_RUN_DIR", &d)
                .env("APACHE_LOCK_DIR", &d)
                .env("APACHE_LOG_DIR", &d)
                .current_dir(&d)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let log = d.join("error.log");
        wait_until("apache to answer 200", Duration::from_secs(20), || {
            assert!(
                apache.running(),
                "apache2 exited: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            matches!(http_get(port, probe), Ok((200, _)))
        });
        Apache { port, apache, dir }
    }

    /// The URL of `path` (starting with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}
