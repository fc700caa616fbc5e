//! Snapshots of /proc and /sys: mounts, processes, privileges. Read once, turned into
//! observations; no rule reads these files itself.

pub mod mounts;
pub mod tree;
