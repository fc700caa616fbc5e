//! `trapdetect run` below its command: the other generators' driver (`run -- COMMAND`,
//! `--load-results`), the join of the load's seconds with the kernel's, and the `run` section
//! the run's observations are reported in.

pub mod driver;
pub mod external;
pub mod join;
pub mod section;
