//! What to send, how fast and for how long: a [`Plan`], checked completely before anything
//! starts (bad URL, rate, durations, unresolvable or non-loopback host, headers that would
//! break the request line), so a bad input never leaves a half-started flood behind.

use std::{
    net::{IpAddr, SocketAddr, ToSocketAddrs},
    path::PathBuf,
    time::Duration,
};

use serde::Serialize;

use super::{
    Sample,
    exchange::H2Settings,
    schedule::{Arrival, Shard},
    tls::{self, TlsOptions},
    transport::{self, Address, Connector},
};
use crate::error::{Error, Result};

/// Most Host headers × paths the generator prebuilds requests for.
pub const MAX_REQUESTS: usize = 100_000;
/// Longest run, warm-up included.
pub const MAX_SPAN: Duration = Duration::from_secs(86_400);
/// Longest per-request timeout.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3_600);

/// The parsed `http[s]://host:port/path` target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// `https://`.
    pub tls: bool,
    /// Host as written (brackets stripped from IPv6 literals).
    pub host: String,
    /// Port (80, or 443 for https, when absent).
    pub port: u16,
    /// Path and query (`/` when absent), fragment dropped.
    pub path: String,
}

impl Url {
    /// Parses an `http://` or `https://` URL.
    pub fn parse(s: &str) -> Result<Url> {
        let bad = |why: &str| Error::usage(format!("--url `{}`: {why}", crate::escape::text(s)));
        let lower = s.to_ascii_lowercase();
        let (tls, rest) = if lower.starts_with("http://") {
            (false, &s[7..])
        } else if lower.starts_with("https://") {
            (true, &s[8..])
        } else {
            return Err(bad("must start with http:// or https://"));
        };
        if s.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(bad("contains spaces or control characters"));
        }
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(split);
        if authority.contains('@') {
            return Err(bad("user:password@ is not supported"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in host"))?;
            (h, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            None if tls => 443,
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| bad("port must be 1-65535"))?,
        };
        let tail = tail.split('#').next().unwrap_or_default();
        let path = if tail.is_empty() {
            "/".to_string()
        } else if tail.starts_with('?') {
            format!("/{tail}")
        } else {
            tail.to_string()
        };
        Ok(Url {
            tls,
            host: host.to_string(),
            port,
            path,
        })
    }

    /// The Host header value for this URL.
    pub fn host_header(&self) -> String {
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == if self.tls { 443 } else { 80 } {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }
}

/// A load to run. Build with [`Plan::new`] or [`Plan::probe`], adjust the public fields, then
/// hand it to [`super::start`], which checks it again.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The URL as given (for reports).
    pub url: String,
    /// Parsed URL.
    pub target: Url,
    /// Arrivals per second. Required for open loop; with `closed_loop` it caps the rate
    /// (wrk2-style: latency still counts from each intended instant).
    pub rate: Option<f64>,
    /// Inter-arrival process.
    pub arrival: Arrival,
    /// Measured window.
    pub duration: Duration,
    /// Unmeasured lead-in before the window.
    pub warmup: Duration,
    /// Per-request timeout, from the moment a worker takes the arrival (connect included).
    pub timeout: Duration,
    /// Reuse connections (HTTP/1.1 keep-alive).
    pub keepalive: bool,
    /// Closed loop with this many workers (for comparison with closed-loop tools).
    pub closed_loop: Option<usize>,
    /// Host header values, picked uniformly per request (empty: from the URL).
    pub hosts: Vec<String>,
    /// Paths with integer weights (empty: the URL's path).
    pub path_mix: Vec<(String, u32)>,
    /// Request method.
    pub method: String,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// Request body.
    pub body: Vec<u8>,
    /// Seed for Poisson gaps and host/path picks.
    pub seed: u64,
    /// Allow a target outside loopback.
    pub allow_remote: bool,
    /// Runtime worker threads.
    pub threads: usize,
    /// Scheduling lag (p99) beyond which the run is untrusted (exit 3).
    pub lag_budget: Duration,
    /// Nice value the lanes ask for (0: left as started).
    pub nice: i32,
    /// Trust settings for `https://` targets.
    pub tls: TlsOptions,
    /// HTTP/2 (h2c for `http://`, ALPN h2 for `https://`) instead of HTTP/1.1.
    pub http2: Option<H2Settings>,
    /// Connect to this unix socket instead of the URL's host and port (which still give the
    /// Host header and the TLS server name).
    pub unix_socket: Option<PathBuf>,
    /// Receives one [`Sample`] per request, warm-up included (for `--samples-out` and joins).
    pub samples: Option<std::sync::mpsc::Sender<Sample>>,
    /// Most connections open at once (`None`: [`DEFAULT_MAX_CONNECTIONS`], or -c in a closed
    /// loop, capped by the fd limit). An arrival that finds all of them busy waits for one.
    pub max_connections: Option<usize>,
    /// Longest an arrival waits for a free connection (or a connect token) before it is
    /// dropped; capped at the timeout.
    pub max_wait: Duration,
    /// New connections per second (`None`: [`CONNECT_RATE_PER_BUDGET`] × the budget or twice
    /// the offered rate, whichever is higher, with keep-alive; unbounded without it: every
    /// request then needs one).
    pub connect_rate: Option<f64>,
    /// Share of sent arrivals, %, that may end without a status before `load.errors` fails.
    pub max_errors_pct: f64,
    /// Which HTTP/1.1 client sends the requests.
    pub engine: super::Engine,
    /// `--shard I/N`: this copy's place among N generators (its `rate` already divided).
    pub shard: Option<Shard>,
    /// `--start-at`: the wall-clock instant (ns since the Unix epoch) the first arrival (of the
    /// warm-up, if any) is due; `None` (or a past instant): as soon as the generator is up.
    pub start_at_unix_ns: Option<i128>,
}

/// Default connection budget: below nginx's default `worker_connections` (512 upstream, 768 in
/// Debian), so a one-worker server is not pushed into refusing connections, and far below a
/// usual descriptor limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default new-connection rate, per connection of the budget per second: the whole budget may
/// be reopened four times a second, a reconnect storm no faster. Never below twice the offered
/// rate ([`CONNECT_RATE_PER_ARRIVAL`]): a server that closes every connection needs one connect
/// per request, and the generator must be able to offer what it is asked to.
pub const CONNECT_RATE_PER_BUDGET: f64 = 4.0;
/// Default new-connection rate per offered arrival per second (see [`CONNECT_RATE_PER_BUDGET`]).
pub const CONNECT_RATE_PER_ARRIVAL: f64 = 2.0;
/// Default `--max-wait`.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(1);
/// Default `--max-errors`, %.
pub const DEFAULT_MAX_ERRORS_PCT: f64 = 1.0;
/// The lanes' nice value by default: as started. `--nice -10` keeps an open-loop schedule on
/// a host whose CPUs the server saturates (lanes at the server's priority woke 15-33 ms late
/// at p99 in runs here), but lanes that preempt the server change what it gets of the CPUs
/// when they run: with the generator on the server's machine neither is neutral, so the
/// choice is the user's and the report says which was made.
pub const DEFAULT_NICE: i32 = 0;

/// What the report echoes of the plan.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct PlanEcho {
    /// URL (escaped).
    pub url: String,
    /// Resolved address the connections go to.
    pub address: String,
    /// `open` or `closed`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub mode: crate::util::de::Name,
    /// Arrival process (`null` for an unpaced closed loop).
    pub arrival: Option<Arrival>,
    /// Target arrivals per second (`null` for an unpaced closed loop).
    pub rate_per_s: Option<f64>,
    /// Closed-loop workers.
    pub concurrency: Option<usize>,
    /// Measured window, s.
    pub duration_s: f64,
    /// Warm-up, s.
    pub warmup_s: f64,
    /// Per-request timeout, s.
    pub timeout_s: f64,
    /// Keep-alive.
    pub keepalive: bool,
    /// Method.
    pub method: String,
    /// Distinct Host headers.
    pub hosts: usize,
    /// Paths and weights (escaped).
    pub paths: Vec<PathWeight>,
    /// Seed.
    pub seed: u64,
    /// Runtime threads.
    pub threads: usize,
    /// Lag budget, µs.
    pub lag_budget_us: f64,
    /// `https://`: TLS (rustls).
    pub tls: bool,
    /// `--insecure`: the server's certificate was not checked.
    pub tls_insecure: bool,
    /// `http/1.1` or `h2`.
    #[serde(deserialize_with = "crate::util::de::static_str")]
    pub protocol: crate::util::de::Name,
    /// HTTP/2 connections per lane (`null` for HTTP/1.1).
    pub h2_connections: Option<usize>,
    /// HTTP/2 concurrent streams per connection, at most (`null` for HTTP/1.1).
    pub h2_max_streams: Option<usize>,
    /// Connection budget in effect (all lanes).
    pub max_connections: usize,
    /// Longest wait for a free connection before an arrival is dropped, s.
    pub max_wait_s: f64,
    /// New connections per second allowed (`null`: unbounded).
    pub connect_rate_per_s: Option<f64>,
    /// Errors (no status) above this share of sent arrivals, %, fail the run.
    pub max_errors_pct: f64,
    /// `--shard I/N` (absent without it): `rate_per_s` is then this copy's share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

/// One entry of the path mix.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct PathWeight {
    /// Path (escaped).
    pub path: String,
    /// Weight.
    pub weight: u32,
}

