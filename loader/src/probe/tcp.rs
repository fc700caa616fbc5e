//! The socket probes' maps (`ebpf/src/tcp.rs`, `ebpf/src/connect.rs`): which ports and network
//! namespaces count, and reading what the programs counted. The two TCP event maps can be taken
//! out of the object so the per-second sampler reads them on its own thread.

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{Array, MapData, PerCpuArray};
use trapdetect_common::{
    hist::HIST_BUCKETS,
    names::*,
    tcp::{
        CONNECT_CLASSES, ConnectStat, DIR_LOCAL, DIR_REMOTE, ERRNO_SLOTS, MAX_NETNS,
        MAX_PORT_SLOTS, NUM_EVENTS, port_index,
    },
};

use trapdetect_common::served::{
    PORT_FRONT, PORT_OWN, SRV_BYTES, SRV_REQUESTS, SRV_SEGMENTS, SRV_SLOTS,
};

use super::{Probes, map_err, sum_slot};
use crate::error::Result;

/// One count per event kind (`trapdetect_common::tcp::EV_*`).
pub type Events = [u64; NUM_EVENTS as usize];

/// The TCP event counters at one moment (cumulative since attach).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpSample {
    /// Every TCP socket of the host, all namespaces.
    pub system: Events,
    /// Events on a watched port (local or remote; each event once) in a watched namespace.
    pub watched: Events,
    /// Per watched port, in slot order: `[by local port, by remote port]`.
    pub ports: Vec<[Events; 2]>,
}

fn sub(a: &Events, b: &Events) -> Events {
    std::array::from_fn(|i| a[i].saturating_sub(b[i]))
}

impl TcpSample {
    /// What happened between `earlier` and `self`.
    pub fn minus(&self, earlier: &TcpSample) -> TcpSample {
        TcpSample {
            system: sub(&self.system, &earlier.system),
            watched: sub(&self.watched, &earlier.watched),
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| match earlier.ports.get(i) {
                    Some(e) => [sub(&p[0], &e[0]), sub(&p[1], &e[1])],
                    None => *p,
                })
                .collect(),
        }
    }
}

/// The two TCP event maps, owned (moved to the sampler thread).
pub struct TcpMaps {
    totals: PerCpuArray<MapData, u64>,
    ports: PerCpuArray<MapData, u64>,
    slots: u32,
}

impl TcpMaps {
    /// Reads every counter of the watched ports and the totals (one lookup per slot).
    pub fn read(&self) -> Result<TcpSample> {
        let mut s = TcpSample::default();
        for ev in 0..NUM_EVENTS {
            s.system[ev as usize] = sum_slot(&self.totals, MAP_TCP_TOTALS, ev)?;
            s.watched[ev as usize] = sum_slot(&self.totals, MAP_TCP_TOTALS, NUM_EVENTS + ev)?;
        }
        for slot in 0..self.slots {
            let mut p = [[0u64; NUM_EVENTS as usize]; 2];
            for (d, dir) in [DIR_LOCAL, DIR_REMOTE].into_iter().enumerate() {
                for ev in 0..NUM_EVENTS {
                    p[d][ev as usize] =
                        sum_slot(&self.ports, MAP_TCP_PORTS, port_index(slot, dir, ev))?;
                }
            }
            s.ports.push(p);
        }
        Ok(s)
    }
}

/// connect() of watched clients, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectClass {
    /// Calls.
    pub count: u64,
    /// Summed latency, ns.
    pub sum_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Histogram (`trapdetect_common::hist`).
    pub hist: Vec<u64>,
}

/// Everything the connect() maps hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectCounts {
    /// By class (`CS_COMPLETED`, `CS_IN_PROGRESS`).
    pub classes: Vec<ConnectClass>,
    /// Slot 0: successes; slot `e`: errno `e`.
    pub by_errno: Vec<u64>,
}

