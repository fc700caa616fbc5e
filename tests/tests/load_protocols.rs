//! `trapdetect load` over the transports users benchmark with: TLS (rustls) against Debian's
//! nginx with a certificate made in the test, HTTP/2 (over TLS with ALPN, and h2c), and a unix
//! socket. Each run must deliver every
//! arrival as a 2xx, and the TLS figures (handshakes, resumptions, SNI) must be the ones the
//! connection pattern implies.

use std::time::Duration;

use serde_json::Value;
use trapdetect_e2e::{json, servers::Nginx, trapdetect};

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `trapdetect load --json -q` with `args`; returns (exit code, report). The lag budget
/// is wide: these tests check protocols, not the generator's punctuality on a shared box.
fn load(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["load", "--json", "-q", "--lag-budget", "5s"];
    a.extend_from_slice(args);
    let out = trapdetect(&a, LIMIT);
    let v = json(&out);
    let code = out.status.code().expect("exit code");
    assert_eq!(v["exit_code"], code, "exit code matches the report");
    let schema = trapdetect_e2e::schema::load("load.schema.json");
    trapdetect_e2e::schema::validate(&schema, &v, "$");
    (code, v)
}

fn n(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64().unwrap_or_else(|| panic!("{path:?} in {v}"))
}

/// Every measured arrival got a 2xx and nothing else.
fn all_2xx(v: &Value) {
    let sched = n(v, &["scheduled"]);
    assert!(sched > 0);
    assert_eq!(n(v, &["ok_2xx"]), sched, "{v}");
    assert_eq!(n(v, &["errors_total"]), 0, "{}", v["errors"]);
    assert_eq!(n(v, &["non_2xx"]), 0);
}

#[test]
fn https_with_cacert_verifies_and_sends_sni() {
    let ng = Nginx::start();
    let url = format!("https://localhost:{}/", ng.tls_port);
    let ca = ng.ca.to_str().unwrap();
    let (code, v) = load(&[
        "--url",
        &url,
        "--cacert",
        ca,
        "--rate",
        "200",
        "--duration",
        "2s",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 0, "{v}");
    all_2xx(&v);
    assert_eq!(v["plan"]["tls"], true);
    assert_eq!(v["plan"]["tls_insecure"], false);
    // nginx answers `sni=$ssl_server_name`: the name arrived.
    assert_eq!(
        n(&v, &["body_bytes"]),
        n(&v, &["ok_2xx"]) * "sni=localhost".len() as u64
    );
    // Keep-alive: a handshake per new connection, timed apart from the connect.
    let hs = n(&v, &["connections", "tls_handshakes"]);
    assert!(hs >= 1 && hs <= n(&v, &["connections", "opened"]), "{v}");
    assert_eq!(n(&v, &["tls_handshake_time", "count"]), hs);
    assert_eq!(n(&v, &["connect_time", "count"]), hs);
}

#[test]
fn https_reconnects_resume_the_session() {
    let ng = Nginx::start();
    let url = format!("https://127.0.0.1:{}/", ng.tls_port);
    let (code, v) = load(&[
        "--url",
        &url,
        "--insecure",
        "--rate",
        "50",
        "--duration",
        "2s",
        "--threads",
        "1",
        "--no-keepalive",
    ]);
    assert_eq!(code, 0, "{v}");
    all_2xx(&v);
    assert_eq!(v["plan"]["tls_insecure"], true);
    // An IP literal sends no SNI.
    assert_eq!(
        n(&v, &["body_bytes"]),
        n(&v, &["ok_2xx"]) * "sni=".len() as u64
    );
    let sched = n(&v, &["scheduled"]);
    let hs = n(&v, &["connections", "tls_handshakes"]);
    let resumed = n(&v, &["connections", "tls_resumed"]);
    assert_eq!(hs, sched, "one connection, one handshake per request");
    // The first handshake is full; the later ones (20 ms apart, one at a time) resume.
    assert!(resumed < hs, "{v}");
    assert!(resumed * 10 >= hs * 9, "{resumed} of {hs} resumed");
}

#[test]
fn https_with_an_untrusted_certificate_fails_every_handshake() {
    let ng = Nginx::start();
    let url = format!("https://localhost:{}/", ng.tls_port);
    let other = ng.other_ca.to_str().unwrap();
    let (code, v) = load(&[
        "--url",
        &url,
        "--cacert",
        other,
        "--rate",
        "50",
        "--duration",
        "1s",
    ]);
    assert_eq!(code, 1, "no 2xx at all is a fail finding: {v}");
    let sched = n(&v, &["scheduled"]);
    assert_eq!(n(&v, &["errors", "tls"]), sched, "{}", v["errors"]);
    assert_eq!(n(&v, &["ok_2xx"]), 0);
    assert!(v["tls_handshake_time"].is_null());
    let mix = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "load.status-mix")
        .expect("load.status-mix");
    let predicted = mix["predicted"].as_str().unwrap_or_default();
    assert!(
        predicted.contains("TLS handshakes failed") && predicted.contains("--cacert"),
        "{mix}"
    );
}

