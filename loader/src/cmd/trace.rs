//! `trapdetect [trace] --pid N`: attach to a server and everything it forks, count the path
//! lookups each request makes and which filesystems they walk, and report the traps.

use std::{path::PathBuf, time::Duration};

use crate::{
    error::{Error, Result},
    output,
    report::{self, Report},
    trace,
    util::{parse_duration, parse_rate},
};

/// Flags of the trace command.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Process to trace, with every process it has forked or forks during the trace (give
    /// php-fpm's master to cover its workers).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// --comm, --cgroup, --container, --unit: the server named instead.
    #[command(flatten)]
    pub select: crate::cmd::SelectArgs,
    /// Drive a light open-loop probe load at this URL, so per-request figures are exact
    /// (without it: per accepted connection, or per second).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Probe load rate, requests per second (with --url).
    #[arg(long, value_name = "REQ/S", default_value = "25", value_parser = parse_rate)]
    pub rate: f64,
    /// How long to trace (Ctrl-C ends early and still reports).
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// --json, --json-out, --html and the exports.
    #[command(flatten)]
    pub output: crate::cmd::OutputArgs,
    /// Paths to list in the report (most called first).
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub top: usize,
    /// --ignore and --strict.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
    /// Share of path calls whose path string may be unknown before the measurement is
    /// declared untrustworthy (exit 3), percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 1.0)]
    pub loss_budget: f64,
    /// Kernel BTF to read struct offsets from, instead of /sys/kernel/btf/vmlinux (for kernels
    /// built without CONFIG_DEBUG_INFO_BTF, e.g. a file from BTFHub).
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// Allow --url to point outside loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// A client of the target to watch, e.g. the load generator (repeatable): its connect()
    /// calls on TCP sockets, and those of the processes it forks, are counted and timed, with
    /// failures by errno (EADDRNOTAVAIL: ephemeral ports exhausted).
    #[arg(long = "watch-client", value_name = "PID")]
    pub watch_client: Vec<u32>,
    /// Do not attach this program of the probes table (repeatable; for diagnosing a kernel and
    /// measuring overhead). Leaving out a required one makes the measurement untrusted (exit 3).
    #[arg(long = "skip-probe", value_name = "PROGRAM", hide = true)]
    pub skip_probe: Vec<String>,
    /// Also attach the off-CPU probes `trapdetect run` uses and report where the threads'
    /// time went over the window (on a CPU, waiting for one, blocked by why); they run at
    /// every context switch of the host.
    #[arg(long)]
    pub offcpu: bool,
    /// No progress on stderr (errors, warnings and the start line remain).
    #[arg(long, short = 'q', conflicts_with = "progress")]
    pub quiet: bool,
    /// Progress on stderr even when it is not a terminal (one line a second, for a log).
    #[arg(long)]
    pub progress: bool,
    /// --backend and --sample-hz.
    #[command(flatten)]
    pub backend: crate::sample::BackendArgs,
    /// Read an `strace -f -tt -T -y` log (or the `-ff` set FILE.PID) instead of tracing: the
    /// path table, filesystems and fs findings from it, no eBPF and no privilege.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["url", "watch_client"])]
    pub from_strace: Option<PathBuf>,
    /// The target's mount table saved with the strace log (a copy of /proc/PID/mountinfo);
    /// default: the live one of --pid, else trapdetect's own.
    #[arg(long, value_name = "FILE", requires = "from_strace")]
    pub mountinfo: Option<PathBuf>,
}

