//! Socket census of one network namespace: TIME_WAIT by port and by flow, which side closed
//! first and when the TIME_WAIT drains, ephemeral-port headroom per (client IP, server IP,
//! server port), listen queues, TcpExt counters, and the descriptor limits of the target. It
//! is the static half of the net.* traps: one snapshot, no tracing; the observation has room
//! for the traced per-second series (`traced`). It gathers and never renders: the `network`
//! section is rendered by `report::net`.
//!
//! Split along its seams: the data model (`model`), aggregation of a socket stream
//! (`tally`), reading a namespace (`census`), the TIME_WAIT watcher (`watch`), and the traced
//! half (`traced`). Sockets come from sock_diag netlink (`diag`), falling back to
//! /proc/net/tcp{,6} (`procfs`); everything namespace-bound is read inside the target's
//! namespace (`netns`).

mod census;
pub mod diag;
mod model;
pub mod netns;
pub mod procfs;
mod tally;
pub mod traced;
mod watch;

pub use self::{
    census::{census, census_in, census_with_upstreams, fd_use},
    model::*,
    netns::Netns,
    tally::Tally,
    traced::{NetTraced, TcpEvents},
    watch::{PortSample, TimeWaitWatch},
};
