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
            use clap::error::ErrorKind;
            // Help and version go to stdout (exit 0); usage errors are one line (exit 2).
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                let _ = e.print();
                std::process::exit(e.exit_code());
            }
            eprintln!("trapdetect: {} (see --help)", one_line(&e.to_string()));
            std::process::exit(trapdetect::error::exit::USAGE);
        }
    };
    let result = match cli.command {
        None => cmd::trace::run(cli.trace),
        Some(Command::Trace(a)) => cmd::trace::run(a),
        Some(Command::Load(a)) => cmd::load::run(*a),
        Some(Command::Preflight(a)) => cmd::preflight::run(a),
        Some(Command::WaitDrain(a)) => cmd::wait_drain::run(a),
        Some(Command::Explain(a)) => cmd::explain::run(a),
        Some(Command::NetCensus(a)) => cmd::net_census::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("trapdetect: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// clap's message without its "error: " prefix, usage block and hint: the first line.
fn one_line(msg: &str) -> String {
    let first = msg
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("bad usage");
    first.trim().trim_start_matches("error: ").to_string()
}
