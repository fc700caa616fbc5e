//! `trapdetect agent`: trace a node's server window after window and serve the last window
//! to Prometheus (`/metrics`) and to harnesses (`/report`, or `--once`).

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use crate::{
    agent::{self, Config},
    error::{Error, Result},
    util::parse_duration,
};

/// Flags of `trapdetect agent`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  stopped (SIGINT/SIGTERM, or --windows done) after a window traced the target; with
     --once: the window's code, as trace's
  1  --once: a `fail` finding
  2  bad usage, or --listen cannot be served
  3  no window traced the target (none found, or it could not be traced); --once: the
     measurement cannot be trusted
  4  no window can trace: privilege or kernel support")]
pub struct AgentArgs {
    /// The server's process (with everything it forks); a --comm, --cgroup, --container or
    /// --unit is found again before every window, so a server that restarts is followed.
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// --comm, --cgroup, --container, --unit: the server named instead.
    #[command(flatten)]
    pub select: crate::cmd::SelectArgs,
    /// Length of each window: a trace of this long, judged, then served until the next ends.
    #[arg(long, short = 'w', value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub window: Duration,
    /// Serve `/metrics` (OpenMetrics) and `/report` (JSON) on this address (loopback unless
    /// you mean to expose it: the findings name the server's mounts).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Stop after N windows (default: until SIGINT or SIGTERM).
    #[arg(long, value_name = "N")]
    pub windows: Option<u64>,
    /// One window, printed as `trace` prints its report (text, or --json), then exit with its
    /// code: the agent's view for a harness on any node.
    #[arg(long, conflicts_with_all = ["listen", "windows"])]
    pub once: bool,
    /// With --once: the report as JSON (trapdetect.report/1).
    #[arg(long, requires = "once")]
    pub json: bool,
    /// Also push every window's series to this Prometheus remote-write receiver
    /// (`http://HOST:PORT/api/v1/write`: Prometheus with --web.enable-remote-write-receiver,
    /// Mimir, Thanos Receive, VictoriaMetrics).
    #[arg(long, value_name = "URL", conflicts_with = "once")]
    pub remote_write: Option<String>,
    /// A `test_id` label on every series (the tag k6 puts on its own output, so one query
    /// joins the load with the traps).
    #[arg(long, value_name = "ID")]
    pub test_id: Option<String>,
    /// --ignore and --strict, for every window.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
    /// Kernel BTF to read struct offsets from, instead of /sys/kernel/btf/vmlinux.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// --backend and --sample-hz.
    #[command(flatten)]
    pub backend: crate::sample::BackendArgs,
    /// Leave out the off-CPU probes, and with them where the threads' time went (on a CPU,
    /// waiting for one, blocked by why): they run at every context switch of the host.
    #[arg(long)]
    pub no_offcpu: bool,
    /// No progress on stderr: no line a window (errors, and the line saying where it serves,
    /// remain).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Runs the agent; returns the exit code.
pub fn run(a: AgentArgs) -> Result<i32> {
    if a.pid.is_none() && a.select.selector().is_none() {
        return Err(Error::usage(
            "--pid is required, or the server named by --comm, --cgroup, --container or --unit",
        ));
    }
    if a.pid == Some(0) {
        return Err(Error::usage("--pid 0: not a process id"));
    }
    if a.window < Duration::from_secs(1) {
        return Err(Error::usage("--window: at least 1s"));
    }
    if !a.once && a.listen.is_none() && a.windows.is_none() && a.remote_write.is_none() {
        return Err(Error::usage(
            "nothing would see the windows: give --listen ADDR:PORT, --remote-write URL, \
             --windows N or --once",
        ));
    }
    let remote_write = a
        .remote_write
        .as_deref()
        .map(agent::remote::RemoteWrite::parse)
        .transpose()
        .map_err(Error::Usage)?;
    if a.windows == Some(0) {
        return Err(Error::usage("--windows 0: at least one"));
    }
    crate::cmd::check_ignore(&a.verdict.ignore)?;
    if let Some(t) = &a.test_id
        && (t.is_empty() || t.len() > 128 || t.chars().any(char::is_control))
    {
        return Err(Error::usage("--test-id: 1 to 128 printable characters"));
    }
    let cfg = Config {
        window: a.window,
        windows: a.windows,
        listen: a.listen,
        test_id: a.test_id.clone(),
        quiet: a.quiet,
        ignore: a.verdict.ignore.clone(),
        strict: a.verdict.strict,
        backend: a.backend.clone(),
        btf: a.btf.clone(),
        offcpu: !a.no_offcpu,
        remote_write,
        progress: if a.once {
            crate::util::Progress::new(a.quiet, false)
        } else {
            crate::util::Progress::Silent
        },
    };
    // Checked above: a pid or a selector, so `find` always names one.
    let resolve = || {
        a.select
            .find(a.pid)
            .map(|(pid, how)| (pid.unwrap_or(0), how))
    };
    if a.once {
        let r = agent::window(&cfg, &resolve)?;
        crate::cmd::trace::emit(&r, a.json, None, None)?;
        return Ok(r.exit_code);
    }
    agent::run(&cfg, &resolve)
}
