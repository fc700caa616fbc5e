//! Other load generators under `trapdetect run`: reading their results (`--load-results`, or
//! what `-- COMMAND` prints) and running them as a child on the run's clock, watched as a
//! client (its CPU and run-queue delay per second), killed and reaped whatever happens.

pub mod child;
pub mod merge;
pub mod merged;
pub mod results;
pub mod section;
pub mod time;

pub use results::{COLUMNS, Format, LoadResults, ParseError, ResultSecond, Totals, parse};

/// Largest results file read (`run --load-results`, `report` merging several): a 10-minute
/// vegeta run at 5,000 req/s.
pub const RESULTS_CAP: u64 = 1 << 30;
