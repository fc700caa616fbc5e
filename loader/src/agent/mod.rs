//! `trapdetect agent`: a long-running mode for the server of one node. It traces the target
//! in consecutive windows — each one a `trace` of `--window` (attached, held, read, detached,
//! judged by the same rules) — keeps the last window's report, and serves it: `/metrics` as
//! OpenMetrics text for Prometheus, `/report` as the report's JSON. The target is found again
//! before every window (`--comm`, `--cgroup`, `--container`, `--unit`), so a server that
//! restarts is followed; the time no window covered (the attach and detach between two
//! windows, windows without a target) is counted and exported, never hidden.

mod metrics;
pub mod remote;
mod serve;

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{
    error::{Result, exit},
    report::Report,
    sample::BackendArgs,
    trace,
};

/// What the agent is asked to do.
pub struct Config {
    /// Each window's length.
    pub window: Duration,
    /// Stop after this many windows (`None`: until SIGINT/SIGTERM).
    pub windows: Option<u64>,
    /// Where `/metrics` and `/report` are served.
    pub listen: Option<SocketAddr>,
    /// A label on every series (`test_id`, as k6 tags its own output).
    pub test_id: Option<String>,
    /// No line a window on stderr.
    pub quiet: bool,
    /// `--ignore` and `--strict`, applied to every window.
    pub ignore: Vec<String>,
    /// See `ignore`.
    pub strict: bool,
    /// `--backend` and `--sample-hz`.
    pub backend: BackendArgs,
    /// `--btf`.
    pub btf: Option<PathBuf>,
    /// Attach the off-CPU probes: each window says where the threads' time went.
    pub offcpu: bool,
    /// Where each window's series are pushed (Prometheus remote-write).
    pub remote_write: Option<remote::RemoteWrite>,
    /// Progress of each window's trace ([`crate::util::Progress::Silent`] between windows).
    pub progress: crate::util::Progress,
}

/// Finds the target before each window: its pid, and how it was found (by name).
pub type Resolve<'a> = dyn Fn() -> Result<(u32, Option<String>)> + 'a;

/// One window traced and judged: the report, as `trace` would print it.
pub fn window(cfg: &Config, resolve: &Resolve) -> Result<Report> {
    let (pid, selected_by) = resolve()?;
    let opts = trace::Options {
        pid,
        duration: cfg.window,
        top: 12,
        loss_budget_pct: 1.0,
        progress: cfg.progress,
        btf: cfg.btf.clone(),
        watch_clients: vec![],
        skip_probes: vec![],
        offcpu: if cfg.offcpu {
            trace::OffCpu::Window
        } else {
            trace::OffCpu::Off
        },
    };
    let (mut report, _) = crate::sample::measure(&cfg.backend, &opts, None)?;
    if let Some(t) = report.target.as_mut() {
        t.selected_by = selected_by;
    }
    report.finish(&cfg.ignore, cfg.strict);
    Ok(report)
}

/// The last window and the agent's own counters: what `/metrics` and `/report` serve.
pub struct State {
    test_id: Option<String>,
    /// The last window that traced the target.
    last: Option<Done>,
    /// Windows that traced the target, and those that did not (no target, an error).
    windows: u64,
    failed: u64,
    /// Seconds the windows that traced the target covered, and the seconds between them
    /// (attach, detach and judging) or in windows that traced nothing.
    observed_s: f64,
    unobserved_s: f64,
    /// Why the last window did not (one line).
    last_error: Option<String>,
    /// Pushing to a remote-write receiver, and the pushes that failed.
    remote: bool,
    push_failures: u64,
}

/// A window that traced the target.
struct Done {
    doc: Value,
    json: String,
    end_unix_s: f64,
}

impl State {
    fn new(test_id: Option<String>, remote: bool) -> State {
        State {
            remote,
            push_failures: 0,
            test_id,
            last: None,
            windows: 0,
            failed: 0,
            observed_s: 0.0,
            unobserved_s: 0.0,
            last_error: None,
        }
    }

    /// The last window traced the target.
    fn up(&self) -> bool {
        self.last.is_some() && self.last_error.is_none()
    }

    /// A window that traced: `span_s` from looking for the target to its report judged.
    fn record(&mut self, r: &Report, span_s: f64) {
        let w = r.window_s.unwrap_or(0.0);
        self.windows += 1;
        self.observed_s += w;
        self.unobserved_s += (span_s - w).max(0.0);
        self.last_error = None;
        self.last = Some(Done {
            doc: serde_json::to_value(r).unwrap_or_default(),
            json: r.to_json() + "\n",
            end_unix_s: crate::load::unix_ns_now() as f64 / 1e9,
        });
    }

