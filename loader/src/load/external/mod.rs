//! Other load generators under `trapdetect run`: reading their results (`--load-results`, or
//! what `-- COMMAND` prints) and running them as a child on the run's clock, watched as a
//! client (its CPU and run-queue delay per second), killed and reaped whatever happens.

pub mod child;
pub mod merge;
pub mod results;
pub mod section;
pub mod time;

pub use results::{COLUMNS, Format, LoadResults, ParseError, ResultSecond, Totals, parse};
