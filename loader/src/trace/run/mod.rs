//! `trapdetect run` below its command: the other generators' driver (`run -- COMMAND`,
//! `--load-results`) and the `run` section the run's observations are reported in.

pub mod external;
pub mod section;
