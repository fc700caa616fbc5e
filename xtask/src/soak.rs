//! `cargo xtask soak`: one long `trapdetect run` (trace + open-loop load) against php-fpm with
//! worker churn (`pm.max_requests`, so workers exit and are forked anew all along) and client
//! churn (a new connection per request), sampled every 10 s for trapdetect's RSS and CPU; at the
//! end its counts are set against an independent one (the PHP script appends one byte per
//! request to a file) and its own event-loss counters. Not part of CI (30 minutes by default).

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
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
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
