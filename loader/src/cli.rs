//! Command line: each subcommand's flags are defined once, in its `cmd::*` module, with their
//! help text; `--help`, the man pages and the README tables come from there.

use clap::{Parser, Subcommand};

use crate::cmd;

/// Exit codes, shown in `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  no `fail` finding
  1  at least one `fail` finding (with --strict: or a `warn` finding)
  2  bad usage or bad input, or a report that could not be written (stdout, an output file)
  3  the measurement itself cannot be trusted (probes missing, events lost beyond the budget,
     the load generator fell behind its schedule)
  4  insufficient privilege or kernel support (the missing capability is named)";

/// Finds the environment traps that silently falsify server benchmarks, and names the one that
/// caps a run.
#[derive(Debug, Parser)]
#[command(
    name = "trapdetect",
    version,
    long_version = crate::version::LONG,
    after_help = EXIT_CODES,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// Subcommand; without one, trace `--pid`.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Trace a running server (the default command).
    #[command(flatten)]
    pub trace: cmd::trace::TraceArgs,
    /// Colour FAIL/WARN/ok in text output: `auto` (on a terminal, unless NO_COLOR is set),
    /// `always`, `never`.
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "WHEN",
        default_value = "auto"
    )]
    pub color: crate::report::color::Choice,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Attach to a server and report the traps its requests walk into (same as no subcommand).
    #[command(after_help = EXIT_CODES)]
    Trace(cmd::trace::TraceArgs),
    /// Open-loop load and tracing at once, joined second by second: what every thread waits
    /// on when throughput goes flat, and a verdict (docs/run.md).
    #[command(after_help = EXIT_CODES)]
    Run(Box<cmd::run::RunArgs>),
    /// The open-loop load generator alone.
    Load(Box<cmd::load::LoadArgs>),
    /// Trace a node's server window after window; serve the last window to Prometheus
    /// (`/metrics`) and as JSON (`/report`), or print one (`--once`) (docs/agent.md).
    Agent(Box<cmd::agent::AgentArgs>),
    /// Fast static check of the environment for harness scripts (no tracing).
    Preflight(cmd::preflight::PreflightArgs),
    /// Re-render a saved JSON report (any command's) as text, HTML, CSV, OpenMetrics or .hgrm.
    Report(cmd::report::ReportArgs),
    /// Two saved runs side by side: each change, and whether it exceeds the runs' own noise.
    Compare(cmd::compare::CompareArgs),
    /// Wait until TIME_WAIT sockets on a port drain below a threshold (for harness scripts).
    WaitDrain(cmd::wait_drain::WaitDrainArgs),
    /// Version, git commit, build date, eBPF object hash; with --kernel, this kernel's support.
    Version(cmd::version::VersionArgs),
    /// What a finding id means: mechanism, evidence keys, remedy (`--list`: every id).
    Explain(cmd::explain::ExplainArgs),
    /// Network census and net.* findings alone (debugging, end-to-end tests; docs/net.md).
    #[command(hide = true)]
    NetCensus(cmd::net_census::NetCensusArgs),
    /// Write the man pages and shell completions (packaging: `cargo xtask dist`).
    #[command(hide = true)]
    Generate(cmd::generate::GenerateArgs),
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn trace_is_the_default_command() {
        let cli = Cli::try_parse_from(["trapdetect", "--pid", "42", "--duration", "3s"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.trace.pid, Some(42));
        assert_eq!(cli.trace.duration, std::time::Duration::from_secs(3));
        let cli = Cli::try_parse_from(["trapdetect", "trace", "--pid", "7", "--json"]).unwrap();
        match cli.command {
            Some(Command::Trace(t)) => {
                assert_eq!(t.pid, Some(7));
                assert!(t.output.json);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn color_is_accepted_before_and_after_the_subcommand() {
        use crate::report::color::Choice;
        let cli = Cli::try_parse_from(["trapdetect", "preflight", "--color", "never"]).unwrap();
        assert_eq!(cli.color, Choice::Never);
        let cli = Cli::try_parse_from(["trapdetect", "--color", "always", "--pid", "1"]).unwrap();
        assert_eq!(cli.color, Choice::Always);
        assert!(Cli::try_parse_from(["trapdetect", "load", "--color", "red"]).is_err());
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            vec!["trapdetect", "--pid", "abc"],
            vec!["trapdetect", "--pid", "1", "--duration", "ten"],
            vec!["trapdetect", "--pid", "1", "--duration", "0s"],
            vec!["trapdetect", "--pid", "1", "--rate", "-5"],
        ] {
            let e = Cli::try_parse_from(&args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }
}

#[cfg(test)]
#[path = "cli_checks.rs"]
mod checks;