impl Plan {
    /// An open-loop plan with defaults: const arrivals, 10 s timeout, keep-alive, no warm-up.
    pub fn new(url: &str, rate: f64, duration: Duration) -> Result<Plan> {
        let target = Url::parse(url)?;
        Ok(Plan {
            url: url.to_string(),
            target,
            rate: Some(rate),
            arrival: Arrival::Const,
            duration,
            warmup: Duration::ZERO,
            timeout: Duration::from_secs(10),
            keepalive: true,
            closed_loop: None,
            hosts: vec![],
            path_mix: vec![],
            method: "GET".into(),
            headers: vec![],
            body: vec![],
            seed: 1,
            allow_remote: false,
            threads: default_threads(),
            lag_budget: Duration::from_millis(10),
            nice: DEFAULT_NICE,
            tls: TlsOptions::default(),
            http2: None,
            unix_socket: None,
            samples: None,
            max_connections: None,
            max_wait: DEFAULT_MAX_WAIT,
            connect_rate: None,
            max_errors_pct: DEFAULT_MAX_ERRORS_PCT,
            engine: super::Engine::default(),
            shard: None,
            start_at_unix_ns: None,
        })
    }

    /// A light probe load for the tracer: const arrivals, keep-alive, timeout 10 s, no warm-up.
    pub fn probe(url: &str, rate: f64, duration: Duration, allow_remote: bool) -> Result<Plan> {
        let mut p = Plan::new(url, rate, duration)?;
        p.allow_remote = allow_remote;
        p.threads = 1;
        p.check()?;
        Ok(p)
    }

