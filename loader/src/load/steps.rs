//! Steps to the knee: one run of consecutive open-loop steps at rising rates, each judged on
//! what the server delivered *inside* the step (2xx answered after the step ended are the
//! previous load's backlog, not this rate's capacity), and the knee stated as the result: the
//! highest step that met the latency SLO with ≥ 99 % delivered and no errors. A step in which
//! the generator itself fell behind measures the generator, so it ends the run without a
//! verdict on the server beyond the steps already passed.

use std::{
    fmt::Write as _,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use serde::Serialize;

use super::{Errors, Plan, Point, Summary};
use crate::{
    error::{Error, Result, exit},
    host::net::{Netns, TimeWaitWatch},
};

/// Share of a step's arrivals that must be answered 2xx inside the step.
pub const DELIVERED_MIN: f64 = 0.99;
/// Most steps in one run.
pub const MAX_STEPS: usize = 1_000;
/// Wire format of a step run's JSON document.
pub const SCHEMA: &str = "trapdetect.load-steps/1";

/// `--rate N` or `--rate FROM..TO`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateRange {
    /// The rate, or the first step's.
    pub from: f64,
    /// The last step's rate (a step run).
    pub to: Option<f64>,
}

impl RateRange {
    /// Parses `800` or `1000..20000` (each a rate as `parse_rate` accepts it).
    pub fn parse(s: &str) -> std::result::Result<RateRange, String> {
        match s.split_once("..") {
            None => Ok(RateRange {
                from: crate::util::parse_rate(s)?,
                to: None,
            }),
            Some((a, b)) => {
                let (from, to) = (crate::util::parse_rate(a)?, crate::util::parse_rate(b)?);
                if to <= from {
                    return Err(format!(
                        "`{s}`: the range must rise (FROM..TO with TO > FROM)"
                    ));
                }
                Ok(RateRange { from, to: Some(to) })
            }
        }
    }
}

/// What to step through.
#[derive(Clone, Debug)]
pub struct StepSpec {
    /// First step's rate.
    pub from: f64,
    /// Last step's rate (included when the steps land on it).
    pub to: f64,
    /// Increment.
    pub step: f64,
    /// Measured length of each step.
    pub step_duration: Duration,
    /// 2xx latency p99 (from the intended instant) a step must stay within.
    pub slo_p99: Option<Duration>,
    /// Before each step after the first, wait until fewer than this many TIME_WAIT sockets
    /// remain on the target port.
    pub drain_below: Option<u64>,
    /// Longest wait for that drain.
    pub drain_timeout: Duration,
}

impl StepSpec {
    /// The steps' rates.
    pub fn rates(&self) -> Vec<f64> {
        let n = ((self.to - self.from) / self.step + 1e-9).floor() as usize + 1;
        (0..n).map(|i| self.from + i as f64 * self.step).collect()
    }

    /// Checks the spec (the plan is checked per step by `start`).
    pub fn check(&self) -> Result<()> {
        if !self.step.is_finite() || self.step <= 0.0 {
            return Err(Error::usage("--step must be a rate greater than 0"));
        }
        let n = (self.to - self.from) / self.step + 1.0;
        if n > MAX_STEPS as f64 {
            return Err(Error::usage(format!(
                "--rate {}..{} --step {}: {n:.0} steps, at most {MAX_STEPS}",
                self.from, self.to, self.step
            )));
        }
        if self.step_duration < Duration::from_secs(2) {
            return Err(Error::usage(
                "--step-duration must be at least 2s (a step is judged on whole seconds after \
                 its first)",
            ));
        }
        if self.slo_p99.is_some_and(|d| d.is_zero()) {
            return Err(Error::usage("--slo-p99 must be positive"));
        }
        if self.drain_below == Some(0) {
            return Err(Error::usage("--drain-below must be at least 1"));
        }
        Ok(())
    }
}

