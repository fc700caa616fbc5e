//! Traffic the server's sockets receive on its ports, counted at `tcp/tcp_probe` (every
//! segment an established TCP socket processes): payload bytes and data segments, whatever
//! client sent them, including keep-alive connections opened before the trace; and, on the
//! target's own ports, requests: a data segment on a socket that has sent something since its
//! previous data segment (its `snd_nxt` moved: a response went out) starts a new request, as
//! does the first one seen on a socket. That is HTTP/1.x, FastCGI and most request/response
//! protocols without pipelining. The loader compares the bytes with what its own probe load
//! sent, so per-request figures are never divided by the probe's requests while another
//! client's requests are in the counts.

/// Slot of `SERVED`: payload bytes received by server-side sockets of the watched ports.
pub const SRV_BYTES: u32 = 0;
/// Slot of `SERVED`: segments carrying payload.
pub const SRV_SEGMENTS: u32 = 1;
/// Slot of `SERVED`: requests received on the target's own ports.
pub const SRV_REQUESTS: u32 = 2;
/// Size of `SERVED`.
pub const SRV_SLOTS: u32 = 3;

/// `SERVED_PORT` value: a port in front of the target (the `--url` port): bytes only.
pub const PORT_FRONT: u8 = 1;
/// `SERVED_PORT` value: one of the target's own listening ports: bytes and requests.
pub const PORT_OWN: u8 = 2;
