//! The `trapdetect` binary: parse, dispatch, print one-line errors with documented exit codes.

use clap::Parser;
use trapdetect::{
    cli::{Cli, Command},
    cmd,
};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // clap prints help/version to stdout (exit 0) and usage errors to stderr (exit 2).
            let _ = e.print();
            std::process::exit(e.exit_code());
        }
    };
    let result = match cli.command {
        None => cmd::trace::run(cli.trace),
        Some(Command::Trace(a)) => cmd::trace::run(a),
        Some(Command::Load(a)) => cmd::load::run(*a),
        Some(Command::Preflight(a)) => cmd::preflight::run(a),
        Some(Command::WaitDrain(a)) => cmd::wait_drain::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("trapdetect: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
