//! `cargo xtask ...`: install prerequisites, build, test, demo, bench. Every command that
//! needs the toolchain runs `setup` first, so a fresh machine needs nothing but this repo.

mod bench;
mod demo;
mod fuzz;
mod setup;
mod util;

use anyhow::Result;
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
    Setup,
    /// setup, then build the release binary (target/release/trapdetect).
    Build,
    /// setup, build, then run every test, the privileged end-to-end ones included, and (with
    /// no filter) every fuzz target for a few seconds on its seed corpus.
    Test {
        /// Extra arguments for `cargo test` (e.g. a test name filter).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// setup, build, then trace a php-fpm whose working directory is deep in a slow FUSE
    /// mount, and the same server started from a native directory, side by side.
    Demo,
    /// setup, build, then run the cargo-fuzz targets on their seed corpus, one after another.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Only this target.
        target: Option<String>,
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
        Cmd::Setup => setup::run(),
        Cmd::Build => {
            setup::run()?;
            util::cargo(&["build", "--release"])
        }
        Cmd::Test { args } => {
            setup::run()?;
            util::cargo(&["build", "--release"])?;
            let mut a: Vec<&str> = vec!["test", "--release"];
            a.extend(args.iter().map(String::as_str));
            util::cargo(&a)?;
            if args.is_empty() {
                // 9 targets x 8 s: the fuzzers stay exercised in CI within ~2 minutes.
                fuzz::run(8, None)?;
            }
            Ok(())
        }
        Cmd::Fuzz { seconds, target } => {
            setup::run()?;
            util::cargo(&["build", "--release"])?;
            fuzz::run(seconds, target.as_deref()).map(drop)
        }
        Cmd::Demo => {
            setup::run()?;
            util::cargo(&["build", "--release"])?;
            demo::run()
        }
        Cmd::Bench { filter } => {
            setup::run()?;
            util::cargo(&["build", "--release"])?;
            bench::run(filter.as_deref())
        }
    }
}
