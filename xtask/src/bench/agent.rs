//! Cost of `trapdetect agent` (issue 24): a server held at a fixed rate by `trapdetect load`
//! (open loop) — php-fpm behind nginx at 1,000 req/s, nginx serving a static file over
//! keep-alive at 10,000 req/s — while `trace` holds one window of the whole run, and while the
//! agent runs 10 s windows over it. Reported: each tracer's own process CPU (its user space:
//! the eBPF programs' time is charged to the traced threads and is `trace`'s per-syscall cost,
//! the same for both), as % of one core, the agent's beyond `trace`'s; the agent's RSS after
//! its first window and at the end; the time a `/metrics` scrape takes (20 scrapes); the CPU
//! a window costs beyond `trace`'s (attaching: mostly the verifier, in the kernel; judging),
//! and what that makes at the default 60 s window; the eBPF programs' own share of one CPU
//! (the kernel's run-time statistics: `tracer.bpf_cpu_pct`) in trace's window and in the
//! agent's last. Both with the off-CPU probes attached (`trace --offcpu`; the agent's
//! default), so both split the threads' time.
//! `TRAPDETECT_AGENT_BENCH_SECONDS` sets the run's length (default 60; 1800 for the 30-minute
//! RSS check).

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use trapdetect_e2e::{
    TempDir, bin, free_port,
    servers::{PhpStack, StaticNginx},
};

use super::{median, record};

/// User + system CPU seconds and resident KiB of a live process, from /proc.
fn usage(pid: u32) -> Option<(f64, u64)> {
    let (rss, ticks) = crate::soak::sample(pid)?;
    Some((ticks as f64 / 100.0, rss))
}

