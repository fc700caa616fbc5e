//! `trapdetect report FILE.json`: re-renders a saved trapdetect JSON document of any schema
//! (trace, preflight, run and net-census reports, load runs, step runs, comparisons,
//! wait-drain results) as text, HTML and the exports, so a CI artifact can be looked at later.
//! A report or a load run is read back into its typed model and printed by the code that
//! printed it live, so its text is the live text, byte for byte.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{
    error::{Error, Result, exit},
    load::external::{self, merged},
    report::{self, Report, export::ExportArgs, preflight},
};

/// Flags of `trapdetect report`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  rendered
  2  bad input: the file is missing, not JSON, or not a trapdetect report; an output file
     could not be written; several files that cannot be merged")]
pub struct ReportArgs {
    /// A JSON report saved with --json or --json-out (any trapdetect command). Several: load
    /// generators' results (`trapdetect load --json-out` of copies run with --shard, vegeta
    /// or k6 results of several runners), merged on wall-clock seconds.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Several files: print the merged document (JSON) instead of its text.
    #[arg(long)]
    pub json: bool,
    /// Write the HTML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the text report (the default when no file output is asked for).
    #[arg(long)]
    pub text: bool,
    /// Exports.
    #[command(flatten)]
    pub export: ExportArgs,
}

/// Runs the command; 0 once everything asked for is written.
pub fn run(a: ReportArgs) -> Result<i32> {
    if a.files.len() > 1 {
        return merged(&a);
    }
    if a.json {
        return Err(Error::usage(
            "--json is for several files merged (one saved document is JSON already)",
        ));
    }
    let file = &a.files[0];
    let doc = super::read_saved(file)?;
    let comparison = if doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.compare/"))
    {
        Some(
            serde_json::from_value::<crate::report::compare::Comparison>(doc.clone())
                .map_err(|e| Error::usage(format!("{}: not a comparison ({e})", file.display())))?,
        )
    } else {
        None
    };
    let exportable = doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.report/") || s.starts_with("trapdetect.load/"));
    if !exportable && a.export != Default::default() {
        return Err(Error::usage(format!(
            "{}: the exports need a report or a load run (this is {})",
            file.display(),
            crate::escape::text(doc["schema"].as_str().unwrap_or("?"))
        )));
    }
    if let Some(p) = &a.html {
        let page = match &comparison {
            // The runs themselves are not in the comparison: no per-second overlays.
            Some(c) => crate::report::compare::html(c, &Value::Null, &Value::Null),
            None => crate::sections::html(&doc),
        };
        crate::output::write("--html", p, page.as_bytes())?;
    }
    a.export.write(&doc)?;
    let files = a.html.is_some()
        || a.export.csv.is_some()
        || a.export.openmetrics.is_some()
        || a.export.hgrm.is_some();
    if a.text || !files {
        let text = match &comparison {
            Some(c) => report::text::terminal_safe(&crate::report::compare::text(c)),
            None => text(doc, file)?,
        };
        crate::util::print(&text)?;
    }
    Ok(exit::OK)
}

/// Several generators' results merged on wall-clock seconds: the text, or with --json the
/// document (which `report` reads back to the same text).
fn merged(a: &ReportArgs) -> Result<i32> {
    if a.html.is_some() || a.export != Default::default() {
        return Err(Error::usage(
            "several files are merged into text or --json: --html and the exports are for one \
             report",
        ));
    }
    let mut files = vec![];
    for f in &a.files {
        let name = crate::escape::bytes(f.as_os_str().as_encoded_bytes());
        let bytes = crate::input::read_capped(&name, f, external::RESULTS_CAP)?;
        let mtime = crate::util::mtime_unix(f).unwrap_or(0.0);
        files.push((name, bytes, mtime));
    }
    let m = merged::build(&files).map_err(Error::usage)?;
    let out = if a.json {
        serde_json::to_string_pretty(&m).unwrap_or_default() + "\n"
    } else {
        report::text::terminal_safe(&m.text())
    };
    crate::util::print(&out)?;
    Ok(exit::OK)
}

