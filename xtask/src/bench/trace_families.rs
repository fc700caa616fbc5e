//! What each probe family costs the server it traces (issue 28), on the setups the tracer
//! exists for: php-fpm behind nginx with one FastCGI connection (over TCP) per request, nginx
//! serving a static file over keep-alive connections, and a Go net/http server, each under
//! `wrk -t1 -c8`. The probe set grows one family at a time (`--skip-probe` leaves the others
//! out): the path probes alone, + process tracking (fork/exit), + TCP state changes, + request
//! counting (accepts and `tcp_probe`, the default set), + the client watch (connect(), with an
//! idle process as the watched client: what every other process's connect() pays), + the
//! off-CPU probes `trapdetect run` adds (`--offcpu`). And bpftrace doing the same counting
//! (path calls by path string with their latency, TCP state changes by port, payload on the
//! server's ports), when Debian's bpftrace can be installed.
//!
//! Each configuration is measured in pairs against untraced, the order alternating (AB, BA:
//! ABBA), and all configurations interleaved within a round so drift reaches them alike; the
//! figure is the median of the per-pair ratios traced ÷ untraced.
//!
//! `BENCH_TRACE_PAIRS` (default 5) sets the pairs, `BENCH_TRACE_SECS` (default 3) the length of
//! one wrk run, `BENCH_TRACE_SETUPS` a comma-separated subset of `php,nginx,go`, and
//! `BENCH_TRACE_ONLY=families` runs this part of `cargo xtask bench trace` alone.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use trapdetect_e2e::{
    TempDir, Tracer,
    servers::{PhpOptions, PhpStack, Proc, StaticNginx, children_of},
    zoo::{AppServer, GoBinary, Work},
};

use super::{median, record, wrk_rps};

/// The probe families, in the order they are added; each with the programs that make it.
const FAMILIES: &[(&str, &str, &[&str])] = &[
    ("path", "path probes only", &[]),
    (
        "process",
        "+ process tracking",
        &["sched_process_fork", "sched_process_exit"],
    ),
    ("tcp", "+ TCP state changes", &["inet_sock_set_state"]),
    (
        "requests",
        "+ request counting (default)",
        &["sys_exit_accept", "tcp_probe"],
    ),
    ("client", "+ client watch", &[]),
    ("offcpu", "+ off-CPU (= run's probes)", &[]),
];

#[derive(Clone, Copy, PartialEq)]
enum Config {
    /// trapdetect with the families up to and including this index of `FAMILIES`.
    Families(usize),
    Bpftrace,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Families(i) => FAMILIES[i].1,
            Config::Bpftrace => "bpftrace, same counting",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Config::Families(i) => FAMILIES[i].0,
            Config::Bpftrace => "bpftrace",
        }
    }
}

/// The server under test.
struct Setup {
    name: &'static str,
    title: &'static str,
    /// The process trapdetect is given.
    pid: u32,
    /// Every process of the server (bpftrace's filter).
    pids: Vec<u32>,
    /// Every process whose CPU serves a request (the server's, nginx in front of php-fpm).
    cpu_pids: Vec<u32>,
    /// The server's own listening port (where requests are counted).
    port: u16,
    url: String,
    _keep: Box<dyn std::any::Any>,
}

enum Tool {
    Trapdetect(Tracer, Option<Proc>),
    Bpftrace(Child),
}

/// A tracer of `config` attached to the setup; detaches on drop.
struct Attached(Option<Tool>);

impl Attached {
    fn pid(&self) -> Option<u32> {
        match &self.0 {
            None => None,
            Some(Tool::Trapdetect(t, _)) => Some(t.pid()),
            Some(Tool::Bpftrace(c)) => Some(c.id()),
        }
    }

    fn to(config: Config, s: &Setup) -> Result<Attached> {
        let tool = match config {
            Config::Families(upto) => {
                let pid = s.pid.to_string();
                let mut args: Vec<String> = ["--pid", &pid, "--duration", "600s", "--quiet"]
                    .iter()
                    .map(|a| a.to_string())
                    .collect();
                for (_, _, progs) in &FAMILIES[upto + 1..] {
                    for p in *progs {
                        args.push("--skip-probe".into());
                        args.push(p.to_string());
                    }
                }
                let client = FAMILIES[..=upto].iter().any(|f| f.0 == "client");
                let idle = client.then(|| Proc::spawn("sleep", Command::new("sleep").arg("600")));
                if let Some(p) = &idle {
                    args.push("--watch-client".into());
                    args.push(p.pid().to_string());
                }
                if FAMILIES[..=upto].iter().any(|f| f.0 == "offcpu") {
                    args.push("--offcpu".into());
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Tool::Trapdetect(Tracer::start(&args), idle)
            }
            Config::Bpftrace => Tool::Bpftrace(bpftrace(s)?),
        };
        // Let the attach's own work (BTF, /proc walks) settle before the load starts.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Attached(Some(tool)))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        match self.0.take() {
            None => {}
            Some(Tool::Trapdetect(t, _idle)) => {
                let _ = t.interrupt();
            }
            Some(Tool::Bpftrace(mut c)) => {
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                let _ = c.wait();
            }
        }
    }
}

