//! Parsers for the text files the census reads: /proc/net/tcp{,6} (the fallback when
//! sock_diag is unavailable), /proc/net/netstat (TcpExt counters), /proc/PID/limits, and the
//! network sysctls. Pure functions over text, so unit tests run on recorded files.

use std::{
    collections::BTreeMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
};

use super::{NetSysctls, SockRec, diag::TCP_LISTEN};

/// USER_HZ: /proc/net/tcp prints timers in clock ticks of 10 ms.
const MS_PER_TICK: u32 = 10;

/// Parses /proc/net/tcp or /proc/net/tcp6 (the header line is skipped; malformed lines too,
/// counted in the second value).
pub fn parse_tcp(text: &str) -> (Vec<SockRec>, usize) {
    let mut out = vec![];
    let mut bad = 0;
    for line in text.lines().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        match parse_tcp_line(line) {
            Some(r) => out.push(r),
            None => bad += 1,
        }
    }
    (out, bad)
}

fn parse_tcp_line(line: &str) -> Option<SockRec> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 10 {
        return None;
    }
    let local = parse_addr(f[1])?;
    let remote = parse_addr(f[2])?;
    let state = u8::from_str_radix(f[3], 16).ok()?;
    let (_tx, rx) = f[4].split_once(':')?;
    let rqueue = u32::from_str_radix(rx, 16).ok()?;
    let (tr, when) = f[5].split_once(':')?;
    let timer = u8::from_str_radix(tr, 16).ok()?;
    let ticks = u32::from_str_radix(when, 16).ok()?;
    let inode = f[9].parse().ok()?;
    Some(SockRec {
        state,
        local,
        remote,
        timer,
        expires_ms: ticks.saturating_mul(MS_PER_TICK),
        // /proc/net/tcp shows a listener's accept-queue length (rx_queue) but not its backlog.
        rqueue: if state == TCP_LISTEN { rqueue } else { 0 },
        backlog: None,
        inode,
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits (IPv6): each 32-bit word printed in host order.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(a.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    let ip = match a.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Ipv6Addr::from(b).to_canonical()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The TcpExt counters the network rules use.
pub const TCP_EXT_COUNTERS: &[&str] = &[
    "ListenOverflows",
    "ListenDrops",
    "SyncookiesSent",
    "SyncookiesRecv",
    "SyncookiesFailed",
    "TCPReqQFullDrop",
    "TCPReqQFullDoCookies",
    "TCPTimeWaitOverflow",
    "TW",
    "TWRecycled",
    "TWKilled",
];

/// Parses /proc/net/netstat into the TcpExt counters listed in [`TCP_EXT_COUNTERS`].
pub fn parse_netstat(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some(n), Some(v)) = (
            names.strip_prefix("TcpExt:"),
            values.strip_prefix("TcpExt:"),
        ) else {
            continue;
        };
        for (name, value) in n.split_whitespace().zip(v.split_whitespace()) {
            if TCP_EXT_COUNTERS.contains(&name)
                && let Ok(v) = value.parse()
            {
                out.insert(name.to_string(), v);
            }
        }
    }
    out
}

/// `Max open files` from /proc/PID/limits: (soft, hard), `None` meaning unlimited.
pub fn parse_nofile(text: &str) -> Option<(Option<u64>, Option<u64>)> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let f: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    let lim = |s: &str| -> Option<Option<u64>> {
        if s == "unlimited" {
            Some(None)
        } else {
            s.parse().ok().map(Some)
        }
    };
    Some((lim(f.first()?)?, lim(f.get(1)?)?))
}

/// `ip_local_reserved_ports` (`8080,9000-9010`) as inclusive ranges.
pub fn parse_port_list(s: &str) -> Option<Vec<(u16, u16)>> {
    let mut out = vec![];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let p = part.parse().ok()?;
                (p, p)
            }
        };
        out.push((a, b));
    }
    Some(out)
}

/// Ports of `ranges` inside `[lo, hi]` (ranges may overlap; each port counted once).
pub fn ports_in(ranges: &[(u16, u16)], lo: u16, hi: u16) -> u32 {
    let mut r: Vec<(u16, u16)> = ranges
        .iter()
        .filter_map(|&(a, b)| {
            let (a, b) = (a.max(lo), b.min(hi));
            (a <= b).then_some((a, b))
        })
        .collect();
    r.sort();
    let mut n = 0u32;
    let mut next = 0u32;
    for (a, b) in r {
        let a = (a as u32).max(next);
        if a <= b as u32 {
            n += b as u32 - a + 1;
            next = b as u32 + 1;
        }
    }
    n
}

