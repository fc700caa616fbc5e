//! `trapdetect wait-drain` (being built; see its issue).

use crate::error::{Error, Result};

/// Flags of `trapdetect wait-drain`.
#[derive(Debug, clap::Args)]
pub struct WaitDrainArgs {}

/// Runs the command; returns the exit code.
pub fn run(_args: WaitDrainArgs) -> Result<i32> {
    Err(Error::usage("`wait-drain` is not built yet"))
}
