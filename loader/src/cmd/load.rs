//! `trapdetect load` (being built; see its issue).

use crate::error::{Error, Result};

/// Flags of `trapdetect load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: LoadArgs) -> Result<i32> {
    Err(Error::usage("`load` is not built yet"))
}