/// Runs the trace; returns the exit code.
pub fn run(args: TraceArgs) -> Result<i32> {
    if let Some(log) = &args.from_strace {
        crate::cmd::check_ignore(&args.verdict.ignore)?;
        output::check_all(&[
            ("--json-out", args.output.json_out.as_deref()),
            ("--html", args.output.html.as_deref()),
        ])?;
        output::check_all(&args.output.export.paths())?;
        let mut report = crate::strace::report(log, args.mountinfo.as_deref(), args.pid, args.top)?;
        report.finish(&args.verdict.ignore, args.verdict.strict);
        emit(
            &report,
            args.output.json,
            args.output.json_out.as_deref(),
            args.output.html.as_deref(),
        )?;
        args.output
            .export
            .write(&serde_json::to_value(&report).unwrap_or_default())?;
        return Ok(report.exit_code);
    }
    let (pid, selected_by) = args.select.resolve(args.pid)?;
    let Some(pid) = pid else {
        return Err(Error::usage(
            "--pid is required, or the server named by --comm, --cgroup, --container or --unit (try `trapdetect --help`)",
        ));
    };
    if !(0.0..=100.0).contains(&args.loss_budget) {
        return Err(Error::usage(
            "--loss-budget is a percentage between 0 and 100",
        ));
    }
    let known = crate::probe::program_names();
    if let Some(bad) = args.skip_probe.iter().find(|p| !known.contains(p)) {
        return Err(Error::usage(format!(
            "--skip-probe {}: no such program (see the probes table of a report)",
            crate::escape::text(bad)
        )));
    }
    crate::cmd::check_ignore(&args.verdict.ignore)?;
    if args.watch_client.contains(&0) {
        return Err(Error::usage("--watch-client 0: not a process id"));
    }
    // Output paths are refused now, before anything is attached.
    output::check_all(&[
        ("--json-out", args.output.json_out.as_deref()),
        ("--html", args.output.html.as_deref()),
    ])?;
    output::check_all(&args.output.export.paths())?;
    let opts = trace::Options {
        pid,
        duration: args.duration,
        top: args.top,
        loss_budget_pct: args.loss_budget,
        progress: crate::util::Progress::new(args.quiet, args.progress),
        btf: args.btf.clone(),
        watch_clients: args.watch_client.clone(),
        skip_probes: args.skip_probe.clone(),
        offcpu: if args.offcpu {
            trace::OffCpu::Window
        } else {
            trace::OffCpu::Off
        },
    };
    // Validate and resolve the URL before attaching anything.
    let mut probe = match &args.url {
        Some(url) => Some(trace::probe_load::ProbeLoad::new(
            url,
            args.rate,
            args.duration,
            args.allow_remote,
        )?),
        None => None,
    };
    let (mut report, _) = crate::sample::measure(
        &args.backend,
        &opts,
        probe.as_mut().map(|p| p as &mut dyn trace::LoadDriver),
    )?;
    if let Some(t) = report.target.as_mut() {
        t.selected_by = selected_by;
    }
    report.finish(&args.verdict.ignore, args.verdict.strict);
    emit(
        &report,
        args.output.json,
        args.output.json_out.as_deref(),
        args.output.html.as_deref(),
    )?;
    args.output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

/// Prints the report (text or JSON) and writes the requested files; a file that cannot be
/// written never stops the others or the printed report (see [`output::emit`]).
pub fn emit(
    report: &Report,
    json: bool,
    json_out: Option<&std::path::Path>,
    html: Option<&std::path::Path>,
) -> Result<()> {
    let j = report.to_json() + "\n";
    let shown = if json {
        j.clone()
    } else {
        report::text::render(report)
    };
    let h = html
        .map(|_| crate::sections::html_of(report))
        .unwrap_or_default();
    output::emit(
        &shown,
        &[
            ("--json-out", json_out, j.as_bytes()),
            ("--html", html, h.as_bytes()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn watch_client_and_skip_probe_parse() {
        let cli = Cli::try_parse_from([
            "trapdetect",
            "--pid",
            "42",
            "--watch-client",
            "7",
            "--watch-client",
            "8",
            "--skip-probe",
            "inet_sock_set_state",
        ])
        .unwrap();
        assert_eq!(cli.trace.watch_client, vec![7, 8]);
        assert_eq!(cli.trace.skip_probe, vec!["inet_sock_set_state"]);
        let cli = Cli::try_parse_from(["trapdetect", "trace", "--pid", "1"]).unwrap();
        match cli.command {
            Some(Command::Trace(t)) => assert!(t.watch_client.is_empty()),
            other => panic!("{other:?}"),
        }
        for bad in [
            vec!["trapdetect", "--pid", "1", "--watch-client", "x"],
            vec!["trapdetect", "--pid", "1", "--watch-client", "-3"],
            vec!["trapdetect", "--pid", "1", "--watch-client"],
        ] {
            assert_eq!(
                Cli::try_parse_from(&bad).unwrap_err().exit_code(),
                2,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn unknown_probes_and_pid_0_are_usage_errors_before_anything_attaches() {
        let run = |extra: &[&str]| {
            let mut a = vec!["trapdetect", "--pid", "1"];
            a.extend(extra);
            let cli = Cli::try_parse_from(&a).unwrap();
            super::run(cli.trace).unwrap_err()
        };
        let e = run(&["--skip-probe", "no_such_program"]);
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("no such program"), "{e}");
        assert_eq!(run(&["--watch-client", "0"]).exit_code(), 2);
        // Every program of the table is a valid name.
        for p in crate::probe::program_names() {
            assert!(!p.is_empty());
        }
        assert!(
            crate::probe::program_names()
                .iter()
                .any(|p| p == "inet_sock_set_state")
        );
    }
}
