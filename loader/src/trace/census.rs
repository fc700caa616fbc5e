//! The network census with its verdicts, shared by `net-census`, `preflight` and the traced
//! network half: gather (`host::net`), judge (`traps::net`), and what could not be judged.

use std::time::Duration;

use crate::{
    error::Result,
    host::net::{self, Netns, TcpExtSnapshot},
    report::Skipped,
    traps::{self, Finding},
};

/// The census with its findings, ready for a report: what `net-census` prints and what
/// `preflight` (or a traced run) adds with `Report::add(&check.obs)` (the `network` section).
pub struct NetCheck {
    /// The observation.
    pub obs: net::NetObservation,
    /// net.* findings.
    pub findings: Vec<Finding>,
    /// Checks the census could not support, with the reason.
    pub skipped: Vec<Skipped>,
}

/// Census of `ns` (the pid's namespace when `ns` is `None`) with the target `pid`, a planned
/// `(rate per second, client timeout)` and ports of interest; `baseline` turns the TcpExt
/// counters into increments.
pub fn check(
    ns: Option<&Netns>,
    pid: Option<u32>,
    plan: Option<(f64, Duration)>,
    ports: &[u16],
    baseline: Option<&TcpExtSnapshot>,
) -> Result<NetCheck> {
    let own = pid.map_or(Netns::Own, Netns::Pid);
    let mut obs = net::census_in(ns.unwrap_or(&own), pid, plan, ports)?;
    if let Some(b) = baseline {
        obs.set_baseline(b);
    }
    let findings = traps::net::rules(&obs);
    let skipped = traps::net::skipped(&obs)
        .into_iter()
        .map(|(check, reason)| Skipped {
            check: check.to_string(),
            reason,
        })
        .collect();
    Ok(NetCheck {
        obs,
        findings,
        skipped,
    })
}
