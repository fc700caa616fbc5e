//! Self-monitoring counters: what the probes could not record, so the report can say how far
//! its own numbers can be trusted. Slots of the `COUNTERS` per-CPU array.

/// Path keys seen for the first time (one ring-buffer record each).
pub const C_NEW_KEYS: u32 = 0;
/// First-sighting records dropped because the ring buffer was full.
pub const C_RINGBUF_DROPS: u32 = 1;
/// Path arguments that could not be read from user memory.
pub const C_PATH_READ_FAILS: u32 = 2;
/// Syscall exits whose entry record was overwritten by another thread (tid slot collision).
pub const C_INFLIGHT_COLLISIONS: u32 = 3;
/// Syscall exits with no entry record (the syscall began before attach).
pub const C_EXIT_WITHOUT_ENTER: u32 = 4;
/// Path-stat inserts that failed (map full even after LRU eviction).
pub const C_PATH_STATS_INSERT_FAILS: u32 = 5;
/// Successful `accept`/`accept4` returns in traced processes.
pub const C_ACCEPTS: u32 = 6;
/// Processes added to the traced set by `sched_process_fork`.
pub const C_FORKS_FOLLOWED: u32 = 7;
/// Traced processes that exited during the trace.
pub const C_EXITS: u32 = 8;
/// connect() exits of watched clients with no entry record (began before attach).
pub const C_CONNECT_EXIT_WITHOUT_ENTER: u32 = 9;
/// connect() exits whose entry record was overwritten by another thread.
pub const C_CONNECT_COLLISIONS: u32 = 10;
/// connect() calls of watched clients on sockets that are not TCP (unix, UDP), not counted.
pub const C_CONNECT_NOT_TCP: u32 = 11;
/// TCP state changes on a watched port whose socket's namespace could not be read.
pub const C_TCP_NETNS_READ_FAILS: u32 = 12;
/// TCP state changes on a watched port number but in another network namespace (not counted).
pub const C_TCP_OTHER_NETNS: u32 = 13;
/// Number of counter slots.
pub const NUM_COUNTERS: u32 = 16;

/// Counter names for reports, indexed by slot.
pub const COUNTER_NAMES: [&str; 14] = [
    "new_keys",
    "ringbuf_drops",
    "path_read_fails",
    "inflight_collisions",
    "exit_without_enter",
    "path_stats_insert_fails",
    "accepts",
    "forks_followed",
    "exits",
    "connect_exit_without_enter",
    "connect_collisions",
    "connect_not_tcp",
    "tcp_netns_read_fails",
    "tcp_other_netns",
];
