//! `cargo xtask soak`: one long `trapdetect run` (trace + open-loop load) against php-fpm with
//! worker churn (`pm.max_requests`, so workers exit and are forked anew all along) and client
//! churn (a new connection per request), sampled every 10 s for trapdetect's RSS and CPU; at the
//! end its counts are set against an independent one (the PHP script appends one byte per
//! request to a file) and its own event-loss counters. Not part of CI (30 minutes by default).
//! `--agent`: the same for `trapdetect agent` (issue 24's "RSS flat over 30 minutes").

use std::{
    io::Write,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};
use trapdetect_e2e::{
    TempDir,
    servers::{PhpOptions, PhpStack},
};

use crate::util::root;

/// Options of `cargo xtask soak`.
pub struct Options {
    /// Length of the run.
    pub minutes: u64,
    /// Offered rate, requests per second.
    pub rate: u64,
}

/// RSS (KiB) and user+system CPU ticks of a live process.
pub fn sample(pid: u32) -> Option<(u64, u64)> {
    let rss = status_kib(pid, "VmRSS:")?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((rss, ticks))
}

pub fn run(opts: &Options) -> Result<()> {
    ensure!(
        opts.minutes > 0 && opts.rate > 0,
        "--minutes and --rate must be > 0"
    );
    let bin = root().join("target/release/trapdetect");
    let dir = TempDir::new("soak");
    let count = dir.path().join("count");
    std::fs::write(&count, "")?;
    let script = format!(
        "<?php file_put_contents('{}', 'x', FILE_APPEND | LOCK_EX); echo \"ok\\n\";",
        count.display()
    );
    let stack = PhpStack::start_with(
        dir.path(),
        4,
        &script,
        PhpOptions {
            max_requests: 200,
            ..Default::default()
        },
    );
    // The stack's own readiness request(s) before the run are not the run's.
    let before = std::fs::metadata(&count)?.len();
    let json_out = dir.path().join("run.json");
    let secs = opts.minutes * 60;
    let mut child = Command::new(&bin)
        .args([
            "run",
            "--pid",
            &stack.fpm.pid().to_string(),
            "--url",
            &stack.url(),
        ])
        .args(["--rate", &opts.rate.to_string()])
        .args([
            "--duration",
            &format!("{secs}s"),
            "--no-keepalive",
            "--quiet",
        ])
        .arg("--json-out")
        .arg(&json_out)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn trapdetect run")?;
    let pid = child.id();
    let tick = 100.0; // USER_HZ on Linux
    let t0 = Instant::now();
    let mut rows: Vec<Value> = vec![];
    let mut last = sample(pid).map(|s| (t0.elapsed().as_secs_f64(), s.1));
    eprintln!(
        "xtask soak: {} min at {}/s; a row every 10 s",
        opts.minutes, opts.rate
    );
    eprintln!("  {:>6} {:>9} {:>7}", "t s", "RSS MiB", "CPU %");
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(secs + 120) {
            let _ = child.kill();
            bail!("trapdetect run did not end within its duration + 2 min");
        }
        std::thread::sleep(Duration::from_secs(10));
        if let (Some((rss, ticks)), Some((t_prev, ticks_prev))) = (sample(pid), last) {
            let t = t0.elapsed().as_secs_f64();
            let cpu = (ticks - ticks_prev) as f64 / tick / (t - t_prev) * 100.0;
            eprintln!("  {t:>6.0} {:>9.1} {cpu:>7.1}", rss as f64 / 1024.0);
            rows.push(
                json!({"t_s": t.round(), "rss_kib": rss, "cpu_pct": (cpu * 10.0).round() / 10.0}),
            );
            last = Some((t, ticks));
        }
    };
    let v: Value = serde_json::from_slice(&std::fs::read(&json_out).context("run's JSON")?)?;
    // The window's requests by three counts: the generator's 2xx, the tracer's request count,
    // and the server's own (one byte per request, drain included).
    let served_by_server = std::fs::metadata(&count)?.len() - before;
    let summary = json!({
        "minutes": opts.minutes,
        "rate_per_s": opts.rate,
        "exit_code": status.code(),
        "trusted": v["measurement"]["trusted"],
        "load_ok_2xx": v["load"]["ok_2xx"],
        "load_errors": v["load"]["errors_total"],
        "trace_requests": v["requests"]["count"],
        "server_count": served_by_server,
        "counters": v["measurement"]["counters"],
        "rss_kib_first": rows.first().map(|r| r["rss_kib"].clone()),
        "rss_kib_last": rows.last().map(|r| r["rss_kib"].clone()),
        "rss_kib_max": rows.iter().filter_map(|r| r["rss_kib"].as_u64()).max(),
        "cpu_pct_mean": if rows.is_empty() { 0.0 } else {
            rows.iter().filter_map(|r| r["cpu_pct"].as_f64()).sum::<f64>() / rows.len() as f64
        },
        "samples": rows,
    });
    let out_dir = root().join("target/soak");
    std::fs::create_dir_all(&out_dir)?;
    let path = out_dir.join("soak.json");
    std::fs::File::create(&path)?
        .write_all((serde_json::to_string_pretty(&summary)? + "\n").as_bytes())?;
    eprintln!(
        "xtask soak: exit {:?}, trusted {}; 2xx (generator) {}, requests (tracer) {}, \
         requests (server's own count) {}; RSS first {} KiB, last {} KiB, max {} KiB; CPU mean \
         {:.1} %; ring-buffer drops {}, map insert failures {}; {}",
        status.code(),
        summary["trusted"],
        summary["load_ok_2xx"],
        summary["trace_requests"],
        served_by_server,
        summary["rss_kib_first"],
        summary["rss_kib_last"],
        summary["rss_kib_max"],
        summary["cpu_pct_mean"].as_f64().unwrap_or(0.0),
        v["measurement"]["counters"]["ringbuf_drops"],
        v["measurement"]["counters"]["path_stats_insert_fails"],
        path.display()
    );
    drop(stack);
    Ok(())
}

