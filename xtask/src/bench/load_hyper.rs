//! `cargo xtask bench load-hyper`: the generator's hand-written HTTP/1.1 client against hyper's
//! (`hyper::client::conn::http1`), like for like: the same `trapdetect load` binary, the same
//! scheduler, connection budget and recorder, only `--engine native|hyper` differs (issue 13:
//! the hand-written path may stay only if it is faster). Against the same nginx as `bench
//! load`, the same warm-up and window, both under the same scheduling policy, the two engines
//! alternate at every try (the order swapped each try), so a neighbour's build hits both.
//!
//! Per rate: CPU per request (the whole process, warm-up included), nginx's CPU per request,
//! scheduling lag p99, delivered. Rates 5,000/s and 20,000/s, then up the ladder until neither
//! engine holds a step (held: every request 2xx, ≥ 99 % delivered, lag p99 < 1 ms). Then peak
//! RSS of each engine with 10,000 requests in flight against a server that never answers.

use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::{
    load::{Nginx, Settings, Step, target_dir, trapdetect_step_with, wait_hwm},
    record,
};

/// 5,000 and 20,000 are the points; the rest climbs to each engine's highest rate.
const RATES: &[u64] = &[
    5_000, 10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 90_000, 100_000, 120_000,
];
const ENGINES: [&str; 2] = ["native", "hyper"];

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Peak RSS (MiB) of `trapdetect load --engine E` holding 10,000 requests in flight against
/// `misbehave never`, and its in-flight high-water mark.
fn memory(engine: &str) -> Result<(f64, Value)> {
    let mut server = Command::new(target_dir().join("misbehave"))
        .arg("never")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("start misbehave (cargo build --release builds it)")?;
    let mut port = String::new();
    {
        use std::io::BufRead;
        let stdout = server.stdout.take().context("misbehave stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut port)?;
    }
    let url = format!("http://127.0.0.1:{}/", port.trim());
    let child = Command::new(target_dir().join("trapdetect"))
        .args([
            "load",
            "--json",
            "-q",
            "--url",
            &url,
            "--rate",
            "1250",
            "--duration",
            "8s",
            "--timeout",
            "10s",
            "--max-connections",
            "10000",
            "--max-wait",
            "10s",
            "--engine",
            engine,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (hwm, out) = wait_hwm(child)?;
    drop(server.stdin.take());
    let _ = server.kill();
    let _ = server.wait();
    let v: Value = serde_json::from_str(&out).context("trapdetect JSON")?;
    Ok((hwm as f64 / 1024.0, v["in_flight"]["max"].clone()))
}

pub fn run() -> Result<()> {
    let s = Settings::from_env();
    let tries = std::env::var("BENCH_LOAD_TRIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2usize)
        .max(1);
    let nginx = Nginx::start(&s)?;
    let bin = target_dir().join("trapdetect");
    eprintln!(
        "trapdetect load --engine native vs --engine hyper (same scheduler, budget, recorder; \
         1 lane), {tries} interleaved tries per rate, against {}; scheduling: {}; load \
         average {}",
        nginx.url(),
        if s.fifo { "SCHED_FIFO 1" } else { "CFS" },
        loadavg()
    );
    // Per engine: still climbing, highest rate held (strict), highest delivered (lax).
    let mut climbing = [true, true];
    let mut strict = [0u64, 0];
    let mut lax = [0u64, 0];
    let mut rows = vec![];
    for &rate in RATES {
        if !climbing.iter().any(|c| *c) {
            break;
        }
        eprintln!("  rate {rate}/s (load average {})", loadavg());
        let mut steps: [Vec<Step>; 2] = [vec![], vec![]];
        for k in 0..tries {
            let order = if k % 2 == 0 { [0, 1] } else { [1, 0] };
            for e in order {
                if !climbing[e] {
                    continue;
                }
                let st = trapdetect_step_with(&s, &bin, &nginx, rate, &["--engine", ENGINES[e]])?;
                eprintln!("    {:<6} try {}: {}", ENGINES[e], k + 1, st.line(rate));
                steps[e].push(st);
            }
        }
        let mut row = serde_json::Map::new();
        row.insert("rate".into(), json!(rate));
        for e in 0..2 {
            let v = &steps[e];
            if v.is_empty() {
                continue;
            }
            if v.iter().any(|st| st.strict(rate)) {
                strict[e] = rate;
            }
            if v.iter().any(|st| st.lax(rate)) {
                lax[e] = rate;
            }
            climbing[e] = v.iter().any(|st| st.strict(rate) || st.lax(rate));
            let cpu: Vec<f64> = v.iter().map(|st| st.cpu_per_req_us).collect();
            let nginx_cpu: Vec<f64> = v.iter().map(|st| st.nginx_per_req_us).collect();
            let lag: Vec<f64> = v
                .iter()
                .map(|st| st.lag_us.map_or(f64::INFINITY, |l| l[1]))
                .collect();
            let delivered: Vec<f64> = v.iter().map(|st| st.delivered_per_s).collect();
            row.insert(
                ENGINES[e].into(),
                json!({
                    "cpu_per_req_us": cpu,
                    "nginx_cpu_per_req_us": nginx_cpu,
                    "lag_p99_us": lag,
                    "delivered_per_s": delivered,
                    "failed": v.iter().map(|st| st.failed).collect::<Vec<_>>(),
                    "held": v.iter().map(|st| st.strict(rate)).collect::<Vec<_>>(),
                    "others_cores": v.iter().map(|st| st.others_cores).collect::<Vec<_>>(),
                }),
            );
        }
        if !steps[0].is_empty() && !steps[1].is_empty() {
            let c = |e: usize| {
                mean(
                    &steps[e]
                        .iter()
                        .map(|x| x.cpu_per_req_us)
                        .collect::<Vec<_>>(),
                )
            };
            eprintln!(
                "    CPU per request, mean of tries: native {:.1} µs, hyper {:.1} µs, hyper ÷ \
                 native {:.2}",
                c(0),
                c(1),
                c(1) / c(0).max(1e-9)
            );
        }
        rows.push(Value::Object(row));
    }
    drop(nginx);
    eprintln!("  memory with 10,000 in flight (misbehave never, --max-connections 10000):");
    let mut mem = serde_json::Map::new();
    for e in ENGINES {
        let (mib, inflight) = memory(e)?;
        eprintln!("    {e:<6} peak RSS {mib:.1} MiB (in flight max {inflight})");
        mem.insert(e.into(), json!({"rss_mib": mib, "in_flight_max": inflight}));
    }
    eprintln!(
        "result: highest rate held (lag p99 < 1 ms): native {}/s, hyper {}/s; delivered \
         (≥ 99 %, all 2xx): native {}/s, hyper {}/s; load average {}",
        strict[0],
        strict[1],
        lax[0],
        lax[1],
        loadavg()
    );
    record(
        "load.engine_native_vs_hyper",
        json!({
            "scheduling": if s.fifo { "fifo" } else { "other" },
            "held": {"native": strict[0], "hyper": strict[1]},
            "delivered": {"native": lax[0], "hyper": lax[1]},
            "rates": rows,
            "memory_10k_in_flight": mem,
        }),
    );
    Ok(())
}