impl Probes {
    /// Remote ports the traced processes connected to so far (their upstreams), with the
    /// connects, busiest first (empty when the TCP state program is not attached).
    pub fn upstream_ports(&self) -> Vec<(u16, u64)> {
        let Some(m) = self.ebpf.map(trapdetect_common::names::MAP_UPSTREAM) else {
            return vec![];
        };
        let Ok(h) = aya::maps::PerCpuHashMap::<&MapData, u32, u64>::try_from(m) else {
            return vec![];
        };
        let mut out: Vec<(u16, u64)> = h
            .iter()
            .flatten()
            .filter(|(p, _)| *p > 0 && *p <= u16::MAX as u32)
            .map(|(p, v)| (p as u16, v.iter().sum()))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// Counts the state changes of these ports one by one (at most `MAX_PORT_SLOTS`, in the
    /// order given); returns the ports kept.
    pub fn watch_ports(&mut self, ports: &[u16]) -> Result<Vec<u16>> {
        let mut m: Array<&mut MapData, u8> = Array::try_from(
            self.ebpf
                .map_mut(MAP_PORT_SLOT)
                .ok_or_else(|| map_err(MAP_PORT_SLOT, "missing"))?,
        )
        .map_err(|e| map_err(MAP_PORT_SLOT, e))?;
        let kept: Vec<u16> = ports
            .iter()
            .copied()
            .take(MAX_PORT_SLOTS as usize)
            .collect();
        for (i, &p) in kept.iter().enumerate() {
            m.set(p as u32, i as u8 + 1, 0)
                .map_err(|e| map_err(&format!("{MAP_PORT_SLOT}[{p}]"), e))?;
        }
        Ok(kept)
    }

    /// Restricts the per-port counts to sockets of these namespaces (inode numbers); returns
    /// false when the filter cannot be used (no offsets) and every namespace counts.
    pub fn watch_netns(&mut self, inums: &[u32]) -> Result<bool> {
        if !self.netns_filter || inums.is_empty() {
            return Ok(false);
        }
        let mut m: Array<&mut MapData, u32> = Array::try_from(
            self.ebpf
                .map_mut(MAP_NETNS)
                .ok_or_else(|| map_err(MAP_NETNS, "missing"))?,
        )
        .map_err(|e| map_err(MAP_NETNS, e))?;
        for (i, &n) in inums.iter().take(MAX_NETNS as usize).enumerate() {
            m.set(i as u32, n, 0)
                .map_err(|e| map_err(&format!("{MAP_NETNS}[{i}]"), e))?;
        }
        Ok(true)
    }

    /// Takes the TCP event maps for `slots` watched ports (None when the TCP state program is
    /// not attached).
    pub fn take_tcp_maps(&mut self, slots: usize) -> Result<Option<TcpMaps>> {
        if !self.is_attached(PROG_INET_SOCK_SET_STATE) {
            return Ok(None);
        }
        let mut take = |name: &str| -> Result<PerCpuArray<MapData, u64>> {
            let m = self
                .ebpf
                .take_map(name)
                .ok_or_else(|| map_err(name, "missing"))?;
            PerCpuArray::try_from(m).map_err(|e| map_err(name, e))
        };
        Ok(Some(TcpMaps {
            totals: take(MAP_TCP_TOTALS)?,
            ports: take(MAP_TCP_PORTS)?,
            slots: slots as u32,
        }))
    }

    /// Counts the payload that sockets bound to these ports receive (`tcp_probe`), and the
    /// requests on the target's `own` ports; returns false when that program is not attached.
    pub fn watch_served_ports(&mut self, own: &[u16], front: &[u16]) -> Result<bool> {
        if !self.is_attached(PROG_TCP_PROBE) || (own.is_empty() && front.is_empty()) {
            return Ok(false);
        }
        let mut m: Array<&mut MapData, u8> = Array::try_from(
            self.ebpf
                .map_mut(MAP_SERVED_PORT)
                .ok_or_else(|| map_err(MAP_SERVED_PORT, "missing"))?,
        )
        .map_err(|e| map_err(MAP_SERVED_PORT, e))?;
        let tagged = front
            .iter()
            .map(|&p| (p, PORT_FRONT))
            .chain(own.iter().map(|&p| (p, PORT_OWN)));
        for (p, kind) in tagged {
            m.set(p as u32, kind, 0)
                .map_err(|e| map_err(&format!("{MAP_SERVED_PORT}[{p}]"), e))?;
        }
        Ok(true)
    }

    /// Payload bytes, data segments (all watched ports) and requests (the target's own
    /// ports) received (`None`: not attached).
    pub fn served(&self) -> Result<Option<[u64; 3]>> {
        if !self.is_attached(PROG_TCP_PROBE) {
            return Ok(None);
        }
        let v = self.sums(MAP_SERVED, SRV_SLOTS)?;
        Ok(Some([
            v[SRV_BYTES as usize],
            v[SRV_SEGMENTS as usize],
            v[SRV_REQUESTS as usize],
        ]))
    }

    /// The connect() counts (None when the connect programs are not attached).
    pub fn connect_counts(&self) -> Result<Option<ConnectCounts>> {
        if !self.is_attached(PROG_SYS_EXIT_CONNECT) || !self.is_attached(PROG_SYS_ENTER_CONNECT) {
            return Ok(None);
        }
        let stats: PerCpuArray<&MapData, ConnectStat> = PerCpuArray::try_from(
            self.ebpf
                .map(MAP_CONNECT_STATS)
                .ok_or_else(|| map_err(MAP_CONNECT_STATS, "missing"))?,
        )
        .map_err(|e| map_err(MAP_CONNECT_STATS, e))?;
        let mut c = ConnectCounts::default();
        for class in 0..CONNECT_CLASSES {
            let per_cpu = stats
                .get(&class, 0)
                .map_err(|e| map_err(MAP_CONNECT_STATS, e))?;
            let mut t = ConnectClass {
                hist: vec![0; HIST_BUCKETS as usize],
                ..Default::default()
            };
            for v in per_cpu.iter() {
                t.count += v.count;
                t.sum_ns += v.sum_ns;
                t.max_ns = t.max_ns.max(v.max_ns);
                for (i, h) in v.hist.iter().enumerate() {
                    t.hist[i] += *h as u64;
                }
            }
            c.classes.push(t);
        }
        c.by_errno = self.sums(MAP_CONNECT_ERRNO, ERRNO_SLOTS)?;
        Ok(Some(c))
    }

    /// Runs of `program` the kernel skipped because another BPF program was already running on
    /// that CPU (`recursion_misses` in its fdinfo; a softirq can interrupt a program). None when
    /// the program is not loaded or the kernel does not report it.
    pub fn recursion_misses(&self, program: &str) -> Option<u64> {
        let fd = self.ebpf.program(program)?.fd().ok()?;
        let raw = fd.as_fd().as_raw_fd();
        let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}")).ok()?;
        parse_recursion_misses(&text)
    }
}