/// The open-loop load for `secs` at `rate` against `url`.
fn load(url: &str, rate: u32, secs: u64) -> Result<Child> {
    Command::new(bin())
        .args(["load", "--url", url, "--rate", &rate.to_string()])
        .args(["--duration", &format!("{secs}s"), "-q", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("start trapdetect load")
}

fn delivered(c: Child) -> Result<f64> {
    let out = c.wait_with_output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("load JSON")?;
    Ok(v["delivered_rate_per_s"].as_f64().unwrap_or(0.0))
}

/// One GET of /metrics: its wall time and the text.
fn scrape(port: u16) -> Result<(Duration, String)> {
    let t = Instant::now();
    let mut c = TcpStream::connect(("127.0.0.1", port))?;
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut body = vec![];
    c.read_to_end(&mut body)?;
    anyhow::ensure!(body.starts_with(b"HTTP/1.1 200"), "scrape failed");
    Ok((t.elapsed(), String::from_utf8_lossy(&body).into_owned()))
}

/// A gauge's value in a scrape.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))?
        .rsplit(' ')
        .next()?
        .parse()
        .ok()
}

struct Figures {
    trace_cpu_pct: f64,
    agent_cpu_pct: f64,
    rss_first_kib: u64,
    rss_end_kib: u64,
    scrape_ms: (f64, f64),
    rates: [f64; 2],
    /// The eBPF programs' share of one CPU, %: trace's window, the agent's last.
    bpf_pct: [f64; 2],
    /// Windows the agent completed, and its CPU seconds beyond trace's over the run, per
    /// window.
    windows: f64,
    per_window_cpu_s: f64,
}

/// The trace run, then the agent run, each under the same load.
fn measure(pid: u32, url: &str, rate: u32, secs: u64) -> Result<Figures> {
    // trace: one window of the whole run.
    let l = load(url, rate, secs)?;
    let t = Command::new(bin())
        .args([
            "trace",
            "--pid",
            &pid.to_string(),
            "-q",
            "--json",
            "--offcpu",
        ])
        .args(["--duration", &format!("{secs}s")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    std::thread::sleep(Duration::from_secs(secs) - Duration::from_millis(500));
    let (trace_cpu, _) = usage(t.id()).context("trace's /proc")?;
    let out = t.wait_with_output()?;
    let trace_doc: serde_json::Value = serde_json::from_slice(&out.stdout).context("trace JSON")?;
    anyhow::ensure!(
        trace_doc["threads"].is_object(),
        "trace --offcpu gave no threads section"
    );
    let trace_bpf = trace_doc["tracer"]["bpf_cpu_pct"].as_f64().unwrap_or(0.0);
    let trace_rate = delivered(l)?;
    // agent: 10 s windows.
    let port = free_port();
    let l = load(url, rate, secs)?;
    let mut a = Command::new(bin())
        .args(["agent", "--pid", &pid.to_string(), "--window", "10s", "-q"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(12));
    let (_, rss_first) = usage(a.id()).context("agent's /proc")?;
    let mut scrapes = vec![];
    for _ in 0..20 {
        scrapes.push(scrape(port)?.0.as_secs_f64() * 1e3);
    }
    let left =
        Duration::from_secs(secs).saturating_sub(start.elapsed() + Duration::from_millis(500));
    std::thread::sleep(left);
    let (agent_cpu, rss_end) = usage(a.id()).context("agent's /proc")?;
    let agent_s = start.elapsed().as_secs_f64();
    let last = scrape(port)?.1;
    let windows = gauge(&last, "trapdetect_agent_windows").unwrap_or(0.0);
    let agent_bpf = gauge(&last, "trapdetect_tracer_cpu_ratio").unwrap_or(0.0) * 100.0;
    let trace_per_s = trace_cpu / (secs as f64 - 0.5);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(a.id() as i32, libc::SIGTERM) };
    let _ = a.wait();
    let agent_rate = delivered(l)?;
    let max = scrapes.iter().copied().fold(0.0, f64::max);
    Ok(Figures {
        trace_cpu_pct: trace_per_s * 100.0,
        windows,
        per_window_cpu_s: (agent_cpu - trace_per_s * agent_s) / windows.max(1.0),
        agent_cpu_pct: agent_cpu / agent_s * 100.0,
        rss_first_kib: rss_first,
        rss_end_kib: rss_end,
        scrape_ms: (median(&scrapes), max),
        rates: [trace_rate, agent_rate],
        bpf_pct: [trace_bpf, agent_bpf],
    })
}

pub fn run() -> Result<()> {
    let secs: u64 = std::env::var("TRAPDETECT_AGENT_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
        .max(20);
    let dir = TempDir::new("bench-agent");
    let php = PhpStack::start(dir.path(), 4, "<?php echo \"ok\\n\";");
    let nginx = StaticNginx::start(&[("index.html", b"ok\n")]);
    let cases = [
        (
            "php-fpm + nginx, one FastCGI connection a request",
            php.fpm.pid(),
            php.url(),
            1_000,
        ),
        (
            "nginx static, keep-alive",
            nginx.nginx.pid(),
            nginx.url("/index.html"),
            10_000,
        ),
    ];
    println!(
        "\ntrapdetect agent (10 s windows) against trace (one window), {secs} s each, the same open-loop load:"
    );
    println!(
        "{:<52} {:>7} {:>7} {:>8} {:>7} {:>9} {:>7} {:>11} {:>9} {:>9} {:>12} {:>11}",
        "server @ rate",
        "trace %",
        "agent %",
        "beyond %",
        "windows",
        "s/window",
        "@60s %",
        "2xx/s t|a",
        "RSS 1st",
        "RSS end",
        "scrape ms",
        "eBPF % t|a"
    );
    for (what, pid, url, rate) in cases {
        let f = measure(pid, &url, rate, secs)?;
        let beyond = f.agent_cpu_pct - f.trace_cpu_pct;
        // At the default 60 s window the same cost a window is spread over 60 s.
        let at_60 = f.per_window_cpu_s / 60.0 * 100.0;
        println!(
            "{:<52} {:>7.2} {:>7.2} {:>8.2} {:>7.0} {:>9.3} {:>7.2} {:>5.0}|{:<5.0} {:>8}K {:>8}K {:>5.2}|{:<6.2} {:>5.2}|{:<5.2}",
            format!("{what} @ {rate}/s"),
            f.trace_cpu_pct,
            f.agent_cpu_pct,
            beyond,
            f.windows,
            f.per_window_cpu_s,
            at_60,
            f.rates[0],
            f.rates[1],
            f.rss_first_kib,
            f.rss_end_kib,
            f.scrape_ms.0,
            f.scrape_ms.1,
            f.bpf_pct[0],
            f.bpf_pct[1]
        );
        record(
            &format!("agent/{rate}"),
            serde_json::json!({
                "seconds": secs,
                "trace_cpu_pct_of_one_core": f.trace_cpu_pct,
                "agent_cpu_pct_of_one_core": f.agent_cpu_pct,
                "agent_beyond_trace_pct": beyond,
                "windows": f.windows,
                "cpu_s_per_window_beyond_trace": f.per_window_cpu_s,
                "beyond_trace_pct_at_60s_windows": at_60,
                "delivered_per_s": {"trace": f.rates[0], "agent": f.rates[1]},
                "agent_rss_kib": {"first_window": f.rss_first_kib, "end": f.rss_end_kib},
                "scrape_ms": {"median": f.scrape_ms.0, "max": f.scrape_ms.1},
                "ebpf_cpu_pct_of_one_core": {"trace": f.bpf_pct[0], "agent_last_window": f.bpf_pct[1]},
            }),
        );
    }
    Ok(())
}
