//! The `trapdetect` binary: parse, dispatch, print one-line errors with documented exit codes.

use clap::{CommandFactory, Parser};
use trapdetect::{
    cli::{Cli, Command},
    cmd,
};

fn main() {
    trapdetect::util::raise_nofile_limit();
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
    trapdetect::report::color::init(cli.color);
    let result = match cli.command {
        None => cmd::trace::run(cli.trace),
        Some(Command::Trace(a)) => cmd::trace::run(a),
        Some(Command::Load(a)) => cmd::load::run(*a),
        Some(Command::Agent(a)) => cmd::agent::run(*a),
        Some(Command::Preflight(a)) => cmd::preflight::run(a),
        Some(Command::Report(a)) => cmd::report::run(a),
        Some(Command::Compare(a)) => cmd::compare::run(a),
        Some(Command::Run(a)) => cmd::run::run(*a),
        Some(Command::WaitDrain(a)) => cmd::wait_drain::run(a),
        Some(Command::Version(a)) => cmd::version::run(a),
        Some(Command::Explain(a)) => cmd::explain::run(a),
        Some(Command::NetCensus(a)) => cmd::net_census::run(a),
        Some(Command::Generate(a)) => cmd::generate::run(a, Cli::command()),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("trapdetect: {e}");
            std::process::exit(e.exit_code());
        }
    }
}

/// clap's message on one line: without its "error: " prefix and usage block, but with the
/// names of missing arguments and the "did you mean" tip that follow the first line.
fn one_line(msg: &str) -> String {
    let mut parts: Vec<String> = vec![];
    for l in msg.lines() {
        let t = l.trim();
        if t.starts_with("Usage:") || t.starts_with("For more information") {
            break;
        }
        if !t.is_empty() {
            parts.push(t.trim_start_matches("error: ").to_string());
        }
    }
    match parts.split_first() {
        None => "bad usage".to_string(),
        Some((first, [])) => first.clone(),
        Some((first, rest)) => format!("{first} {}", rest.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 11: the missing argument's name and clap's "did you mean" tip were dropped.
    #[test]
    fn usage_errors_keep_the_missing_name_and_the_tip() {
        let e = Cli::try_parse_from(["trapdetect", "load"]).unwrap_err();
        let m = one_line(&e.to_string());
        assert!(m.contains("required arguments were not provided"), "{m}");
        assert!(m.contains("--url <URL>"), "{m}");
        assert!(!m.contains('\n'));
        let e = Cli::try_parse_from(["trapdetect", "preflight", "--jsn"]).unwrap_err();
        let m = one_line(&e.to_string());
        assert!(m.contains("unexpected argument '--jsn'"), "{m}");
        assert!(
            m.contains("tip: a similar argument exists: '--json'"),
            "{m}"
        );
        assert!(!m.contains("Usage"), "{m}");
    }
}