#[test]
fn unix_socket() {
    let ng = Nginx::start();
    let sock = ng.unix_socket.to_str().unwrap();
    let (code, v) = load(&[
        "--url",
        "http://localhost/",
        "--unix-socket",
        sock,
        "--rate",
        "300",
        "--duration",
        "2s",
    ]);
    assert_eq!(code, 0, "{v}");
    all_2xx(&v);
    assert_eq!(v["plan"]["address"], format!("unix:{sock}"));
    assert_eq!(n(&v, &["body_bytes"]), n(&v, &["ok_2xx"]) * 2);
    assert!(v["tls_handshake_time"].is_null());
}

#[test]
fn bad_transport_flags_are_one_line_exit_2() {
    let dir = trapdetect_e2e::TempDir::new("proto-bad");
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--url", "http://127.0.0.1:9/", "--insecure"],
            "https:// URLs only",
        ),
        (
            vec![
                "--url",
                "https://127.0.0.1:9/",
                "--cacert",
                "/nonexistent.pem",
            ],
            "--cacert /nonexistent.pem",
        ),
        (
            vec!["--url", "https://127.0.0.1:9/", "--cacert", f],
            "no usable CA",
        ),
        (
            vec![
                "--url",
                "http://localhost/",
                "--unix-socket",
                "/nonexistent.sock",
            ],
            "--unix-socket /nonexistent.sock",
        ),
        (
            vec!["--url", "http://localhost/", "--unix-socket", f],
            "not a unix socket",
        ),
        (
            vec!["--url", "http://127.0.0.1:9/", "--http2", "--no-keepalive"],
            "--no-keepalive has no meaning",
        ),
        (
            vec![
                "--url",
                "http://127.0.0.1:9/",
                "--http2",
                "--max-streams",
                "0",
            ],
            "--max-streams 1-100,000",
        ),
    ] {
        let mut a = vec!["load", "--rate", "10", "--duration", "1s"];
        a.extend_from_slice(&args);
        let out = trapdetect(&a, LIMIT);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("trapdetect: ") && err.contains(says),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn http2_over_tls_multiplexes_streams_on_the_connections_asked_for() {
    let ng = Nginx::start();
    let url = format!("https://localhost:{}/", ng.h2_port);
    let ca = ng.ca.to_str().unwrap();
    let (code, v) = load(&[
        "--url",
        &url,
        "--cacert",
        ca,
        "--http2",
        "--connections",
        "2",
        "--max-streams",
        "50",
        "--rate",
        "500",
        "--duration",
        "2s",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 0, "{v}");
    all_2xx(&v);
    assert_eq!(v["plan"]["protocol"], "h2");
    assert_eq!(v["plan"]["h2_connections"], 2);
    assert_eq!(v["plan"]["h2_max_streams"], 50);
    // Two connections (ALPN chose h2 on both), every other request a stream on one of them.
    let sched = n(&v, &["scheduled"]);
    assert_eq!(n(&v, &["connections", "opened"]), 2, "{}", v["connections"]);
    assert_eq!(n(&v, &["connections", "tls_handshakes"]), 2);
    assert_eq!(n(&v, &["connections", "reused_requests"]), sched - 2);
    assert_eq!(n(&v, &["body_bytes"]), n(&v, &["ok_2xx"]) * 2);
}

#[test]
fn h2c_prior_knowledge() {
    let ng = Nginx::start();
    let url = format!("http://127.0.0.1:{}/", ng.h2c_port);
    let (code, v) = load(&[
        "--url",
        &url,
        "--http2",
        "--rate",
        "500",
        "--duration",
        "2s",
        "--threads",
        "1",
    ]);
    assert_eq!(code, 0, "{v}");
    all_2xx(&v);
    assert_eq!(n(&v, &["connections", "opened"]), 1);
    assert_eq!(n(&v, &["body_bytes"]), n(&v, &["ok_2xx"]) * 2);
    assert!(v["tls_handshake_time"].is_null());
}

#[test]
fn http2_to_a_tls_listener_without_h2_fails_the_negotiation() {
    let ng = Nginx::start();
    let url = format!("https://localhost:{}/", ng.tls_port);
    let (code, v) = load(&[
        "--url",
        &url,
        "--insecure",
        "--http2",
        "--rate",
        "20",
        "--duration",
        "1s",
    ]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(n(&v, &["errors", "tls"]), n(&v, &["scheduled"]));
}