/// The sysctls the network rules use, by their `/proc/sys` path below `/proc/sys/`.
pub const SYSCTLS: &[&str] = &[
    "net/ipv4/ip_local_port_range",
    "net/ipv4/ip_local_reserved_ports",
    "net/ipv4/tcp_tw_reuse",
    "net/ipv4/tcp_tw_reuse_delay",
    "net/ipv4/tcp_fin_timeout",
    "net/ipv4/tcp_max_tw_buckets",
    "net/core/somaxconn",
    "net/ipv4/tcp_max_syn_backlog",
    "net/ipv4/tcp_syncookies",
];

/// Builds [`NetSysctls`] from `(path below /proc/sys, value)` pairs.
pub fn sysctls_from(values: &BTreeMap<String, String>) -> NetSysctls {
    let get = |k: &str| values.get(k).map(|v| v.trim());
    let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let range = get("net/ipv4/ip_local_port_range").and_then(|v| {
        let mut it = v.split_whitespace().map(|p| p.parse::<u16>());
        match (it.next(), it.next()) {
            (Some(Ok(a)), Some(Ok(b))) if a <= b => Some([a, b]),
            _ => None,
        }
    });
    NetSysctls {
        ip_local_port_range: range,
        ip_local_reserved_ports: get("net/ipv4/ip_local_reserved_ports").map(str::to_string),
        tcp_tw_reuse: num("net/ipv4/tcp_tw_reuse"),
        tcp_tw_reuse_delay_ms: num("net/ipv4/tcp_tw_reuse_delay"),
        tcp_fin_timeout_s: num("net/ipv4/tcp_fin_timeout"),
        tcp_max_tw_buckets: num("net/ipv4/tcp_max_tw_buckets"),
        somaxconn: num("net/core/somaxconn"),
        tcp_max_syn_backlog: num("net/ipv4/tcp_max_syn_backlog"),
        tcp_syncookies: num("net/ipv4/tcp_syncookies"),
        read_from: String::new(),
    }
}

/// Parses `sysctl -a` style lines (`net.ipv4.tcp_tw_reuse = 2`) into `sysctls_from` input.
pub fn parse_sysctl_lines(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().replace('.', "/"), v.trim().to_string()))
        .collect()
}

/// Reads the sysctls of the calling thread's network namespace from /proc/sys.
pub fn read_sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|k| {
            std::fs::read_to_string(format!("/proc/sys/{k}"))
                .ok()
                .map(|v| (k.to_string(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_lines() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
           0: 0100007F:1F90 00000000:0000 0A 00000000:00000009 00:00000000 00000000     0        0 31337 1 0 100 0 0 10 0\n\
           1: 0100007F:1F90 0100007F:9C41 06 00000000:00000000 03:000016A8 00000000     0        0 0 3 0\n\
         garbage\n";
        let (socks, bad) = parse_tcp(text);
        assert_eq!(bad, 1);
        assert_eq!(socks.len(), 2);
        assert_eq!(socks[0].local, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(socks[0].state, TCP_LISTEN);
        assert_eq!((socks[0].rqueue, socks[0].inode), (9, 31337));
        assert_eq!(socks[1].remote, "127.0.0.1:40001".parse().unwrap());
        assert_eq!(socks[1].expires_ms, 0x16A8 * 10);
        let v6 = "h\n   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000100007F:9C41 06 00000000:00000000 03:00000064 00000000     0        0 0 3 0\n";
        let (s6, _) = parse_tcp(v6);
        assert_eq!(s6[0].local, "127.0.0.1:8080".parse().unwrap());
    }

    #[test]
    fn limits_and_port_lists() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
Max open files            256                  unlimited            files     \n";
        assert_eq!(parse_nofile(limits), Some((Some(256), None)));
        let r = parse_port_list("8080, 9000-9010,40000-40009,40005-40020").unwrap();
        assert_eq!(ports_in(&r, 40000, 40999), 21);
        assert_eq!(ports_in(&r, 1024, 65535), 1 + 11 + 21);
        assert_eq!(parse_port_list("").unwrap(), vec![]);
        assert!(parse_port_list("a-b").is_none());
    }
}