/// The bpftrace program doing trapdetect's default counting for the server's processes:
/// path calls counted by path string with their latency, processes followed through fork,
/// TCP state changes counted by port, payload and segments on the server's port.
fn bpftrace_program(pids: &[u32], port: u16) -> String {
    let mut p = String::from("BEGIN {");
    for pid in pids {
        p.push_str(&format!(" @t[{pid}] = 1;"));
    }
    p.push_str(" }\n");
    p.push_str(
        "tracepoint:sched:sched_process_fork /@t[args->parent_pid]/ { @t[args->child_pid] = 1; }\n\
         tracepoint:sched:sched_process_exit /@t[pid]/ { delete(@t[pid]); }\n",
    );
    // Enter: the path string (trapdetect hashes it) and a start time.
    for (call, arg) in [
        ("newstat", "filename"),
        ("newlstat", "filename"),
        ("newfstatat", "filename"),
        ("statx", "filename"),
        ("chdir", "filename"),
        ("access", "filename"),
        ("faccessat", "filename"),
        ("faccessat2", "filename"),
        ("open", "filename"),
        ("openat", "filename"),
        ("readlink", "path"),
        ("readlinkat", "pathname"),
    ] {
        p.push_str(&format!(
            "tracepoint:syscalls:sys_enter_{call} /@t[pid]/ {{ @s[tid] = nsecs; @path[tid] = str(args->{arg}); }}\n"
        ));
    }
    p.push_str(
        "tracepoint:syscalls:sys_enter_getcwd,tracepoint:syscalls:sys_enter_fchdir /@t[pid]/ { @s[tid] = nsecs; @path[tid] = \"\"; }\n",
    );
    let exits = [
        "newstat",
        "newlstat",
        "newfstatat",
        "statx",
        "chdir",
        "fchdir",
        "getcwd",
        "access",
        "faccessat",
        "faccessat2",
        "open",
        "openat",
        "readlink",
        "readlinkat",
    ]
    .map(|c| format!("tracepoint:syscalls:sys_exit_{c}"))
    .join(",");
    p.push_str(&format!(
        "{exits} /@s[tid]/ {{ @calls[@path[tid]] = count(); @lat[@path[tid]] = hist(nsecs - @s[tid]); delete(@s[tid]); delete(@path[tid]); }}\n"
    ));
    p.push_str(
        "tracepoint:syscalls:sys_exit_accept,tracepoint:syscalls:sys_exit_accept4 /@t[pid]/ { @accepts = count(); }\n",
    );
    p.push_str(&format!(
        "tracepoint:sock:inet_sock_set_state /args->protocol == 6/ {{ @tcp[args->oldstate, args->newstate] = count(); \
         if (args->sport == {port} || args->dport == {port}) {{ @port[args->oldstate, args->newstate] = count(); }} }}\n\
         tracepoint:tcp:tcp_probe /args->sport == {port} && args->data_len > 0/ {{ @bytes = sum(args->data_len); @segs = count(); }}\n"
    ));
    p
}

fn bpftrace(s: &Setup) -> Result<Child> {
    let mut c = Command::new("bpftrace")
        .args(["-e", &bpftrace_program(&s.pids, s.port)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("bpftrace")?;
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = tx.send(line);
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) if line.starts_with("Attaching") => Ok(c),
        other => {
            let _ = c.kill();
            let mut err = String::new();
            if let Some(mut e) = c.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            let _ = c.wait();
            bail!(
                "bpftrace did not attach within 60 s: {other:?} {}",
                err.lines().take(3).collect::<Vec<_>>().join(" / ")
            );
        }
    }
}

