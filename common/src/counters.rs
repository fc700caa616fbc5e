//! Self-monitoring counters: what the probes could not record, so the report can say how far
//! its own numbers can be trusted. Slots of the `COUNTERS` per-CPU array.

/// Defines each slot constant next to its report name, so `COUNTER_NAMES` cannot drift from
/// the slots: the names array is built from the same list, and slots must be 0, 1, 2...
macro_rules! counters {
    ($($(#[doc = $doc:expr])* $name:ident = $slot:literal => $label:literal;)*) => {
        $($(#[doc = $doc])* pub const $name: u32 = $slot;)*

        /// Counter names for reports, indexed by slot.
        pub const COUNTER_NAMES: [&str; [$($slot),*].len()] = [$($label),*];

        const _: () = {
            let slots = [$($slot),*];
            let mut i = 0;
            while i < slots.len() {
                assert!(slots[i] == i as u32, "counter slots must be 0, 1, 2... in order");
                i += 1;
            }
        };
    };
}

counters! {
    /// Path keys seen for the first time (one ring-buffer record each).
    C_NEW_KEYS = 0 => "new_keys";
    /// First-sighting records dropped because the ring buffer was full.
    C_RINGBUF_DROPS = 1 => "ringbuf_drops";
    /// Path arguments that could not be read from user memory.
    C_PATH_READ_FAILS = 2 => "path_read_fails";
    /// Syscall entry records overwritten by another thread's (tid slot collision): that call's
    /// exit finds no record.
    C_INFLIGHT_COLLISIONS = 3 => "inflight_collisions";
    /// Path calls already in progress at attach (read from /proc/PID/task/TID/syscall when the
    /// process was marked traced): their exits are counted here, not timed.
    C_EXIT_WITHOUT_ENTER = 4 => "exit_without_enter";
    /// Path-stat inserts that failed (map full even after LRU eviction).
    C_PATH_STATS_INSERT_FAILS = 5 => "path_stats_insert_fails";
    /// Successful `accept`/`accept4` returns in traced processes.
    C_ACCEPTS = 6 => "accepts";
    /// Processes added to the traced set by `sched_process_fork`.
    C_FORKS_FOLLOWED = 7 => "forks_followed";
    /// Traced processes that exited during the trace.
    C_EXITS = 8 => "exits";
    /// connect() calls of watched clients already in progress at attach (read from /proc).
    C_CONNECT_EXIT_WITHOUT_ENTER = 9 => "connect_exit_without_enter";
    /// connect() entry records overwritten by another thread's.
    C_CONNECT_COLLISIONS = 10 => "connect_collisions";
    /// connect() calls of watched clients on sockets that are not TCP (unix, UDP), not counted.
    C_CONNECT_NOT_TCP = 11 => "connect_not_tcp";
    /// TCP state changes on a watched port whose socket's namespace could not be read.
    C_TCP_NETNS_READ_FAILS = 12 => "tcp_netns_read_fails";
    /// TCP state changes on a watched port number but in another network namespace (not counted).
    C_TCP_OTHER_NETNS = 13 => "tcp_other_netns";
    /// `accept`/`accept4` returns of traced processes that failed with EMFILE or ENFILE: a
    /// process (or the system) out of descriptors, refusing connections it should serve.
    C_ACCEPT_EMFILE = 14 => "accept_emfile";
}

/// Number of counter slots (the size of the `COUNTERS` map; spare slots stay 0).
pub const NUM_COUNTERS: u32 = 16;

const _: () = assert!(COUNTER_NAMES.len() <= NUM_COUNTERS as usize);
