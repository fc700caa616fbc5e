//! `cargo xtask ...`: install prerequisites, build, test, demo, bench. Every command that
//! needs the toolchain runs `setup` first, so a fresh machine needs nothing but this repo.

mod bench;
mod demo;
mod dist;
mod fuzz;
mod setup;
mod soak;
mod util;
mod vm;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install what is missing (apt packages, rust-src, bpf-linker); says what it installs.
    Setup {
        /// Only what building needs (LLVM for bpf-linker, rust-src, bpf-linker), not the
        /// servers and tools the tests exercise.
        #[arg(long)]
        build_only: bool,
    },
    /// setup, then build the release binary (target/release/trapdetect).
    Build,
    /// setup, build, then run every test, the privileged end-to-end ones included, and (with
    /// no filter) every fuzz target for a few seconds on its seed corpus.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// setup, build, then boot each Debian kernel of the matrix (5.10, 6.1, 6.12) under qemu
    /// and run the focused end-to-end set inside it. Part of `test`.
    Kernels {
        /// Only these kernels (e.g. `6.1`).
        names: Vec<String>,
        /// Boot nothing: print README's "Kernels" table from the last run's consoles.
        #[arg(long)]
        table: bool,
        /// The trapdetect binary the guests' tests run (e.g. `cargo xtask dist`'s static one);
        /// the build tree's by default.
        #[arg(long, value_name = "PATH")]
        bin: Option<std::path::PathBuf>,
        /// The target the guests' test executables are built for (`test` uses the static
        /// musl one; default: the host's, and aarch64-unknown-linux-musl with --arch arm64).
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
        /// The guests' CPU: amd64 (the matrix `test` runs) or arm64 (qemu-system-aarch64,
        /// static aarch64 executables, the reduced set; not part of `test`).
        #[arg(long, value_name = "ARCH", default_value = "amd64")]
        arch: String,
        /// Boot the BTF-less guest instead: Debian's 6.1 source built here without
        /// CONFIG_DEBUG_INFO_BTF (6-7 minutes the first time, then cached), its tests given
        /// `--btf` with the BTF file pahole makes from its DWARF; not part of `test`.
        #[arg(long)]
        no_btf: bool,
    },
    /// setup, build, then trace a php-fpm whose working directory is deep in a slow FUSE
    /// mount, and the same server started from a native directory, side by side.
    Demo,
    /// setup, build, then one long `trapdetect run` against php-fpm with worker and client
    /// churn: trapdetect's RSS and CPU every 10 s, its event loss, and its counts against the
    /// server's own. Not part of `test`.
    Soak {
        /// Length of the run, minutes.
        #[arg(long, default_value_t = 30)]
        minutes: u64,
        /// Offered rate, requests per second.
        #[arg(long, default_value_t = 300)]
        rate: u64,
        /// Soak `trapdetect agent` (5 s windows) instead of one `run`: python's
        /// ThreadingHTTPServer, a new thread per request, under `trapdetect load`.
        #[arg(long)]
        agent: bool,
    },
    /// Build the static binary (musl), man pages, completions, a tarball and a .deb into
    /// target/dist, and check them: static, runs, installs and removes, traces.
    Dist {
        /// Rust target (repeatable): x86_64-unknown-linux-musl (default),
        /// aarch64-unknown-linux-musl.
        #[arg(long = "target", default_value = "x86_64-unknown-linux-musl")]
        targets: Vec<String>,
        /// Skip the trace check (it needs root and builds the end-to-end tests).
        #[arg(long)]
        no_trace_check: bool,
    },
    /// setup, build, then run the cargo-fuzz targets on their seed corpus, one after another.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Only this target.
        target: Option<String>,
        /// Build release + AddressSanitizer (slow to build) instead of CI's quick build.
        #[arg(long)]
        asan: bool,
    },
    /// setup, build, then measure overhead and speed side by side with the peer tools.
    Bench {
        /// Only run benchmarks whose name contains this.
        filter: Option<String>,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Setup { build_only } => setup::run(if build_only {
            setup::Scope::Build
        } else {
            setup::Scope::All
        }),
        Cmd::Build => {
            setup::run(setup::Scope::Build)?;
            util::cargo(&["build", "--release"])
        }
        Cmd::Test { args } => test(&args),
        Cmd::Kernels {
            names,
            table,
            bin,
            target,
            arch,
            no_btf,
        } => {
            let arch = match arch.as_str() {
                "amd64" | "x86_64" => vm::Arch::X86_64,
                "arm64" | "aarch64" => vm::Arch::Arm64,
                other => bail!("--arch {other}: amd64 or arm64"),
            };
            setup::run(setup::Scope::All)?;
            if no_btf {
                setup::install_kernel_build_tools()?;
            }
            let target = match (target, arch) {
                (None, vm::Arch::Arm64) => {
                    setup::install_arm64_guest_tools()?;
                    Some(arch.rust_target().to_string())
                }
                (t, _) => t,
            };
            match &target {
                Some(t) => {
                    dist::add_target(t)?;
                    let mut c = util::cargo_cmd();
                    c.envs(dist::cross_env(t)).args([
                        "build",
                        "--release",
                        "-p",
                        "trapdetect",
                        "--target",
                        t,
                    ]);
                    util::run(&mut c)?;
                }
                None => util::cargo(&["build", "--release"])?,
            }
            if table {
                vm::table_from_last_run()
            } else {
                // The guests run it from their own working directory: pass it absolute.
                let bin = bin
                    .map(|b| {
                        std::fs::canonicalize(&b).with_context(|| format!("--bin {}", b.display()))
                    })
                    .transpose()?;
                vm::run(
                    arch,
                    no_btf,
                    &names,
                    bin.as_deref(),
                    target.as_deref(),
                    None,
                )
            }
        }
        Cmd::Fuzz {
            seconds,
            target,
            asan,
        } => {
            setup::run(setup::Scope::All)?;
            util::cargo(&["build", "--release"])?;
            fuzz::run(seconds, target.as_deref(), asan).map(drop)
        }
        Cmd::Demo => {
            setup::run(setup::Scope::All)?;
            util::cargo(&["build", "--release"])?;
            demo::run()
        }
        Cmd::Dist {
            targets,
            no_trace_check,
        } => {
            setup::run(if no_trace_check {
                setup::Scope::Build
            } else {
                setup::Scope::All
            })?;
            dist::run(&dist::Options {
                targets,
                no_trace_check,
            })
            .map(drop)
        }
        Cmd::Soak {
            minutes,
            rate,
            agent,
        } => {
            setup::run(setup::Scope::All)?;
            util::cargo(&["build", "--release"])?;
            let opts = soak::Options { minutes, rate };
            if agent {
                soak::agent(&opts)
            } else {
                soak::run(&opts)
            }
        }
        Cmd::Bench { filter } => {
            setup::run(setup::Scope::All)?;
            util::cargo(&["build", "--release"])?;
            bench::run(filter.as_deref())
        }
    }
}

