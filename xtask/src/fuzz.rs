//! `cargo xtask fuzz [--seconds N] [--asan] [TARGET]`: runs the cargo-fuzz (libFuzzer) targets
//! of `fuzz/` on their checked-in seed corpus, one after the other, and prints executions and
//! findings per target. `cargo xtask test` runs every target briefly, so CI fuzzes too.
//!
//! The build CI uses is coverage-instrumented (libFuzzer's guidance) and unoptimized, with
//! debug assertions (overflow checks) and without AddressSanitizer: about 3.5 min cold on the
//! 2-core VM, where release + ASan took about 25 min, and the parsers are safe Rust (the
//! crate's few `unsafe` blocks are syscalls, none in a parser), so what a fuzzer finds in them
//! is a panic, which this build catches. Unoptimized it runs about 11,000 mountinfo inputs a
//! second. It is plain cargo with cargo-fuzz's flags (no cargo-fuzz to install). `--asan`
//! builds release + ASan through cargo-fuzz for long runs by hand.
//!
//! New inputs libFuzzer finds go to `fuzz/work/<target>` (ignored by git); the seeds in
//! `fuzz/corpus/<target>` are only read. A crash leaves its input in `fuzz/artifacts/` and
//! fails the command.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::util;

/// The targets, in the order they run (names of `fuzz/fuzz_targets/*.rs`).
pub const TARGETS: &[&str] = &[
    "mountinfo",
    "proc_files",
    "fpm_config",
    "btf",
    "elf",
    "sock_diag",
    "proc_net_tcp",
    "http_response",
    "flags",
    "load_results",
    "strace",
];

/// The cargo-fuzz flags of the long build by hand (`--asan`): see the module doc.
const ASAN_BUILD: &[&str] = &["--release", "--sanitizer", "address"];

/// The host's target triple (where cargo-fuzz puts the binaries).
fn host_triple() -> Result<String> {
    let out = Command::new("rustc")
        .args(["+nightly", "-vV"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .output()
        .context("rustc +nightly -vV")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_string)
        .context("rustc -vV printed no host line")
}

/// What one target did.
pub struct Outcome {
    target: &'static str,
    seconds: u64,
    executions: u64,
    corpus: u64,
    crashed: bool,
}

fn nightly_cargo() -> Command {
    // The rustup proxy, not $CARGO (xtask runs under stable's cargo).
    let mut c = Command::new("cargo");
    c.arg("+nightly");
    c.env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// Installs cargo-fuzz when it is missing (idempotent).
fn ensure_cargo_fuzz() -> Result<()> {
    let ok = nightly_cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("xtask: installing cargo-fuzz (cargo install cargo-fuzz --locked)");
        util::run(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))?;
    }
    Ok(())
}

/// The eBPF object the newest release build made (the host's, or `cargo xtask test`'s for
/// the static target): the fuzz build reuses it instead of running aya-build again under
/// sanitizers.
fn ebpf_object(root: &Path) -> Result<PathBuf> {
    let target = root.join("target");
    let mut dirs = vec![target.join("release/build")];
    for e in std::fs::read_dir(&target).with_context(|| format!("{}", target.display()))? {
        dirs.push(e?.path().join("release/build"));
    }
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for build in dirs.iter().filter(|d| d.is_dir()) {
        for e in std::fs::read_dir(build).with_context(|| format!("{}", build.display()))? {
            let p = e?.path().join("out/trapdetect");
            if let Ok(m) = std::fs::metadata(&p)
                && let Ok(t) = m.modified()
                && best.as_ref().is_none_or(|(b, _)| t > *b)
            {
                best = Some((t, p));
            }
        }
    }
    best.map(|(_, p)| p)
        .context("no eBPF object under target/release/build: run `cargo xtask build` first")
}

