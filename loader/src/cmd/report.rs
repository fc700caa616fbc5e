//! `trapdetect report FILE.json`: re-renders a saved trapdetect JSON document of any schema
//! (trace, preflight, run and net-census reports, load runs, step runs, comparisons,
//! wait-drain results) as text, HTML and the exports, so a CI artifact can be looked at later.

use std::path::PathBuf;

use serde_json::Value;

use crate::{
    error::{Error, Result, exit},
    report::{self, export::ExportArgs},
};

/// Flags of `trapdetect report`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  rendered
  2  bad input: the file is missing, not JSON, or not a trapdetect report; an output file
     could not be written")]
pub struct ReportArgs {
    /// A JSON report saved with --json or --json-out (any trapdetect command).
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
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
    let doc = super::read_saved(&a.file)?;
    let comparison = if doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.compare/"))
    {
        Some(
            serde_json::from_value::<super::compare::Comparison>(doc.clone()).map_err(|e| {
                Error::usage(format!("{}: not a comparison ({e})", a.file.display()))
            })?,
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
            a.file.display(),
            crate::escape::text(doc["schema"].as_str().unwrap_or("?"))
        )));
    }
    if let Some(p) = &a.html {
        let page = match &comparison {
            // The runs themselves are not in the comparison: no per-second overlays.
            Some(c) => super::compare::html(c, &Value::Null, &Value::Null),
            None => report::html::render_value(&doc, &[]),
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
            Some(c) => report::text::terminal_safe(&super::compare::text(c)),
            None => report::text::render_value(&doc),
        };
        crate::util::print(&text)?;
    }
    Ok(exit::OK)
}
