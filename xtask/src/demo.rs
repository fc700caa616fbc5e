//! `cargo xtask demo` (being built).
use anyhow::Result;

pub fn run() -> Result<()> {
    anyhow::bail!("demo is being built")
}
