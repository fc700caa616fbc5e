//! `trapdetect compare A.json B.json`: a run before and after a change, side by side: rates,
//! percentiles, errors, per-request kernel figures and findings, each change set against the
//! run-to-run noise the runs themselves show (the spread of their per-second values).

use std::path::PathBuf;

use serde_json::Value;

use crate::{
    error::{Result, exit},
    report::compare::{compare, html, text},
};

/// Flags of `trapdetect compare`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  compared
  2  bad input: a file is missing, not JSON, not a trapdetect report, or the two are of
     different kinds; an output file could not be written")]
pub struct CompareArgs {
    /// The run before (a saved JSON report of any trapdetect command).
    #[arg(value_name = "A.json")]
    pub a: PathBuf,
    /// The run after.
    #[arg(value_name = "B.json")]
    pub b: PathBuf,
    /// Print the comparison as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write the comparison as HTML to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn describe(path: &std::path::Path, doc: &Value) -> String {
    let cmd = if doc["schema"]
        .as_str()
        .is_some_and(|s| s.starts_with("trapdetect.load"))
    {
        "load"
    } else {
        doc["command"].as_str().unwrap_or("?")
    };
    format!(
        "{} ({cmd})",
        crate::escape::text(&path.display().to_string())
    )
}

/// Runs the command.
pub fn run(args: CompareArgs) -> Result<i32> {
    let a = read_comparable(&args.a)?;
    let b = read_comparable(&args.b)?;
    let c = compare(describe(&args.a, &a), &a, describe(&args.b, &b), &b);
    if let Some(p) = &args.html {
        crate::output::write("--html", p, html(&c, &a, &b).as_bytes())?;
    }
    if args.json {
        let j = serde_json::to_string_pretty(&c).unwrap_or_default();
        crate::util::print(&(j + "\n"))?;
    } else {
        crate::util::print(&text(&c))?;
    }
    Ok(exit::OK)
}

/// The schemas `compare` reads: reports and load runs.
fn read_comparable(path: &std::path::Path) -> Result<serde_json::Value> {
    let doc = super::read_saved(path)?;
    match doc["schema"].as_str() {
        Some(s) if s.starts_with("trapdetect.report/") || s.starts_with("trapdetect.load/") => {
            Ok(doc)
        }
        s => Err(crate::error::Error::usage(format!(
            "{}: a {} document cannot be compared (expected a report or a load run)",
            path.display(),
            crate::escape::text(s.unwrap_or("?"))
        ))),
    }
}
