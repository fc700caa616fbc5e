//! `trapdetect net-census` (hidden, for debugging and end-to-end tests): the static network
//! census and the net.* findings alone, as the report's `network` section. `--baseline` takes
//! an earlier `net-census --json` output so the TcpExt counters become increments.

use std::{path::PathBuf, time::Duration};

pub use crate::trace::census::{NetCheck, check};
use crate::{
    error::{Error, Result},
    escape,
    host::net::{Netns, TcpExtSnapshot},
    report::{Report, Target, text},
    util::{parse_duration, parse_rate, print},
};

/// Flags of `trapdetect net-census`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0  no `fail` finding
  1  at least one `fail` finding (with --strict: or a `warn` finding)
  2  bad usage or bad input (no such process or namespace, unreadable --baseline)
  3  the sockets could not be counted
  4  no privilege to enter the namespace (CAP_SYS_ADMIN)")]
pub struct NetCensusArgs {
    /// The server: its namespace, listeners and descriptors.
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: Option<u32>,
    /// Take the census of this named namespace (default: the pid's, else our own).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// A port of interest (repeatable): its TIME_WAIT, listeners and flow groups are listed.
    #[arg(long = "port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub ports: Vec<u16>,
    /// Planned arrival rate, per second (with --timeout).
    #[arg(long, value_name = "REQ/S", value_parser = parse_rate, requires = "timeout")]
    pub rate: Option<f64>,
    /// Planned client timeout (with --rate): the run holds rate x timeout connections.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "rate")]
    pub timeout: Option<Duration>,
    /// An earlier `net-census --json` output of the same namespace: report counter increments.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// --ignore and --strict.
    #[command(flatten)]
    pub verdict: crate::cmd::VerdictArgs,
}

fn baseline(path: &std::path::Path) -> Result<TcpExtSnapshot> {
    let body =
        crate::input::read_capped(&path.display().to_string(), path, crate::input::REPORT_CAP)?;
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| Error::usage(format!("{}: not JSON ({e})", path.display())))?;
    let snap = v.pointer("/network/tcp_ext").or_else(|| v.get("tcp_ext"));
    snap.cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .ok_or_else(|| {
            Error::usage(format!(
                "{}: no network.tcp_ext in it (expected `trapdetect net-census --json` output)",
                path.display()
            ))
        })
}

/// Runs the command; returns the exit code.
pub fn run(a: NetCensusArgs) -> Result<i32> {
    crate::cmd::check_ignore(&a.verdict.ignore)?;
    let ns = a
        .netns
        .as_deref()
        .map(Netns::named)
        .transpose()
        .map_err(Error::usage)?;
    let base = a.baseline.as_deref().map(baseline).transpose()?;
    let c = check(
        ns.as_ref(),
        a.pid,
        a.rate.zip(a.timeout),
        &a.ports,
        base.as_ref(),
    )?;
    let mut r = Report::new("net-census");
    if let Some(p) = a.pid {
        let link = |w: &str| {
            std::fs::read_link(format!("/proc/{p}/{w}"))
                .map(|l| escape::bytes(l.as_os_str().as_encoded_bytes()))
                .unwrap_or_else(|_| "?".into())
        };
        r.target = Some(Target {
            pid: p,
            comm: c
                .obs
                .fds
                .first()
                .map(|f| f.comm.clone())
                .unwrap_or_default(),
            exe: link("exe"),
            cwd: link("cwd"),
            processes: 1,
            exited_after_s: None,
            selected_by: None,
        });
    }
    r.findings = c.findings;
    r.skipped = c.skipped;
    r.add(&c.obs);
    r.finish(&a.verdict.ignore, a.verdict.strict);
    if a.json {
        print(&format!("{}\n", r.to_json()))?;
    } else {
        print(&text::render(&r))?;
    }
    Ok(r.exit_code)
}
