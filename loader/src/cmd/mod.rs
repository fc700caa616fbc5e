//! One module per subcommand: its flags (clap `Args`) and its `run`, returning the exit code.

pub mod explain;
pub mod load;
pub mod net_census;
pub mod preflight;
pub mod trace;
pub mod wait_drain;
