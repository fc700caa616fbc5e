//! TCP state changes (`inet_sock_set_state`, as a raw tracepoint), counted in the kernel by
//! event kind: for every TCP socket of the host, and one by one for the watched ports (the
//! target's listening ports) in the watched network namespaces. The tracepoint runs for every
//! TCP state change on the host, mostly in softirq context: the program decides from the two
//! states first, then the socket's protocol and ports (struct offsets from BTF), before it
//! touches anything else, and attributes by port and namespace, never by the current task. A
//! raw tracepoint: the kernel fills no record (both addresses, v4 and v6) before the program
//! runs, and it detaches without the grace period a perf-event tracepoint waits out.

use aya_ebpf::{
    macros::{map, raw_tracepoint},
    maps::{Array, LruPerCpuHashMap, PerCpuArray},
    programs::RawTracePointContext,
};
use trapdetect_common::{
    counters::{C_TCP_NETNS_READ_FAILS, C_TCP_OTHER_NETNS},
    tcp::{
        DIR_LOCAL, DIR_REMOTE, IPPROTO_TCP, MAX_NETNS, NUM_EVENTS, PORT_COUNT_SLOTS, TCP_CLOSE,
        TCP_SYN_SENT, TOTAL_SLOTS, UPSTREAM_ENTRIES, classify, port_index,
    },
};

use crate::{
    kernel::{add, global, read_u16, sock_netns},
    process::{COUNTERS, current_traced},
};

/// `struct inet_sock`'s `inet_sport` (the local port, network order: not `skc_num`, which
/// `inet_put_port` zeroes before the move to CLOSE is traced), `struct sock_common`'s
/// `skc_dport` (the remote port, network order), `struct sock`'s `sk_protocol`. From BTF.
#[unsafe(no_mangle)]
static TCP_OFF_INET_SPORT: u32 = 0;
#[unsafe(no_mangle)]
static TCP_OFF_SK_DPORT: u32 = 0;
#[unsafe(no_mangle)]
static TCP_OFF_SK_PROTOCOL: u32 = 0;

/// Not a counted transition.
const NO_EVENT: u32 = u32::MAX;

/// Port → 1 + its slot in `TCP_PORTS` (0: not watched). An array indexed by port: the lookup
/// is inlined by the JIT, where a hash lookup would be a helper call on every state change.
#[map]
static PORT_SLOT: Array<u8> = Array::with_max_entries(65536, 0);

/// Network namespaces (inode numbers) whose sockets count; slot 0 empty: any namespace.
#[map]
static NETNS: Array<u32> = Array::with_max_entries(MAX_NETNS, 0);

/// Events by kind: host-wide, then on watched ports (see `trapdetect_common::tcp`).
#[map]
static TCP_TOTALS: PerCpuArray<u64> = PerCpuArray::with_max_entries(TOTAL_SLOTS, 0);

/// Events by (watched port slot, local/remote, kind).
#[map]
static TCP_PORTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(PORT_COUNT_SLOTS, 0);

#[inline(always)]
fn slot_of(port: u32) -> u32 {
    PORT_SLOT.get(port).map(|s| *s as u32).unwrap_or(0)
}

/// Remote port → connects by traced processes over the window: the target's upstreams (nginx's
/// FastCGI or proxy connections), known even when none is alive at the census's instant.
#[map]
static UPSTREAM: LruPerCpuHashMap<u32, u64> =
    LruPerCpuHashMap::with_max_entries(UPSTREAM_ENTRIES, 0);

/// Whether socket `sk` lives in a watched namespace (`None`: its namespace could not be read).
#[inline(always)]
pub fn netns_watched(sk: u64) -> Option<bool> {
    let first = NETNS.get(0).copied().unwrap_or(0);
    if first == 0 {
        return Some(true);
    }
    let inum = sock_netns(sk)?;
    let mut i = 0;
    while i < MAX_NETNS {
        if NETNS.get(i).copied().unwrap_or(0) == inum {
            return Some(true);
        }
        i += 1;
    }
    Some(false)
}

/// Whether socket `sk` lives in a watched namespace, counting why not.
#[inline(always)]
fn in_watched_netns(sk: u64) -> bool {
    match netns_watched(sk) {
        Some(true) => true,
        Some(false) => {
            add(&COUNTERS, C_TCP_OTHER_NETNS, 1);
            false
        }
        None => {
            add(&COUNTERS, C_TCP_NETNS_READ_FAILS, 1);
            false
        }
    }
}

/// raw_tp/inet_sock_set_state(const struct sock *sk, const int oldstate, const int newstate).
#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: RawTracePointContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let old: u64 = ctx.arg(1);
    let new: u64 = ctx.arg(2);
    let (old, new) = (old as u32, new as u32);
    // CLOSE→SYN_SENT runs in connect(), in the connecting task: a traced process opening a
    // connection. The remote port is set by then (the local one may not be yet).
    let connecting = old == TCP_CLOSE && new == TCP_SYN_SENT;
    // A plain number, not an Option kept across the reads below: the verifier rejects the
    // spill of an Option's uninitialised payload.
    let ev = classify(old, new).unwrap_or(NO_EVENT);
    if !connecting && ev == NO_EVENT {
        return 0;
    }
    if read_u16(sk, global(&TCP_OFF_SK_PROTOCOL)).map(u32::from) != Some(IPPROTO_TCP) {
        return 0;
    }
    let dport = read_u16(sk, global(&TCP_OFF_SK_DPORT)).map_or(0, u16::from_be) as u32;
    if connecting {
        if current_traced().is_some() {
            match UPSTREAM.get_ptr_mut(&dport) {
                Some(n) => unsafe { *n += 1 },
                None => {
                    let _ = UPSTREAM.insert(&dport, &1, 0);
                }
            }
        }
        return 0;
    }
    if ev == NO_EVENT {
        return 0;
    }
    add(&TCP_TOTALS, ev, 1);
    let sport = read_u16(sk, global(&TCP_OFF_INET_SPORT)).map_or(0, u16::from_be) as u32;
    let local = slot_of(sport);
    let remote = slot_of(dport);
    if local == 0 && remote == 0 {
        return 0;
    }
    if !in_watched_netns(sk) {
        return 0;
    }
    add(&TCP_TOTALS, NUM_EVENTS + ev, 1);
    if local != 0 {
        add(&TCP_PORTS, port_index(local - 1, DIR_LOCAL, ev), 1);
    }
    if remote != 0 {
        add(&TCP_PORTS, port_index(remote - 1, DIR_REMOTE, ev), 1);
    }
    0
}