/// `cargo xtask soak --agent`: `trapdetect agent` at 5 s windows (attached, judged and served
/// anew every window) on python's ThreadingHTTPServer, which starts a thread per request (new
/// thread ids all along, the agent's per-thread state churned), under `trapdetect load` at
/// `rate`; every 30 s the agent's RSS, peak RSS, descriptors and CPU, and the windows it served
/// by its own `/metrics`. RSS swings within a window (the object and BTF loaded while it
/// attaches); what must not grow is the peak and the RSS between windows.
pub fn agent(opts: &Options) -> Result<()> {
    ensure!(
        opts.minutes > 0 && opts.rate > 0,
        "--minutes and --rate must be > 0"
    );
    let bin = root().join("target/release/trapdetect");
    let dir = TempDir::new("soak-agent");
    std::fs::write(dir.path().join("index.html"), "ok\n")?;
    let port = trapdetect_e2e::free_port();
    let mut server = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("python3 -m http.server")?;
    trapdetect_e2e::wait_until("http.server to listen", Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let secs = opts.minutes * 60;
    let url = format!("http://127.0.0.1:{port}/index.html");
    let load = Command::new(&bin)
        .args(["load", "--url", &url, "--rate", &opts.rate.to_string()])
        .args(["--duration", &format!("{secs}s"), "-q", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawn trapdetect load")?;
    let listen = trapdetect_e2e::free_port();
    let mut agent = Command::new(&bin)
        .args([
            "agent",
            "--pid",
            &server.id().to_string(),
            "--window",
            "5s",
            "-q",
        ])
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn trapdetect agent")?;
    let pid = agent.id();
    eprintln!(
        "xtask soak --agent: {} min at {}/s, 5 s windows; a row every 30 s",
        opts.minutes, opts.rate
    );
    eprintln!(
        "  {:>6} {:>9} {:>9} {:>5} {:>7} {:>8}",
        "t s", "RSS MiB", "peak MiB", "fds", "CPU %", "windows"
    );
    let t0 = Instant::now();
    let mut rows: Vec<Value> = vec![];
    let mut last = sample(pid).map(|s| (0.0, s.1));
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_secs(30));
        if let Some(s) = agent.try_wait()? {
            bail!("the agent exited early: {s}");
        }
        let (Some((rss, ticks)), Some((t_prev, ticks_prev))) = (sample(pid), last) else {
            continue;
        };
        let t = t0.elapsed().as_secs_f64();
        let cpu = (ticks - ticks_prev) as f64 / 100.0 / (t - t_prev) * 100.0;
        let peak = status_kib(pid, "VmHWM:").unwrap_or(0);
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))?.count();
        let windows = windows_served(listen).unwrap_or(0);
        eprintln!(
            "  {t:>6.0} {:>9.1} {:>9.1} {fds:>5} {cpu:>7.1} {windows:>8}",
            rss as f64 / 1024.0,
            peak as f64 / 1024.0
        );
        rows.push(
            json!({"t_s": t.round(), "rss_kib": rss, "peak_kib": peak, "fds": fds,
            "cpu_pct": (cpu * 10.0).round() / 10.0, "windows": windows}),
        );
        last = Some((t, ticks));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = agent.wait()?;
    let load_out = load.wait_with_output()?;
    let _ = server.kill();
    let _ = server.wait();
    let l: Value = serde_json::from_slice(&load_out.stdout).context("load JSON")?;
    agent_summary(opts, &rows, status.code(), &l)
}