/// `recursion_misses:` of a BPF program's fdinfo.
pub fn parse_recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
}

/// What the server's ports received in the window (`tcp_probe`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Served {
    /// Every watched port: the target's listening ports and the probe URL's.
    pub ports: Vec<u16>,
    /// The target's own listening ports (where requests are counted).
    pub own_ports: Vec<u16>,
    /// Payload bytes the server-side sockets of all those ports received.
    pub payload_bytes: u64,
    /// Segments that carried payload.
    pub data_segments: u64,
    /// Requests received on the target's own ports (`None`: it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Most the probe load can have sent (`None`: no probe load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_bytes_max: Option<u64>,
    /// `tcp_probe` was held back and attached during the window (`trace::keepalive`):
    /// `requests` adds the connections accepted before it, one request each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_late: Option<LateCount>,
}

/// When and why a held-back `tcp_probe` was attached during the window.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LateCount {
    /// Seconds into the window.
    pub after_s: f64,
    /// Connections the target had accepted before (each counted as one request).
    pub accepted_before: u64,
    /// What made it attach.
    pub why: String,
}

impl Served {
    /// With the count of a `tcp_probe` attached late: the connections accepted before it
    /// join the requests, one each.
    pub fn counted_late(mut self, late: Option<LateCount>) -> Served {
        if let Some(l) = &late {
            self.requests = self.requests.map(|r| r + l.accepted_before);
        }
        self.counted_late = late;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_subtract_per_port_and_kind() {
        let mut a = TcpSample {
            system: [10, 1, 2, 0, 0, 3],
            watched: [5, 0, 1, 0, 0, 0],
            ports: vec![[[5, 0, 1, 0, 0, 0], [0; 6]]],
        };
        let b = a.clone();
        a.system[0] += 7;
        a.watched[0] += 4;
        a.ports[0][0][0] += 4;
        let d = a.minus(&b);
        assert_eq!(d.system, [7, 0, 0, 0, 0, 0]);
        assert_eq!(d.watched, [4, 0, 0, 0, 0, 0]);
        assert_eq!(d.ports, vec![[[4, 0, 0, 0, 0, 0], [0; 6]]]);
    }

    #[test]
    fn recursion_misses_from_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nprog_id:\t912\nrun_time_ns:\t0\nrun_cnt:\t0\nrecursion_misses:\t3\nverified_insns:\t120\n";
        assert_eq!(parse_recursion_misses(text), Some(3));
        assert_eq!(parse_recursion_misses("pos:\t0\n"), None);
    }
}