/// The text of a saved document, printed by the code that printed it live.
fn text(mut doc: Value, file: &Path) -> Result<String> {
    report::text::terminal_safe_doc(&mut doc);
    let schema = doc["schema"].as_str().unwrap_or("").to_string();
    let bad = |e: serde_json::Error| {
        Error::usage(format!(
            "{}: not a {} document ({e})",
            file.display(),
            crate::escape::text(&schema)
        ))
    };
    if schema.starts_with("trapdetect.report/") {
        let mut r: Report = serde_json::from_value(doc).map_err(bad)?;
        r.section_text = crate::sections::texts(&r);
        Ok(if r.command == "preflight" {
            // Evidence and host facts when the run printed them (`--verbose`).
            let verbose = r
                .sections
                .get("preflight")
                .and_then(|p| p["verbose"].as_bool());
            preflight::render_text(&r, verbose.unwrap_or(false))
        } else {
            report::text::render(&r)
        })
    } else if schema.starts_with("trapdetect.merged-load/") {
        let m: merged::MergedLoad = serde_json::from_value(doc).map_err(bad)?;
        Ok(m.text())
    } else if schema.starts_with("trapdetect.load/") {
        let d: crate::load::document::Document = serde_json::from_value(doc).map_err(bad)?;
        Ok(crate::load::document::text(&d))
    } else {
        Ok(report::text::steps_or_drain(&doc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        load::external::{
            Format, Totals,
            section::{ExternalLoad, ExternalResults},
        },
        trace::run::section::RunSection,
        traps::{
            Finding, Id, Severity,
            run::{RunObs, RunSecond},
        },
    };

    #[test]
    fn a_saved_report_prints_as_the_live_one() {
        let mut r = Report::new("run");
        r.window_s = Some(5.0);
        r.findings
            .push(Finding::new(Id::PoolTooSmall, Severity::Fail, "pool").with("workers", 1));
        let obs = RunObs {
            seconds: vec![RunSecond {
                t_s: 0,
                offered: 80,
                ok_2xx: 25,
                marks: vec!["late-sample"],
                ..Default::default()
            }],
            window_s: 5.0004,
            off_s: vec![0.25; trapdetect_common::offcpu::NUM_CLASSES as usize],
            on_cpu_s: 0.1234,
            workers: 1,
            ..Default::default()
        };
        r.add(&ExternalLoad {
            source: "command".into(),
            command: vec!["wrk".into(), "-t1".into()],
            exit_status: Some(0),
            interrupted: true,
            killed: false,
            missing_columns: vec!["ok_2xx".into()],
            generators: vec![],
            results: Some(ExternalResults {
                format: Format::OhaJson,
                totals: Totals {
                    requests: Some(100),
                    ok_2xx: Some(99),
                    duration_s: Some(3.0),
                    ..Default::default()
                },
                delivered_per_s: Some(33.0),
                start_unix_s: None,
                skipped_lines: 0,
                seconds_before_window: 0,
            }),
        });
        r.add(&RunSection::of(
            &obs,
            7,
            &["ok_2xx"],
            "kernel-served-requests",
            "exact",
        ));
        r.finish(&[], false);
        let live = report::text::render(&r);
        let saved: Value = serde_json::from_str(&r.to_json()).unwrap();
        let again = text(saved, Path::new("r.json")).unwrap();
        assert_eq!(again, live);
        assert!(
            live.contains("Generator: wrk -t1 (exit 0, interrupted"),
            "{live}"
        );
        assert!(live.contains("late-sample"), "{live}");
        // Its page too: the live report's is the saved one's, and the load's part is what the
        // external generator said (not a built-in run's figures read from keys it lacks).
        let live = crate::sections::html_of(&r);
        let saved: Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(crate::sections::html(&saved), live);
        assert!(
            live.contains("<tr><th>Generator</th><td>wrk -t1 (exit 0, interrupted"),
            "{live}"
        );
        assert!(live.contains("<tr><th>Results</th><td>oha JSON"), "{live}");
        assert!(!live.contains("<th>offered</th>"), "{live}");
        assert!(!live.contains("could not be read back"), "{live}");
        assert!(live.contains("<summary>load (text)</summary><pre>Generator: wrk"));
    }
}
