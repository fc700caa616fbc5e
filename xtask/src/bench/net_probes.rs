//! Overhead of the traced socket probes, side by side in one run. First the worst case in
//! isolation: one process that connects to its own listener one connection at a time (every
//! state change is on a watched port, every connect() is watched), untraced, with the path
//! probes only, and with the full set; the difference is the cost per connection. Then nginx
//! (one process) under
//! `wrk`, both in a namespace made for the bench, untraced and traced three ways: the path
//! probes alone (the probe set before the socket probes), the socket probes alone (TCP state
//! changes, and connect() with wrk as the watched client), and the full set. Keep-alive is the
//! claim to check (the socket probes fire per connection, not per request); `Connection:
//! close` is the worst case (every request is a connection: about ten TCP state changes and one
//! connect()). Rounds are interleaved; medians and ratios to untraced are reported.

use std::{
    io::Write,
    process::{Child, ChildStdin, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use trapdetect_e2e::{TempDir, Tracer, netns::NetNs, netpeer::Peer, wait_until};

use super::{median, record};

const ROUNDS: usize = 9;
const SECS: u32 = 3;
const PORT: u16 = 8090;

/// Programs of the path-syscall family (everything but the socket probes and the process
/// lifecycle). The syscall dispatch (`sys_enter_path`/`sys_exit_path`) also carries the
/// watched clients' connect(), so "socket probes only" keeps it and leaves its path part idle
/// (the target is nginx, whose path calls are few under wrk).
const PATH_PROGRAMS: &[&str] = &["sys_exit_accept", "fuse_request_send", "fuse_request_end"];
const SOCKET_PROGRAMS: &[&str] = &[
    "inet_sock_set_state",
    "sys_enter_connect",
    "sys_exit_connect",
];

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Untraced,
    PathOnly,
    SocketOnly,
    Full,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::PathOnly => "path probes only",
            Mode::SocketOnly => "socket probes only",
            Mode::Full => "full probe set",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::PathOnly => "path_only",
            Mode::SocketOnly => "socket_only",
            Mode::Full => "full",
        }
    }
}

/// `wrk` started inside the namespace but held before exec, so the tracer can be told its pid
/// first.
struct Wrk {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
}

