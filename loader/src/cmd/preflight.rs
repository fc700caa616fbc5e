//! `trapdetect preflight` (being built; see its issue).

use crate::error::{Error, Result};

/// Flags of `trapdetect preflight`.
#[derive(Debug, clap::Args)]
pub struct PreflightArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: PreflightArgs) -> Result<i32> {
    Err(Error::usage("`preflight` is not built yet"))
}
