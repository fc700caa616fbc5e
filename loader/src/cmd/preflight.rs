//! `trapdetect preflight`: a fast static check a harness runs before it measures, so it can
//! refuse a bad environment instead of documenting it. No tracing; most checks need no root
//! (the ones that do are listed as skipped, with the missing capability).
//!
//! Flow: validate the inputs (exit 2 on a missing pid or dir, an unreadable or malformed FPM
//! config, conflicting flags) → snapshot (`host::*`) → rules (`traps::*`) → one report. This
//! module holds the flags and checks their combinations; the rest is `crate::preflight::check`.

use std::{path::PathBuf, time::Duration};

use crate::{
    error::{Error, Result},
    escape,
    preflight::Options,
    traps::registry,
    util::{parse_duration, parse_rate, parse_size},
};

/// `preflight --help`'s epilogue: the ids it checks, from the rule registry, then the
/// harness line and the exit codes.
fn after_help() -> String {
    let mut ids = String::from("Checks (ids for --ignore):");
    let mut width = ids.len();
    for id in registry::ids_of(registry::Command::Preflight) {
        if width + 1 + id.len() > 92 {
            ids.push('\n');
            width = 0;
        } else {
            ids.push(' ');
            width += 1;
        }
        ids.push_str(id);
        width += id.len();
    }
    format!("{ids}\n(see docs/preflight.md and docs/net.md).\n\n{AFTER_HELP}")
}

const AFTER_HELP: &str = "In a harness:
  trapdetect preflight --dir \"$RUN\" --pid \"$SRV_PID\" || exit 1

Exit codes:
  0  no `fail` finding
  1  at least one `fail` finding (with --strict: or a `warn` finding)
  1  also with --strict: a check that could fail was skipped (listed as INCOMPLETE)
  2  bad usage or bad input (missing pid or dir, unreadable or malformed FPM config)
Checks that need a privilege this run lacks are listed as `skipped`, with the reason.";

