//! The open-loop load generator: a schedule in, a stream of per-request samples and one
//! [`Summary`] out. `trapdetect load` is a thin command over it, and the tracer's probe load
//! uses it too: there is one scheduler and one HTTP client in trapdetect.
//!
//! Shape of a run: on each generator thread (a single-threaded tokio runtime, one "lane"), a
//! dispatcher releases its share of the arrivals at instants computed from the start
//! (`start + i / rate`, or seeded exponential gaps), woken by a timerfd, whatever is still
//! outstanding, and hands each to its own request task (optionally bounded by a semaphore: the
//! closed-loop mode is the same scheduler with a permit per worker). Each task records its
//! outcome with its latency measured from the *intended* instant, so a slow server or a late
//! generator cannot hide latency (no coordinated omission). The generator measures itself too:
//! scheduling lag, in-flight high-water mark, its own fd limit, CPU and memory.
//!
//! ```no_run
//! # fn main() -> Result<(), trapdetect::error::Error> {
//! use std::time::Duration;
//! let plan = trapdetect::load::Plan::probe("http://127.0.0.1:8080/", 25.0, Duration::from_secs(10), false)?;
//! let running = trapdetect::load::start(plan)?;
//! println!("in flight: {}", running.live().in_flight);
//! let summary = running.wait()?;
//! print!("{}", trapdetect::load::render_text(&summary));
//! # Ok(()) }
//! ```

mod budget;
mod classify;
mod client;
mod clock;
mod deadline;
pub mod document;
pub mod driver;
mod engine;
mod exchange;
pub mod external;
mod findings;
mod h2;
mod html;
pub mod http;
mod hyper_h1;
pub mod inputs;
mod plan;
mod render;
mod schedule;
mod stats;
pub mod steps;
mod summary;
mod tls;
mod transport;

pub use classify::ErrorKind;
pub use client::Engine;
pub use clock::{mono_ns, start_at, unix_ns_now};
pub use engine::{Live, Running, raise_fd_limit, start};
pub use exchange::H2Settings;
pub use findings::{findings, problems};
pub use plan::{
    CONNECT_RATE_PER_BUDGET, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_ERRORS_PCT, DEFAULT_MAX_WAIT,
    DEFAULT_NICE, Plan, PlanEcho, Url, default_threads, expand_hosts, parse_path_mix,
};
pub use render::render_text;
pub use schedule::{Arrival, MAX_SHARDS, Schedule, Shard};
pub use stats::Sample;
pub use summary::{Drain, Errors, FdLimit, Listen, Percentiles, Point, Queue, SCHEMA, Summary};
pub use tls::TlsOptions;
pub use transport::Address;

/// Fewest file descriptors a run needs beyond its connections (stdio, runtime, output files).
const FD_RESERVE: u64 = 64;
