//! A zoo of server families beside php-fpm (issue 22: a verdict must hold on any server, not
//! only on the ones its rule was written with). Each is Debian's own, started by the test on
//! 127.0.0.1 from a working directory the test chooses (so it can sit on the slow FUSE mount),
//! with a request cost the test chooses ([`Work`]), waited for until it answers 200, and torn
//! down in `Drop`: gunicorn with sync workers, Node's http module, Go's net/http (built here,
//! offline, stdlib only), `python3 -m http.server`. nginx (static, as a FastCGI proxy over TCP,
//! with a low descriptor limit) is [`crate::servers::StaticNginx`] and
//! [`crate::servers::PhpStack`]. Beside them: a bounded CPU hog, pinning a process tree to
//! CPUs, and the ground-truth readings a test compares a verdict with (a closed-loop capacity
//! from wrk, descriptors and their limit per process, TCP states by port).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use crate::{
    TempDir, free_port,
    servers::{Proc, children_of, http_get},
    wait_until,
};

/// Debian's Python: `python3` on PATH may be another one (pyenv) without Debian's modules.
pub const PYTHON: &str = "/usr/bin/python3";

/// What one request costs the server (the same knob in every family that has it).
#[derive(Clone, Debug)]
pub enum Work {
    /// Answer `ok` at once.
    Plain,
    /// Open and read a file by this path, relative to the server's working directory (a
    /// template read on every request).
    ReadFile(PathBuf),
    /// The same read handed to the runtime's pool of I/O threads, the request waiting for its
    /// callback (Node's `fs.readFile`: libuv's four threads; Node only).
    ReadFileAsync(PathBuf),
    /// A busy loop of this many iterations (`x += i % 7`).
    Cpu(u64),
    /// Take an exclusive `flock` on this file and hold it this many ms (gunicorn only).
    Flock(PathBuf, u64),
    /// Open this SQLite database and `SELECT count(*) FROM t` (gunicorn only; see
    /// [`sqlite_db`]).
    Sqlite(PathBuf),
    /// Hold one process-wide lock this many ms: gunicorn's `threading.Lock` (its threads wait
    /// on a futex), Go's `sync.Mutex` (its goroutines park in the runtime, no thread waits).
    Mutex(u64),
    /// Sleep this many ms (gunicorn only).
    Sleep(u64),
    /// Wait this many ms on a `threading.Event` nobody sets (gunicorn only): a futex wait
    /// with a timeout that runs out, as Ruby's `sleep` is.
    TimedWait(u64),
    /// GET this URL and answer its body (gunicorn only): a call to an upstream, the worker
    /// blocked in a read on a connection it opened.
    Call(String),
    /// Admit this many requests a second in each worker (a token bucket, burst of a second)
    /// and answer the rest `429 Too Many Requests` at once (gunicorn only).
    Limit(u64),
}

