//! Prometheus remote-write (protocol 1.0): after each window the agent POSTs its series to
//! `--remote-write URL` — a `prometheus.WriteRequest` protobuf, snappy-compressed, as
//! Prometheus, Mimir, Thanos Receive and VictoriaMetrics accept. Both encodings are written
//! here (a few dozen lines, no code generator): protobuf by its wire format (field key,
//! varint lengths, little-endian doubles), snappy as its block format with every byte a
//! literal (valid snappy that any decoder reads; it does not compress, and a window's series
//! are a few kilobytes). Plain `http://` only; a push that fails is said and counted, and the
//! next window pushes again.

use std::{
    io::{Read, Write},
    net::{TcpStream, ToSocketAddrs},
    time::Duration,
};

use crate::report::export::Family;

/// How long a push may take to connect, and to send or to read the answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Where to push.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteWrite {
    /// `host:port`.
    authority: String,
    /// The request path (`/api/v1/write`).
    path: String,
}

impl RemoteWrite {
    /// `http://HOST[:PORT]/PATH`; the error is the one-line usage message.
    pub fn parse(url: &str) -> Result<RemoteWrite, String> {
        let shown = crate::escape::text(url);
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("--remote-write {shown}: an http:// URL (https is not supported)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let bad = |c: char| c.is_whitespace() || c.is_control();
        if authority.is_empty() || authority.contains(bad) || path.contains(bad) {
            return Err(format!(
                "--remote-write {shown}: expected http://HOST[:PORT]/PATH"
            ));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(RemoteWrite {
            authority,
            path: path.to_string(),
        })
    }

    /// Pushes every sample of `fams`, stamped `at_ms` (Unix ms). Ok when the receiver
    /// answered 2xx; else the reason, one line.
    pub fn push(&self, fams: &[Family], at_ms: i64) -> Result<(), String> {
        let body = snappy_literal(&encode(fams, at_ms));
        let addr = self
            .authority
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", self.authority))?
            .next()
            .ok_or_else(|| format!("{}: no address", self.authority))?;
        let mut c =
            TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("{addr}: {e}"))?;
        let _ = c.set_read_timeout(Some(TIMEOUT));
        let _ = c.set_write_timeout(Some(TIMEOUT));
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Encoding: snappy\r\nContent-Type: application/x-protobuf\r\nX-Prometheus-Remote-Write-Version: 0.1.0\r\nUser-Agent: trapdetect/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.path,
            self.authority,
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        c.write_all(head.as_bytes())
            .and_then(|()| c.write_all(&body))
            .map_err(|e| format!("{addr}: {e}"))?;
        let mut answer = vec![];
        let _ = c.take(4096).read_to_end(&mut answer);
        let line = String::from_utf8_lossy(&answer);
        let line = line.lines().next().unwrap_or("");
        match line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
        {
            Some(s) if (200..300).contains(&s) => Ok(()),
            _ => Err(format!(
                "{addr}{}: {}",
                self.path,
                crate::escape::text(if line.is_empty() { "no answer" } else { line })
            )),
        }
    }
}

/// The families as a `WriteRequest`: one `TimeSeries` per sample, its labels `__name__` and
/// the sample's, sorted by name (as the protocol requires), one sample at `at_ms`.
pub fn encode(fams: &[Family], at_ms: i64) -> Vec<u8> {
    let mut req = vec![];
    for f in fams {
        for (labels, v) in &f.samples {
            let name = f.series_name();
            let mut all: Vec<(&str, &str)> = vec![("__name__", &name)];
            all.extend(labels.iter().map(|(k, v)| (*k, v.as_str())));
            all.sort_by(|a, b| a.0.cmp(b.0));
            let mut ts = vec![];
            for (k, v) in all {
                let mut label = vec![];
                field_bytes(&mut label, 1, k.as_bytes());
                field_bytes(&mut label, 2, v.as_bytes());
                field_bytes(&mut ts, 1, &label);
            }
            let mut sample = vec![0x09];
            sample.extend_from_slice(&v.to_le_bytes());
            sample.push(0x10);
            varint(&mut sample, at_ms as u64);
            field_bytes(&mut ts, 2, &sample);
            field_bytes(&mut req, 1, &ts);
        }
    }
    req
}

/// A length-delimited field (wire type 2).
fn field_bytes(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push(field << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Snappy's block format with every byte a literal: the length as a varint, then literals of
/// at most 64 KiB (tag 61: a two-byte length less one follows).
pub fn snappy_literal(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + data.len() / 65_536 * 3 + 8);
    varint(&mut out, data.len() as u64);
    for chunk in data.chunks(65_536) {
        let n = chunk.len() - 1;
        if n < 60 {
            out.push((n as u8) << 2);
        } else {
            out.push(61 << 2);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::Kind;

    /// One sample, encoded by hand from the protobuf wire format: the bytes must be exactly
    /// these (labels sorted, `__name__` first here as it sorts first).
    #[test]
    fn one_sample_is_the_wire_format_by_hand() {
        let fams = [Family {
            kind: Kind::Gauge,
            name: "m",
            help: "",
            samples: vec![(vec![("test_id", "t".to_string())], 1.0)],
        }];
        let got = encode(&fams, 300);
        let label = |k: &[u8], v: &[u8]| {
            let mut l = vec![0x0a, k.len() as u8];
            l.extend_from_slice(k);
            l.extend([0x12, v.len() as u8]);
            l.extend_from_slice(v);
            l
        };
        let (l1, l2) = (label(b"__name__", b"m"), label(b"test_id", b"t"));
        // value 1.0: 0x3ff0000000000000 little-endian; timestamp 300 = 0xac 0x02.
        let sample = [0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0xac, 0x02];
        let mut ts = vec![0x0a, l1.len() as u8];
        ts.extend(&l1);
        ts.extend([0x0a, l2.len() as u8]);
        ts.extend(&l2);
        ts.extend([0x12, sample.len() as u8]);
        ts.extend(sample);
        let mut want = vec![0x0a, ts.len() as u8];
        want.extend(ts);
        assert_eq!(got, want);
    }

    /// A literal-only snappy block decodes back to its input: short, exactly 60, and longer
    /// than one 64 KiB literal.
    #[test]
    fn snappy_literals_decode_back() {
        fn decode(b: &[u8]) -> Vec<u8> {
            let (mut len, mut shift, mut i) = (0usize, 0, 0);
            loop {
                len |= ((b[i] & 0x7f) as usize) << shift;
                shift += 7;
                i += 1;
                if b[i - 1] < 0x80 {
                    break;
                }
            }
            let mut out = vec![];
            while i < b.len() {
                let tag = b[i];
                assert_eq!(tag & 3, 0, "only literals");
                let n = match tag >> 2 {
                    61 => {
                        let n = u16::from_le_bytes([b[i + 1], b[i + 2]]) as usize + 1;
                        i += 3;
                        n
                    }
                    n if n < 60 => {
                        i += 1;
                        n as usize + 1
                    }
                    other => panic!("tag {other}"),
                };
                out.extend_from_slice(&b[i..i + n]);
                i += n;
            }
            assert_eq!(out.len(), len);
            out
        }
        for n in [1, 59, 60, 61, 65_536, 65_537, 200_000] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
            assert_eq!(decode(&snappy_literal(&data)), data, "{n} bytes");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            RemoteWrite::parse("http://127.0.0.1:9090/api/v1/write"),
            Ok(RemoteWrite {
                authority: "127.0.0.1:9090".into(),
                path: "/api/v1/write".into()
            })
        );
        assert_eq!(
            RemoteWrite::parse("http://prom/w").unwrap().authority,
            "prom:80"
        );
        for bad in ["https://x/w", "ftp://x", "http:///w", "http://a b/w"] {
            assert!(RemoteWrite::parse(bad).is_err(), "{bad}");
        }
    }
}