    /// Checks everything that does not need the network.
    pub fn check(&self) -> Result<()> {
        self.check_schedule()?;
        self.check_request()
    }

    /// The schedule and its limits: rate or workers, duration, timeouts, threads, budgets.
    fn check_schedule(&self) -> Result<()> {
        if let Some(rate) = self.rate
            && (!rate.is_finite() || rate <= 0.0 || rate > 10_000_000.0)
        {
            return Err(Error::usage(format!(
                "--rate {rate}: must be greater than 0 and at most 10,000,000 per second"
            )));
        }
        match self.closed_loop {
            None if self.rate.is_none() => {
                return Err(Error::usage(
                    "--rate is required (or --closed-loop -c N for a closed-loop comparison)",
                ));
            }
            Some(0) => return Err(Error::usage("-c/--concurrency must be at least 1")),
            Some(n) if n > 1_000_000 => {
                return Err(Error::usage(format!("-c {n}: more than 1,000,000 workers")));
            }
            _ => {}
        }
        if self.duration.is_zero() {
            return Err(Error::usage("--duration must be positive"));
        }
        // An open-loop window with no arrival in it measures nothing and must not pass.
        if let (Some(rate), None) = (self.rate, self.closed_loop)
            && rate * self.duration.as_secs_f64() < 1.0
        {
            let rate = match self.shard {
                Some(s) => format!(
                    "{} ÷ --shard {}/{} = {rate}",
                    rate * f64::from(s.count),
                    s.index,
                    s.count
                ),
                None => rate.to_string(),
            };
            return Err(Error::usage(format!(
                "--rate {rate} for {} s schedules no request; raise --rate or --duration",
                self.duration.as_secs_f64()
            )));
        }
        if self.duration + self.warmup > MAX_SPAN {
            return Err(Error::usage(
                "--warmup plus --duration exceed a day; that is a typo, not a benchmark",
            ));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(Error::usage("--timeout must be between 1 ms and 1 h"));
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(Error::usage("--nice must be between -20 and 19"));
        }
        if self.lag_budget.is_zero() {
            return Err(Error::usage("--lag-budget must be positive"));
        }
        if self.threads == 0 || self.threads > 256 {
            return Err(Error::usage("--threads must be 1-256"));
        }
        if self.max_connections == Some(0) {
            return Err(Error::usage("--max-connections must be at least 1"));
        }
        if self.max_wait > MAX_TIMEOUT {
            return Err(Error::usage("--max-wait must be at most 1 h"));
        }
        if let Some(r) = self.connect_rate
            && (!r.is_finite() || r <= 0.0)
        {
            return Err(Error::usage(format!(
                "--max-connect-rate {r}: must be greater than 0"
            )));
        }
        if !(0.0..=100.0).contains(&self.max_errors_pct) {
            return Err(Error::usage(format!(
                "--max-errors {}: a percentage, 0-100",
                self.max_errors_pct
            )));
        }
        Ok(())
    }

