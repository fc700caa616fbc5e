//! The request denominator: what "per request" divides by, and when it must not be computed.
//!
//! The probe load (`--url`) counts its own requests exactly, and a server without keep-alive
//! accepts one connection per request; but another client on the same server (a benchmark
//! over keep-alive connections opened before the trace) adds syscalls to the counts without
//! adding to either. The server's ports tell (`trapdetect_common::served`): `tcp_probe`
//! counts the payload its sockets receive, whatever client sent it, and the requests that
//! arrive on the target's own ports. More payload than the probe load sent means other
//! traffic shares the window: per request then divides by every request the server received.
//! Where that count does not exist (a target without a TCP port of its own, e.g. php-fpm on a
//! unix socket, counts its FastCGI accepts instead), or neither does, the report declines
//! per-request figures with the reason and shows per-second ones.

/// What the probe load sent and got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeCount {
    /// Requests the server answered (any status).
    pub answered: u64,
    /// Largest number of request bytes the probe can have written in the window (`None`:
    /// unknown).
    pub sent_bytes_max: Option<u64>,
    /// What drove it: `probe-load` (the tracer's light load), `run-load` (`trapdetect run`'s
    /// load, the measurement itself).
    pub basis: &'static str,
}

pub use crate::probe::tcp::{LateCount, Served};

/// The decision: the count, its basis, and what the report says about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Denominator {
    /// Requests to divide by (`None`: per-second figures).
    pub count: Option<u64>,
    /// `probe-load`, `run-load`, `served-requests`, `accepted-connections`, `declined` or
    /// `none`.
    pub basis: &'static str,
    /// Why, or the caveat.
    pub note: Option<String>,
}

fn ports(p: &[u16]) -> String {
    let s: Vec<String> = p.iter().map(u16::to_string).collect();
    format!(
        "port{} {}",
        if p.len() == 1 { "" } else { "s" },
        s.join(", ")
    )
}

const ACCEPTS_ASSUMED: &str = "one request per accepted connection assumed (true for php-fpm behind nginx without keep-alive to FPM)";

/// Decides the denominator from the probe load's count (if any), the accepted connections of
/// the traced processes, and what the server's ports received (`None`: `tcp_probe` is not
/// attached, or no port to watch). `watched`: the target's ports were watched for a
/// connection that stays open and none did, so `tcp_probe` stayed held back (issue 28).
pub fn decide(
    probe: Option<ProbeCount>,
    accepts: u64,
    served: Option<&Served>,
    watched: Option<&[u16]>,
) -> Denominator {
    let served_requests = served.and_then(|s| s.requests).filter(|&n| n > 0);
    // Without a TCP port of its own, a target's accepts are its requests (FastCGI).
    let accepts_count = served.is_none_or(|s| s.own_ports.is_empty()) && accepts > 0;
    let Some(p) = probe else {
        return without_probe(accepts, served, watched);
    };
    // Other traffic: more payload on the ports than the probe can have sent, or more accepts
    // than its requests (another client through the front end of a php-fpm target).
    let by_bytes = match (served, p.sent_bytes_max) {
        (Some(s), Some(max)) if s.payload_bytes > max => Some(format!(
            "the server's {} received {} bytes of requests in the window, the probe load sent at most {max}",
            ports(&s.ports),
            s.payload_bytes
        )),
        _ => None,
    };
    let by_accepts = (accepts > p.answered + p.answered / 10 + 2).then(|| {
        format!(
            "the target accepted {accepts} connections for the probe load's {} requests",
            p.answered
        )
    });
    let Some(why) = by_bytes.or(by_accepts) else {
        return Denominator {
            count: Some(p.answered),
            basis: p.basis,
            note: (served.is_none() && watched.is_none()).then(|| {
                "no payload count on the server's ports (tcp_probe not attached, or no TCP port): other clients' keep-alive traffic would go unnoticed".to_string()
            }),
        };
    };
    let why = format!("another client's traffic shares the window ({why})");
    if let (Some(n), Some(s)) = (served_requests, served) {
        return Denominator {
            count: Some(n),
            basis: "served-requests",
            note: Some(format!(
                "{why}: per request divides by the {n} requests the server's {} received, whatever client sent them, the probe load's {} among them",
                ports(&s.own_ports),
                p.answered
            )),
        };
    }
    if accepts_count {
        return Denominator {
            count: Some(accepts),
            basis: "accepted-connections",
            note: Some(format!(
                "{why}: per request divides by the {accepts} connections the target accepted, whatever client caused them; {ACCEPTS_ASSUMED}"
            )),
        };
    }
    Denominator {
        count: None,
        basis: "declined",
        note: Some(format!(
            "per-request figures declined: {why}, and the server's own requests cannot be counted here (no TCP port of its own, no accepts); figures are per second"
        )),
    }
}