/// One step's result.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// Planned arrivals per second.
    pub rate_per_s: f64,
    /// Measured arrivals sent.
    pub scheduled: u64,
    /// Arrivals per second actually offered.
    pub offered_per_s: f64,
    /// 2xx answered inside the step.
    pub delivered_in_step: u64,
    /// The same per second of the step.
    pub delivered_per_s: f64,
    /// 2xx answered per arrival over the step's whole seconds after the first (the ramp):
    /// ~1 while the server keeps up, whatever its latency, ~capacity ÷ rate beyond.
    pub delivered_ratio: f64,
    /// 2xx to this step's arrivals answered after it ended (its backlog, not its capacity).
    pub ok_2xx_after_step: u64,
    /// Answers with another status.
    pub non_2xx: u64,
    /// Arrivals with no status.
    pub errors_total: u64,
    /// By kind.
    pub errors: Errors,
    /// 2xx latency from the intended instant, median, µs.
    pub latency_p50_us: Option<f64>,
    /// 2xx latency from the intended instant, 99th percentile, µs.
    pub latency_p99_us: Option<f64>,
    /// Scheduling lag p99, µs.
    pub sched_lag_p99_us: Option<f64>,
    /// The generator kept its schedule (false: the step measured the generator).
    pub valid: bool,
    /// Valid, ≥ 99 % delivered inside the step, no errors, within the SLO.
    pub passed: bool,
    /// Why it did not pass (or was not valid).
    pub why: Vec<String>,
    /// TIME_WAIT sockets on the target port when the step started (with --drain-below).
    pub time_wait_at_start: Option<u64>,
    /// Time spent waiting for that drain, s.
    pub drain_wait_s: Option<f64>,
    /// The step's per-second series (window then drain).
    pub series: Vec<Point>,
}

/// Judges one step from its summary and the generator's own problems (`super::problems`).
pub fn judge(s: &Summary, problems: &[String], rate: f64, slo: Option<Duration>) -> Step {
    let window_secs = s.window.measured_s.ceil() as u64;
    let delivered: u64 = s
        .series
        .iter()
        .filter(|p| p.t_s < window_secs)
        .map(|p| p.ok_2xx)
        .sum();
    // Answers trail arrivals by the latency, so the first second of a step is a ramp and a
    // healthy server's last answers land after the step: judged over whole seconds from the
    // second one, 2xx per arrival is ~1 whatever the latency (below 1 s) and ~capacity ÷ rate
    // once the server cannot keep up.
    let from = u64::from(window_secs > 1);
    let steady = |f: fn(&Point) -> u64| -> u64 {
        s.series
            .iter()
            .filter(|p| p.t_s >= from && p.t_s < window_secs)
            .map(f)
            .sum()
    };
    let (ok, arrived) = (steady(|p| p.ok_2xx), steady(|p| p.scheduled));
    let ratio = if arrived > 0 {
        ok as f64 / arrived as f64
    } else {
        0.0
    };
    let r = crate::traps::round;
    let p99 = s.latency_2xx.as_ref().map(|p| p.p99_us);
    let mut why: Vec<String> = problems.iter().map(|p| format!("generator: {p}")).collect();
    let valid = why.is_empty();
    // One answer short is the resolution of whole seconds (an answer that crossed the step's
    // end by a hair), not a server falling behind: it matters only at low rates.
    if ratio < DELIVERED_MIN && arrived.saturating_sub(ok) > 1 {
        why.push(format!(
            "delivered {:.2}% of arrivals (< {:.0}%)",
            ratio * 100.0,
            DELIVERED_MIN * 100.0
        ));
    }
    if s.errors_total > 0 {
        why.push(format!("{} errors", s.errors_total));
    }
    // A dropped arrival was never sent: the server held every connection of the budget past
    // --max-wait, which is falling behind whatever the ratio says.
    if s.dropped > 0 {
        why.push(format!(
            "{} arrivals dropped (no connection free within --max-wait)",
            s.dropped
        ));
    }
    if let Some(slo) = slo {
        let limit = slo.as_secs_f64() * 1e6;
        match p99 {
            Some(p) if p <= limit => {}
            Some(p) => why.push(format!("p99 {:.1} ms > SLO {:.1} ms", p / 1e3, limit / 1e3)),
            None => why.push("no 2xx: no latency to hold to the SLO".into()),
        }
    }
    Step {
        rate_per_s: rate,
        scheduled: s.scheduled,
        offered_per_s: s.offered_rate_per_s,
        delivered_in_step: delivered,
        delivered_per_s: if s.window.measured_s > 0.0 {
            r(delivered as f64 / s.window.measured_s, 3)
        } else {
            0.0
        },
        delivered_ratio: r(ratio, 6),
        ok_2xx_after_step: s.ok_2xx.saturating_sub(delivered),
        non_2xx: s.non_2xx,
        errors_total: s.errors_total,
        errors: s.errors.clone(),
        latency_p50_us: s.latency_2xx.as_ref().map(|p| p.p50_us),
        latency_p99_us: p99,
        sched_lag_p99_us: s.sched_lag.as_ref().map(|p| p.p99_us),
        valid,
        passed: why.is_empty(),
        why,
        time_wait_at_start: None,
        drain_wait_s: None,
        series: s.series.clone(),
    }
}

