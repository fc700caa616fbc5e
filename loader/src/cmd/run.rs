//! `trapdetect run --pid N --url URL --rate R`: the open-loop load and the tracing at once, on
//! one clock, joined second by second, and a verdict on what the server's threads waited on
//! when throughput went flat.

use std::path::PathBuf;

use crate::{
    error::{Error, Result},
    trace::{self, run::external::ExternalDriver},
};

/// Flags of `trapdetect run`: the load generator's, plus the target.
#[derive(Debug, Clone, clap::Args)]
// `--url` is the built-in generator's: another one (`-- COMMAND`, `--load-results`) has none.
#[command(mut_arg("url", |a| a.required(false).default_value("")))]
pub struct RunArgs {
    /// Server to trace, with every process it forks (php-fpm's master covers its workers).
    #[arg(
        long,
        short = 'p',
        value_name = "PID",
        required_unless_present_any = ["from_strace", "comm", "cgroup", "container", "unit"]
    )]
    pub pid: Option<u32>,
    /// --comm, --cgroup, --container, --unit: the server named instead.
    #[command(flatten)]
    pub select: crate::cmd::SelectArgs,
    /// Kernel BTF to read struct offsets from, instead of /sys/kernel/btf/vmlinux.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The load: every flag of `trapdetect load`.
    #[command(flatten)]
    pub load: crate::cmd::load::LoadArgs,
    /// Results of your own generator to join second by second: read when the window ends
    /// (after COMMAND exits, when one is given). oha JSON, vegeta results (JSON lines, CSV)
    /// or JSON report, k6 summary export or JSON lines, wrk or hey text, hey CSV,
    /// trapdetect load JSON. Repeat it for several generators (N vegeta or k6 runners, N
    /// copies of `trapdetect load --shard I/N`): their results are merged on wall-clock
    /// seconds, so each file must carry wall-clock times.
    #[arg(long, value_name = "FILE")]
    pub load_results: Vec<PathBuf>,
    /// Your own generator instead of the built-in one, run for the window (which ends at
    /// --duration or when it exits) and watched as a client; its stdout is read as its
    /// results unless --load-results names them.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// --backend and --sample-hz.
    #[command(flatten)]
    pub backend: crate::sample::BackendArgs,
    /// Judge an `strace -f -tt -T -y` log (or the `-ff` set FILE.PID) instead of tracing: the
    /// threads' time split, rules and verdict from their calls, no eBPF, no load, no privilege.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["load_results", "command", "btf"])]
    pub from_strace: Option<PathBuf>,
    /// The target's mount table saved with the strace log (a copy of /proc/PID/mountinfo);
    /// default: the live one of --pid, else trapdetect's own.
    #[arg(long, value_name = "FILE", requires = "from_strace")]
    pub mountinfo: Option<PathBuf>,
}

/// Runs the command; returns the exit code.
pub fn run(args: RunArgs) -> Result<i32> {
    if args.load.closed_loop {
        return Err(Error::usage(
            "trapdetect run drives an open-loop load: drop --closed-loop",
        ));
    }
    crate::cmd::check_ignore(&args.load.verdict.ignore)?;
    if let Some(log) = &args.from_strace {
        return from_strace(&args, log);
    }
    if args.pid.is_none() && args.select.selector().is_none() {
        return Err(Error::usage(
            "--pid is required, or the server named by --comm, --cgroup, --container or --unit (or --from-strace FILE)",
        ));
    }
    let external = !args.command.is_empty() || !args.load_results.is_empty();
    if external && (!args.load.url.is_empty() || args.load.rate.is_some()) {
        return Err(Error::usage(
            "--url and --rate drive the built-in generator: with -- COMMAND or --load-results, drop them",
        ));
    }
    if !external && args.load.url.is_empty() {
        return Err(Error::usage(
            "--url is required (or your own generator after --, or --load-results FILE)",
        ));
    }
    if args.load.shard.is_some() || args.load.start_at.is_some() {
        return Err(Error::usage(
            "--shard and --start-at belong to `trapdetect load` (run its copies with them, then \
             join their JSON with --load-results)",
        ));
    }
    if args.load.rate.as_ref().is_some_and(|r| r.to.is_some()) {
        return Err(Error::usage(
            "trapdetect run drives one rate: steps (--rate A..B) belong to `trapdetect load`",
        ));
    }
    let plan = if external {
        None
    } else {
        let plan = crate::cmd::load::plan(&args.load)?;
        plan.resolve()?;
        Some(plan)
    };
    // Output paths are refused now, before anything is attached.
    crate::output::check_all(&[
        ("--json-out", args.load.output.json_out.as_deref()),
        ("--html", args.load.output.html.as_deref()),
        ("--samples-out", args.load.samples_out.as_deref()),
    ])?;
    crate::output::check_all(&args.load.output.export.paths())?;
    // Named, not given: resolved last, just before anything attaches.
    let (Some(pid), selected_by) = args.select.resolve(args.pid)? else {
        return Err(Error::usage("--pid is required"));
    };
    let opts = trace::Options {
        pid,
        duration: args.load.duration,
        top: 12,
        loss_budget_pct: 1.0,
        progress: crate::util::Progress::new(args.load.quiet, args.load.progress),
        btf: args.btf.clone(),
        watch_clients: vec![],
        skip_probes: vec![],
        offcpu: trace::OffCpu::PerSecond,
    };
    let other = if external {
        Some(ExternalDriver::new(
            pid,
            args.command.clone(),
            args.load_results.clone(),
        )?)
    } else {
        None
    };
    let mut report = trace::run::driver::measure(&opts, &args.backend, plan, other)?;
    if let Some(t) = report.target.as_mut() {
        t.selected_by = selected_by;
    }
    finish(&args, report)
}