/// Without a load of trapdetect's: the requests the target's own ports received, else its
/// accepts (saying whether its ports were watched for a connection that stays open), else
/// none.
fn without_probe(accepts: u64, served: Option<&Served>, watched: Option<&[u16]>) -> Denominator {
    let served_requests = served.and_then(|s| s.requests).filter(|&n| n > 0);
    if let (Some(n), Some(s)) = (served_requests, served) {
        let late = s.counted_late.as_ref().map(|l| {
            format!(
                "; the per-segment counter (tcp_probe) was held back and {}: the {} connections accepted before count one request each, and what a connection carried before that attach is not counted",
                l.why, l.accepted_before
            )
        });
        return Denominator {
            count: Some(n),
            basis: "served-requests",
            note: Some(format!(
                "requests the server's {} received in the window, whatever client sent them (a request starts with the first data a connection sends after a response){}; pass --url for exact figures",
                ports(&s.own_ports),
                late.unwrap_or_default()
            )),
        };
    }
    if accepts > 0 {
        let why = match watched {
            Some(p) => format!(
                "one request per accepted connection: no connection on the target's {} stayed open between two looks 0.1 s apart in the window (no keep-alive), so the per-segment counter (tcp_probe) was not attached",
                ports(p)
            ),
            None => ACCEPTS_ASSUMED.to_string(),
        };
        return Denominator {
            count: Some(accepts),
            basis: "accepted-connections",
            note: Some(format!("{why}; pass --url for exact figures")),
        };
    }
    Denominator {
        count: None,
        basis: "none",
        note: Some(
            "no --url, no accepted connections and no requests on a TCP port of the target: pass --url to drive a light probe load"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(bytes: u64, requests: Option<u64>, probe: Option<u64>) -> Served {
        Served {
            ports: vec![8080],
            own_ports: if requests.is_some() {
                vec![8080]
            } else {
                vec![]
            },
            payload_bytes: bytes,
            data_segments: bytes / 80,
            requests,
            probe_bytes_max: probe,
            counted_late: None,
        }
    }

    const PROBE: ProbeCount = ProbeCount {
        answered: 61,
        sent_bytes_max: Some(61 * 80),
        basis: "probe-load",
    };

    #[test]
    fn the_probe_count_stands_when_the_port_saw_only_its_bytes() {
        let d = decide(
            Some(PROBE),
            0,
            Some(&served(61 * 80, Some(61), Some(61 * 80))),
            None,
        );
        assert_eq!((d.count, d.basis, d.note), (Some(61), "probe-load", None));
        // `run`'s load is named as such, not as a probe (issue 22: a 1,500/s flood was
        // "probe-load" in the report's header).
        let run = ProbeCount {
            basis: "run-load",
            ..PROBE
        };
        let d = decide(
            Some(run),
            0,
            Some(&served(61 * 80, Some(61), Some(61 * 80))),
            None,
        );
        assert_eq!(d.basis, "run-load");
    }

    #[test]
    fn a_keep_alive_flood_divides_by_every_request_the_server_received() {
        // wrk's connections were open before the trace: no accept, only bytes and requests.
        let d = decide(
            Some(PROBE),
            0,
            Some(&served(4_000_000, Some(50_061), Some(4880))),
            None,
        );
        assert_eq!((d.count, d.basis), (Some(50_061), "served-requests"));
        let n = d.note.unwrap();
        assert!(
            n.contains("another client's traffic shares the window (the server's port 8080 received 4000000 bytes of requests in the window, the probe load sent at most 4880)"),
            "{n}"
        );
        assert!(n.contains("the probe load's 61 among them"), "{n}");
    }

    #[test]
    fn a_front_end_flood_on_php_fpm_divides_by_its_accepts() {
        // php-fpm on a unix socket: the flood shows on nginx's port and in the FastCGI accepts.
        let d = decide(
            Some(PROBE),
            5000,
            Some(&served(400_000, None, Some(4880))),
            None,
        );
        assert_eq!((d.count, d.basis), (Some(5000), "accepted-connections"));
        assert!(d.note.unwrap().contains("another client's traffic"));
        // Without the payload count, the extra accepts alone tell.
        let p = ProbeCount {
            answered: 20,
            sent_bytes_max: None,
            basis: "probe-load",
        };
        let d = decide(Some(p), 500, None, None);
        assert_eq!((d.count, d.basis), (Some(500), "accepted-connections"));
        assert!(
            d.note
                .unwrap()
                .contains("accepted 500 connections for the probe load's 20")
        );
        // Within the tolerance (a health check, a reconnect): the probe's count.
        assert_eq!(decide(Some(p), 23, None, None).count, Some(20));
        assert!(
            decide(Some(p), 20, None, None)
                .note
                .unwrap()
                .contains("keep-alive traffic would go unnoticed")
        );
    }

    #[test]
    fn declined_when_nothing_counts_the_server_requests() {
        // A target with a TCP port whose requests could not be counted (0) and no accepts.
        let mut s = served(400_000, Some(0), Some(4880));
        s.own_ports = vec![8080];
        let d = decide(Some(PROBE), 0, Some(&s), None);
        assert_eq!((d.count, d.basis), (None, "declined"));
        let n = d.note.unwrap();
        assert!(
            n.starts_with("per-request figures declined: another client's traffic"),
            "{n}"
        );
        assert!(n.ends_with("figures are per second"), "{n}");
    }

    #[test]
    fn without_a_probe_served_requests_then_accepts_then_none() {
        let d = decide(None, 4, Some(&served(90_000, Some(1000), None)), None);
        assert_eq!((d.count, d.basis), (Some(1000), "served-requests"));
        // php-fpm: no TCP port, the FastCGI accepts are the count.
        let d = decide(None, 37, None, None);
        assert_eq!((d.count, d.basis), (Some(37), "accepted-connections"));
        assert!(d.note.unwrap().starts_with(ACCEPTS_ASSUMED));
        assert_eq!(decide(None, 0, None, None).basis, "none");
    }

    #[test]
    fn a_held_back_counter_counts_accepts_until_a_connection_stays_open() {
        // php-fpm on TCP port 9000 behind nginx, a connection per request: the watch saw none
        // stay open, tcp_probe never ran; the accepts are the requests.
        let d = decide(None, 7_300, None, Some(&[9000]));
        assert_eq!((d.count, d.basis), (Some(7_300), "accepted-connections"));
        let n = d.note.unwrap();
        assert!(
            n.starts_with("one request per accepted connection: no connection on the target's port 9000 stayed open"),
            "{n}"
        );
        // A keep-alive client came 1.2 s in: 40 connections accepted before (one request
        // each), 12,000 requests counted by tcp_probe after.
        let late = LateCount {
            after_s: 1.2,
            accepted_before: 40,
            why: "attached 1.2 s into the window, when a connection on port 8080 (from 127.0.0.1:5000) stayed open".into(),
        };
        let s = served(900_000, Some(12_000), None).counted_late(Some(late.clone()));
        assert_eq!(s.requests, Some(12_040));
        assert_eq!(s.counted_late, Some(late));
        let d = decide(None, 48, Some(&s), None);
        assert_eq!((d.count, d.basis), (Some(12_040), "served-requests"));
        let n = d.note.unwrap();
        assert!(
            n.contains("tcp_probe) was held back and attached 1.2 s into the window, when a connection on port 8080 (from 127.0.0.1:5000) stayed open: the 40 connections accepted before count one request each"),
            "{n}"
        );
        // Not attached late: the same served count, unchanged.
        assert_eq!(
            served(1, Some(5), None).counted_late(None).requests,
            Some(5)
        );
    }
}
