//! Snapshots of /proc and /sys: mounts, processes, privileges. Read once, turned into
//! observations; no rule reads these files itself.

pub mod cpu;
pub mod dirprobe;
pub mod fingerprint;
pub mod fpm;
// `host::host`: the brief names the machine-wide snapshot `host.rs`.
#[allow(clippy::module_inception)]
pub mod host;
pub mod mounts;
pub mod net;
pub mod nginx;
pub mod process;
pub mod runtime;
pub mod target;
pub mod tuning;