    /// The requests: method, Host headers, paths, headers, TLS and HTTP/2 options.
    fn check_request(&self) -> Result<()> {
        if !is_token(&self.method) {
            return Err(Error::usage(format!(
                "--method `{}` is not an HTTP method token",
                crate::escape::text(&self.method)
            )));
        }
        for h in &self.hosts {
            if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(Error::usage(format!(
                    "Host header `{}` is empty or has spaces or control characters",
                    crate::escape::text(h)
                )));
            }
        }
        for (p, w) in &self.path_mix {
            if !p.starts_with('/') || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(Error::usage(format!(
                    "--path-mix: `{}` must start with / and have no spaces or control characters",
                    crate::escape::text(p)
                )));
            }
            if *w == 0 {
                return Err(Error::usage("--path-mix: weights must be at least 1"));
            }
        }
        for h in &self.headers {
            check_header(h)?;
        }
        if !self.target.tls && (self.tls.insecure || self.tls.cacert.is_some()) {
            return Err(Error::usage(
                "--insecure and --cacert apply to https:// URLs only",
            ));
        }
        if let Some(h) = self.http2 {
            if !self.keepalive {
                return Err(Error::usage(
                    "--no-keepalive has no meaning with --http2 (streams share connections)",
                ));
            }
            if !(1..=10_000).contains(&h.connections) || !(1..=100_000).contains(&h.max_streams) {
                return Err(Error::usage(
                    "--connections must be 1-10,000 and --max-streams 1-100,000",
                ));
            }
        }
        if self.tls.insecure && self.tls.cacert.is_some() {
            return Err(Error::usage(
                "--insecure and --cacert contradict each other: pick one",
            ));
        }
        let n = self.hosts.len().max(1) * self.path_mix.len().max(1);
        if n > MAX_REQUESTS {
            return Err(Error::usage(format!(
                "{n} Host × path combinations; at most {MAX_REQUESTS}"
            )));
        }
        Ok(())
    }

    /// Resolves the host (or takes the unix socket); refuses a non-loopback address without
    /// `allow_remote`.
    pub fn resolve(&self) -> Result<Address> {
        if let Some(p) = &self.unix_socket {
            use std::os::unix::fs::FileTypeExt;
            let bad = |why: String| {
                Error::usage(format!(
                    "--unix-socket {}: {why}",
                    crate::escape::text(&p.to_string_lossy())
                ))
            };
            let meta = std::fs::metadata(p).map_err(|e| bad(e.to_string()))?;
            if !meta.file_type().is_socket() {
                return Err(bad("not a unix socket".into()));
            }
            return Ok(Address::Unix(p.clone()));
        }
        let host = self.target.host.as_str();
        let addrs: Vec<SocketAddr> = (host, self.target.port)
            .to_socket_addrs()
            .map_err(|e| {
                Error::usage(format!(
                    "cannot resolve host `{}`: {e}",
                    crate::escape::text(host)
                ))
            })?
            .collect();
        // Prefer IPv4: `localhost` often lists ::1 first while servers listen on 127.0.0.1.
        let addr = addrs
            .iter()
            .find(|a| a.is_ipv4())
            .or(addrs.first())
            .copied()
            .ok_or_else(|| {
                Error::usage(format!(
                    "cannot resolve host `{}`: no address",
                    crate::escape::text(host)
                ))
            })?;
        if !self.allow_remote && !is_loopback(addr.ip()) {
            return Err(Error::usage(format!(
                "refusing to send load to {addr} (not loopback): this is a load generator and a \
                 flood is an attack on a server you do not own; pass --allow-remote if you own it"
            )));
        }
        Ok(Address::Tcp(addr))
    }

    /// How connections to `address` are opened: with TLS (ALPN `http/1.1`, or `h2` with
    /// HTTP/2; SNI from the URL's host) for `https://`. Reads `--cacert` here, before anything starts.
    pub fn connector(&self, address: Address) -> Result<Connector> {
        let tls = if self.target.tls {
            Some((
                tls::config(
                    &self.tls,
                    if self.http2.is_some() {
                        &[b"h2"]
                    } else {
                        &[b"http/1.1"]
                    },
                )?,
                tls::server_name(&self.target.host)?,
            ))
        } else {
            None
        };
        Ok(transport::connector(address, tls, self.http2))
    }

    /// Every request the run can send, prebuilt: index `host * paths + path`.
    pub fn requests(&self) -> Vec<Box<[u8]>> {
        let hosts = if self.hosts.is_empty() {
            vec![self.target.host_header()]
        } else {
            self.hosts.clone()
        };
        let paths: Vec<&str> = if self.path_mix.is_empty() {
            vec![self.target.path.as_str()]
        } else {
            self.path_mix.iter().map(|(p, _)| p.as_str()).collect()
        };
        let mut out = Vec::with_capacity(hosts.len() * paths.len());
        for h in &hosts {
            for p in &paths {
                let mut r = format!(
                    "{} {p} HTTP/1.1\r\nHost: {h}\r\nUser-Agent: trapdetect/{}\r\n",
                    self.method,
                    env!("CARGO_PKG_VERSION")
                );
                if !self.keepalive {
                    r.push_str("Connection: close\r\n");
                }
                for hd in &self.headers {
                    r.push_str(hd);
                    r.push_str("\r\n");
                }
                if !self.body.is_empty() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH")
                {
                    r.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
                }
                r.push_str("\r\n");
                let mut b = r.into_bytes();
                b.extend_from_slice(&self.body);
                out.push(b.into_boxed_slice());
            }
        }
        out
    }

    /// The connection budget with `usable` descriptors: the one asked for, else -c for a
    /// closed loop, else the default, the last two capped at `usable`.
    pub fn budget(&self, usable: u64) -> usize {
        let cap = usize::try_from(usable).unwrap_or(usize::MAX).max(1);
        match (self.max_connections, self.closed_loop) {
            (Some(n), _) => n,
            (None, Some(c)) => c.min(cap),
            (None, None) => DEFAULT_MAX_CONNECTIONS.min(cap),
        }
    }

    /// New connections allowed per second with `budget` connections (`None`: unbounded).
    pub fn connect_rate_for(&self, budget: usize) -> Option<f64> {
        match self.connect_rate {
            Some(r) => Some(r),
            None if self.keepalive => Some(
                (CONNECT_RATE_PER_BUDGET * budget as f64)
                    .max(CONNECT_RATE_PER_ARRIVAL * self.rate.unwrap_or(0.0)),
            ),
            None => None,
        }
    }

    /// How long an arrival may wait for a connection: `max_wait`, at most the timeout.
    pub fn wait_bound(&self) -> Duration {
        self.max_wait.min(self.timeout)
    }

    /// The seed of the arrivals and picks: `--seed`, or with `--shard` this copy's own.
    pub fn run_seed(&self) -> u64 {
        self.shard.map_or(self.seed, |s| s.seed(self.seed))
    }

    /// Where const arrivals fall in their gap: (I-1)/N with `--shard`, else 0.
    pub fn phase(&self) -> f64 {
        self.shard.map_or(0.0, |s| s.phase())
    }

    /// Path weights (1 when no mix is given).
    pub fn weights(&self) -> Vec<u32> {
        if self.path_mix.is_empty() {
            vec![1]
        } else {
            self.path_mix.iter().map(|(_, w)| *w).collect()
        }
    }

    /// The report's copy of the plan.
    pub fn echo(&self, address: impl std::fmt::Display) -> PlanEcho {
        let paths = if self.path_mix.is_empty() {
            vec![(self.target.path.clone(), 1)]
        } else {
            self.path_mix.clone()
        };
        PlanEcho {
            url: crate::escape::text(&self.url),
            address: address.to_string(),
            mode: if self.closed_loop.is_some() {
                "closed"
            } else {
                "open"
            },
            arrival: self.rate.map(|_| self.arrival),
            rate_per_s: self.rate,
            concurrency: self.closed_loop,
            duration_s: self.duration.as_secs_f64(),
            warmup_s: self.warmup.as_secs_f64(),
            timeout_s: self.timeout.as_secs_f64(),
            keepalive: self.keepalive,
            method: self.method.clone(),
            hosts: self.hosts.len().max(1),
            paths: paths
                .into_iter()
                .map(|(path, weight)| PathWeight {
                    path: crate::escape::text(&path),
                    weight,
                })
                .collect(),
            seed: self.seed,
            threads: self.threads,
            lag_budget_us: self.lag_budget.as_secs_f64() * 1e6,
            tls: self.target.tls,
            tls_insecure: self.target.tls && self.tls.insecure,
            protocol: if self.http2.is_some() {
                "h2"
            } else {
                "http/1.1"
            },
            h2_connections: self.http2.map(|h| h.connections),
            h2_max_streams: self.http2.map(|h| h.max_streams),
            max_connections: self.budget(u64::MAX),
            max_wait_s: self.wait_bound().as_secs_f64(),
            connect_rate_per_s: self.connect_rate_for(self.budget(u64::MAX)),
            max_errors_pct: self.max_errors_pct,
            shard: self.shard,
        }
    }
}