fn wrk(url: &str, secs: u32) -> Result<f64> {
    let out = Command::new("wrk")
        .args(["-t1", "-c8", &format!("-d{secs}s"), url])
        .output()
        .context("wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    wrk_rps(&text).with_context(|| format!("wrk output: {text}"))
}

/// User + system CPU of a live process (every thread), seconds; 0 once it is gone.
fn proc_cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// User + system CPU of reaped children (wrk), seconds.
fn children_cpu_s() -> f64 {
    // SAFETY: plain getrusage into a zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// One wrk run: (requests/s, CPU µs per request of the server, wrk and the tracer together).
/// CPU per request moves much less than throughput when other tenants take the CPUs.
fn measure(s: &Setup, tool: Option<u32>, secs: u32) -> Result<(f64, f64)> {
    let cpu = || {
        s.cpu_pids
            .iter()
            .chain(&tool)
            .map(|&p| proc_cpu_s(p))
            .sum::<f64>()
            + children_cpu_s()
    };
    let c0 = cpu();
    let rps = wrk(&s.url, secs)?;
    let used = cpu() - c0;
    Ok((rps, 1e6 * used / (rps * secs as f64).max(1.0)))
}

fn env_num(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn start(name: &str) -> Result<Setup> {
    Ok(match name {
        "php" => {
            let cwd = TempDir::new("bench-fam-php");
            let stack = PhpStack::start_with(
                cwd.path(),
                4,
                "<?php echo \"ok\\n\";",
                PhpOptions {
                    listen_tcp: true,
                    ..Default::default()
                },
            );
            let mut pids = vec![stack.fpm.pid()];
            pids.extend(stack.workers());
            let mut cpu_pids = pids.clone();
            cpu_pids.push(stack.nginx.pid());
            cpu_pids.extend(children_of(stack.nginx.pid()));
            Setup {
                cpu_pids,
                name: "php",
                title: "php-fpm (4 workers, TCP) behind nginx, one FastCGI connection per request",
                pid: stack.fpm.pid(),
                pids,
                port: stack.fpm_port.context("php-fpm on TCP")?,
                url: stack.url(),
                _keep: Box::new((stack, cwd)),
            }
        }
        "nginx" => {
            let n = StaticNginx::start(&[("index.html", b"ok\n")]);
            let mut pids = vec![n.nginx.pid()];
            pids.extend(n.workers());
            Setup {
                cpu_pids: pids.clone(),
                name: "nginx",
                title: "nginx (1 worker) serving a static file over keep-alive",
                pid: n.nginx.pid(),
                pids,
                port: n.port,
                url: n.url("/index.html"),
                _keep: Box::new(n),
            }
        }
        "go" => {
            let bin = GoBinary::build();
            let cwd = TempDir::new("bench-fam-go");
            let app = AppServer::go(&bin, cwd.path(), Work::Plain);
            Setup {
                name: "go",
                title: "a Go net/http server over keep-alive",
                pid: app.proc.pid(),
                pids: vec![app.proc.pid()],
                cpu_pids: vec![app.proc.pid()],
                port: app.port,
                url: app.url(),
                _keep: Box::new((app, bin, cwd)),
            }
        }
        other => bail!("BENCH_TRACE_SETUPS: no setup {other:?} (php, nginx, go)"),
    })
}

pub fn run() -> Result<()> {
    let pairs = env_num("BENCH_TRACE_PAIRS", 5).max(1) as usize;
    let secs = env_num("BENCH_TRACE_SECS", 3).max(1);
    let setups = std::env::var("BENCH_TRACE_SETUPS").unwrap_or_else(|_| "php,nginx,go".into());
    let mut configs: Vec<Config> = (0..FAMILIES.len()).map(Config::Families).collect();
    if super::offcpu::ensure_bpftrace() {
        configs.push(Config::Bpftrace);
    }
    println!(
        "\nload average before: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    for name in setups.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s = start(name)?;
        let _ = wrk(&s.url, 2)?; // warm up
        let mut ratios: Vec<Vec<f64>> = vec![vec![]; configs.len()];
        let mut cpu: Vec<Vec<f64>> = vec![vec![]; configs.len()];
        let mut base: Vec<f64> = vec![];
        let mut base_cpu: Vec<f64> = vec![];
        for pair in 0..pairs {
            // Rotate the configurations each round; alternate the order within each pair.
            for i in (0..configs.len()).map(|k| (k + pair) % configs.len()) {
                let c = configs[i];
                let traced = |s: &Setup| -> Result<(f64, f64)> {
                    let a = Attached::to(c, s)?;
                    let r = measure(s, a.pid(), secs);
                    drop(a);
                    r
                };
                let (u, t) = if pair % 2 == 0 {
                    let u = measure(&s, None, secs)?;
                    (u, traced(&s))
                } else {
                    let t = traced(&s);
                    (measure(&s, None, secs)?, t)
                };
                match t {
                    Ok(t) => {
                        ratios[i].push(t.0 / u.0);
                        cpu[i].push(t.1 / u.1);
                        base.push(u.0);
                        base_cpu.push(u.1);
                    }
                    // bpftrace has been seen to hang on this locked-down kernel: a lost pair.
                    Err(e) if c == Config::Bpftrace => {
                        println!("  {} pair {pair} lost: {e}", c.name())
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        println!(
            "\n{}, wrk -t1 -c8, {pairs} ABBA pairs of {secs} s runs per row (untraced: median {:.0} req/s, {:.1} µs CPU per request):",
            s.title,
            median(&base),
            median(&base_cpu)
        );
        println!(
            "  {:<32} {:>10}  {:>10}  pairs (throughput)",
            "", "throughput", "CPU/req"
        );
        for (i, c) in configs.iter().enumerate() {
            if ratios[i].is_empty() {
                continue;
            }
            let m = median(&ratios[i]);
            let mc = median(&cpu[i]);
            let list: Vec<String> = ratios[i].iter().map(|r| format!("{r:.3}")).collect();
            println!(
                "  {:<32} {:>10.3}  {:>10.3}  {}",
                c.name(),
                m,
                mc,
                list.join(", ")
            );
            record(
                &format!("trace.families.{}.{}", s.name, c.key()),
                serde_json::json!({"ratio": m, "cpu_per_request_ratio": mc, "pairs": ratios[i], "cpu_pairs": cpu[i]}),
            );
        }
    }
    println!(
        "load average after: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    Ok(())
}
