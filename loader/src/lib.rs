//! trapdetect: finds the environment traps that silently falsify server benchmarks, and names
//! the one that caps a run.
//!
//! Observations flow one way: probes and snapshots → observations → rules → findings → report.
//! Rules (`traps`) never touch the kernel.

pub mod agent;
pub mod btf;
pub mod cli;
pub mod cmd;
pub mod error;
pub mod escape;
pub mod figures;
#[doc(hidden)]
pub mod fuzzing;
pub mod host;
pub mod input;
#[cfg(test)]
mod layers;
pub mod load;
pub mod output;
pub mod preflight;
pub mod probe;
pub mod report;
pub mod sample;
pub mod sections;
pub mod strace;
pub mod trace;
pub mod traps;
pub mod util;
pub mod version;