/// Half the CPUs, one or two lanes: the server under test needs the other cores, and on a
/// 2-core machine one lane holds a higher rate than two that share cores with the server
/// (measured in docs/load.md, OVERHEAD AND LIMITS).
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (cpus / 2).clamp(1, 2)
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn check_header(h: &str) -> Result<()> {
    let bad = |why: &str| Error::usage(format!("--header `{}`: {why}", crate::escape::text(h)));
    let (name, value) = h
        .split_once(':')
        .ok_or_else(|| bad("expected `Name: value`"))?;
    if !is_token(name) {
        return Err(bad("the name is not a header token"));
    }
    if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
        return Err(bad("the value has control characters"));
    }
    for reserved in ["host", "content-length", "transfer-encoding", "connection"] {
        if name.eq_ignore_ascii_case(reserved) {
            return Err(bad(
                "set by trapdetect (use --host-header for Host, --no-keepalive for Connection)",
            ));
        }
    }
    Ok(())
}

/// Expands `site-{0001..0010}` into site-0001 … site-0010 (several groups multiply; a start
/// with leading zeros sets the width).
pub fn expand_hosts(pattern: &str) -> Result<Vec<String>> {
    let Some(open) = pattern.find('{') else {
        return Ok(vec![pattern.to_string()]);
    };
    let bad = || {
        Error::usage(format!(
            "--host-header `{}`: expected a range like site-{{0001..0010}}",
            crate::escape::text(pattern)
        ))
    };
    let close = pattern[open..].find('}').ok_or_else(bad)? + open;
    let (a, b) = pattern[open + 1..close].split_once("..").ok_or_else(bad)?;
    let lo: u64 = a.parse().map_err(|_| bad())?;
    let hi: u64 = b.parse().map_err(|_| bad())?;
    if hi < lo || hi - lo >= MAX_REQUESTS as u64 {
        return Err(bad());
    }
    let width = if a.len() > 1 && a.starts_with('0') {
        a.len()
    } else {
        0
    };
    let rest = expand_hosts(&pattern[close + 1..])?;
    let mut out = vec![];
    for n in lo..=hi {
        for r in &rest {
            out.push(format!("{}{n:0width$}{r}", &pattern[..open]));
            if out.len() > MAX_REQUESTS {
                return Err(Error::usage(format!(
                    "--host-header expands to more than {MAX_REQUESTS} hosts"
                )));
            }
        }
    }
    Ok(out)
}

