//! `trapdetect load` below its command: one run (the samples written as they come, progress on
//! stderr, Ctrl-C ending it early) or a step run, then the report printed and written. The
//! command (cmd/load.rs) builds the plan and the steps from its flags and hands them here.

use std::{
    io::Write as _,
    path::Path,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use crate::{
    error::{Error, Result},
    load::{
        self, Plan, Running, Sample, Summary,
        document::{Document, text, verdict},
        steps::StepSpec,
    },
    output::OutputFile,
    report::export::ExportArgs,
};

/// The command's flags the run reads beyond the plan: where the report goes, the verdict's
/// flags and the progress on stderr.
pub struct Outputs<'a> {
    /// --json.
    pub json: bool,
    /// --json-out.
    pub json_out: Option<&'a Path>,
    /// --html.
    pub html: Option<&'a Path>,
    /// The exports.
    pub export: &'a ExportArgs,
    /// --samples-out.
    pub samples_out: Option<&'a Path>,
    /// --ignore.
    pub ignore: &'a [String],
    /// --strict.
    pub strict: bool,
    /// --quiet.
    pub quiet: bool,
    /// --progress.
    pub progress: bool,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: std::ffi::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn catch_interrupts() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    let handler = SigHandler::Handler(on_signal);
    // SAFETY: installing a handler is unsafe in nix; this one only stores to an atomic, which is
    // async-signal-safe.
    unsafe {
        let _ = signal(Signal::SIGINT, handler);
        let _ = signal(Signal::SIGTERM, handler);
    }
}

/// Runs a step run; returns the exit code.
pub fn run_steps(args: &Outputs, plan: &Plan, spec: &StepSpec) -> Result<i32> {
    crate::output::check_all(&[("--html", args.html)])?;
    let json_out = args
        .json_out
        .map(|p| OutputFile::create("--json-out", p))
        .transpose()?;
    catch_interrupts();
    let rates = spec.rates();
    if !args.quiet {
        eprintln!(
            "trapdetect load: {} steps from {}/s to {}/s, {}s each, to {}; Ctrl-C ends early.",
            rates.len(),
            spec.from,
            rates.last().copied().unwrap_or(spec.from),
            spec.step_duration.as_secs_f64(),
            crate::escape::text(&plan.url)
        );
        announce_wait(plan);
    }
    let report = load::steps::run(plan, spec, &INTERRUPTED, |s| {
        if !args.quiet {
            eprintln!(
                "  step {}/s: delivered {:.1}/s ({:.2}%), {} errors, p99 {} → {}",
                s.rate_per_s,
                s.delivered_per_s,
                s.delivered_ratio * 100.0,
                s.errors_total,
                s.latency_p99_us
                    .map_or("-".into(), |us| format!("{:.2} ms", us / 1e3)),
                if s.passed {
                    "pass"
                } else if s.valid {
                    "fail"
                } else {
                    "invalid"
                }
            );
        }
    })?;
    let json = serde_json::to_string_pretty(&report)
        .map_err(|e| Error::Untrusted(format!("serialize the report: {e}")))?;
    // The run is measured: a file that cannot be written is reported after the report is
    // printed, never instead of it.
    let mut lost = vec![];
    if let (Some(mut f), Some(p)) = (json_out, args.json_out)
        && let Err(e) = f
            .write_all(json.as_bytes())
            .and_then(|_| f.write_all(b"\n"))
            .map_err(|e| Error::output(format!("--json-out {}", p.display()), e))
            .and_then(|_| f.commit())
    {
        lost.push(e.to_string());
    }
    if let Some(p) = args.html {
        let value = serde_json::to_value(&report).unwrap_or_default();
        if let Err(e) = crate::output::write("--html", p, crate::sections::html(&value).as_bytes())
        {
            lost.push(e.to_string());
        }
    }
    let shown = if args.json {
        json + "\n"
    } else {
        load::steps::render(&report)
    };
    if let Err(e) = crate::util::print(&shown) {
        lost.insert(0, e.to_string());
    }
    if !lost.is_empty() {
        return Err(Error::ReportLost(lost.join("; ")));
    }
    Ok(report.exit_code)
}