impl Work {
    /// (`ZOO_MODE`, `ZOO_ARG`, `ZOO_MS`) for the servers' environment.
    fn env(&self) -> [(&'static str, String); 3] {
        let (mode, arg, ms) = match self {
            Work::Plain => ("plain", String::new(), 0),
            Work::ReadFile(p) => ("file", p.display().to_string(), 0),
            Work::ReadFileAsync(p) => ("file-async", p.display().to_string(), 0),
            Work::Cpu(n) => ("cpu", n.to_string(), 0),
            Work::Flock(p, ms) => ("flock", p.display().to_string(), *ms),
            Work::Sqlite(p) => ("sqlite", p.display().to_string(), 0),
            Work::Mutex(ms) => ("mutex", String::new(), *ms),
            Work::Sleep(ms) => ("sleep", String::new(), *ms),
            Work::TimedWait(ms) => ("timedwait", String::new(), *ms),
            Work::Call(url) => ("call", url.clone(), 0),
            Work::Limit(n) => ("limit", String::new(), *n),
        };
        [
            ("ZOO_MODE", mode.into()),
            ("ZOO_ARG", arg),
            ("ZOO_MS", ms.to_string()),
        ]
    }
}

/// Creates the SQLite database `path` with one table `t` of `rows` rows (with Debian's
/// `sqlite3`; write it in a slowfs' backing directory before the mount, which is read-only).
pub fn sqlite_db(path: &Path, rows: u32) {
    let sql = format!(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);\n\
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})\n\
         INSERT INTO t (v) SELECT printf('row %d', i) FROM n;\n"
    );
    let out = Command::new("sqlite3")
        .arg(path)
        .arg(sql)
        .stdin(Stdio::null())
        .output()
        .expect("run sqlite3 (cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "sqlite3 {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits (up to `limit`) until `port` answers `/` with 200, failing at once if `proc` exited
/// (with `log`'s content in the message).
fn wait_200(what: &str, proc: &mut Proc, port: u16, log: &Path, limit: Duration) {
    wait_200_at(what, proc, port, "/", log, limit);
}

/// As [`wait_200`], for `path`.
fn wait_200_at(what: &str, proc: &mut Proc, port: u16, path: &str, log: &Path, limit: Duration) {
    wait_until(&format!("{what} to answer 200"), limit, || {
        assert!(
            proc.running(),
            "{what} exited: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        matches!(http_get(port, path), Ok((200, _)))
    });
}

/// The WSGI application gunicorn serves: the request's cost from `ZOO_MODE` and `ZOO_ARG`.
const WSGI_APP: &str = r#"import fcntl, os, sqlite3, threading, time, urllib.request

MODE = os.environ.get("ZOO_MODE", "plain")
ARG = os.environ.get("ZOO_ARG", "")
MS = int(os.environ.get("ZOO_MS", "0"))
LOCK = threading.Lock()
BUCKET = [0.0, time.monotonic()]


def app(environ, start_response):
    if MODE == "file":
        with open(ARG, "rb") as f:
            body = f.read()
    elif MODE == "cpu":
        x = 0
        for i in range(int(ARG)):
            x += i % 7
        body = b"%d\n" % x
    elif MODE == "flock":
        with open(ARG, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            time.sleep(MS / 1000.0)
            fcntl.flock(f, fcntl.LOCK_UN)
        body = b"ok\n"
    elif MODE == "mutex":
        with LOCK:
            time.sleep(MS / 1000.0)
        body = b"ok\n"
    elif MODE == "sleep":
        time.sleep(MS / 1000.0)
        body = b"ok\n"
    elif MODE == "limit":
        now = time.monotonic()
        BUCKET[0] = min(float(MS), BUCKET[0] + (now - BUCKET[1]) * MS)
        BUCKET[1] = now
        if BUCKET[0] < 1.0:
            body = b"slow down\n"
            start_response("429 Too Many Requests", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]
        BUCKET[0] -= 1.0
        body = b"ok\n"
    elif MODE == "call":
        with urllib.request.urlopen(ARG, timeout=30) as r:
            body = r.read()
    elif MODE == "timedwait":
        threading.Event().wait(MS / 1000.0)
        body = b"ok\n"
    elif MODE == "sqlite":
        c = sqlite3.connect(ARG)
        try:
            n = c.execute("SELECT count(*) FROM t").fetchone()[0]
        finally:
            c.close()
        body = b"%d\n" % n
    else:
        body = b"ok\n"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"#;

/// Debian's gunicorn (python3-gunicorn) with sync workers: one request at a time per worker,
/// and every connection closed after its response (sync workers do not keep alive).
pub struct Gunicorn {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The master (arbiter); the workers are its children.
    pub master: Proc,
    /// The app, pid file and log (on ext4).
    pub dir: TempDir,
}

impl Gunicorn {
    /// Starts `workers` sync workers in working directory `cwd` serving `work`; waits until
    /// it answers 200 and all the workers are up.
    pub fn start(cwd: &Path, workers: u32, work: Work) -> Gunicorn {
        Gunicorn::start_with(cwd, workers, None, work)
    }

    /// As [`Gunicorn::start`], with `threads` threads in each worker (the `gthread` worker
    /// class: connections kept alive in the worker's poller while its threads are busy) when
    /// given.
    pub fn start_with(cwd: &Path, workers: u32, threads: Option<u32>, work: Work) -> Gunicorn {
        let dir = TempDir::new("gunicorn");
        let d = dir.path();
        std::fs::write(d.join("zooapp.py"), WSGI_APP).unwrap();
        let port = free_port();
        let log = d.join("gunicorn.log");
        let mut cmd = Command::new(PYTHON);
        cmd.args(["-m", "gunicorn"]);
        match threads {
            Some(n) => cmd.args(["--worker-class", "gthread", "--threads", &n.to_string()]),
            None => cmd.args(["--worker-class", "sync"]),
        };
        cmd.args(["--workers", &workers.to_string()])
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .arg("--chdir")
            .arg(cwd)
            .arg("--pythonpath")
            .arg(d)
            .arg("--error-logfile")
            .arg(&log)
            // Stop within Proc's 5 s grace; a request never takes a minute here.
            .args(["--graceful-timeout", "1", "--timeout", "60"])
            .arg("zooapp:app")
            .envs(work.env())
            // No __pycache__ left beside the app.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut master = Proc::spawn("gunicorn", &mut cmd);
        wait_200("gunicorn", &mut master, port, &log, Duration::from_secs(60));
        let pid = master.pid();
        wait_until("gunicorn's workers", Duration::from_secs(30), || {
            children_of(pid).len() == workers as usize
        });
        Gunicorn { port, master, dir }
    }

    /// The URL of `/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Pids of the workers.
    pub fn workers(&self) -> Vec<u32> {
        children_of(self.master.pid())
    }
}

/// uWSGI (Debian's, the python3 plugin): a master and `processes` workers serving the zoo's
/// WSGI app on `--http-socket`, which answers HTTP/1.1 without `Connection: close` and then
/// closes the connection (a client that keeps it alive finds it closed on its next request).
pub struct Uwsgi {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The master; the workers are its children.
    pub master: Proc,
    /// The app and log (on ext4).
    pub dir: TempDir,
}

impl Uwsgi {
    /// Starts it in working directory `cwd` serving `work`; waits until it answers 200 and
    /// all the workers are up.
    pub fn start(cwd: &Path, processes: u32, work: Work) -> Uwsgi {
        let dir = TempDir::new("uwsgi");
        let d = dir.path();
        std::fs::write(d.join("zooapp.py"), WSGI_APP).unwrap();
        let port = free_port();
        let log = d.join("uwsgi.log");
        let mut cmd = Command::new("uwsgi");
        cmd.args(["--plugin", "python3", "--master", "--die-on-term"])
            .args(["--processes", &processes.to_string()])
            .args(["--http-socket", &format!("127.0.0.1:{port}")])
            .arg("--wsgi-file")
            .arg(d.join("zooapp.py"))
            .args(["--callable", "app", "--disable-logging"])
            .arg("--chdir")
            .arg(cwd)
            .arg("--logto")
            .arg(&log)
            .envs(work.env())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut master = Proc::spawn("uwsgi", &mut cmd);
        wait_200("uwsgi", &mut master, port, &log, Duration::from_secs(60));
        let pid = master.pid();
        wait_until("uWSGI's workers", Duration::from_secs(30), || {
            children_of(pid).len() == processes as usize
        });
        Uwsgi { port, master, dir }
    }

    /// The URL of `/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// lighttpd (Debian's): one process serving `docroot` on 127.0.0.1 with its defaults
/// (keep-alive; its stat cache, which stats a file about once a second rather than per
/// request).
pub struct Lighttpd {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The server.
    pub proc: Proc,
    _dir: TempDir,
}

impl Lighttpd {
    /// Starts it; waits until `probe` (a path under the docroot) answers 200.
    pub fn start(docroot: &Path, probe: &str) -> Lighttpd {
        let dir = TempDir::new("lighttpd");
        let port = free_port();
        let log = dir.path().join("error.log");
        let conf = dir.path().join("lighttpd.conf");
        let quoted = |p: &Path| {
            p.to_str()
                .unwrap()
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        };
        std::fs::write(
            &conf,
            format!(
                "server.document-root = \"{}\"\nserver.port = {port}\nserver.bind = \"127.0.0.1\"\nserver.modules = ()\nserver.errorlog = \"{}\"\n",
                quoted(docroot),
                quoted(&log)
            ),
        )
        .unwrap();
        let mut proc = Proc::spawn(
            "lighttpd",
            Command::new("lighttpd")
                .arg("-D")
                .arg("-f")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        wait_200_at(
            "lighttpd",
            &mut proc,
            port,
            probe,
            &log,
            Duration::from_secs(30),
        );
        Lighttpd {
            port,
            proc,
            _dir: dir,
        }
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// The Node.js server: one process, one event loop; a file read is `readFileSync` (the loop
/// waits for it) or, `file-async`, `fs.readFile` (libuv's thread pool reads, the loop serves
/// other requests meanwhile); the CPU loop runs on the loop.
const NODE_APP: &str = r#"const http = require("http");
const fs = require("fs");
const mode = process.env.ZOO_MODE || "plain";
const arg = process.env.ZOO_ARG || "";
const port = Number(process.argv[2]);
http.createServer((req, res) => {
  let body;
  if (mode === "file-async") {
    fs.readFile(arg, (err, data) => {
      if (err) {
        res.writeHead(500);
        res.end(String(err));
        return;
      }
      res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": data.length });
      res.end(data);
    });
    return;
  } else if (mode === "file") {
    body = fs.readFileSync(arg);
  } else if (mode === "cpu") {
    let x = 0;
    for (let i = 0; i < Number(arg); i++) x += i % 7;
    body = x + "\n";
  } else {
    body = "ok\n";
  }
  res.writeHead(200, { "Content-Type": "text/plain", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}).listen(port, "127.0.0.1", 511);
"#;

/// Go's net/http server: a goroutine per connection on as many threads as CPUs.
const GO_APP: &str = r#"package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	mode, arg := os.Getenv("ZOO_MODE"), os.Getenv("ZOO_ARG")
	n, _ := strconv.Atoi(arg)
	ms, _ := strconv.Atoi(os.Getenv("ZOO_MS"))
	var mu sync.Mutex
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch mode {
		case "file":
			b, err := os.ReadFile(arg)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Write(b)
		case "cpu":
			x := 0
			for i := 0; i < n; i++ {
				x += i % 7
			}
			fmt.Fprintln(w, x)
		case "mutex":
			mu.Lock()
			time.Sleep(time.Duration(ms) * time.Millisecond)
			mu.Unlock()
			w.Write([]byte("ok\n"))
		default:
			w.Write([]byte("ok\n"))
		}
	})
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
"#;

/// Which runtime an [`AppServer`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// Debian's `node` (nodejs).
    Node,
    /// A Go binary built with Debian's golang-go ([`GoBinary`]).
    Go,
}

/// The Go server built once (about a minute on a cold cache here), run as often as needed.
pub struct GoBinary {
    /// The executable.
    pub exe: PathBuf,
    _dir: TempDir,
}

impl GoBinary {
    /// Builds [`GO_APP`] with Debian's `go`, offline: GOPATH mode (no module, nothing to
    /// download), GOPATH in a fresh temporary directory; the build cache beside the test
    /// binaries ([`go_cache`]), so only the first build of a CI run compiles the standard
    /// library.
    pub fn build() -> GoBinary {
        let dir = TempDir::new("go");
        let d = dir.path();
        std::fs::write(d.join("main.go"), GO_APP).unwrap();
        let exe = d.join("zoo-go");
        let out = Command::new("go")
            .args(["build", "-o"])
            .arg(&exe)
            .arg("main.go")
            .current_dir(d)
            .env("GO111MODULE", "off")
            .env("GOFLAGS", "")
            .env("GOPROXY", "off")
            .env("GOPATH", d.join("gopath"))
            .env("GOCACHE", go_cache())
            .stdin(Stdio::null())
            .output()
            .expect("run go (cargo xtask setup installs golang-go)");
        assert!(
            out.status.success(),
            "go build: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        GoBinary { exe, _dir: dir }
    }
}

/// Go's build cache for the zoo: `target/<profile>/zoo-gocache`, kept between builds (a
/// cache: nothing in it is a test's state).
fn go_cache() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("zoo-gocache")))
        .unwrap_or_else(|| std::env::temp_dir().join("trapdetect-e2e-gocache"))
}

/// A Node or Go server (one process) on 127.0.0.1.
pub struct AppServer {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The server process.
    pub proc: Proc,
    /// Its script and log.
    pub dir: TempDir,
}

impl AppServer {
    /// Starts Node's server in `cwd` serving `work` (Plain, ReadFile, ReadFileAsync, Cpu).
    pub fn node(cwd: &Path, work: Work) -> AppServer {
        let dir = TempDir::new("node");
        let script = dir.path().join("server.js");
        std::fs::write(&script, NODE_APP).unwrap();
        let mut cmd = Command::new("node");
        cmd.arg(&script);
        AppServer::start("node", cmd, cwd, work, dir)
    }

    /// The same Node server started by a shell that does not exec it (a launcher script
    /// that runs `node` and then something else): the process is the shell, Node its child.
    /// SIGTERM to the shell ends Node too.
    pub fn node_under_shell(cwd: &Path, work: Work) -> AppServer {
        let dir = TempDir::new("node-sh");
        let script = dir.path().join("server.js");
        std::fs::write(&script, NODE_APP).unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#"node "$0" "$1" & trap 'kill $!' TERM; wait; wait"#)
            .arg(&script);
        AppServer::start("node", cmd, cwd, work, dir)
    }

    /// Starts the Go server `bin` in `cwd` serving `work` (Plain, ReadFile, Cpu).
    pub fn go(bin: &GoBinary, cwd: &Path, work: Work) -> AppServer {
        assert!(
            !matches!(work, Work::ReadFileAsync(_)),
            "Go reads on the goroutine"
        );
        AppServer::start(
            "go",
            Command::new(&bin.exe),
            cwd,
            work,
            TempDir::new("go-run"),
        )
    }

    fn start(what: &str, mut cmd: Command, cwd: &Path, work: Work, dir: TempDir) -> AppServer {
        assert!(
            matches!(
                work,
                Work::Plain | Work::ReadFile(_) | Work::ReadFileAsync(_) | Work::Cpu(_)
            ) || (what == "go" && matches!(work, Work::Mutex(_))),
            "{what} serves Plain, ReadFile, ReadFileAsync and Cpu (Go also Mutex), not {work:?}"
        );
        let port = free_port();
        let log = dir.path().join("server.log");
        cmd.arg(port.to_string())
            .envs(work.env())
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut proc = Proc::spawn(what, &mut cmd);
        wait_200(what, &mut proc, port, &log, Duration::from_secs(30));
        AppServer { port, proc, dir }
    }

    /// The URL of `/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// `python3 -m http.server` serving a directory (HTTP/1.0: a connection per request; a
/// listen backlog of 5).
pub struct PyHttpServer {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The server.
    pub proc: Proc,
    _dir: TempDir,
}

impl PyHttpServer {
    /// Serves `root` (its working directory too) with `index.html` there answering `/`.
    pub fn start(root: &Path) -> PyHttpServer {
        let dir = TempDir::new("pyhttp");
        let log = dir.path().join("server.log");
        let port = free_port();
        let mut proc = Proc::spawn(
            "python3 -m http.server",
            Command::new(PYTHON)
                .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
                .arg(root)
                .arg(port.to_string())
                .current_dir(root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        );
        wait_200(
            "python3 -m http.server",
            &mut proc,
            port,
            &log,
            Duration::from_secs(30),
        );
        PyHttpServer {
            port,
            proc,
            _dir: dir,
        }
    }
}

/// The two servers of [`SplitWriter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitFamily {
    /// Java's built-in `com.sun.net.httpserver.HttpServer` (OpenJDK), eight handler threads.
    Java,
    /// Python's `http.server.ThreadingHTTPServer` speaking HTTP/1.1.
    Python,
}

/// Java's server: each response's headers and body go out in two writes.
const SPLIT_JAVA: &str = r#"import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

public class Split {
    public static void main(String[] a) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(a[0])), 128);
        s.setExecutor(Executors.newFixedThreadPool(8));
        byte[] body = "x".repeat(2700).getBytes();
        s.createContext("/", ex -> {
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        s.start();
    }
}
"#;

/// Python's: `end_headers` flushes the headers, then the body is written.
const SPLIT_PYTHON: &str = r#"import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = sys.argv[2] == "nodelay"
    def do_GET(self):
        body = b"x" * 2700
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// A keep-alive server that writes each response's headers and body in two calls, with
/// Nagle's algorithm on (each socket's default) or off (`nodelay`: TCP_NODELAY, which both
/// servers have a switch for: `-Dsun.net.httpserver.nodelay=true`, `disable_nagle_algorithm`).
pub struct SplitWriter {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The server.
    pub proc: Proc,
    _dir: TempDir,
}

impl SplitWriter {
    /// Starts `family`'s server (Java's compiled first with `javac`).
    pub fn start(family: SplitFamily, nodelay: bool) -> SplitWriter {
        let dir = TempDir::new("split");
        let d = dir.path();
        let log = d.join("server.log");
        let port = free_port();
        let mut cmd = match family {
            SplitFamily::Java => java_command(
                d,
                "Split",
                SPLIT_JAVA,
                &[&format!("-Dsun.net.httpserver.nodelay={nodelay}")],
            ),
            SplitFamily::Python => {
                std::fs::write(d.join("split.py"), SPLIT_PYTHON).unwrap();
                let mut c = Command::new(PYTHON);
                c.arg("split.py");
                c
            }
        };
        cmd.arg(port.to_string())
            .arg(if nodelay { "nodelay" } else { "nagle" })
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let name = format!("{family:?} split writer");
        let mut proc = Proc::spawn(&name, &mut cmd);
        wait_200(&name, &mut proc, port, &log, Duration::from_secs(60));
        SplitWriter {
            port,
            proc,
            _dir: dir,
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

/// `java` with `options` running class `class`, its source `src` compiled with `javac` into
/// `dir` first.
fn java_command(dir: &Path, class: &str, src: &str, options: &[&str]) -> Command {
    std::fs::write(dir.join(format!("{class}.java")), src).unwrap();
    let out = Command::new("javac")
        .arg(format!("{class}.java"))
        .current_dir(dir)
        .output()
        .expect("run javac (cargo xtask setup installs openjdk-17-jdk-headless)");
    assert!(
        out.status.success(),
        "javac: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = Command::new("java");
    c.args(options).args(["-Xmx128m", "-cp", ".", class]);
    c
}

/// Java's server with a fixed pool whose handlers sleep, alone or holding one monitor.
const POOL_JAVA: &str = r#"import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

public class Pool {
    static final Object LOCK = new Object();
    static volatile long SINK;
    public static void main(String[] a) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(a[0])), 1024);
        s.setExecutor(Executors.newFixedThreadPool(Integer.parseInt(a[1])));
        long ms = Long.parseLong(a[2]);
        boolean locked = a[3].equals("locked");
        boolean cpu = a[3].equals("cpu");
        byte[] body = "ok\n".getBytes();
        s.createContext("/", ex -> {
            try {
                if (cpu) {
                    long x = 0;
                    for (long i = 0; i < ms * 1_000_000L; i++) x += i % 7;
                    SINK += x;
                } else if (locked) {
                    synchronized (LOCK) { Thread.sleep(ms); }
                } else {
                    Thread.sleep(ms);
                }
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            ex.sendResponseHeaders(200, body.length);
            ex.getResponseBody().write(body);
            ex.close();
        });
        s.start();
    }
}
"#;

/// Java's built-in `com.sun.net.httpserver.HttpServer` (OpenJDK 17) on a fixed pool of
/// `threads` handler threads, each request `Thread.sleep(ms)` (`locked`: inside one
/// `synchronized` block all requests share; or a CPU loop, [`JavaPool::start_cpu`]), TCP_NODELAY on, its idle-connection timer set to
/// an hour (`sun.net.httpserver.idleInterval`: its `idle-timeout-task` thread's one timed
/// wait then never runs out in a test). Beside them the JVM runs its own threads: compilers,
/// G1's, the VM thread and its periodic task thread, the JDK's service threads.
pub struct JavaPool {
    /// Port on 127.0.0.1.
    pub port: u16,
    /// The server.
    pub proc: Proc,
    _dir: TempDir,
}

impl JavaPool {
    /// Starts it (compiled first).
    pub fn start(threads: u32, ms: u32, locked: bool) -> JavaPool {
        JavaPool::start_mode(threads, ms, if locked { "locked" } else { "free" })
    }

    /// Starts it with handlers that spin on the CPU instead of sleeping: `millions` million
    /// iterations of a loop per request.
    pub fn start_cpu(threads: u32, millions: u32) -> JavaPool {
        JavaPool::start_mode(threads, millions, "cpu")
    }

    fn start_mode(threads: u32, ms: u32, mode: &str) -> JavaPool {
        let dir = TempDir::new("java-pool");
        let d = dir.path();
        let log = d.join("server.log");
        let port = free_port();
        let mut cmd = java_command(
            d,
            "Pool",
            POOL_JAVA,
            &[
                "-Dsun.net.httpserver.nodelay=true",
                "-Dsun.net.httpserver.idleInterval=3600",
            ],
        );
        cmd.arg(port.to_string())
            .arg(threads.to_string())
            .arg(ms.to_string())
            .arg(mode)
            .current_dir(d)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut proc = Proc::spawn("java pool", &mut cmd);
        wait_200("java pool", &mut proc, port, &log, Duration::from_secs(60));
        JavaPool {
            port,
            proc,
            _dir: dir,
        }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `own`, a report's `runtime_threads`, names the JVM's own threads (one VM thread, one
    /// periodic task thread, one of each compiler among them) and none of the server's (the
    /// handler thread, the dispatcher, the launcher's `java`).
    pub fn assert_own_threads_named(own: &serde_json::Value) {
        for name in [
            "VM Thread",
            "VM Periodic Tas",
            "C1 CompilerThre",
            "C2 CompilerThre",
        ] {
            assert_eq!(own[name], 1, "{name}: {own:#}");
        }
        for name in ["pool-1-thread-1", "HTTP-Dispatcher", "java"] {
            assert!(own.get(name).is_none(), "{name}: {own:#}");
        }
    }
}

/// A bounded busy loop (`sh` spinning under `timeout`), optionally pinned to one CPU: other
/// work on the host. Stopped on drop, or by itself after its time.
pub struct CpuHog {
    /// The `timeout` process (the loop is its child).
    pub proc: Proc,
}

impl CpuHog {
    /// Spins for at most `seconds`, on `cpu` when given.
    pub fn start(seconds: u32, cpu: Option<usize>) -> CpuHog {
        CpuHog::running(seconds, cpu, "while :; do :; done")
    }

    /// `yes > /dev/null` for at most `seconds`: a hog that spends much of its time in system
    /// calls, where the timer interrupts that wake a server's threads find it in the kernel.
    pub fn in_syscalls(seconds: u32) -> CpuHog {
        CpuHog::running(seconds, None, "exec yes > /dev/null")
    }

    fn running(seconds: u32, cpu: Option<usize>, script: &str) -> CpuHog {
        let mut cmd = match cpu {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.args(["-c", &c.to_string(), "timeout"]);
                t
            }
            None => Command::new("timeout"),
        };
        cmd.args([&seconds.to_string(), "sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        CpuHog {
            proc: Proc::spawn("cpu hog", &mut cmd),
        }
    }
}

/// `pid` and every process below it.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        all.extend(children_of(all[i]));
        i += 1;
    }
    all
}

/// Pins every thread of every process in `pid`'s tree to `cpus` (processes forked later
/// inherit it); returns the threads pinned.
pub fn pin_tree(pid: u32, cpus: &[usize]) -> usize {
    pin_threads(pid, cpus, |_, _| true)
}

/// Pins every thread of `pid`'s tree but each process's main thread (tid = pid), one by one
/// as `taskset -p -c CPUS TID` does: the workers confined, the processes' own masks (their
/// main threads') still every CPU. Returns the threads pinned.
pub fn pin_threads_but_main(pid: u32, cpus: &[usize]) -> usize {
    pin_threads(pid, cpus, |p, tid| tid != p)
}

/// Pins the threads of `pid`'s tree blocked in `futex` now (`/proc/PID/task/TID/syscall`'s
/// first field, the system call's number), one by one: an idle pool's workers parked on their condition
/// variable, not its threads in `epoll_wait` or `read` (Apache event MPM's listener and main
/// threads). Returns the threads pinned.
pub fn pin_threads_in_futex(pid: u32, cpus: &[usize]) -> usize {
    pin_threads(pid, cpus, |p, tid| {
        std::fs::read_to_string(format!("/proc/{p}/task/{tid}/syscall"))
            .is_ok_and(|s| s.split_whitespace().next() == Some(&libc::SYS_futex.to_string()))
    })
}

/// Pins each thread of `pid`'s tree that `which(pid, tid)` chooses.
fn pin_threads(pid: u32, cpus: &[usize], which: impl Fn(u32, u32) -> bool) -> usize {
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let mut n = 0;
    for p in tree(pid) {
        for t in std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if !which(p, tid as u32) {
                continue;
            }
            let r = unsafe {
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
            };
            assert_eq!(
                r,
                0,
                "sched_setaffinity {tid}: {}",
                std::io::Error::last_os_error()
            );
            n += 1;
        }
    }
    n
}

/// `Cpus_allowed_list` of `pid` (e.g. `1` or `0-1`).
pub fn cpus_allowed(pid: u32) -> String {
    proc_status(pid, "Cpus_allowed_list:")
}

fn proc_status(pid: u32, key: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Open descriptors of `pid` now.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The soft `Max open files` of `pid`, from /proc/PID/limits.
pub fn nofile_limit(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("Max open files"))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// TCP sockets in the host's namespace by state (as `ss -tan` names them, e.g. `TIME-WAIT`)
/// whose local or peer port is `port`.
pub fn tcp_states(port: u16) -> std::collections::BTreeMap<String, usize> {
    let out = Command::new("ss")
        .args(["-tanH"])
        .stdin(Stdio::null())
        .output()
        .expect("ss (iproute2)");
    let mut m = std::collections::BTreeMap::new();
    let suffix = format!(":{port}");
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 5 && (f[3].ends_with(&suffix) || f[4].ends_with(&suffix)) {
            *m.entry(f[0].to_string()).or_insert(0) += 1;
        }
    }
    m
}

/// What one wrk run measured.
#[derive(Clone, Debug)]
pub struct WrkRun {
    /// `Requests/sec`.
    pub rps: f64,
    /// Requests completed (`N requests in T`).
    pub requests: u64,
    /// Non-2xx/3xx responses plus socket errors (0 when it had none).
    pub errors: u64,
    /// wrk's own output.
    pub output: String,
}

/// A closed-loop capacity: wrk with `connections` connections (one thread) for `seconds`.
pub fn wrk_capacity(url: &str, connections: u32, seconds: u32) -> WrkRun {
    let out = Command::new("wrk")
        .args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s")])
        .args(["--timeout", "5s"])
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("wrk");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("wrk output without Requests/sec: {text}"));
    let requests = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    // "Non-2xx or 3xx responses: N" and "Socket errors: connect A, read B, write C, timeout D".
    let mut errors = 0;
    for l in text.lines().map(str::trim) {
        if let Some(n) = l.strip_prefix("Non-2xx or 3xx responses:") {
            errors += n.trim().parse::<u64>().unwrap_or(0);
        }
        if let Some(rest) = l.strip_prefix("Socket errors:") {
            errors += rest
                .split(',')
                .filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    WrkRun {
        rps,
        requests,
        errors,
        output: text,
    }
}