    /// A window that traced nothing, `span_s` long.
    fn fail(&mut self, why: String, span_s: f64) {
        self.failed += 1;
        self.unobserved_s += span_s;
        self.last_error = Some(why);
    }

    /// The last window's report as JSON, and how many windows have traced the target (its
    /// number); before the first one, why there is none yet.
    pub fn report_json(&self) -> std::result::Result<(String, u64), String> {
        match (&self.last, &self.last_error) {
            (Some(d), _) => Ok((d.json.clone(), self.windows)),
            (None, Some(e)) => Err(format!("no window has traced the target yet: {e}")),
            (None, None) => Err("no window has ended yet".into()),
        }
    }

    /// `/metrics`: the last window's findings and figures and the agent's own counters.
    pub fn metrics(&self) -> String {
        metrics::text(self)
    }
}

/// Runs windows until `cfg.windows` are done or a signal comes, serving each one's report
/// as it ends. 0 on a stop after at least one window traced the target, 3 when none did; an
/// error where no window can ever trace (privilege or kernel support, exit 4), or the address
/// cannot be served.
pub fn run(cfg: &Config, resolve: &Resolve) -> Result<i32> {
    trace::install_signal_handlers();
    let signals = trace::signals();
    let stop = || trace::signals() != signals;
    let state = Arc::new(Mutex::new(State::new(
        cfg.test_id.clone(),
        cfg.remote_write.is_some(),
    )));
    let server = match cfg.listen {
        Some(a) => Some(serve::Server::start(a, state.clone())?),
        None => None,
    };
    if let Some(s) = &server {
        eprintln!(
            "trapdetect agent: /metrics and /report on http://{}, a window every {:.0} s",
            s.addr(),
            cfg.window.as_secs_f64()
        );
    }
    let mut n = 0u64;
    while !stop() && cfg.windows.is_none_or(|w| n < w) {
        n += 1;
        let started = Instant::now();
        match window(cfg, resolve) {
            Ok(r) => {
                if !cfg.quiet {
                    eprintln!("trapdetect agent: window {n}: {}", summary(&r));
                }
                lock(&state).record(&r, started.elapsed().as_secs_f64());
            }
            Err(e) if e.exit_code() == exit::PRIVILEGE => return Err(e),
            Err(e) => {
                if !cfg.quiet {
                    eprintln!("trapdetect agent: window {n}: no trace: {e}");
                }
                // Nothing was traced: wait out the window before looking for the target again.
                while started.elapsed() < cfg.window && !stop() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                lock(&state).fail(e.to_string(), started.elapsed().as_secs_f64());
            }
        }
        if let Some(rw) = &cfg.remote_write {
            push(rw, &state);
        }
    }
    drop(server);
    let traced = lock(&state).windows;
    if traced == 0 {
        eprintln!(
            "trapdetect agent: no window traced the target ({n} tried): nothing was measured"
        );
        return Ok(exit::UNTRUSTED);
    }
    Ok(exit::OK)
}

/// Pushes the state's series; a failure is said (one line) and counted, never fatal.
fn push(rw: &remote::RemoteWrite, state: &Mutex<State>) {
    let fams = metrics::families(&lock(state));
    let at_ms = (crate::load::unix_ns_now() / 1_000_000) as i64;
    if let Err(e) = rw.push(&fams, at_ms) {
        eprintln!("trapdetect agent: --remote-write: {e}");
        lock(state).push_failures += 1;
    }
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// A window in one line: the target, the requests, the findings that are not `info`.
fn summary(r: &Report) -> String {
    let target = r
        .target
        .as_ref()
        .map_or("-".to_string(), |t| format!("pid {} ({})", t.pid, t.comm));
    let found: Vec<String> = r
        .findings
        .iter()
        .filter(|f| f.severity != crate::traps::Severity::Info)
        .map(|f| {
            format!(
                "{} {}",
                f.id.as_str(),
                f.severity.label().to_ascii_lowercase()
            )
        })
        .collect();
    format!(
        "{target}, {:.1} s, exit {}{}",
        r.window_s.unwrap_or(0.0),
        r.exit_code,
        if found.is_empty() {
            String::new()
        } else {
            format!(": {}", found.join(", "))
        }
    )
}
