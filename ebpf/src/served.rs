//! What the server's sockets receive on its ports, whatever client sent it: payload bytes,
//! data segments and requests (see `trapdetect_common::served`) at the `tcp_probe` raw
//! tracepoint, which every established TCP socket passes for each segment it processes (since
//! Linux 4.16; struct offsets from BTF). The program runs for every such segment on the host:
//! it decides from the socket's own port, one read and one array lookup, before anything else.

use aya_ebpf::{
    macros::{map, raw_tracepoint},
    maps::{Array, LruHashMap, PerCpuArray},
    programs::RawTracePointContext,
};
use trapdetect_common::served::{PORT_OWN, SRV_BYTES, SRV_REQUESTS, SRV_SEGMENTS, SRV_SLOTS};

use crate::{
    kernel::{add, global, read_ptr, read_u8, read_u16, read_u32},
    tcp::netns_watched,
};

/// Port → `PORT_FRONT` or `PORT_OWN` when payload received by sockets bound to it counts.
#[map]
static SERVED_PORT: Array<u8> = Array::with_max_entries(65536, 0);

/// Payload bytes and data segments (see `trapdetect_common::served`).
#[map]
static SERVED: PerCpuArray<u64> = PerCpuArray::with_max_entries(SRV_SLOTS, 0);

/// Socket → its `snd_nxt` at its last data segment.
#[map]
static SERVED_LAST: LruHashMap<u64, u32> = LruHashMap::with_max_entries(65536, 0);

#[unsafe(no_mangle)]
static SERVED_OFF_SK_NUM: u32 = 0;
#[unsafe(no_mangle)]
static SERVED_OFF_TCP_SND_NXT: u32 = 0;
#[unsafe(no_mangle)]
static SERVED_OFF_SKB_LEN: u32 = 0;
#[unsafe(no_mangle)]
static SERVED_OFF_SKB_DATA: u32 = 0;

/// raw_tp/tcp_probe(struct sock *sk, struct sk_buff *skb), from `tcp_rcv_established` with
/// `skb->data` at the TCP header: the socket's own port is `skc_num` (host order), the
/// segment's payload `skb->len` less the header (`doff` words), as the tracepoint's record
/// computes them. A raw tracepoint: the kernel fills no record for it (the `tcp/tcp_probe`
/// record copies both addresses, windows and the RTT for every segment of the host before a
/// program can look at the port).
#[raw_tracepoint(tracepoint = "tcp_probe")]
pub fn tcp_probe(ctx: RawTracePointContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let Some(sport) = read_u16(sk, global(&SERVED_OFF_SK_NUM)) else {
        return 0;
    };
    let kind = SERVED_PORT.get(sport as u32).copied().unwrap_or(0);
    if kind == 0 {
        return 0;
    }
    let skb: u64 = ctx.arg(1);
    let len = read_u32(skb, global(&SERVED_OFF_SKB_LEN)).unwrap_or(0);
    let doff = read_ptr(skb, global(&SERVED_OFF_SKB_DATA))
        .and_then(|th| read_u8(th, 12))
        .map_or(0, |b| b >> 4);
    // A header is 5 to 15 words; anything else was not read.
    let Some(payload) = len.checked_sub(doff as u32 * 4).filter(|_| doff >= 5) else {
        return 0;
    };
    if payload == 0 {
        return 0;
    }
    if netns_watched(sk) != Some(true) {
        return 0;
    }
    add(&SERVED, SRV_BYTES, payload as u64);
    add(&SERVED, SRV_SEGMENTS, 1);
    if kind == PORT_OWN {
        // A response went out since this socket's last data segment (or none was seen yet):
        // this segment starts a request.
        let nxt = read_u32(sk, global(&SERVED_OFF_TCP_SND_NXT)).unwrap_or(0);
        let same = unsafe { SERVED_LAST.get(&sk) }.is_some_and(|last| *last == nxt);
        if !same {
            add(&SERVED, SRV_REQUESTS, 1);
            let _ = SERVED_LAST.insert(&sk, &nxt, 0);
        }
    }
    0
}