impl Wrk {
    fn spawn(ns: &NetNs, close: bool) -> Result<Wrk> {
        let header = if close { "-H 'Connection: close' " } else { "" };
        let script =
            format!("read go; exec wrk -t1 -c8 -d{SECS}s {header}http://127.0.0.1:{PORT}/");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = ns.enter_on_exec(&mut cmd).spawn().context("wrk")?;
        let stdin = child.stdin.take();
        Ok(Wrk {
            child: Some(child),
            stdin,
        })
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Runs wrk; returns (requests/s, CPU µs per request of nginx and wrk together). CPU is
    /// what the probes add to; it moves much less than throughput with other load on the host.
    fn run(mut self, nginx: u32) -> Result<(f64, f64)> {
        let (n0, w0) = (proc_cpu_s(nginx)?, children_cpu_s());
        writeln!(self.stdin.take().context("stdin")?, "go")?;
        let out = self.child.take().context("wrk")?.wait_with_output()?;
        let (n1, w1) = (proc_cpu_s(nginx)?, children_cpu_s());
        if !out.status.success() {
            bail!("wrk exited with {}", out.status);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let rate = super::wrk_rps(&text).with_context(|| format!("wrk output: {text}"))?;
        let requests: f64 = text
            .lines()
            .find_map(|l| l.trim().split_once(" requests in "))
            .and_then(|(n, _)| n.trim().parse().ok())
            .with_context(|| format!("wrk output: {text}"))?;
        Ok((rate, 1e6 * ((n1 - n0) + (w1 - w0)) / requests.max(1.0)))
    }
}

impl Drop for Wrk {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// User + system CPU of a process, seconds (/proc/PID/stat utime and stime).
fn proc_cpu_s(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit(')').next().context("stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz)
}

/// User + system CPU of reaped children, seconds.
fn children_cpu_s() -> f64 {
    // SAFETY: plain getrusage into a zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn tracer(mode: Mode, nginx: u32, wrk: u32) -> Option<Tracer> {
    let skip: &[&str] = match mode {
        Mode::Untraced => return None,
        Mode::PathOnly => SOCKET_PROGRAMS,
        Mode::SocketOnly => PATH_PROGRAMS,
        Mode::Full => &[],
    };
    let (n, w) = (nginx.to_string(), wrk.to_string());
    let mut args = vec!["--pid", &n, "--duration", "600s", "--quiet"];
    if mode != Mode::PathOnly {
        args.extend(["--watch-client", &w]);
    }
    for s in skip {
        args.extend(["--skip-probe", s]);
    }
    Some(Tracer::start(&args))
}

fn nginx(ns: &NetNs, dir: &TempDir) -> Result<u32> {
    let d = dir.path().display().to_string();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
               keepalive_requests 1000000;\n\
               server {{ listen 127.0.0.1:{PORT} backlog=4096; location / {{ return 200 \"ok\\n\"; }} }} }}\n"
        ),
    )?;
    let pid = ns.spawn(Command::new("nginx").args([
        "-e",
        &format!("{d}/error.log"),
        "-c",
        conf.to_str().context("path")?,
    ]));
    wait_until("nginx to listen", Duration::from_secs(10), || {
        let o = ns.exec(
            &["sh", "-c", &format!("ss -Htln sport = :{PORT} | wc -l")],
            Duration::from_secs(10),
        );
        String::from_utf8_lossy(&o.stdout).trim() == "1"
    });
    Ok(pid)
}

/// The connection loop under each mode: (connections per second, CPU µs per connection).
fn loop_round(ns: &NetNs, mode: Mode, port: u16) -> Result<(f64, f64)> {
    let mut p = Peer::conn_loop(ns, &format!("127.0.0.1:{port}"), SECS as f64);
    let t = tracer(mode, p.pid(), p.pid());
    let r = p.go();
    drop(t.map(Tracer::interrupt));
    match r[..] {
        [rate, cpu_ns] => Ok((rate as f64, cpu_ns as f64 / 1000.0)),
        _ => bail!("netpeer loop said {r:?}"),
    }
}

fn connection_loop(ns: &NetNs) -> Result<()> {
    let modes = [Mode::Untraced, Mode::PathOnly, Mode::Full];
    let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
    let mut cpus: Vec<Vec<f64>> = vec![vec![]; modes.len()];
    let mut port = 9100;
    for round in 0..ROUNDS {
        for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
            // A fresh port per run: the last run's TIME_WAIT stays on its own.
            port += 1;
            let (r, c) = loop_round(ns, modes[i], port)?;
            rates[i].push(r);
            cpus[i].push(c);
        }
    }
    let (base, base_cpu) = (median(&rates[0]), median(&cpus[0]));
    println!(
        "\none process connecting to itself, one connection at a time (server closes first), median of {ROUNDS} interleaved {SECS} s runs:"
    );
    for (i, m) in modes.iter().enumerate() {
        let (r, c) = (median(&rates[i]), median(&cpus[i]));
        println!(
            "  {:<19} {:>8.0} conn/s  {:>6.1} % of untraced   CPU {:.2} µs per connection ({:+.2})",
            m.name(),
            r,
            100.0 * r / base,
            c,
            c - base_cpu
        );
        record(
            &format!("net_probes.connection_loop.{}", m.key()),
            serde_json::json!({"conn_per_s": r, "ratio": r / base, "cpu_us_per_connection": c, "cpu_us_added_per_connection": c - base_cpu, "runs": rates[i], "cpu_runs": cpus[i]}),
        );
    }
    let socket_us = median(&cpus[2]) - median(&cpus[1]);
    println!(
        "  the socket probes alone: {socket_us:+.2} µs of CPU per connection (full set minus path probes)"
    );
    record(
        "net_probes.connection_loop.socket_probes_cpu_us_per_connection",
        serde_json::json!(socket_us),
    );
    Ok(())
}

pub fn run() -> Result<()> {
    let ns = NetNs::new("bnp");
    // Connection: close leaves one TIME_WAIT per request on nginx's side; let the kernel reuse
    // client ports freely so the worst case measures the probes, not port exhaustion.
    ns.sysctl("net.ipv4.ip_local_port_range", "1024 65535");
    ns.sysctl("net.ipv4.tcp_tw_reuse", "1");
    connection_loop(&ns)?;
    let dir = TempDir::new("bench-net-probes");
    let pid = nginx(&ns, &dir)?;
    let modes = [Mode::Untraced, Mode::PathOnly, Mode::SocketOnly, Mode::Full];
    for (close, label) in [(false, "keep-alive"), (true, "Connection: close")] {
        // Warm up.
        Wrk::spawn(&ns, close)?.run(pid)?;
        let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
        let mut cpus: Vec<Vec<f64>> = vec![vec![]; modes.len()];
        for round in 0..ROUNDS {
            for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
                let wrk = Wrk::spawn(&ns, close)?;
                let t = tracer(modes[i], pid, wrk.pid());
                let (rate, cpu) = wrk.run(pid)?;
                rates[i].push(rate);
                cpus[i].push(cpu);
                if let Some(t) = t {
                    let _ = t.interrupt();
                }
            }
        }
        let (base, base_cpu) = (median(&rates[0]), median(&cpus[0]));
        println!(
            "\nnginx (1 process) + wrk -t1 -c8 {label}, in a namespace, median of {ROUNDS} interleaved {SECS} s runs:"
        );
        for (i, m) in modes.iter().enumerate() {
            let (r, c) = (median(&rates[i]), median(&cpus[i]));
            let (lo, hi) = rates[i]
                .iter()
                .fold((f64::MAX, 0f64), |(l, h), v| (l.min(*v), h.max(*v)));
            println!(
                "  {:<19} {:>8.0} req/s  {:>6.1} % of untraced  (runs {:.0}..{:.0})  CPU {:.2} µs/request ({:+.2})",
                m.name(),
                r,
                100.0 * r / base,
                lo,
                hi,
                c,
                c - base_cpu
            );
            record(
                &format!(
                    "net_probes.nginx_{}.{}",
                    if close { "close" } else { "keepalive" },
                    m.key()
                ),
                serde_json::json!({"req_per_s": r, "ratio": r / base, "runs": rates[i], "cpu_us_per_request": c, "cpu_us_added_per_request": c - base_cpu}),
            );
        }
    }
    Ok(())
}