/// Flags of `trapdetect preflight`.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(after_help = after_help())]
pub struct PreflightArgs {
    /// The server to check: its cwd, exe and open files, cgroup CPU quota, affinity, tracer,
    /// age and peak memory (give php-fpm's master to cover its pools).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// --comm, --cgroup, --container, --unit: the server named instead.
    #[command(flatten)]
    pub select: crate::cmd::SelectArgs,
    /// A directory the run uses (run dir, docroot, databases); fails on a slow or remote
    /// filesystem. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub dir: Vec<PathBuf>,
    /// The load generator's pid: whether it shares CPUs or SMT siblings with the server.
    #[arg(long, value_name = "PID")]
    pub client: Option<u32>,
    /// Port the server listens on (for the network census).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Planned offered load, requests per second (with --timeout: the census sizes for
    /// rate × timeout connections).
    #[arg(long, value_name = "REQ/S", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// The load generator's request timeout (with --rate).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// A php-fpm configuration to check (default: the config of the php-fpm masters found by
    /// process name, or of --pid when it is php-fpm).
    #[arg(long, value_name = "FILE")]
    pub fpm_config: Option<PathBuf>,
    /// Memory the php-fpm pools may have, e.g. 2G, 512M, 1.5GiB (powers of 1024); default:
    /// MemAvailable plus what the workers hold now.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub mem_budget: Option<u64>,
    /// Sample other processes' CPU for this long (default 250ms with --pid, none without).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub sample: Option<Duration>,
    /// Do not sample (host.noise then uses the load average and CPU pressure only).
    #[arg(long)]
    pub no_sample: bool,
    /// Set a mark in the kernel log after checking: later runs report the lines since it.
    #[arg(long)]
    pub mark: bool,
    /// Where the mark lives (default $XDG_RUNTIME_DIR/trapdetect/kmsg.mark, or
    /// /run/trapdetect/kmsg.mark for root).
    #[arg(long, value_name = "FILE")]
    pub mark_file: Option<PathBuf>,
    /// Before a run: save the environment's fingerprint and moving counters (frequency,
    /// throttling, steal, pressure, kernel log position, swap, processes' CPU) to FILE.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// After a run: compare the environment with the one saved by --save FILE; what drifted
    /// is an env.drift finding (exit 1 when one fails).
    #[arg(long, value_name = "FILE")]
    pub since: Option<PathBuf>,
    /// --ignore and --strict.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
    /// --json, --json-out, --html and the exports.
    #[command(flatten)]
    pub output: crate::cmd::OutputArgs,
    /// No progress on stderr (preflight shows none; accepted so `-q` works in every command).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Text: show each finding's evidence and the host facts under the one-line summary.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

/// Flag combinations clap cannot express as one-line errors.
fn validate(a: &PreflightArgs) -> Result<()> {
    if a.sample.is_some() && a.no_sample {
        return Err(Error::usage("--sample and --no-sample conflict"));
    }
    if a.rate.is_some() != a.timeout.is_some() {
        return Err(Error::usage(
            "--rate and --timeout go together (the census sizes for rate × timeout connections)",
        ));
    }
    if a.output.json && a.verbose {
        return Err(Error::usage(
            "--verbose is for text; --json always carries the full evidence",
        ));
    }
    for id in &a.verdict.ignore {
        if !registry::ids_of(registry::Command::Preflight).any(|k| k == id) {
            return Err(Error::usage(format!(
                "--ignore {}: no such finding id (known: {})",
                escape::text(id),
                registry::ids_of(registry::Command::Preflight)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

/// Runs the command; returns the exit code.
pub fn run(args: PreflightArgs) -> Result<i32> {
    crate::output::check_all(&[
        ("--json-out", args.output.json_out.as_deref()),
        ("--html", args.output.html.as_deref()),
    ])?;
    crate::output::check_all(&args.output.export.paths())?;
    validate(&args)?;
    let (pid, selected_by) = args.select.resolve(args.pid)?;
    let mut report = crate::preflight::check(&Options {
        pid,
        ..options(&args)
    })?;
    if let Some(t) = report.target.as_mut() {
        t.selected_by = selected_by;
    }
    let j = report.to_json() + "\n";
    let shown = if args.output.json {
        j.clone()
    } else {
        crate::report::preflight::render_text(&report, args.verbose)
    };
    let h = args
        .output
        .html
        .as_ref()
        .map(|_| crate::sections::html_of(&report))
        .unwrap_or_default();
    crate::output::emit(
        &shown,
        &[
            ("--json-out", args.output.json_out.as_deref(), j.as_bytes()),
            ("--html", args.output.html.as_deref(), h.as_bytes()),
        ],
    )?;
    args.output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

/// The checks' options, from the flags.
fn options(a: &PreflightArgs) -> Options {
    Options {
        pid: a.pid,
        dir: a.dir.clone(),
        client: a.client,
        port: a.port,
        rate: a.rate,
        timeout: a.timeout,
        fpm_config: a.fpm_config.clone(),
        mem_budget: a.mem_budget,
        sample: a.sample,
        no_sample: a.no_sample,
        mark: a.mark,
        mark_file: a.mark_file.clone(),
        save: a.save.clone(),
        since: a.since.clone(),
        ignore: a.verdict.ignore.clone(),
        strict: a.verdict.strict,
        verbose: a.verbose,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> PreflightArgs {
        let mut v = vec!["trapdetect", "preflight"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v).unwrap().command {
            Some(Command::Preflight(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_parse() {
        let a = parse(&[
            "--pid",
            "42",
            "--dir",
            "/srv/run",
            "--dir",
            "/srv/www",
            "--port",
            "8080",
            "--rate",
            "800",
            "--timeout",
            "10s",
            "--fpm-config",
            "/etc/php/8.2/fpm/php-fpm.conf",
            "--mem-budget",
            "2G",
            "--strict",
            "--ignore",
            "cpu.affinity",
            "--ignore",
            "host.virt",
            "--json",
            "--json-out",
            "/tmp/p.json",
            "--mark",
        ]);
        assert_eq!(a.pid, Some(42));
        assert_eq!(a.dir.len(), 2);
        assert_eq!(a.port, Some(8080));
        assert_eq!(a.rate, Some(800.0));
        assert_eq!(a.timeout, Some(Duration::from_secs(10)));
        assert_eq!(a.mem_budget, Some(2 << 30));
        assert!(a.verdict.strict && a.output.json && a.mark);
        assert_eq!(a.verdict.ignore, ["cpu.affinity", "host.virt"]);
        assert!(validate(&a).is_ok());
    }

    #[test]
    fn conflicting_flags_are_one_line_usage_errors() {
        for (args, needle) in [
            (vec!["--sample", "1s", "--no-sample"], "conflict"),
            (vec!["--rate", "800"], "go together"),
            (vec!["--timeout", "10s"], "go together"),
            (vec!["--json", "--verbose"], "--verbose is for text"),
            (vec!["--ignore", "cpu.qouta"], "no such finding id"),
        ] {
            let e = validate(&parse(&args)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let msg = e.to_string();
            assert!(msg.contains(needle), "{args:?}: {msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        assert!(validate(&parse(&["--ignore", "net.time-wait"])).is_ok());
    }

    #[test]
    fn every_id_is_documented_in_help() {
        let help = after_help();
        for id in registry::ids_of(registry::Command::Preflight) {
            assert!(help.contains(id), "{id} missing from --help");
        }
        assert!(help.lines().all(|l| l.len() <= 100), "{help}");
    }
}
