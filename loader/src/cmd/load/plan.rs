//! `trapdetect load`'s flags made into the plan and the steps, each refused here with a
//! one-line usage error before anything is sent.

use std::time::Duration;

use super::LoadArgs;
use crate::{
    error::{Error, Result},
    load::{self, Plan, steps::StepSpec},
    util::parse_duration,
};

pub(super) fn parse_warmup(s: &str) -> std::result::Result<Duration, String> {
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
        .map(|s| load::start_at(s, load::unix_ns_now()))
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
/// `shard`: the plan's (`--shard`, parsed once by [`plan`]).
pub fn step_spec(a: &LoadArgs, shard: Option<load::Shard>) -> Result<Option<StepSpec>> {
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
    let n = shard.map_or(1.0, |s| f64::from(s.count));
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
