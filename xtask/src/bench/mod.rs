//! `cargo xtask bench`: every figure measured side by side with its peer tool in one run,
//! reported as ratios. One module per area; each registers its benchmarks here. Results are
//! also written to target/bench/results.json.

use std::{collections::BTreeMap, sync::Mutex};

mod agent;
mod load;
mod load_hyper;

use anyhow::Result;

mod net;
mod net_probes;
mod offcpu;
mod preflight;
mod sample;
mod trace;
mod trace_families;

/// A named benchmark.
pub struct Bench {
    pub name: &'static str,
    pub run: fn() -> Result<()>,
}

fn all() -> Vec<Bench> {
    vec![
        Bench {
            name: "trace",
            run: trace::run,
        },
        Bench {
            name: "offcpu",
            run: offcpu::run,
        },
        Bench {
            name: "load",
            run: load::run,
        },
        Bench {
            name: "load-hyper",
            run: load_hyper::run,
        },
        Bench {
            name: "preflight",
            run: preflight::run,
        },
        Bench {
            name: "net",
            run: net::run,
        },
        Bench {
            name: "net-probes",
            run: net_probes::run,
        },
        Bench {
            name: "sample",
            run: sample::run,
        },
        Bench {
            name: "agent",
            run: agent::run,
        },
    ]
}

static RESULTS: Mutex<BTreeMap<String, serde_json::Value>> = Mutex::new(BTreeMap::new());

/// Records one figure for results.json.
pub fn record(key: &str, v: serde_json::Value) {
    RESULTS.lock().unwrap().insert(key.to_string(), v);
}

/// wrk's `Requests/sec:` figure from its output.
pub fn wrk_rps(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Median of a non-empty sample.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

pub fn run(filter: Option<&str>) -> Result<()> {
    // Fixtures find the release binaries here.
    unsafe {
        std::env::set_var(
            "TRAPDETECT_TARGET_DIR",
            crate::util::root().join("target/release"),
        )
    };
    // A bench's exact name runs that bench alone (`load` without `load-hyper`); otherwise
    // every bench whose name contains the filter.
    let exact = filter.is_some_and(|f| all().iter().any(|b| b.name == f));
    for b in all() {
        if filter.is_none_or(|f| b.name == f || (!exact && b.name.contains(f))) {
            eprintln!("== bench {}", b.name);
            (b.run)()?;
        }
    }
    let dir = crate::util::root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let out = serde_json::to_string_pretty(&*RESULTS.lock().unwrap())?;
    std::fs::write(dir.join("results.json"), out + "\n")?;
    eprintln!("results: {}", dir.join("results.json").display());
    Ok(())
}