/// The result of a step run.
#[derive(Clone, Debug, Serialize)]
pub struct Knee {
    /// The highest passing step below the first failing one (`null`: none passed, or the
    /// answer is unknown).
    pub rate_per_s: Option<f64>,
    /// `found` (a step failed after one passed), `above_range` (every step passed),
    /// `below_range` (the first step failed), `generator_limited` (a step measured the
    /// generator before the server failed one), `interrupted`.
    pub verdict: &'static str,
    /// One sentence for people.
    pub text: String,
}

/// The knee of `steps` (run in order, stopped at the first that did not pass).
pub fn knee(steps: &[Step], interrupted: bool) -> Knee {
    let passed = steps
        .iter()
        .take_while(|s| s.passed)
        .last()
        .map(|s| s.rate_per_s);
    let first_bad = steps.iter().find(|s| !s.passed);
    let at_least = |p: Option<f64>| {
        p.map(|r| format!("the server held {r}/s (the highest step passed)"))
            .unwrap_or_else(|| "no step passed".into())
    };
    match first_bad {
        Some(b) if !b.valid => Knee {
            rate_per_s: None,
            verdict: "generator_limited",
            text: format!(
                "unknown: the generator fell behind at {}/s ({}), so that step measured the \
                 generator, not the server; {}",
                b.rate_per_s,
                b.why.join("; "),
                at_least(passed)
            ),
        },
        Some(b) => match passed {
            Some(r) => Knee {
                rate_per_s: Some(r),
                verdict: "found",
                text: format!(
                    "{r}/s: the highest step that met the SLO with ≥ {:.0}% delivered and no \
                     errors; {}/s did not ({})",
                    DELIVERED_MIN * 100.0,
                    b.rate_per_s,
                    b.why.join("; ")
                ),
            },
            None => Knee {
                rate_per_s: None,
                verdict: "below_range",
                text: format!(
                    "below the range: the first step, {}/s, already failed ({})",
                    b.rate_per_s,
                    b.why.join("; ")
                ),
            },
        },
        None if interrupted => Knee {
            rate_per_s: None,
            verdict: "interrupted",
            text: format!(
                "unknown: interrupted before a step failed; {}",
                at_least(passed)
            ),
        },
        None => Knee {
            rate_per_s: passed,
            verdict: "above_range",
            text: match passed {
                Some(r) => format!("at or above {r}/s: every step passed; raise the range"),
                None => "no step ran".into(),
            },
        },
    }
}

/// The exit code of a step run: 0 knee found or above the range, 1 below the range,
/// 3 when the generator, or an interrupt, left the knee unknown.
pub fn exit_code(k: &Knee) -> i32 {
    match k.verdict {
        "found" | "above_range" => exit::OK,
        "below_range" => exit::FAIL,
        _ => exit::UNTRUSTED,
    }
}

/// The JSON document of a step run (`schema` = `trapdetect.load-steps/1`).
#[derive(Clone, Debug, Serialize)]
pub struct StepsReport {
    /// Wire format version.
    pub schema: &'static str,
    /// trapdetect version.
    pub version: &'static str,
    /// The first step's plan (later steps differ only in the rate).
    pub plan: super::PlanEcho,
    /// Rates stepped through.
    pub from_per_s: f64,
    /// Last rate.
    pub to_per_s: f64,
    /// Increment.
    pub step_per_s: f64,
    /// Measured length of each step, s.
    pub step_duration_s: f64,
    /// The SLO, µs (`null`: none).
    pub slo_p99_us: Option<f64>,
    /// Minimum share delivered inside a step.
    pub delivered_min: f64,
    /// The steps run, in order (the run stops at the first that does not pass).
    pub steps: Vec<Step>,
    /// The result.
    pub knee: Knee,
    /// The exit code.
    pub exit_code: i32,
}

