//! `trapdetect report FILE.json`: re-renders a saved report of any schema (trace, preflight,
//! load, net-census) as text, HTML and the exports, so a CI artifact can be looked at later.

use std::path::{Path, PathBuf};

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

/// Reads and checks a saved trapdetect JSON document.
pub fn read(path: &Path) -> Result<Value> {
    let body =
        std::fs::read(path).map_err(|e| Error::input(format!("read {}", path.display()), e))?;
    let doc: Value = serde_json::from_slice(&body)
        .map_err(|e| Error::usage(format!("{}: not JSON ({e})", path.display())))?;
    match doc["schema"].as_str() {
        Some(s) if s.starts_with("trapdetect.report/") || s.starts_with("trapdetect.load/") => {
            Ok(doc)
        }
        Some(s) => Err(Error::usage(format!(
            "{}: unknown schema {:?} (expected trapdetect.report/1 or trapdetect.load/1)",
            path.display(),
            crate::escape::text(s)
        ))),
        None => Err(Error::usage(format!(
            "{}: not a trapdetect report (no \"schema\" field)",
            path.display()
        ))),
    }
}

/// Runs the command; 0 once everything asked for is written.
pub fn run(a: ReportArgs) -> Result<i32> {
    let doc = read(&a.file)?;
    if let Some(p) = &a.html {
        crate::output::write(
            "--html",
            p,
            report::html::render_value(&doc, &[]).as_bytes(),
        )?;
    }
    a.export.write(&doc)?;
    let files = a.html.is_some()
        || a.export.csv.is_some()
        || a.export.openmetrics.is_some()
        || a.export.hgrm.is_some();
    if a.text || !files {
        crate::util::print(&report::text::render_value(&doc))?;
    }
    Ok(exit::OK)
}