fn stat(out: &str, key: &str) -> Option<u64> {
    out.lines()
        .rev()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

/// What `cargo fuzz build --dev --sanitizer none` gives rustc: libFuzzer's coverage guidance
/// (sancov's inline 8-bit counters, PC table and compare tracing) and `--cfg fuzzing`; the dev
/// profile keeps debug assertions and overflow checks.
const QUICK_RUSTFLAGS: &[&str] = &[
    "-Cpasses=sancov-module",
    "-Cllvm-args=-sanitizer-coverage-level=4",
    "-Cllvm-args=-sanitizer-coverage-inline-8bit-counters",
    "-Cllvm-args=-sanitizer-coverage-pc-table",
    "-Cllvm-args=-sanitizer-coverage-trace-compares",
    "--cfg",
    "fuzzing",
];

/// Builds every fuzz target; returns the eBPF object they embed. A no-op for cargo when
/// nothing changed. The quick build (CI's) is cargo with cargo-fuzz's flags, for the host
/// target so the binaries land where cargo-fuzz puts them: installing cargo-fuzz took 64 s of
/// a cold machine. `--asan` builds through cargo-fuzz (installed if missing).
pub fn build(asan: bool) -> Result<PathBuf> {
    let root = util::root();
    let obj = ebpf_object(&root)?;
    let mut cargo = nightly_cargo();
    if asan {
        ensure_cargo_fuzz()?;
        cargo.args(["fuzz", "build"]).args(ASAN_BUILD);
    } else {
        // With --target, RUSTFLAGS reach the targets' crates, not build scripts or macros.
        cargo
            .args(["build", "--bins", "--target", &host_triple()?])
            .env("RUSTFLAGS", QUICK_RUSTFLAGS.join(" "));
    }
    util::run(
        cargo
            .env("TRAPDETECT_EBPF_OBJ", &obj)
            .current_dir(root.join("fuzz")),
    )?;
    Ok(obj)
}

/// Builds the fuzz crate, then runs each target (or `only`) for `seconds`.
pub fn run(seconds: u64, only: Option<&str>, asan: bool) -> Result<Vec<Outcome>> {
    let root = util::root();
    let fuzz = root.join("fuzz");
    let targets: Vec<&'static str> = TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_none_or(|o| o == *t))
        .collect();
    if targets.is_empty() {
        bail!(
            "no fuzz target named {:?} (known: {})",
            only,
            TARGETS.join(", ")
        );
    }
    let obj = build(asan)?;
    let bins =
        fuzz.join("target")
            .join(host_triple()?)
            .join(if asan { "release" } else { "debug" });
    // One libFuzzer process per core at a time (each is single-threaded): CI's 4 s per target
    // takes half the wall time on two cores.
    let lanes = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(targets.len());
    let next = std::sync::Mutex::new(targets.iter());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..lanes {
            scope.spawn(|| {
                loop {
                    let Some(&t) = next.lock().unwrap().next() else {
                        break;
                    };
                    let r = fuzz_one(t, seconds, &fuzz, &bins, &obj);
                    results.lock().unwrap().push((t, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(t, _)| TARGETS.iter().position(|x| x == t));
    let mut outcomes = vec![];
    for (_, r) in results {
        outcomes.push(r?);
    }
    let crashed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.crashed)
        .map(|o| o.target)
        .collect();
    if !crashed.is_empty() {
        bail!("fuzzing found crashes in: {}", crashed.join(", "));
    }
    Ok(outcomes)
}

/// Runs one target's binary for `seconds` on its work directory and seed corpus; prints its
/// line when it ends.
fn fuzz_one(
    t: &'static str,
    seconds: u64,
    fuzz: &Path,
    bins: &Path,
    obj: &Path,
) -> Result<Outcome> {
    let work = fuzz.join("work").join(t);
    let artifacts = fuzz.join("artifacts").join(t);
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&artifacts)?;
    let started = Instant::now();
    // The built binary directly: `cargo fuzz run` would re-check the build each time.
    let out = Command::new(bins.join(t))
        .arg(&work)
        .arg(fuzz.join("corpus").join(t))
        .args([
            &format!("-max_total_time={seconds}"),
            // A fixed seed: every run explores the same inputs first, so what CI's short
            // run tries, a longer run here has tried before (the same commit).
            "-seed=20261202",
            "-rss_limit_mb=2048",
            "-timeout=10",
            "-max_len=65536",
            "-print_final_stats=1",
            &format!("-artifact_prefix={}/", artifacts.display()),
        ])
        .env("TRAPDETECT_EBPF_OBJ", obj)
        .output()
        .with_context(|| format!("{}", bins.join(t).display()))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let o = Outcome {
        target: t,
        seconds: started.elapsed().as_secs(),
        executions: stat(&err, "stat::number_of_executed_units:").unwrap_or(0),
        corpus: std::fs::read_dir(&work)
            .map(|d| d.count() as u64)
            .unwrap_or(0),
        crashed: !out.status.success(),
    };
    if o.crashed {
        eprintln!("{err}");
    }
    eprintln!(
        "fuzz {:<14} {:>4} s  {:>10} executions  {:>6} corpus  {}",
        o.target,
        o.seconds,
        o.executions,
        o.corpus,
        if o.crashed {
            "FINDING (see fuzz/artifacts)"
        } else {
            "ok"
        }
    );
    Ok(o)
}
