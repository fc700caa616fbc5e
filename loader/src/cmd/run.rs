//! `trapdetect run --pid N --url URL --rate R`: the open-loop load and the tracing at once, on
//! one clock, joined second by second, and a verdict on what the server's threads waited on
//! when throughput went flat.

use std::path::PathBuf;

use crate::{
    error::{Error, Result},
    host::mounts::MountTable,
    load::{self, Plan, Running, Summary},
    probe::offcpu::classes_method_of,
    report::Report,
    trace::run::external::{ExternalDriver, LoadSide},
    trace::{
        self, LoadDriver,
        run::{
            join::{METHOD_SAMPLED, delivered_basis, method_name, observe},
            section::RunSection,
        },
        seconds::{KernelSource, Sampler},
    },
    traps,
};

/// Flags of `trapdetect run`: the load generator's, plus the target.
#[derive(Debug, Clone, clap::Args)]
// `--url` is the built-in generator's: another one (`-- COMMAND`, `--load-results`) has none.
#[command(mut_arg("url", |a| a.required(false).default_value("")))]
pub struct RunArgs {
    /// Server to trace, with every process it forks (php-fpm's master covers its workers).
    #[arg(long, short = 'p', value_name = "PID")]
    pub pid: u32,
    /// Kernel BTF to read struct offsets from, instead of /sys/kernel/btf/vmlinux.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// The load: every flag of `trapdetect load`.
    #[command(flatten)]
    pub load: crate::cmd::load::LoadArgs,
    /// Results of your own generator to join second by second: read when the window ends
    /// (after COMMAND exits, when one is given). oha JSON, vegeta results (JSON lines, CSV)
    /// or JSON report, k6 summary export or JSON lines, wrk or hey text, hey CSV,
    /// trapdetect load JSON.
    #[arg(long, value_name = "FILE")]
    pub load_results: Option<PathBuf>,
    /// Your own generator instead of the built-in one, run for the window (which ends at
    /// --duration or when it exits) and watched as a client; its stdout is read as its
    /// results unless --load-results names them.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// --backend and --sample-hz.
    #[command(flatten)]
    pub backend: crate::sample::BackendArgs,
}

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
        self.sampler = Some(Sampler::new(self.pid, r.measured_start_ns()));
        self.running = Some(r);
        Ok(())
    }

    fn progress(&self) -> Option<u64> {
        self.running.as_ref().map(|r| r.live().completed)
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

    fn finish(&mut self, report: &mut Report) -> Result<Option<(u64, &'static str)>> {
        let running = self
            .running
            .take()
            .ok_or_else(|| Error::Untrusted("the load never started".into()))?;
        let s = running.stop()?;
        report.add(&s);
        report.findings.extend(load::findings(&s, &self.plan));
        // Unlike the tracer's light probe, this load is the measurement: a generator that
        // fell behind its schedule measured itself.
        for p in load::problems(&s, &self.plan) {
            report.measurement.trusted = false;
            report.measurement.problems.push(p);
        }
        let answered = s.ok_2xx + s.non_2xx;
        self.summary = Some(s);
        Ok((answered > 0).then_some((answered, "run-load")))
    }
}

