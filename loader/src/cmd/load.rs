//! `trapdetect load`: the open-loop generator alone. Arrivals at a fixed rate whatever the
//! server does, success counted as 2xx only, errors split by kind, latency from the intended
//! send instant, a per-second series, and a verdict on whether the generator kept its schedule.

use std::{path::PathBuf, time::Duration};

use crate::{
    error::{Error, Result},
    load::{
        self, Arrival, Plan,
        driver::Outputs,
        steps::{RateRange, StepSpec},
    },
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

fn parse_warmup(s: &str) -> std::result::Result<Duration, String> {
    if s.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s)
}

/// Builds the plan from the flags, reading --hosts and --body @FILE.
pub fn plan(a: &LoadArgs) -> Result<Plan> {
    let rate = match (a.rate.map(|r| r.from), a.closed_loop) {
        (Some(r), _) => r,
        (None, true) => 1.0,
        (None, false) => {
            return Err(Error::usage(
                "--rate is required (or --closed-loop -c N for a closed-loop comparison)",
            ));
        }
    };
    let shard = a
        .shard
        .as_deref()
        .map(load::Shard::parse)
        .transpose()
        .map_err(Error::Usage)?;
    let share = |r: f64| shard.map_or(r, |s| r / f64::from(s.count));
    let mut p = Plan::new(&a.url, share(rate), a.duration)?;
    p.rate = a.rate.map(|r| share(r.from));
    p.shard = shard;
    p.start_at_unix_ns = a
        .start_at
        .as_deref()
        .map(|s| start_at(s, load::unix_ns_now()))
        .transpose()?;
    p.arrival = a.arrival;
    p.timeout = a.timeout;
    p.warmup = a.warmup;
    p.keepalive = !a.no_keepalive;
    p.closed_loop = if a.closed_loop { a.concurrency } else { None };
    if let Some(pat) = &a.host_header {
        p.hosts = load::expand_hosts(pat)?;
    }
    if let Some(f) = &a.hosts {
        p.hosts = load::inputs::hosts_file(f)?;
    }
    if let Some(m) = &a.path_mix {
        p.path_mix = load::parse_path_mix(m)?;
    }
    p.method = a.method.to_ascii_uppercase();
    p.headers = a.header.clone();
    p.body = load::inputs::body(a.body.as_deref())?;
    p.seed = a.seed;
    if let Some(t) = a.threads {
        p.threads = t;
    }
    p.lag_budget = a.lag_budget;
    p.nice = a.nice;
    p.allow_remote = a.allow_remote;
    p.tls = load::TlsOptions {
        insecure: a.insecure,
        cacert: a.cacert.clone(),
    };
    p.unix_socket = a.unix_socket.clone();
    p.http2 = a.http2.then_some(load::H2Settings {
        connections: a.connections,
        max_streams: a.max_streams,
    });
    p.max_connections = a.max_connections;
    p.max_wait = a.max_wait;
    p.connect_rate = a.max_connect_rate;
    p.max_errors_pct = a.max_errors;
    p.engine = a.engine;
    p.check()?;
    Ok(p)
}

/// The steps of `--rate FROM..TO --step N`, if asked for; refuses what a step run cannot do.
pub fn step_spec(a: &LoadArgs) -> Result<Option<StepSpec>> {
    let (range, step) = match (a.rate.and_then(|r| r.to.map(|to| (r.from, to))), a.step) {
        (None, None) => return Ok(None),
        (Some(_), None) => {
            return Err(Error::usage(
                "--rate FROM..TO steps to the knee: add --step REQ/S",
            ));
        }
        (None, Some(_)) => {
            return Err(Error::usage("--step needs a range: --rate FROM..TO"));
        }
        (Some(r), Some(s)) => (r, s),
    };
    if a.closed_loop {
        return Err(Error::usage(
            "steps to the knee are open loop: --closed-loop cannot step",
        ));
    }
    if a.samples_out.is_some() {
        return Err(Error::usage(
            "--samples-out is for one run; a step run reports per-step series instead",
        ));
    }
    if a.output.export != Default::default() {
        return Err(Error::usage(
            "the exports are for one run; a step run reports its steps with --json, --json-out \
             or --html",
        ));
    }
    // With --shard every step's rate is this copy's share.
    let n = match a.shard.as_deref().map(load::Shard::parse) {
        Some(Ok(s)) => f64::from(s.count),
        Some(Err(e)) => return Err(Error::Usage(e)),
        None => 1.0,
    };
    let spec = StepSpec {
        from: range.0 / n,
        to: range.1 / n,
        step: step / n,
        step_duration: a.step_duration,
        slo_p99: a.slo_p99,
        drain_below: a.drain_below,
        drain_timeout: a.drain_timeout,
    };
    spec.check()?;
    Ok(Some(spec))
}

/// Longest wait `--start-at` accepts.
const START_AT_AHEAD_NS: i128 = 86_400 * 1_000_000_000;
/// How long ago a `--start-at` instant may be and still start the run (at once).
const START_AT_LATE_NS: i128 = 1_000_000_000;