/// `soak --agent`'s summary: written to target/soak/soak-agent.json and said in one line.
fn agent_summary(opts: &Options, rows: &[Value], code: Option<i32>, l: &Value) -> Result<()> {
    let peak = |r: Option<&Value>| r.map(|r| r["peak_kib"].clone());
    let summary = json!({
        "minutes": opts.minutes,
        "rate_per_s": opts.rate,
        "agent_exit_code": code,
        "delivered_per_s": l["delivered_rate_per_s"],
        "windows": rows.last().map(|r| r["windows"].clone()),
        "peak_kib_first": peak(rows.first()),
        "peak_kib_last": peak(rows.last()),
        "rss_kib_min": rows.iter().filter_map(|r| r["rss_kib"].as_u64()).min(),
        "rss_kib_max": rows.iter().filter_map(|r| r["rss_kib"].as_u64()).max(),
        "fds_max": rows.iter().filter_map(|r| r["fds"].as_u64()).max(),
        "samples": rows,
    });
    let out_dir = root().join("target/soak");
    std::fs::create_dir_all(&out_dir)?;
    let path = out_dir.join("soak-agent.json");
    std::fs::File::create(&path)?
        .write_all((serde_json::to_string_pretty(&summary)? + "\n").as_bytes())?;
    eprintln!(
        "xtask soak --agent: exit {:?}; {} windows; delivered {}/s; peak RSS {} KiB after 30 s, \
         {} KiB at the end; RSS {}-{} KiB; descriptors at most {}; {}",
        code,
        summary["windows"],
        summary["delivered_per_s"],
        summary["peak_kib_first"],
        summary["peak_kib_last"],
        summary["rss_kib_min"],
        summary["rss_kib_max"],
        summary["fds_max"],
        path.display()
    );
    Ok(())
}

/// A `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `trapdetect_agent_windows` from the agent's `/metrics`.
fn windows_served(port: u16) -> Option<u64> {
    use std::io::Read;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    c.read_to_string(&mut body).ok()?;
    body.lines()
        .find(|l| l.starts_with("trapdetect_agent_windows{"))?
        .rsplit(' ')
        .next()?
        .parse::<f64>()
        .ok()
        .map(|w| w as u64)
}