/// Runs the steps. `stop` ends the current step early (Ctrl-C); `progress` sees each step.
pub fn run(
    plan: &Plan,
    spec: &StepSpec,
    stop: &AtomicBool,
    mut progress: impl FnMut(&Step),
) -> Result<StepsReport> {
    spec.check()?;
    if spec.drain_below.is_some() && plan.unix_socket.is_some() {
        return Err(Error::usage(
            "--drain-below counts TCP TIME_WAIT sockets; a unix socket has none",
        ));
    }
    let mut watch = match spec.drain_below {
        Some(_) => Some(TimeWaitWatch::open(&Netns::Own)?),
        None => None,
    };
    let mut steps: Vec<Step> = vec![];
    let mut echo = None;
    let mut interrupted = false;
    for (i, rate) in spec.rates().into_iter().enumerate() {
        let mut drained = None;
        if let (Some(below), Some(w)) = (spec.drain_below, watch.as_mut())
            && i > 0
        {
            drained = Some(wait_drain(
                w,
                plan.target.port,
                below,
                spec.drain_timeout,
                stop,
            )?);
        }
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let mut p = plan.clone();
        p.rate = Some(rate);
        p.duration = spec.step_duration;
        // --start-at starts the first step; the others follow it as without.
        if i > 0 {
            p.start_at_unix_ns = None;
        }
        let running = super::start(p.clone())?;
        let summary = loop {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break running.stop()?;
            }
            if running.is_finished() {
                break running.wait()?;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut step = judge(&summary, &super::problems(&summary, &p), rate, spec.slo_p99);
        if let Some((count, waited)) = drained {
            step.time_wait_at_start = Some(count);
            step.drain_wait_s = Some(crate::traps::round(waited.as_secs_f64(), 3));
        }
        echo.get_or_insert(summary.plan);
        progress(&step);
        let go_on = step.passed && !interrupted;
        steps.push(step);
        if !go_on {
            break;
        }
    }
    let knee = knee(&steps, interrupted);
    let plan_echo = match echo {
        Some(e) => e,
        None => plan.echo(plan.resolve()?),
    };
    Ok(StepsReport {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        plan: plan_echo,
        from_per_s: spec.from,
        to_per_s: spec.to,
        step_per_s: spec.step,
        step_duration_s: spec.step_duration.as_secs_f64(),
        slo_p99_us: spec.slo_p99.map(|d| d.as_secs_f64() * 1e6),
        delivered_min: DELIVERED_MIN,
        steps,
        exit_code: exit_code(&knee),
        knee,
    })
}

/// Waits until fewer than `below` TIME_WAIT sockets remain on `port` (or the timeout, or a
/// stop); returns the count when the wait began and how long it took.
fn wait_drain(
    w: &mut TimeWaitWatch,
    port: u16,
    below: u64,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(u64, Duration)> {
    let t0 = Instant::now();
    let first = w.sample(port)?.count;
    let mut n = first;
    while n >= below && t0.elapsed() < timeout && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        n = w.sample(port)?.count;
    }
    Ok((first, t0.elapsed()))
}

/// The text report of a step run.
pub fn render(r: &StepsReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "load steps: {} ({}) · {}/s to {}/s by {}/s · {}s each · {}",
        r.plan.url,
        r.plan.address,
        r.from_per_s,
        r.to_per_s,
        r.step_per_s,
        r.step_duration_s,
        match r.slo_p99_us {
            Some(us) => format!("SLO p99 {} ms", us / 1e3),
            None => "no latency SLO".into(),
        }
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  {:>9} {:>10} {:>12} {:>8} {:>7} {:>7} {:>8} {:>8} {:>8}  verdict",
        "rate/s",
        "offered/s",
        "delivered/s",
        "deliv%",
        "non2xx",
        "errors",
        "p50_ms",
        "p99_ms",
        "lag_p99"
    );
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |us| format!("{:.2}", us / 1e3));
    for s in &r.steps {
        let _ = writeln!(
            o,
            "  {:>9} {:>10.1} {:>12.1} {:>8.2} {:>7} {:>7} {:>8} {:>8} {:>8}  {}",
            s.rate_per_s,
            s.offered_per_s,
            s.delivered_per_s,
            s.delivered_ratio * 100.0,
            s.non_2xx,
            s.errors_total,
            ms(s.latency_p50_us),
            ms(s.latency_p99_us),
            ms(s.sched_lag_p99_us),
            if s.passed {
                "pass".to_string()
            } else if !s.valid {
                format!("INVALID: {}", s.why.join("; "))
            } else {
                format!("FAIL: {}", s.why.join("; "))
            }
        );
        if let (Some(n), Some(w)) = (s.time_wait_at_start, s.drain_wait_s) {
            let _ = writeln!(
                o,
                "  {:>9} (TIME_WAIT {n} at the step's start; waited {w} s)",
                ""
            );
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "knee: {}", r.knee.text);
    let _ = writeln!(o, "exit {}", r.exit_code);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(rate: f64, passed: bool, valid: bool) -> Step {
        Step {
            rate_per_s: rate,
            scheduled: 0,
            offered_per_s: rate,
            delivered_in_step: 0,
            delivered_per_s: 0.0,
            delivered_ratio: 1.0,
            ok_2xx_after_step: 0,
            non_2xx: 0,
            errors_total: 0,
            errors: Errors::from_counts(&Default::default()),
            latency_p50_us: None,
            latency_p99_us: None,
            sched_lag_p99_us: None,
            valid,
            passed,
            why: if passed { vec![] } else { vec!["x".into()] },
            time_wait_at_start: None,
            drain_wait_s: None,
            series: vec![],
        }
    }

    #[test]
    fn ranges_and_rates() {
        assert_eq!(
            RateRange::parse("800").unwrap(),
            RateRange {
                from: 800.0,
                to: None
            }
        );
        assert_eq!(RateRange::parse("1000..20000").unwrap().to, Some(20000.0));
        for bad in ["5..5", "9..1", "..3", "1..", "a..b", "0..10"] {
            assert!(RateRange::parse(bad).is_err(), "{bad}");
        }
        let s = StepSpec {
            from: 1000.0,
            to: 20000.0,
            step: 1000.0,
            step_duration: Duration::from_secs(10),
            slo_p99: None,
            drain_below: None,
            drain_timeout: Duration::from_secs(60),
        };
        let r = s.rates();
        assert_eq!((r.len(), r[0], r[19]), (20, 1000.0, 20000.0));
        s.check().unwrap();
        let off = StepSpec {
            to: 2500.0,
            ..s.clone()
        };
        assert_eq!(
            off.rates(),
            [1000.0, 2000.0],
            "the last step stays inside the range"
        );
        let many = StepSpec {
            step: 1.0,
            ..s.clone()
        };
        assert!(many.check().is_err());
        let short = StepSpec {
            step_duration: Duration::from_millis(500),
            ..s
        };
        assert!(short.check().is_err());
    }

    /// A 3 s step at 100/s whose per-second 2xx completions are `ok` (drain rows included).
    fn summary(ok: &[u64], p99_us: f64) -> Summary {
        use crate::load::summary::{FdLimit, Percentiles, Totals, build};
        let plan = Plan::new("http://127.0.0.1:8080/", 100.0, Duration::from_secs(3)).unwrap();
        let rec = crate::load::stats::Recorder::new(0);
        let mut s = build(
            &rec,
            Totals {
                plan: plan.echo("127.0.0.1:8080"),
                scheduled: 300,
                unsent: 0,
                warmup_scheduled: 0,
                window_ns: 3_000_000_000,
                window_end_ns: 3_000_000_000,
                stopped_early: false,
                start_unix_s: None,
                clock: None,
                in_flight_max: 0,
                rate_x_timeout: None,
                fd_limit: FdLimit::default(),
                opened: 1,
                stale_retries: 0,
                busy_max: 0,
                paced: 0,
                listen: None,
                generator: Default::default(),
            },
        );
        s.series = ok
            .iter()
            .enumerate()
            .map(|(t, &n)| Point {
                t_s: t as u64,
                scheduled: if t < 3 { 100 } else { 0 },
                ok_2xx: n,
                non_2xx: 0,
                errors: Errors::default(),
                lat_2xx_mean_us: None,
                lat_2xx_p99_us: None,
                in_flight_max: 0,
                sched_lag_max_us: 0.0,
                dropped: 0,
                warmup_ok_2xx: 0,
                lat_2xx_hist_ns: None,
            })
            .collect();
        s.ok_2xx = ok.iter().sum();
        s.latency_2xx = Some(Percentiles {
            count: s.ok_2xx,
            mean_us: p99_us / 2.0,
            p50_us: p99_us / 2.0,
            p90_us: p99_us,
            p99_us,
            p99_9_us: p99_us,
            max_us: p99_us,
        });
        s
    }

    #[test]
    fn a_step_is_judged_inside_it_after_its_ramp() {
        let slo = Some(Duration::from_millis(600));
        // Healthy with 0.5 s latency: half of the first second's answers trail into the
        // second, half of the last second's into the drain. Delivered inside: 250 of 300,
        // but 2xx per arrival after the ramp is 1: it passes.
        let st = judge(&summary(&[50, 100, 100, 50], 500_000.0), &[], 100.0, slo);
        assert!(st.passed && st.valid, "{:?}", st.why);
        assert_eq!((st.delivered_in_step, st.ok_2xx_after_step), (250, 50));
        assert_eq!(st.delivered_ratio, 1.0);
        assert!((st.delivered_per_s - 250.0 / 3.0).abs() < 0.01);
        // A server that answers 80/s: 80 % however the seconds fall, and the backlog is
        // answered after the step, reported apart.
        let st = judge(&summary(&[80, 80, 80, 60], 400_000.0), &[], 100.0, slo);
        assert!(!st.passed && st.valid);
        assert_eq!((st.delivered_ratio, st.ok_2xx_after_step), (0.8, 60));
        assert_eq!(st.why, ["delivered 80.00% of arrivals (< 99%)"]);
        // One answer short is whole-second resolution, not a server falling behind.
        let st = judge(&summary(&[100, 100, 99, 1], 1_000.0), &[], 100.0, slo);
        assert!(st.passed, "{:?}", st.why);
        // Over the SLO; and a lagging generator makes the step invalid, whatever else.
        let st = judge(&summary(&[100, 100, 100], 700_000.0), &[], 100.0, slo);
        assert_eq!(st.why, ["p99 700.0 ms > SLO 600.0 ms"]);
        let lag = vec!["scheduling lag p99 20 ms > budget".to_string()];
        let st = judge(&summary(&[100, 100, 100], 1_000.0), &lag, 100.0, slo);
        assert!(!st.valid && !st.passed);
        assert!(st.why[0].starts_with("generator: "), "{:?}", st.why);
    }

    #[test]
    fn the_knee_is_the_last_pass_before_the_first_failure() {
        let k = knee(
            &[
                step(100.0, true, true),
                step(200.0, true, true),
                step(300.0, false, true),
            ],
            false,
        );
        assert_eq!((k.rate_per_s, k.verdict), (Some(200.0), "found"));
        assert_eq!(exit_code(&k), 0);
        let k = knee(&[step(100.0, false, true)], false);
        assert_eq!((k.rate_per_s, k.verdict), (None, "below_range"));
        assert_eq!(exit_code(&k), 1);
        let k = knee(&[step(100.0, true, true), step(200.0, true, true)], false);
        assert_eq!((k.rate_per_s, k.verdict), (Some(200.0), "above_range"));
        // A step the generator could not offer never becomes the server's knee.
        let k = knee(&[step(100.0, true, true), step(200.0, false, false)], false);
        assert_eq!((k.rate_per_s, k.verdict), (None, "generator_limited"));
        assert!(k.text.contains("held 100/s"), "{}", k.text);
        assert_eq!(exit_code(&k), 3);
        let k = knee(&[step(100.0, true, true)], true);
        assert_eq!((k.rate_per_s, k.verdict), (None, "interrupted"));
        assert_eq!(exit_code(&k), 3);
    }
}