/// Runs the command; returns the exit code.
pub fn run(args: RunArgs) -> Result<i32> {
    if args.load.closed_loop {
        return Err(Error::usage(
            "trapdetect run drives an open-loop load: drop --closed-loop",
        ));
    }
    crate::cmd::check_ignore(&args.load.verdict.ignore)?;
    let external = !args.command.is_empty() || args.load_results.is_some();
    if external && (!args.load.url.is_empty() || args.load.rate.is_some()) {
        return Err(Error::usage(
            "--url and --rate drive the built-in generator: with -- COMMAND or --load-results, drop them",
        ));
    }
    if !external && args.load.url.is_empty() {
        return Err(Error::usage(
            "--url is required (or your own generator after --, or --load-results FILE)",
        ));
    }
    if args.load.rate.as_ref().is_some_and(|r| r.to.is_some()) {
        return Err(Error::usage(
            "trapdetect run drives one rate: steps (--rate A..B) belong to `trapdetect load`",
        ));
    }
    let plan = if external {
        None
    } else {
        let plan = crate::cmd::load::plan(&args.load)?;
        plan.resolve()?;
        Some(plan)
    };
    // Output paths are refused now, before anything is attached.
    crate::output::check_all(&[
        ("--json-out", args.load.output.json_out.as_deref()),
        ("--html", args.load.output.html.as_deref()),
        ("--samples-out", args.load.samples_out.as_deref()),
    ])?;
    crate::output::check_all(&args.load.output.export.paths())?;
    let opts = trace::Options {
        pid: args.pid,
        duration: args.load.duration,
        top: 12,
        loss_budget_pct: 1.0,
        progress: crate::util::Progress::new(args.load.quiet, args.load.progress),
        btf: args.btf.clone(),
        watch_clients: vec![],
        skip_probes: vec![],
        offcpu: true,
    };
    let mut builtin = plan.map(|plan| RunDriver {
        pid: args.pid,
        plan,
        running: None,
        sampler: None,
        summary: None,
    });
    let mut other = if external {
        Some(ExternalDriver::new(
            args.pid,
            args.command.clone(),
            args.load_results.clone(),
        )?)
    } else {
        None
    };
    let driver: &mut dyn LoadDriver = match (&mut builtin, &mut other) {
        (Some(b), _) => b,
        (None, Some(o)) => o,
        (None, None) => unreachable!("one generator or the other"),
    };
    let (mut report, sampled) = crate::sample::measure(&args.backend, &opts, Some(driver))?;
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
    let mounts = MountTable::of_pid(args.pid).unwrap_or_default();
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
        let mut obs = observe(side, sampler, &report, &mounts, offcpu_attached, args.pid);
        obs.classified = method != trapdetect_common::offcpu::METHOD_UNKNOWN;
        if sampled.is_some() {
            obs.filesystems = crate::sample::filesystems(sampler, &mounts, args.pid);
        }
        report.findings.extend(traps::run::rules(&obs));
        if offcpu_attached {
            let inputs = traps::run::VerdictInputs {
                delivered_basis: delivered_basis(side, sampler).to_string(),
                timeouts: side
                    .seconds
                    .iter()
                    .filter_map(|x| x.errors.get("timeout"))
                    .sum(),
            };
            let v = traps::run::verdict(&obs, &mut report.findings, &inputs);
            if !v.trusted {
                report.measurement.trusted = false;
                report.measurement.problems.push(format!(
                    "the verdict is that the run measured something other than the server: {}",
                    v.summary
                ));
            }
            report.verdict = Some(v);
        }
        if let Some(s) = &sampled {
            crate::sample::annotate(&mut report.findings, &s.stats, &mounts);
        }
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
    report.finish(&args.load.verdict.ignore, args.load.verdict.strict);
    crate::cmd::trace::emit(
        &report,
        args.load.output.json,
        args.load.output.json_out.as_deref(),
        args.load.output.html.as_deref(),
    )?;
    args.load
        .output
        .export
        .write(&serde_json::to_value(&report).unwrap_or_default())?;
    Ok(report.exit_code)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    #[test]
    fn run_takes_the_load_flags() {
        let cli = Cli::try_parse_from([
            "trapdetect",
            "run",
            "--pid",
            "42",
            "--url",
            "http://127.0.0.1:8080/",
            "--rate",
            "800",
            "--duration",
            "60s",
            "--json-out",
            "/tmp/x.json",
        ])
        .unwrap();
        match cli.command {
            Some(Command::Run(r)) => {
                assert_eq!(r.pid, 42);
                assert_eq!(r.load.rate.map(|r| (r.from, r.to)), Some((800.0, None)));
                assert_eq!(r.load.duration, std::time::Duration::from_secs(60));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            vec![
                "trapdetect",
                "run",
                "--url",
                "http://127.0.0.1/",
                "--rate",
                "5",
            ],
            vec![
                "trapdetect",
                "run",
                "--pid",
                "x",
                "--url",
                "http://127.0.0.1/",
            ],
        ] {
            assert_eq!(Cli::try_parse_from(&bad).unwrap_err().exit_code(), 2);
        }
    }

    #[test]
    fn a_closed_loop_or_a_bad_url_is_refused_before_anything_attaches() {
        for args in [
            vec!["--url", "http://127.0.0.1:1/", "--closed-loop", "-c", "4"],
            vec!["--url", "ftp://127.0.0.1/", "--rate", "5"],
            vec!["--url", "http://127.0.0.1:1/"],
        ] {
            let mut a = vec!["trapdetect", "run", "--pid", "1"];
            a.extend(args.iter().copied());
            let Some(Command::Run(r)) = Cli::try_parse_from(&a).unwrap().command else {
                panic!("{a:?}");
            };
            let e = super::run(*r).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{a:?}: {e}");
        }
    }
}
