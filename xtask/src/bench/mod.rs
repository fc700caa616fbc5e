//! `cargo xtask bench`: every figure measured side by side with its peer tool in one run,
//! reported as ratios. One module per area; each registers its benchmarks here.

use anyhow::Result;

/// A named benchmark.
pub struct Bench {
    pub name: &'static str,
    pub run: fn() -> Result<()>,
}

fn all() -> Vec<Bench> {
    vec![]
}

pub fn run(filter: Option<&str>) -> Result<()> {
    for b in all() {
        if filter.is_none_or(|f| b.name.contains(f)) {
            eprintln!("== bench {}", b.name);
            (b.run)()?;
        }
    }
    Ok(())
}