/// Runs one run; returns the exit code.
pub fn run(args: &Outputs, plan: &Plan) -> Result<i32> {
    let mut run_plan = plan.clone();
    crate::output::check_all(&[("--html", args.html)])?;
    crate::output::check_all(&args.export.paths())?;
    // Both files are created (as hidden temporaries) before the first arrival, so a bad path
    // costs no run; they are put in place only once complete.
    let json_out = args
        .json_out
        .map(|p| OutputFile::create("--json-out", p))
        .transpose()?;
    let writer = samples_writer(args.samples_out, &mut run_plan)?;
    catch_interrupts();
    let running = load::start(run_plan)?;
    let progress = crate::util::Progress::new(args.quiet, args.progress);
    announce(plan);
    if !args.quiet {
        announce_wait(plan);
    }
    let summary = wait(running, &progress)?;
    progress.clear();
    // From here on the run is measured: a file that cannot be written is reported after the
    // report is printed, never instead of it.
    let mut lost = vec![];
    if let Some(w) = writer {
        match w
            .join()
            .map_err(|_| Error::Untrusted("the samples writer panicked".into()))
            .and_then(|r| r)
            .and_then(OutputFile::commit)
        {
            Ok(()) => {}
            Err(e) => lost.push(e.to_string()),
        }
    }
    let (findings, ignored, measurement, code) = verdict(&summary, plan, args.ignore, args.strict);
    let doc = Document {
        summary,
        findings,
        ignored,
        measurement,
        exit_code: code,
    };
    let json = serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::Untrusted(format!("serialize the report: {e}")))?;
    if let (Some(mut f), Some(p)) = (json_out, args.json_out)
        && let Err(e) = f
            .write_all(json.as_bytes())
            .and_then(|_| f.write_all(b"\n"))
            .map_err(|e| Error::output(format!("--json-out {}", p.display()), e))
            .and_then(|_| f.commit())
    {
        lost.push(e.to_string());
    }
    if args.html.is_some() || *args.export != Default::default() {
        let value = serde_json::to_value(&doc).unwrap_or_default();
        if let Some(p) = args.html
            && let Err(e) =
                crate::output::write("--html", p, crate::sections::html(&value).as_bytes())
        {
            lost.push(e.to_string());
        }
        if let Err(e) = args.export.write(&value) {
            lost.push(e.to_string());
        }
    }
    let shown = if args.json { json + "\n" } else { text(&doc) };
    if let Err(e) = crate::util::print(&shown) {
        lost.insert(0, e.to_string());
    }
    if !lost.is_empty() {
        return Err(Error::ReportLost(lost.join("; ")));
    }
    Ok(code)
}

/// Starts the --samples-out writer, fed by the plan's samples channel: one JSON line a request.
fn samples_writer(
    samples_out: Option<&Path>,
    run_plan: &mut Plan,
) -> Result<Option<std::thread::JoinHandle<Result<OutputFile>>>> {
    Ok(match samples_out {
        Some(path) => {
            let mut file = OutputFile::create("--samples-out", path)?;
            let (tx, rx) = std::sync::mpsc::channel::<Sample>();
            run_plan.samples = Some(tx);
            let path = path.to_path_buf();
            Some(std::thread::spawn(move || -> Result<OutputFile> {
                let fail = |e: std::io::Error| {
                    Error::output(format!("--samples-out {}", path.display()), e)
                };
                for s in rx {
                    serde_json::to_writer(&mut file, &s).map_err(|e| fail(e.into()))?;
                    file.write_all(b"\n").map_err(fail)?;
                }
                Ok(file)
            }))
        }
        None => None,
    })
}

/// The start line on stderr.
fn announce(plan: &Plan) {
    eprintln!(
        "trapdetect load: {} to {} for {}s{}, timeout {}s; Ctrl-C ends early.",
        match (plan.rate, plan.closed_loop) {
            (r, Some(c)) => format!(
                "closed loop, {c} workers{}",
                r.map(|r| format!(" capped at {r}/s")).unwrap_or_default()
            ),
            (Some(r), None) => format!("{r}/s {:?}", plan.arrival).to_lowercase(),
            (None, None) => String::new(),
        },
        crate::escape::text(&plan.url),
        plan.duration.as_secs_f64(),
        if plan.warmup.is_zero() {
            String::new()
        } else {
            format!(" after {}s warm-up", plan.warmup.as_secs_f64())
        },
        plan.timeout.as_secs_f64()
    );
}

/// With --start-at still ahead: "waiting until <RFC 3339> to start (shard I/N)" on stderr.
fn announce_wait(plan: &Plan) {
    if let Some(at) = plan.start_at_unix_ns
        && at > load::unix_ns_now()
    {
        eprintln!(
            "waiting until {} to start{}",
            load::external::time::format_rfc3339(at),
            plan.shard
                .map(|s| format!(" (shard {}/{})", s.index, s.count))
                .unwrap_or_default()
        );
    }
}

/// Waits for the run's end (or Ctrl-C), with a progress line a second.
fn wait(running: Running, progress: &crate::util::Progress) -> Result<Summary> {
    let mut next_tick = 1.0;
    let summary = loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            progress.clear();
            eprintln!("trapdetect load: stopping; waiting for requests in flight");
            break running.stop()?;
        }
        if running.is_finished() {
            break running.wait()?;
        }
        std::thread::sleep(Duration::from_millis(50));
        let l = running.live();
        if l.elapsed_s >= next_tick {
            progress.show(&format!(
                "  t={:>4.0}s  scheduled {:>9}  ended {:>9}  2xx {:>9}  in flight {:>6}",
                l.elapsed_s, l.scheduled, l.completed, l.ok_2xx, l.in_flight
            ));
            next_tick = l.elapsed_s.floor() + 1.0;
        }
    };
    Ok(summary)
}
