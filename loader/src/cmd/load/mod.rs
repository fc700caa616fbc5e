//! `trapdetect load`: the open-loop generator alone. Arrivals at a fixed rate whatever the
//! server does, success counted as 2xx only, errors split by kind, latency from the intended
//! send instant, a per-second series, and a verdict on whether the generator kept its schedule.

use std::{path::PathBuf, time::Duration};

mod plan;

use plan::parse_warmup;
pub use plan::{plan, step_spec};

use crate::{
    error::Result,
    load::{self, Arrival, driver::Outputs, steps::RateRange},
    util::{parse_duration, parse_rate},
};

/// Flags of `trapdetect load`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  no `fail` finding (a server at its ceiling is a warning)
  1  a `fail` finding (errors above --max-errors, or under half the arrivals got a 2xx; with
     --strict: or a `warn`)
  2  bad usage or bad input
  3  the generator fell behind its schedule or failed requests itself (the numbers measure
     the generator)
A step run (--rate FROM..TO --step N): 0 knee found or above the range, 1 the first step
already failed, 3 a step measured the generator before the server failed one, or Ctrl-C")]
pub struct LoadArgs {
    /// Target, `http[s]://host[:port]/path` (loopback only unless --allow-remote).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// https: accept any certificate (a self-signed test server); signatures still checked.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// https: trust the CA certificates in this PEM file instead of the system bundle.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// HTTP/2: h2c (prior knowledge) for http://, ALPN h2 for https://; requests are streams
    /// multiplexed on --connections connections per lane.
    #[arg(long)]
    pub http2: bool,
    /// HTTP/2 connections per generator lane.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "http2")]
    pub connections: usize,
    /// HTTP/2 concurrent streams per connection, at most (the server's limit also applies).
    #[arg(long, value_name = "N", default_value_t = 100, requires = "http2")]
    pub max_streams: usize,
    /// Connect to this unix socket; the URL still gives the Host header (and TLS name).
    #[arg(long, value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,
    /// Arrivals per second, fired on schedule whatever is still outstanding (open loop).
    /// With --closed-loop it caps the workers' rate instead. `FROM..TO` with --step: steps to
    /// the knee.
    #[arg(long, short = 'r', value_name = "REQ/S", value_parser = RateRange::parse)]
    pub rate: Option<RateRange>,
    /// Steps to the knee: the increment between consecutive steps of `--rate FROM..TO`.
    #[arg(long, value_name = "REQ/S", value_parser = parse_rate)]
    pub step: Option<f64>,
    /// Measured length of each step.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration, requires = "step")]
    pub step_duration: Duration,
    /// Steps: the 2xx latency p99 (from the intended instant) a step must stay within.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "step")]
    pub slo_p99: Option<Duration>,
    /// Steps: before each step, wait until fewer than N TIME_WAIT sockets remain on the port.
    #[arg(long, value_name = "N", requires = "step")]
    pub drain_below: Option<u64>,
    /// Steps: give up waiting for that drain after this long (the step then runs anyway).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration, requires = "drain_below")]
    pub drain_timeout: Duration,
    /// Inter-arrival process: `const` (start + i/rate) or `poisson` (seeded exponential gaps).
    #[arg(long, value_enum, default_value = "const")]
    pub arrival: Arrival,
    /// Per-request timeout, from the moment a worker takes the arrival (connect included).
    #[arg(long, short = 't', value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Length of the measured window.
    #[arg(long, short = 'd', value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Unmeasured lead-in before the window (its arrivals are sent but not counted).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_warmup)]
    pub warmup: Duration,
    /// Host header, with numeric ranges expanded: `site-{0001..0010}` (picked uniformly).
    #[arg(long, value_name = "PATTERN", conflicts_with = "hosts")]
    pub host_header: Option<String>,
    /// File of Host header values, one per line (picked uniformly).
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// Weighted paths replacing the URL's: `/=3,/perm=1,/rest=1`.
    #[arg(long, value_name = "MIX")]
    pub path_mix: Option<String>,
    /// Request method.
    #[arg(long, short = 'm', value_name = "METHOD", default_value = "GET")]
    pub method: String,
    /// Extra request header `Name: value`. Repeatable.
    #[arg(long, short = 'H', value_name = "HEADER")]
    pub header: Vec<String>,
    /// Request body, or `@FILE` to read it from a file.
    #[arg(long, value_name = "BODY")]
    pub body: Option<String>,
    /// Seed for Poisson gaps and host/path picks (same seed, same arrivals).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// This copy is the I-th of N generators on one schedule: it offers rate/N (each step's
    /// rate too), its const arrivals offset by (I-1)/N of its gap so the N copies interleave
    /// evenly; its seed is derived from --seed and I. Budgets stay per copy.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Wait until this wall-clock time (seconds since the Unix epoch, fraction allowed, e.g.
    /// `$(date -d '+10 sec' +%s)`) before the first arrival (the warm-up starts then), so
    /// copies on several hosts start together. At most 24 h ahead.
    #[arg(long, value_name = "UNIX_TIME")]
    pub start_at: Option<String>,
    /// A fresh connection per request (`Connection: close`) instead of keep-alive.
    #[arg(long)]
    pub no_keepalive: bool,
    /// Closed loop (like wrk, hey, oha without -q) with -c workers, for comparison: reports
    /// the same fields, and says what it cannot show.
    #[arg(long, requires = "concurrency")]
    pub closed_loop: bool,
    /// Closed-loop workers.
    #[arg(long, short = 'c', value_name = "N", requires = "closed_loop")]
    pub concurrency: Option<usize>,
    /// Generator lanes, each a thread (default: half the CPUs, 1-2; the server needs the rest).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Scheduling lag p99 beyond which the run is untrusted (exit 3).
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_duration)]
    pub lag_budget: Duration,
    /// Nice value of the generator's lanes (-20..19), applied when permitted (root or
    /// CAP_SYS_NICE for a negative one): lanes that wake ahead of a saturating server keep
    /// their schedule (-10). 0, the default, leaves them as started. The summary gives the
    /// value they ran at.
    #[arg(long, value_name = "N", default_value_t = crate::load::DEFAULT_NICE, allow_negative_numbers = true)]
    pub nice: i32,
    /// Most connections open at once (default 512, or -c in a closed loop; capped by the fd
    /// limit). An arrival that finds every one busy waits for one (its latency still counts
    /// from its intended instant) and is dropped, counted, after --max-wait.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Longest an arrival waits for a free connection before it is dropped (at most --timeout).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_warmup)]
    pub max_wait: Duration,
    /// New connections per second at most (default: 4 × --max-connections or 2 × --rate,
    /// whichever is higher, with keep-alive; unbounded with --no-keepalive).
    #[arg(long, value_name = "N/S", value_parser = parse_rate)]
    pub max_connect_rate: Option<f64>,
    /// Arrivals that may end without a status (resets, EOFs, timeouts...), % of those sent,
    /// before the run fails (load.errors, exit 1).
    #[arg(long, value_name = "PCT", default_value_t = load::DEFAULT_MAX_ERRORS_PCT)]
    pub max_errors: f64,
    /// Allow a target outside loopback (only a server you own: this is a flood).
    #[arg(long)]
    pub allow_remote: bool,
    /// HTTP/1.1 client: the hand-written one or hyper's (for `cargo xtask bench load-hyper`).
    #[arg(long, value_enum, default_value = "native", hide = true)]
    pub engine: load::Engine,
    /// --json, --json-out, --html and the exports.
    #[command(flatten)]
    pub output: crate::cmd::OutputArgs,
    /// Write one JSON line per request (intended/start/sent/end instants in CLOCK_MONOTONIC
    /// ns, status or error kind, bytes) to FILE, for joining with kernel data.
    #[arg(long, value_name = "FILE")]
    pub samples_out: Option<PathBuf>,
    /// --ignore and --strict.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
    /// No progress on stderr (errors, warnings and the start line remain).
    #[arg(long, short = 'q', conflicts_with = "progress")]
    pub quiet: bool,
    /// Progress on stderr even when it is not a terminal (one line a second, for a log).
    #[arg(long)]
    pub progress: bool,
}

/// Runs the command; returns the exit code.
pub fn run(args: LoadArgs) -> Result<i32> {
    crate::cmd::check_ignore(&args.verdict.ignore)?;
    let plan = plan(&args)?;
    let spec = step_spec(&args, plan.shard)?;
    let outputs = Outputs {
        json: args.output.json,
        json_out: args.output.json_out.as_deref(),
        html: args.output.html.as_deref(),
        export: &args.output.export,
        samples_out: args.samples_out.as_deref(),
        ignore: &args.verdict.ignore,
        strict: args.verdict.strict,
        quiet: args.quiet,
        progress: args.progress,
    };
    match spec {
        Some(spec) => load::driver::run_steps(&outputs, &plan, &spec),
        None => load::driver::run(&outputs, &plan),
    }
}