/// `run --from-strace FILE`: the log judged; the load's flags have nothing to drive.
fn from_strace(args: &RunArgs, log: &std::path::Path) -> Result<i32> {
    if !args.load.url.is_empty() || args.load.rate.is_some() || args.load.samples_out.is_some() {
        return Err(Error::usage(
            "--from-strace judges a log: drop --url, --rate and --samples-out (nothing is driven)",
        ));
    }
    crate::output::check_all(&[
        ("--json-out", args.load.output.json_out.as_deref()),
        ("--html", args.load.output.html.as_deref()),
    ])?;
    crate::output::check_all(&args.load.output.export.paths())?;
    let report = crate::strace::run_report(log, args.mountinfo.as_deref(), args.pid, 12)?;
    finish(args, report)
}

/// Judges, prints and exports a run's report; its exit code.
fn finish(args: &RunArgs, mut report: crate::report::Report) -> Result<i32> {
    report.finish(&args.load.verdict.ignore, args.load.verdict.strict);
    crate::cmd::trace::emit(
        &report,
        args.load.output.json,
        args.load.output.json_out.as_deref(),
        args.load.output.html.as_deref(),
    )?;
    args.load
        .output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn run_takes_the_load_flags() {
        let cli = Cli::try_parse_from([
            "trapdetect",
            "run",
            "--pid",
            "42",
            "--url",
            "http://127.0.0.1:8080/",
            "--rate",
            "800",
            "--duration",
            "60s",
            "--json-out",
            "/tmp/x.json",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Run(r)) => {
                assert_eq!(r.pid, Some(42));
                assert_eq!(r.load.rate.map(|r| (r.from, r.to)), Some((800.0, None)));
                assert_eq!(r.load.duration, std::time::Duration::from_secs(60));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            vec![
                "trapdetect",
                "run",
                "--url",
                "http://127.0.0.1/",
                "--rate",
                "5",
            ],
            vec![
                "trapdetect",
                "run",
                "--pid",
                "x",
                "--url",
                "http://127.0.0.1/",
            ],
        ] {
            assert_eq!(Cli::try_parse_from(&bad).unwrap_err().exit_code(), 2);
        }
    }

    /// `run --from-strace FILE` needs no pid (one names the live mount table) and drives
    /// nothing: a URL, a rate or another generator beside it is refused (exit 2), as is a log
    /// that does not exist.
    #[test]
    fn from_strace_takes_a_log_instead_of_a_pid_and_a_load() {
        let parse = |a: &[&str]| {
            let mut all = vec!["trapdetect", "run"];
            all.extend(a);
            Cli::try_parse_from(&all)
        };
        assert_eq!(
            parse(&["--from-strace", "x", "--load-results", "y"])
                .unwrap_err()
                .exit_code(),
            2
        );
        assert_eq!(parse(&["--mountinfo", "m"]).unwrap_err().exit_code(), 2);
        for extra in [
            vec!["--url", "http://127.0.0.1:1/"],
            vec!["--rate", "5"],
            vec![],
        ] {
            let mut a = vec!["--from-strace", "/nonexistent/trapdetect.strace"];
            a.extend(extra.iter().copied());
            let Some(Command::Run(r)) = parse(&a).unwrap().command else {
                panic!("{a:?}");
            };
            let e = super::run(*r).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}: {e}");
        }
    }

    #[test]
    fn a_closed_loop_or_a_bad_url_is_refused_before_anything_attaches() {
        for args in [
            vec!["--url", "http://127.0.0.1:1/", "--closed-loop", "-c", "4"],
            vec!["--url", "ftp://127.0.0.1/", "--rate", "5"],
            vec!["--url", "http://127.0.0.1:1/"],
        ] {
            let mut a = vec!["trapdetect", "run", "--pid", "1"];
            a.extend(args.iter().copied());
            let Some(Command::Run(r)) = Cli::try_parse_from(&a).unwrap().command else {
                panic!("{a:?}");
            };
            let e = super::run(*r).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}: {e}");
        }
    }
}
