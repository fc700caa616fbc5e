//! `trapdetect run` below its command: the built-in generator's driver, and the run measured
//! (the load with the trace), joined second by second, judged and its run section added. The
//! command (cmd/run.rs) checks its flags, builds the plan or the other generator's driver, and
//! prints what this returns.

use crate::{
    error::{Error, Result},
    host::mounts::MountTable,
    load::{self, Plan, Running, Summary},
    probe::offcpu::classes_method_of,
    report::Report,
    sample::BackendArgs,
    trace::run::external::{ExternalDriver, LoadSide},
    trace::{
        self, LoadDriver, LoadOutcome,
        run::{
            join::{METHOD_SAMPLED, delivered_basis, method_name, observe},
            section::RunSection,
        },
        seconds::{KernelSource, Sampler},
    },
    traps::{self, run::RunObs},
};

/// Drives the full open-loop load during the trace and samples the kernel once a second.
struct RunDriver {
    pid: u32,
    plan: Plan,
    running: Option<Running>,
    sampler: Option<Sampler>,
    summary: Option<Summary>,
}

impl LoadDriver for RunDriver {
    fn start(&mut self) -> Result<()> {
        let r = load::start(self.plan.clone())?;
        self.sampler =
            Some(Sampler::new(self.pid, r.measured_start_ns()).entering_at(self.plan.target.port));
        self.running = Some(r);
        Ok(())
    }

    fn progress(&self) -> Option<u64> {
        self.running.as_ref().map(|r| r.live().completed)
    }

    /// Its answers per second are the delivered rate; the kernel's count of the target's
    /// requests is the timeline's cross-check. Sent to the target's own port, its kept-alive
    /// connections need the counter from the first second; sent to a front end (nginx before
    /// php-fpm over TCP), the accepts count the target's requests until a connection on its
    /// ports stays open, and the front end's port is not watched (only the probe load compares
    /// its bytes).
    fn served_from_start(&self, own_ports: &[u16]) -> bool {
        own_ports.contains(&self.plan.target.port)
    }

    fn tick(&mut self, probes: &dyn KernelSource) {
        if let Some(s) = self.sampler.as_mut() {
            s.tick(probes);
        }
    }

    fn end(&mut self, probes: &dyn KernelSource) {
        // The last, partial second.
        if let Some(s) = self.sampler.as_mut() {
            s.finish(probes);
        }
    }

    fn finish(&mut self) -> Result<LoadOutcome> {
        let running = self
            .running
            .take()
            .ok_or_else(|| Error::Untrusted("the load never started".into()))?;
        let s = running.stop()?;
        let answered = s.ok_2xx + s.non_2xx;
        let out = LoadOutcome {
            count: (answered > 0).then_some((answered, "run-load")),
            findings: load::findings(&s, &self.plan),
            // Unlike the tracer's light probe, this load is the measurement: a generator that
            // fell behind its schedule measured itself.
            problems: load::problems(&s, &self.plan),
            sections: vec![Box::new(s.clone())],
            notes: vec![],
            drain_s: Some(s.window.drain_s),
        };
        self.summary = Some(s);
        Ok(out)
    }
}

