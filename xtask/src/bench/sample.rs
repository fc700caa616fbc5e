//! Cost of the /proc sampling backend (`--backend sample`): php-fpm+nginx at saturation,
//! untraced and sampled at 200 Hz and 1 kHz, rounds interleaved, medians and ratios; and the
//! sampler's own CPU per thread sample, from each sampled run's report.

use std::time::Duration;

use anyhow::{Context, Result};
use trapdetect_e2e::{TempDir, Tracer, servers::PhpStack};

use super::{median, record};
use crate::util::wrk;

const ROUNDS: usize = 5;

/// Sampling rates compared with the untraced server (0: untraced).
const MODES: [u32; 3] = [0, 200, 1000];

fn name(hz: u32) -> String {
    if hz == 0 {
        "untraced".into()
    } else {
        format!("sampled at {hz} Hz")
    }
}

pub fn run() -> Result<()> {
    let dir = TempDir::new("bench-sample");
    let stack = PhpStack::start(dir.path(), 4, "<?php echo \"ok\\n\";");
    let _ = wrk(&stack.url(), 2)?;
    let mut rates: Vec<Vec<f64>> = vec![vec![]; MODES.len()];
    // (sampler CPU s, thread samples, window s) per rate.
    let mut cost: Vec<Vec<(f64, f64, f64)>> = vec![vec![]; MODES.len()];
    for round in 0..ROUNDS {
        for i in (0..MODES.len()).map(|k| (k + round) % MODES.len()) {
            let hz = MODES[i];
            let tracer = (hz > 0).then(|| {
                Tracer::start(&[
                    "trace",
                    "--pid",
                    &stack.fpm.pid().to_string(),
                    "--backend",
                    "sample",
                    "--sample-hz",
                    &hz.to_string(),
                    "--duration",
                    "600s",
                    "--json",
                    "--quiet",
                ])
            });
            std::thread::sleep(Duration::from_millis(100));
            rates[i].push(wrk(&stack.url(), 4)?);
            if let Some(t) = tracer {
                let out = t.interrupt();
                let v: serde_json::Value =
                    serde_json::from_slice(&out.stdout).context("sampled trace JSON")?;
                let s = &v["sample"];
                cost[i].push((
                    s["sampler_cpu_s"].as_f64().unwrap_or(0.0),
                    s["thread_samples"].as_f64().unwrap_or(0.0),
                    v["window_s"].as_f64().unwrap_or(0.0),
                ));
            }
        }
    }
    let base = median(&rates[0]);
    println!(
        "\nphp-fpm (4 workers) + nginx at saturation, wrk -t1 -c8, median of {ROUNDS} interleaved 4 s runs:"
    );
    for (i, hz) in MODES.iter().enumerate() {
        let r = median(&rates[i]);
        let (cpu_us_per_sample, cores) = if cost[i].is_empty() {
            (None, None)
        } else {
            let per: Vec<f64> = cost[i]
                .iter()
                .map(|(c, n, _)| c * 1e6 / n.max(1.0))
                .collect();
            let cores: Vec<f64> = cost[i].iter().map(|(c, _, w)| c / w.max(1e-9)).collect();
            (Some(median(&per)), Some(median(&cores)))
        };
        println!(
            "  {:<20} {:>8.0} req/s  {:>6.1} % of untraced{}",
            name(*hz),
            r,
            100.0 * r / base,
            match (cpu_us_per_sample, cores) {
                (Some(p), Some(c)) => format!(
                    "  sampler: {p:.1} µs of CPU per thread sample, {:.1} % of a core",
                    c * 100.0
                ),
                _ => String::new(),
            }
        );
        record(
            &format!("sample.php_fpm.{}", name(*hz)),
            serde_json::json!({"req_per_s": r, "ratio": r / base, "sampler_us_per_thread_sample": cpu_us_per_sample, "sampler_cores": cores}),
        );
    }
    Ok(())
}
