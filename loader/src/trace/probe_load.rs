//! The light open-loop probe load the tracer drives with `--url`: the load generator's one
//! scheduler and one client, at a low fixed rate, so "per request" means exactly the requests
//! trapdetect sent.

use crate::{
    error::{Error, Result},
    load::{self, Plan, Running},
    traps,
};

use super::{LoadDriver, LoadOutcome};

/// A planned probe load; started when the tracer is attached.
pub struct ProbeLoad {
    plan: Plan,
    running: Option<Running>,
    sent_bytes_max: Option<u64>,
    request_ms: Option<f64>,
}

impl ProbeLoad {
    /// Validates the URL and resolves it now, before anything is attached (bad input: exit 2).
    pub fn new(
        url: &str,
        rate: f64,
        duration: std::time::Duration,
        allow_remote: bool,
    ) -> Result<Self> {
        let plan = Plan::probe(url, rate, duration, allow_remote)?;
        plan.resolve()?;
        Ok(ProbeLoad {
            plan,
            running: None,
            sent_bytes_max: None,
            request_ms: None,
        })
    }
}

impl LoadDriver for ProbeLoad {
    fn start(&mut self) -> Result<()> {
        self.running = Some(load::start(self.plan.clone())?);
        Ok(())
    }

    fn server_port(&self) -> Option<u16> {
        Some(self.plan.target.port)
    }

    fn sent_bytes_max(&self) -> Option<u64> {
        self.sent_bytes_max
    }

    fn request_ms(&self) -> Option<f64> {
        self.request_ms
    }

    fn progress(&self) -> Option<u64> {
        self.running.as_ref().map(|r| r.live().completed)
    }

    fn finish(&mut self) -> Result<LoadOutcome> {
        let running = self
            .running
            .take()
            .ok_or_else(|| Error::Untrusted("the probe load never started".into()))?;
        let s = running.stop()?;
        // Every arrival written at most once, plus one resend per stale pooled connection.
        self.request_ms = s.service_time_2xx.as_ref().map(|p| p.mean_us / 1000.0);
        let longest = self
            .plan
            .requests()
            .iter()
            .map(|r| r.len())
            .max()
            .unwrap_or(0) as u64;
        self.sent_bytes_max =
            Some(longest * (s.scheduled + s.warmup.scheduled + s.connections.stale_retries));
        // Requests the server answered, whatever the status: each one ran through the server.
        let answered = s.ok_2xx + s.non_2xx;
        let mut out = LoadOutcome {
            findings: load::findings(&s, &self.plan),
            ..Default::default()
        };
        // The probe's schedule only paces it; a late probe still counts its requests exactly,
        // so lag is a note here. Requests that never left the generator are a real gap.
        if s.errors.generator_side() > 0 {
            out.problems.push(format!(
                "{} probe requests failed on the generator's side: the request count is incomplete",
                s.errors.generator_side()
            ));
        }
        if let Some(l) = &s.sched_lag {
            out.notes.push(format!(
                "probe load scheduling lag p99 {} µs, max {} µs (pacing only: requests are counted exactly)",
                traps::round(l.p99_us, 0),
                traps::round(l.max_us, 0)
            ));
        }
        if answered == 0 {
            out.notes.push(format!(
                "the probe load got no answer from {}: per-request figures are unavailable",
                self.plan.url
            ));
        } else {
            out.count = Some((answered, "probe-load"));
        }
        out.sections.push(Box::new(s));
        Ok(out)
    }
}