/// Measures the run: the load (the built-in generator's `plan`, or the `other` generator)
/// during the trace, then the join, the rules, the verdict and the run section, into a report
/// not yet finished.
pub fn measure(
    opts: &trace::Options,
    backend: &BackendArgs,
    plan: Option<Plan>,
    mut other: Option<ExternalDriver>,
) -> Result<Report> {
    let mut builtin = plan.map(|plan| RunDriver {
        pid: opts.pid,
        plan,
        running: None,
        sampler: None,
        summary: None,
    });
    let driver: &mut dyn LoadDriver = match (&mut builtin, &mut other) {
        (Some(b), _) => b,
        (None, Some(o)) => o,
        (None, None) => unreachable!("one generator or the other"),
    };
    let (mut report, sampled) = crate::sample::measure(backend, opts, Some(driver))?;
    report.command = "run";
    let method = if sampled.is_some() {
        METHOD_SAMPLED
    } else {
        classes_method_of(&report.probes)
    };
    let offcpu_attached = sampled.is_some()
        || report.probes.iter().any(|p| {
            (p.program == trapdetect_common::offcpu::PROG_OFFCPU_SWITCH
                || p.program == trapdetect_common::offcpu::PROG_OFFCPU_SWITCH_RAW)
                && p.attached
        });
    let mounts = MountTable::of_pid(opts.pid).unwrap_or_default();
    if let Some(s) = &sampled {
        let samplers = [
            builtin.as_mut().and_then(|b| b.sampler.as_mut()),
            other.as_mut().and_then(|o| o.sampler.as_mut()),
        ];
        for k in samplers.into_iter().flatten() {
            k.lock_names.extend(s.lock_names.clone());
        }
    }
    let joined = match (&builtin, &other) {
        (Some(b), _) => b
            .summary
            .as_ref()
            .zip(b.sampler.as_ref())
            .map(|(s, k)| (LoadSide::from_summary(s), k)),
        (None, Some(o)) => o.sampler.as_ref().map(|k| {
            let window_s = k.seconds.iter().map(|x| x.dt_s).sum::<f64>();
            (
                LoadSide::from_external(o.results.as_ref(), &o.client, window_s),
                k,
            )
        }),
        (None, None) => None,
    };
    if let Some((side, sampler)) = &joined {
        if !offcpu_attached {
            report.measurement.notes.push(
                "the off-CPU probes did not attach (see the probes table): the timeline has no kernel columns and there is no wait verdict".into(),
            );
        }
        let mut obs = observe(side, sampler, &report, &mounts, offcpu_attached, opts.pid);
        obs.classified = method != trapdetect_common::offcpu::METHOD_UNKNOWN;
        if sampled.is_some() {
            obs.filesystems = crate::sample::filesystems(sampler, &mounts, opts.pid);
            // Sampled, a thread's waits between two samples count once.
            for l in &mut obs.locks {
                l.waits_lower_bound = true;
            }
            // Whom a wait for a CPU was behind is read at the scheduler's switch: not sampled.
            obs.runq_idle_s = None;
            obs.runq_self_s = None;
        }
        report.findings.extend(traps::run::rules(&obs));
        if offcpu_attached {
            judge(&mut report, &obs, side, sampler);
        }
        if let Some(s) = &sampled {
            crate::sample::annotate(&mut report.findings, &s.stats, &mounts);
        }
        sampler_health(&mut report, sampler);
        let switches = sampler
            .window_totals()
            .get(trapdetect_common::offcpu::S_SWITCHES as usize)
            .copied()
            .unwrap_or(0);
        report.add(&RunSection::of(
            &obs,
            switches,
            &side.missing,
            delivered_basis(side, sampler),
            method_name(method),
        ));
    }
    Ok(report)
}

/// The run's verdict (with the off-CPU probes attached): said in the report, and the run not
/// trusted when it measured something other than the server.
fn judge(report: &mut Report, obs: &RunObs, side: &LoadSide, sampler: &Sampler) {
    let inputs = traps::run::VerdictInputs {
        delivered_basis: delivered_basis(side, sampler).to_string(),
        timeouts: side
            .seconds
            .iter()
            .filter_map(|x| x.errors.get("timeout"))
            .sum(),
    };
    record_verdict(report, obs, &inputs, "run");
}

/// The verdict of `obs`, said in the report; the measurement is not trusted when the verdict
/// is that `what` (the run, the log) measured something other than the server.
pub fn record_verdict(
    report: &mut Report,
    obs: &RunObs,
    inputs: &traps::run::VerdictInputs,
    what: &str,
) {
    let v = traps::run::verdict(obs, &mut report.findings, inputs);
    if !v.trusted {
        report.measurement.trusted = false;
        report.measurement.problems.push(format!(
            "the verdict is that the {what} measured something other than the server: {}",
            v.summary
        ));
    }
    report.verdict = Some(v);
}

/// What the per-second sampler itself says about the timeline: late rows, lost intervals.
fn sampler_health(report: &mut Report, sampler: &Sampler) {
    // A row of the timeline that covers two seconds or more: a whole second is missing
    // (a failed reading, a starved loop), and the per-second join averages what it should
    // have resolved. Said, and the run is not trusted. (A row a few hundred ms long, a
    // tick late on a saturated machine, still resolves its second.)
    // Untrusted when fewer rows than half the window's seconds remain (the join then has
    // little of its per-second resolution left); one late row on a saturated machine is
    // stated.
    if let Some(worst) = sampler
        .seconds
        .iter()
        .map(|s| s.dt_s)
        .filter(|dt| *dt >= 2.0)
        .max_by(f64::total_cmp)
    {
        let window: f64 = sampler.seconds.iter().map(|s| s.dt_s).sum();
        let text = format!(
            "the per-second kernel sampler ran late: one row of the timeline covers {worst:.1} s (its slowest reading took {:.0} ms, one started {:.0} ms after its second had ended){}",
            sampler.slowest_reading_ns as f64 / 1e6,
            sampler.latest_start_ns as f64 / 1e6,
            sampler
                .last_read_error
                .as_ref()
                .map(|e| format!(
                    " ({} failed readings of the off-CPU sums: {e})",
                    sampler.read_errors
                ))
                .unwrap_or_default()
        );
        if (sampler.seconds.len() as f64) < 0.5 * window {
            report.measurement.trusted = false;
            report.measurement.problems.push(text);
        } else {
            report.measurement.notes.push(text);
        }
    }
    let lost: u64 = sampler.seconds.iter().map(|s| s.lost).sum();
    if lost > 0 {
        report.measurement.notes.push(format!(
            "{lost} off-CPU intervals were lost (thread slot collisions or a full map); the seconds are marked"
        ));
    }
}
