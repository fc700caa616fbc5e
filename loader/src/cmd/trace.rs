//! `trapdetect [trace] --pid N`: attach to a server and everything it forks, count the path
//! lookups each request makes and which filesystems they walk, and report the traps.

use std::{path::PathBuf, time::Duration};

use crate::{
    error::{Error, Result},
    report::{self, Report},
    trace,
    util::{parse_duration, parse_rate, print, write_file},
};

/// Flags of the trace command.
#[derive(Debug, Clone, clap::Args)]
pub struct TraceArgs {
    /// Process to trace, with every process it has forked or forks during the trace (give
    /// php-fpm's master to cover its workers).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
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
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
    /// Also write an HTML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Paths to list in the report (most called first).
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub top: usize,
    /// Silence a finding by id (it is still listed as ignored). Repeatable.
    #[arg(long, value_name = "ID")]
    pub ignore: Vec<String>,
    /// Treat warnings as failures for the exit code.
    #[arg(long)]
    pub strict: bool,
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
    /// No progress line on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Runs the trace; returns the exit code.
pub fn run(args: TraceArgs) -> Result<i32> {
    let Some(pid) = args.pid else {
        return Err(Error::usage("--pid is required (try `trapdetect --help`)"));
    };
    if !(0.0..=100.0).contains(&args.loss_budget) {
        return Err(Error::usage(
            "--loss-budget is a percentage between 0 and 100",
        ));
    }
    let opts = trace::Options {
        pid,
        duration: args.duration,
        top: args.top,
        loss_budget_pct: args.loss_budget,
        progress: !args.quiet,
        btf: args.btf.clone(),
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
    let mut report = trace::run(
        &opts,
        probe.as_mut().map(|p| p as &mut dyn trace::LoadDriver),
    )?;
    report.finish(&args.ignore, args.strict);
    emit(
        &report,
        args.json,
        args.json_out.as_deref(),
        args.html.as_deref(),
    )?;
    Ok(report.exit_code)
}

/// Prints the report (text or JSON) and writes the requested files.
pub fn emit(
    report: &Report,
    json: bool,
    json_out: Option<&std::path::Path>,
    html: Option<&std::path::Path>,
) -> Result<()> {
    if let Some(p) = json_out {
        write_file(p, &(report.to_json() + "\n"))?;
    }
    if let Some(p) = html {
        write_file(p, &report::html::render(report))?;
    }
    if json {
        print(&(report.to_json() + "\n"));
    } else {
        print(&report::text::render(report));
    }
    Ok(())
}