/// Parses `/=3,/perm=1,/rest=1` (a path without `=N` weighs 1; the last `=` splits).
pub fn parse_path_mix(s: &str) -> Result<Vec<(String, u32)>> {
    let mut out = vec![];
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (path, w) = match item.rsplit_once('=') {
            Some((p, w)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => (
                p,
                w.parse::<u32>()
                    .map_err(|_| Error::usage(format!("--path-mix: weight `{w}` is too large")))?,
            ),
            // `/=-1`, `/=1.5`: a weight that is not a whole number, not a path ending in `=…`.
            Some((_, w)) if w.trim().parse::<f64>().is_ok() => {
                return Err(Error::usage(format!(
                    "--path-mix: weight `{w}` in `{item}` is not a whole number ≥ 0"
                )));
            }
            _ => (item, 1),
        };
        out.push((path.to_string(), w));
    }
    if out.is_empty() {
        return Err(Error::usage("--path-mix is empty"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("http://127.0.0.1:8080/a/b?x=1#frag").unwrap();
        assert_eq!(
            u,
            Url {
                tls: false,
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/a/b?x=1".into()
            }
        );
        assert_eq!(u.host_header(), "127.0.0.1:8080");
        let u = Url::parse("HTTP://localhost").unwrap();
        assert_eq!(
            (u.port, u.path.as_str(), u.host_header()),
            (80, "/", "localhost".into())
        );
        let u = Url::parse("http://[::1]:9000?q").unwrap();
        assert_eq!((u.host.as_str(), u.path.as_str()), ("::1", "/?q"));
        assert_eq!(u.host_header(), "[::1]:9000");
        let u = Url::parse("https://localhost/x").unwrap();
        assert_eq!(
            (u.tls, u.port, u.host_header()),
            (true, 443, "localhost".into())
        );
        let u = Url::parse("HTTPS://localhost:80/").unwrap();
        assert_eq!((u.tls, u.host_header()), (true, "localhost:80".into()));
        for bad in [
            "https://",
            "ftp://x/",
            "127.0.0.1:80",
            "http://",
            "http://:80/",
            "http://h:0/",
            "http://h:99999/",
            "http://h:abc/",
            "http://u:p@h/",
            "http://h/a b",
            "http://[::1/",
        ] {
            let e = Url::parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn hosts_and_paths() {
        let h = expand_hosts("site-{0001..0010}").unwrap();
        assert_eq!(h.len(), 10);
        assert_eq!((h[0].as_str(), h[9].as_str()), ("site-0001", "site-0010"));
        let h = expand_hosts("a{1..2}.b{8..9}").unwrap();
        assert_eq!(h, ["a1.b8", "a1.b9", "a2.b8", "a2.b9"]);
        assert_eq!(expand_hosts("plain").unwrap(), ["plain"]);
        assert!(expand_hosts("x{3..1}").is_err());
        assert!(expand_hosts("x{1..}").is_err());
        assert!(expand_hosts("x{0..999999}").is_err());
        let m = parse_path_mix("/=3,/perm=1, /rest ,/q?a=b=2").unwrap();
        assert_eq!(
            m,
            [
                ("/".to_string(), 3),
                ("/perm".into(), 1),
                ("/rest".into(), 1),
                ("/q?a=b".into(), 2)
            ]
        );
        assert!(parse_path_mix(",").is_err());
    }

    #[test]
    fn checks() {
        let d = Duration::from_secs(1);
        let ok = Plan::new("http://127.0.0.1:1/", 10.0, d).unwrap();
        ok.check().unwrap();
        let mut p = ok.clone();
        p.rate = Some(0.0);
        assert!(p.check().is_err());
        p.rate = None;
        assert!(p.check().is_err(), "open loop needs a rate");
        p.closed_loop = Some(4);
        p.check().unwrap();
        let mut p = ok.clone();
        p.warmup = MAX_SPAN;
        assert!(p.check().is_err());
        let mut p = ok.clone();
        p.headers = vec!["X-Ok: 1".into()];
        p.check().unwrap();
        for h in [
            "NoColon",
            "Bad Name: x",
            "X: a\r\nInjected: 1",
            "Host: x",
            "connection: close",
        ] {
            p.headers = vec![h.into()];
            assert!(p.check().is_err(), "{h}");
        }
        let mut p = ok.clone();
        p.method = "GET /x".into();
        assert!(p.check().is_err());
        let mut p = ok.clone();
        p.hosts = vec!["a b".into()];
        assert!(p.check().is_err());
    }

    #[test]
    fn loopback_only_unless_allowed() {
        let d = Duration::from_secs(1);
        let p = Plan::new("http://127.0.0.1:8080/", 1.0, d).unwrap();
        assert_eq!(p.resolve().unwrap().to_string(), "127.0.0.1:8080");
        let p = Plan::new("http://localhost:8080/", 1.0, d).unwrap();
        assert!(matches!(p.resolve().unwrap(), Address::Tcp(a) if a.ip().is_loopback()));
        let mut p = Plan::new("http://192.0.2.1:8080/", 1.0, d).unwrap();
        let e = p.resolve().unwrap_err().to_string();
        assert!(
            e.contains("not loopback") && e.contains("--allow-remote"),
            "{e}"
        );
        p.allow_remote = true;
        assert_eq!(p.resolve().unwrap().to_string(), "192.0.2.1:8080");
        let p = Plan::new("http://no-such-host.invalid/", 1.0, d).unwrap();
        assert!(
            p.resolve()
                .unwrap_err()
                .to_string()
                .contains("cannot resolve")
        );
    }

    #[test]
    fn requests_are_prebuilt() {
        let mut p = Plan::new("http://127.0.0.1:8080/x", 1.0, Duration::from_secs(1)).unwrap();
        p.hosts = vec!["a".into(), "b".into()];
        p.path_mix = vec![("/1".into(), 1), ("/2".into(), 3)];
        p.keepalive = false;
        p.method = "POST".into();
        p.body = b"hi".to_vec();
        p.headers = vec!["X-T: 1".into()];
        let r = p.requests();
        assert_eq!(r.len(), 4);
        let s = String::from_utf8(r[3].to_vec()).unwrap();
        assert!(s.starts_with("POST /2 HTTP/1.1\r\nHost: b\r\n"), "{s}");
        assert!(s.contains("Connection: close\r\nX-T: 1\r\nContent-Length: 2\r\n\r\nhi"));
        assert_eq!(p.weights(), [1, 3]);
    }

    /// Every refusal of `check`, its message pinned, in the order the checks run (a plan with
    /// two faults names the first).
    #[test]
    fn check_messages_are_pinned() {
        let d = Duration::from_secs(1);
        let ok = Plan::new("http://127.0.0.1:1/", 10.0, d).unwrap();
        let h2 = |connections, max_streams| {
            Some(crate::load::exchange::H2Settings {
                connections,
                max_streams,
            })
        };
        type Fault<'a> = Box<dyn Fn(&mut Plan) + 'a>;
        let faults: Vec<Fault<'_>> = vec![
            Box::new(|p| p.rate = Some(f64::NAN)),
            Box::new(|p| p.rate = Some(20_000_000.0)),
            Box::new(|p| p.rate = None),
            Box::new(|p| p.closed_loop = Some(0)),
            Box::new(|p| p.closed_loop = Some(2_000_000)),
            Box::new(|p| p.duration = Duration::ZERO),
            Box::new(|p| p.rate = Some(0.5)),
            Box::new(|p| p.warmup = MAX_SPAN),
            Box::new(|p| p.timeout = Duration::ZERO),
            Box::new(|p| p.timeout = MAX_TIMEOUT + d),
            Box::new(|p| p.lag_budget = Duration::ZERO),
            Box::new(|p| p.nice = 20),
            Box::new(|p| p.nice = -21),
            Box::new(|p| p.threads = 0),
            Box::new(|p| p.threads = 257),
            Box::new(|p| p.max_connections = Some(0)),
            Box::new(|p| p.max_wait = MAX_TIMEOUT + d),
            Box::new(|p| p.connect_rate = Some(0.0)),
            Box::new(|p| p.connect_rate = Some(f64::INFINITY)),
            Box::new(|p| p.max_errors_pct = 101.0),
            Box::new(|p| p.method = "GET /x".into()),
            Box::new(|p| p.hosts = vec!["ok".into(), "".into()]),
            Box::new(|p| p.hosts = vec!["a\x7fb".into()]),
            Box::new(|p| p.path_mix = vec![("x".into(), 1)]),
            Box::new(|p| p.path_mix = vec![("/a b".into(), 1)]),
            Box::new(|p| p.path_mix = vec![("/a".into(), 0)]),
            Box::new(|p| p.headers = vec!["Bad Name: x".into()]),
            Box::new(|p| p.tls.insecure = true),
            Box::new(|p| {
                p.tls.cacert = Some("/ca.pem".into());
                p.target.tls = true;
                p.tls.insecure = true;
            }),
            Box::new(|p| {
                p.http2 = h2(1, 1);
                p.keepalive = false;
            }),
            Box::new(|p| p.http2 = h2(0, 1)),
            Box::new(|p| p.http2 = h2(1, 100_001)),
            Box::new(|p| p.http2 = h2(10_000, 100_000)),
            Box::new(|p| {
                p.hosts = (0..1_000).map(|i| format!("h{i}")).collect();
                p.path_mix = (0..101).map(|i| (format!("/{i}"), 1)).collect();
            }),
            // Two faults: the rate is checked first.
            Box::new(|p| {
                p.rate = Some(-1.0);
                p.threads = 0;
            }),
            Box::new(|p| {
                p.threads = 0;
                p.method = "".into();
            }),
            Box::new(|p| {
                p.closed_loop = Some(8);
                p.rate = None;
                p.duration = Duration::ZERO;
            }),
        ];
        let got: Vec<String> = faults
            .iter()
            .map(|fault| {
                let mut p = ok.clone();
                fault(&mut p);
                match p.check() {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("{} {e}", e.exit_code()),
                }
            })
            .collect();
        crate::traps::assert_pinned(
            &got,
            &[
                r##""2 --rate NaN: must be greater than 0 and at most 10,000,000 per second""##,
                r##""2 --rate 20000000: must be greater than 0 and at most 10,000,000 per second""##,
                r##""2 --rate is required (or --closed-loop -c N for a closed-loop comparison)""##,
                r##""2 -c/--concurrency must be at least 1""##,
                r##""2 -c 2000000: more than 1,000,000 workers""##,
                r##""2 --duration must be positive""##,
                r##""2 --rate 0.5 for 1 s schedules no request; raise --rate or --duration""##,
                r##""2 --warmup plus --duration exceed a day; that is a typo, not a benchmark""##,
                r##""2 --timeout must be between 1 ms and 1 h""##,
                r##""2 --timeout must be between 1 ms and 1 h""##,
                r##""2 --lag-budget must be positive""##,
                r##""2 --nice must be between -20 and 19""##,
                r##""2 --nice must be between -20 and 19""##,
                r##""2 --threads must be 1-256""##,
                r##""2 --threads must be 1-256""##,
                r##""2 --max-connections must be at least 1""##,
                r##""2 --max-wait must be at most 1 h""##,
                r##""2 --max-connect-rate 0: must be greater than 0""##,
                r##""2 --max-connect-rate inf: must be greater than 0""##,
                r##""2 --max-errors 101: a percentage, 0-100""##,
                r##""2 --method `GET /x` is not an HTTP method token""##,
                r##""2 Host header `` is empty or has spaces or control characters""##,
                r##""2 Host header `a\\x7fb` is empty or has spaces or control characters""##,
                r##""2 --path-mix: `x` must start with / and have no spaces or control characters""##,
                r##""2 --path-mix: `/a b` must start with / and have no spaces or control characters""##,
                r##""2 --path-mix: weights must be at least 1""##,
                r##""2 --header `Bad Name: x`: the name is not a header token""##,
                r##""2 --insecure and --cacert apply to https:// URLs only""##,
                r##""2 --insecure and --cacert contradict each other: pick one""##,
                r##""2 --no-keepalive has no meaning with --http2 (streams share connections)""##,
                r##""2 --connections must be 1-10,000 and --max-streams 1-100,000""##,
                r##""2 --connections must be 1-10,000 and --max-streams 1-100,000""##,
                r##""ok""##,
                r##""2 101000 Host × path combinations; at most 100000""##,
                r##""2 --rate -1: must be greater than 0 and at most 10,000,000 per second""##,
                r##""2 --threads must be 1-256""##,
                r##""2 --duration must be positive""##,
            ],
        );
    }
}