/// `--start-at UNIX_TIME` against the wall clock `now_ns`: the instant, ns since the epoch.
/// Refuses a time more than 24 h ahead or more than 1 s past.
pub fn start_at(s: &str, now_ns: i128) -> Result<i128> {
    let shown = crate::escape::text(s);
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 12 || !digits(int) || !digits(frac) || s.ends_with('.') {
        return Err(Error::usage(format!(
            "--start-at {shown}: expected seconds since the Unix epoch, e.g. 1733400000.5 \
             (date +%s)"
        )));
    }
    let ns_frac: i128 = format!("{:0<9}", &frac[..frac.len().min(9)])
        .parse()
        .unwrap_or(0);
    let at = int.parse::<i128>().unwrap_or(0) * 1_000_000_000 + ns_frac;
    if at - now_ns > START_AT_AHEAD_NS {
        return Err(Error::usage(format!(
            "--start-at {shown}: more than 24 h ahead ({:.0} s from now)",
            (at - now_ns) as f64 / 1e9
        )));
    }
    if now_ns - at > START_AT_LATE_NS {
        return Err(Error::usage(format!(
            "--start-at {shown}: that time passed {:.1} s ago",
            (now_ns - at) as f64 / 1e9
        )));
    }
    Ok(at)
}

/// Runs the command; returns the exit code.
pub fn run(args: LoadArgs) -> Result<i32> {
    crate::cmd::check_ignore(&args.verdict.ignore)?;
    let plan = plan(&args)?;
    let spec = step_spec(&args)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn args(extra: &[&str]) -> LoadArgs {
        let mut a = vec!["load", "--url", "http://127.0.0.1:1/"];
        a.extend_from_slice(extra);
        Cli::try_parse_from(a).unwrap().load
    }

    /// --shard divides the rate (each step's too) and records I/N; a bad one is one usage line.
    #[test]
    fn shard_divides_the_rate_and_is_echoed() {
        let p = plan(&args(&["--rate", "1000", "--shard", "2/4"])).unwrap();
        assert_eq!(p.rate, Some(250.0));
        assert_eq!(p.shard, Some(load::Shard { index: 2, count: 4 }));
        assert_eq!(p.phase(), 0.25);
        let echo = serde_json::to_value(p.echo("127.0.0.1:1")).unwrap();
        assert_eq!(echo["rate_per_s"], 250.0);
        assert_eq!(echo["shard"], serde_json::json!({"index": 2, "count": 4}));
        let p = plan(&args(&["--rate", "1000"])).unwrap();
        assert_eq!((p.rate, p.shard, p.phase()), (Some(1000.0), None, 0.0));
        let echo = serde_json::to_value(p.echo("127.0.0.1:1")).unwrap();
        assert!(
            echo.get("shard").is_none(),
            "absent without --shard: {echo}"
        );
        let e = plan(&args(&["--rate", "1000", "--shard", "3/2"])).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, "--shard 3/2: I must be between 1 and N".to_string())
        );
        let s = step_spec(&args(&[
            "--rate",
            "1000..3000",
            "--step",
            "500",
            "--shard",
            "1/4",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((s.from, s.to, s.step), (250.0, 750.0, 125.0));
        assert_eq!(s.rates(), [250.0, 375.0, 500.0, 625.0, 750.0]);
        let e = step_spec(&args(&[
            "--rate", "1..3", "--step", "1", "--shard", "1/1001",
        ]))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--shard 1/1001: N must be between 1 and 1000"
        );
    }

    #[test]
    fn start_at_is_an_instant_within_a_day_and_not_past() {
        let now = 1_733_400_000_250_000_000i128;
        assert_eq!(
            start_at("1733400000.5", now).unwrap(),
            1_733_400_000_500_000_000
        );
        assert_eq!(
            start_at("1733400010", now).unwrap(),
            1_733_400_010_000_000_000
        );
        assert_eq!(
            start_at("1733400000.1234567899", now).unwrap(),
            1_733_400_000_123_456_789
        );
        // Within 1 s past: accepted (the run starts at once).
        assert_eq!(
            start_at("1733399999.3", now).unwrap(),
            1_733_399_999_300_000_000
        );
        assert_eq!(
            start_at("1733486400.25", now).unwrap(),
            1_733_486_400_250_000_000
        );
        let got: Vec<String> = [
            "1733399990",
            "1733486400.26",
            "",
            "x",
            "1e9",
            "-5",
            "1733400000.",
            ".5",
            "17334000001111111",
            "1733400000.5.5",
            " 1733400000",
        ]
        .iter()
        .map(|s| {
            let e = start_at(s, now).unwrap_err();
            format!("{} {e}", e.exit_code())
        })
        .collect();
        let bad = |s: &str| {
            format!(
                "2 --start-at {s}: expected seconds since the Unix epoch, e.g. 1733400000.5 \
                 (date +%s)"
            )
        };
        assert_eq!(
            got,
            [
                "2 --start-at 1733399990: that time passed 10.2 s ago".to_string(),
                "2 --start-at 1733486400.26: more than 24 h ahead (86400 s from now)".into(),
                bad(""),
                bad("x"),
                bad("1e9"),
                bad("-5"),
                bad("1733400000."),
                bad(".5"),
                bad("17334000001111111"),
                bad("1733400000.5.5"),
                bad(" 1733400000"),
            ]
        );
    }
}
