//! What the server's sockets receive on its ports, whatever client sent it: payload bytes,
//! data segments and requests (see `trapdetect_common::served`) at `tcp/tcp_probe`, which every established TCP socket passes for each segment
//! it processes (since Linux 4.16; the record layout differs between kernels, so the loader
//! reads the field offsets from tracefs). The program runs for every such segment on the host:
//! it decides from the socket's own port, with one inlined array lookup, before anything else.

use aya_ebpf::{
    macros::{map, tracepoint},
    maps::{Array, LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use trapdetect_common::served::{PORT_OWN, SRV_BYTES, SRV_REQUESTS, SRV_SEGMENTS, SRV_SLOTS};

use crate::{
    kernel::{add, global},
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
static PROBE_SND_NXT_OFF: u32 = 80;
#[unsafe(no_mangle)]
static PROBE_SPORT_OFF: u32 = 64;
#[unsafe(no_mangle)]
static PROBE_DATA_LEN_OFF: u32 = 76;
#[unsafe(no_mangle)]
static PROBE_SKADDR_OFF: u32 = 128;

/// tcp/tcp_probe: `sport` is the receiving socket's own port (host order), `data_len` the
/// segment's payload.
#[tracepoint(category = "tcp", name = "tcp_probe")]
pub fn tcp_probe(ctx: TracePointContext) -> u32 {
    let sport: u16 = unsafe { ctx.read_at(global(&PROBE_SPORT_OFF)) }.unwrap_or(0);
    let kind = SERVED_PORT.get(sport as u32).copied().unwrap_or(0);
    if kind == 0 {
        return 0;
    }
    let len: u16 = unsafe { ctx.read_at(global(&PROBE_DATA_LEN_OFF)) }.unwrap_or(0);
    if len == 0 {
        return 0;
    }
    let sk: u64 = unsafe { ctx.read_at(global(&PROBE_SKADDR_OFF)) }.unwrap_or(0);
    if netns_watched(sk) != Some(true) {
        return 0;
    }
    add(&SERVED, SRV_BYTES, len as u64);
    add(&SERVED, SRV_SEGMENTS, 1);
    if kind == PORT_OWN {
        // A response went out since this socket's last data segment (or none was seen yet):
        // this segment starts a request.
        let nxt: u32 = unsafe { ctx.read_at(global(&PROBE_SND_NXT_OFF)) }.unwrap_or(0);
        let same = unsafe { SERVED_LAST.get(&sk) }.is_some_and(|last| *last == nxt);
        if !same {
            add(&SERVED, SRV_REQUESTS, 1);
            let _ = SERVED_LAST.insert(&sk, &nxt, 0);
        }
    }
    0
}
