//! `cargo xtask ...`: install prerequisites, build, test, demo, bench. Every command that
//! needs the toolchain runs `setup` first, so a fresh machine needs nothing but this repo.

mod bench;
mod demo;
mod setup;
mod util;
mod vm;

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
    /// setup, build, then run every test, the privileged end-to-end ones included.
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
    },
    /// setup, build, then trace a php-fpm whose working directory is deep in a slow FUSE
    /// mount, and the same server started from a native directory, side by side.
    Demo,
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
            // A filtered run is someone narrowing down one test: the matrix only runs in full.
            if args.is_empty() {
                vm::run(&[])?;
            }
            Ok(())
        }
        Cmd::Kernels { names, table } => {
            setup::run()?;
            util::cargo(&["build", "--release"])?;
            if table {
                vm::table_from_last_run()
            } else {
                vm::run(&names)
            }
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