/// `cargo xtask test`: CI's command. The builds run first, while the packages only the tests
/// need (and, for the full run, the matrix's kernels) download and install beside them: no
/// build needs those, and on a fresh machine each side takes minutes. Then the tests.
fn test(args: &[String]) -> Result<()> {
    let mut clock = util::Stages::new();
    let r = test_stages(args, &mut clock);
    // Where the time went, pass or fail (CI's budget is 30 minutes on a fresh machine).
    clock.print();
    r
}

/// The fuzz targets built, then each fuzzed for a few seconds (TRAPDETECT_FUZZ_SECONDS,
/// default 4; 0 skips the run) on the quick build (fuzz.rs); the seed corpus of every target
/// is also replayed by a unit test. Each step with its time and outcome, in order; the first
/// failure ends it.
fn fuzz_beside() -> Vec<(&'static str, std::time::Duration, Result<()>)> {
    let mut done = vec![];
    let t = std::time::Instant::now();
    let built = fuzz::build(false).map(drop);
    let ok = built.is_ok();
    done.push(("fuzz build", t.elapsed(), built));
    let secs = std::env::var("TRAPDETECT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(4);
    if !ok {
        return done;
    }
    if secs == 0 {
        eprintln!("xtask: fuzzers not run (TRAPDETECT_FUZZ_SECONDS=0)");
        return done;
    }
    let t = std::time::Instant::now();
    let ran = fuzz::run(secs, None, false).map(drop);
    done.push(("fuzz run", t.elapsed(), ran));
    done
}

fn test_stages(args: &[String], clock: &mut util::Stages) -> Result<()> {
    let full = args.is_empty();
    clock.time("setup (build tools)", || setup::run(setup::Scope::Build))?;
    let log = util::root().join("target/xtask-apt.log");
    std::fs::create_dir_all(util::root().join("target"))?;
    let background = std::thread::spawn(move || -> Result<Vec<(String, std::time::Duration)>> {
        let mut spent = Vec::new();
        let t = std::time::Instant::now();
        setup::install_test_packages(&log)?;
        spent.push(("  beside: test packages".to_string(), t.elapsed()));
        if full {
            let t = std::time::Instant::now();
            vm::fetch_ci()?;
            spent.push(("  beside: kernels".to_string(), t.elapsed()));
        }
        Ok(spent)
    });
    // Built for, and tested as, the static binary users copy to a benchmark host (`dist`'s):
    // one compile of the dependencies and of trapdetect instead of a glibc build beside the
    // musl one (cold here: 317 s for the glibc build, 280 s for the musl one on top).
    let target = dist::HOST_TARGET;
    let mut a: Vec<&str> = vec!["test", "--release", "--target", target];
    if full {
        // One CI run names every failing test, not only those of the first failing binary.
        a.push("--no-fail-fast");
    }
    a.extend(args.iter().map(String::as_str));
    let builds = (|| -> Result<()> {
        dist::add_target(target)?;
        clock.time("build --release", || {
            util::cargo(&["build", "--release", "--target", target])
        })?;
        // The same selection, compiled only (before any `--`: what follows goes to the tests).
        let mut compile = a.clone();
        let at = compile
            .iter()
            .position(|&x| x == "--")
            .unwrap_or(compile.len());
        compile.insert(at, "--no-run");
        clock.time("test --no-run", || util::cargo(&compile))?;
        Ok(())
    })();
    // Whatever the builds did, apt is not left running on its own.
    let t = std::time::Instant::now();
    let installed = background
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the install thread panicked")));
    clock.add("wait for the installs", t.elapsed());
    builds?;
    for (name, d) in installed? {
        clock.add(&name, d);
    }
    clock.time("setup (all)", || setup::run(setup::Scope::All))?;
    // A failing test's panic message ends its output, where CI's excerpt of the log shows
    // it, not a backtrace of the test harness (stop 51's excerpt ended in 25 frames of it).
    clock.time("tests", || {
        util::run(util::cargo_cmd().args(&a).env("RUST_BACKTRACE", "0"))
    })?;
    if full {
        // What a user copies to a benchmark host: the static binary the tests above ran,
        // packed and checked (static, installs and removes in an empty dpkg root; its trace
        // check is the whole test run); the kernel matrix's guests then run their tests with
        // it.
        let bin = clock.time("dist checks", || {
            dist::run(&dist::Options {
                targets: vec![target.to_string()],
                no_trace_check: true,
            })
        })?;
        // A filtered run is someone narrowing down one test: the matrix and the fuzzers only
        // run in full, the fuzzers beside the guests (vm::Beside: on the core they leave idle).
        let fuzzed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let into = fuzzed.clone();
        let job: vm::Beside = Box::new(move || *into.lock().unwrap() = fuzz_beside());
        let ci_kernels: Vec<String> = vm::CI_KERNELS.iter().map(|k| k.to_string()).collect();
        let matrix = clock.time("kernel matrix", || {
            vm::run(
                vm::Arch::X86_64,
                false,
                &ci_kernels,
                Some(&bin),
                Some(target),
                Some(job),
            )
        });
        let mut fuzzed = std::mem::take(&mut *fuzzed.lock().unwrap());
        if fuzzed.is_empty() {
            // The matrix ended before its guests (skipped outside CI, or failed): alone, then.
            fuzzed = fuzz_beside();
        }
        for (name, d, r) in fuzzed {
            clock.add(&format!("  beside: {name}"), d);
            r?;
        }
        matrix?;
    }
    Ok(())
}
