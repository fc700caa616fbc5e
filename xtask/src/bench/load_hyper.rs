//! `cargo xtask bench load-hyper`: the generator's hand-written HTTP/1.1 path against hyper's
//! client (hyper-util's pooled legacy client) at the same job, in one run: open loop, one
//! thread, keep-alive, the same nginx, the same rates, warm-up and window as `bench load`.
//! Figures: CPU per request (the thread's own rusage for hyper, the process's for trapdetect)
//! and what each delivered. The hyper loop paces with tokio's timer (1 ms ticks), so its lag
//! is reported but is not the comparison: the cost of the client is.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use serde_json::json;

use super::{
    load::{Nginx, STEP_S, Settings, WARMUP_S, target_dir, trapdetect_step},
    record,
};

const RATES: &[u64] = &[5_000, 20_000];

/// What the hyper loop measured.
struct HyperRun {
    ok: u64,
    cpu_per_req_us: f64,
    lag_p99_us: f64,
}

fn thread_cpu_s() -> f64 {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Open loop with hyper on one current-thread runtime: arrival i at i / rate, each its own
/// task, responses read whole; waits for every request (2 s timeout each).
fn hyper_run(url: &str, rate: u64, fifo: bool) -> Result<HyperRun> {
    let uri: hyper::Uri = url.parse().context("url")?;
    let n = rate * (WARMUP_S + STEP_S);
    std::thread::spawn(move || -> Result<HyperRun> {
        if fifo {
            // The same SCHED_FIFO 1 `bench load` gives nginx and every tool (pid 0: this thread).
            let p = libc::sched_param { sched_priority: 1 };
            // SAFETY: a valid sched_param for the calling thread.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let c0 = thread_cpu_s();
        let (ok, lags) = rt.block_on(async move {
            let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
                .pool_max_idle_per_host(usize::MAX)
                .build_http();
            let ok = Arc::new(AtomicU64::new(0));
            let done = Arc::new(AtomicU64::new(0));
            let mut lags = Vec::with_capacity(n as usize);
            let start = tokio::time::Instant::now();
            for i in 0..n {
                let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                tokio::time::sleep_until(due).await;
                lags.push((tokio::time::Instant::now() - due).as_secs_f64() * 1e6);
                let (c, u, ok, done) = (client.clone(), uri.clone(), ok.clone(), done.clone());
                tokio::spawn(async move {
                    let r = tokio::time::timeout(Duration::from_secs(2), async {
                        let resp = c.get(u).await.ok()?;
                        let success = resp.status().is_success();
                        resp.into_body().collect().await.ok()?;
                        Some(success)
                    })
                    .await;
                    if let Ok(Some(true)) = r {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
            while done.load(Ordering::Relaxed) < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ok.load(Ordering::Relaxed), lags)
        });
        let cpu = thread_cpu_s() - c0;
        let mut lags = lags;
        lags.sort_by(f64::total_cmp);
        let p99 = lags
            .get((lags.len() as f64 * 0.99) as usize)
            .copied()
            .unwrap_or(f64::INFINITY);
        Ok(HyperRun {
            ok,
            cpu_per_req_us: cpu / n.max(1) as f64 * 1e6,
            lag_p99_us: p99,
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the hyper thread panicked"))?
}

pub fn run() -> Result<()> {
    let s = Settings::from_env();
    let nginx = Nginx::start(&s)?;
    let bin = target_dir().join("trapdetect");
    let url = nginx.url();
    eprintln!(
        "hand-written HTTP/1.1 (trapdetect load, 1 lane) vs hyper's client, open loop, {WARMUP_S}s \
         warm-up + {STEP_S}s, against {url}"
    );
    let mut rows = vec![];
    for &rate in RATES {
        let td = trapdetect_step(&s, &bin, &nginx, rate)?;
        let hy = hyper_run(&url, rate, s.fifo)?;
        let all = rate * (WARMUP_S + STEP_S);
        eprintln!(
            "  {rate}/s: trapdetect {:.1} µs CPU/request, delivered {:.0}/s, lag p99 {:.0} µs · \
             hyper {:.1} µs CPU/request, {} of {all} 2xx, lag p99 {:.0} µs · hyper/trapdetect \
             CPU {:.2}",
            td.cpu_per_req_us,
            td.delivered_per_s,
            td.lag_us.map_or(f64::INFINITY, |l| l[1]),
            hy.cpu_per_req_us,
            hy.ok,
            hy.lag_p99_us,
            hy.cpu_per_req_us / td.cpu_per_req_us.max(1e-9)
        );
        rows.push(json!({
            "rate": rate,
            "trapdetect_cpu_per_req_us": td.cpu_per_req_us,
            "trapdetect_failed": td.failed,
            "hyper_cpu_per_req_us": hy.cpu_per_req_us,
            "hyper_ok": hy.ok,
            "requests": all,
        }));
    }
    record("load.hyper_vs_handwritten", json!(rows));
    drop(nginx);
    Ok(())
}
