//! Process helpers for xtask.

use std::{path::PathBuf, process::Command};

use anyhow::{Context, Result, bail};

/// The workspace root (xtask lives one level below it).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Runs a command, inheriting stdio; fails with its exit status.
pub fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("spawn {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} exited with {status}");
    }
    Ok(())
}

/// A cargo command in the workspace root, without what `cargo run` set for xtask itself:
/// build scripts that track `CARGO_MANIFEST_DIR` (ring's) saw xtask's there and none in a
/// shell, so every `cargo build` after a `cargo xtask` (and the reverse) rebuilt ring, rustls
/// and trapdetect (2-3 min here).
pub fn cargo_cmd() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    for (k, _) in std::env::vars_os() {
        if let Some(k) = k.to_str()
            && (k.starts_with("CARGO_MANIFEST_")
                || k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_BIN_")
                || k == "CARGO_CRATE_NAME"
                || k == "CARGO_PRIMARY_PACKAGE")
        {
            c.env_remove(k);
        }
    }
    c
}

/// Runs cargo in the workspace root.
pub fn cargo(args: &[&str]) -> Result<()> {
    run(cargo_cmd().args(args))
}

/// Whether a command exists on PATH.
pub fn has(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success())
}

/// Closed-loop saturation with wrk (one thread, 8 connections): requests per second.
pub fn wrk(url: &str, secs: u32) -> Result<f64> {
    let out = Command::new("wrk")
        .args(["-t1", "-c8", &format!("-d{secs}s"), url])
        .output()
        .context("wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("wrk output: {text}"))
}

/// Wall time per stage of a long command, printed as a table at its end.
pub struct Stages {
    start: std::time::Instant,
    spent: Vec<(String, std::time::Duration)>,
}

impl Stages {
    pub fn new() -> Self {
        Stages {
            start: std::time::Instant::now(),
            spent: Vec::new(),
        }
    }

    /// Runs `f` and records how long it took under `name` (also when it fails).
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t = std::time::Instant::now();
        let r = f();
        self.add(name, t.elapsed());
        r
    }

    pub fn add(&mut self, name: &str, d: std::time::Duration) {
        self.spent.push((name.to_string(), d));
    }

    pub fn print(&self) {
        eprintln!("xtask: where the time went");
        for (name, d) in &self.spent {
            eprintln!("xtask:   {name:<28} {:>7.1} s", d.as_secs_f64());
        }
        eprintln!(
            "xtask:   {:<28} {:>7.1} s",
            "total",
            self.start.elapsed().as_secs_f64()
        );
    }
}
