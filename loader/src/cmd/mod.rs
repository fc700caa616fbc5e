//! One module per subcommand: its flags (clap `Args`) and its `run`, returning the exit code.

pub mod compare;
pub mod generate;
pub mod load;
pub mod net_census;
pub mod preflight;
pub mod report;
pub mod trace;
pub mod version;
pub mod wait_drain;
