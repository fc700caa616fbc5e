//! The traced half of the net.* traps (`trapdetect --pid`, `sock/inet_sock_set_state` and
//! connect() of `--watch-client`), staged for real in network namespaces of their own: a server
//! that closes first and a prime number of connections made inside the window, a client that
//! fills a 1,000-port ephemeral range over a veth pair, and a flooded listener with backlog 8.
//! Every count is checked exactly against what the workload did or what the kernel counted.

use std::{
    io::Read,
    time::{Duration, Instant},
};

use serde_json::Value;
use trapdetect_e2e::{
    Tracer, json,
    netns::{NetNs, connect_from},
    netpeer::Peer,
    require_root, schema, wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

/// Tests in this file trace one at a time: each tracer counts host-wide totals too.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The report, validated against the report's and the `network` section's schemas.
fn report(out: &std::process::Output) -> Value {
    let r = json(out);
    schema::validate(&schema::load("report.schema.json"), &r, "$");
    schema::validate(&schema::load("net.schema.json"), &r["network"], "$.network");
    r
}

fn finding<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding in {:#}", r["findings"]))
}

fn sum(v: &Value) -> u64 {
    v.as_array()
        .unwrap_or_else(|| panic!("not a series: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum()
}

fn port(traced: &Value, p: u16) -> &Value {
    traced["by_port"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["port"] == p)
        .unwrap_or_else(|| panic!("port {p} not watched: {traced:#}"))
}

/// `ss -Htan` lines in the namespace, optionally for one state.
fn ss_count(ns: &NetNs, filter: &str) -> usize {
    let o = ns.exec(&["sh", "-c", &format!("ss -Htan {filter} | wc -l")], LIMIT);
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// TcpExt `name` of the namespace, read inside it.
fn tcp_ext(ns: &NetNs, name: &str) -> u64 {
    let o = ns.exec(&["cat", "/proc/net/netstat"], LIMIT);
    let text = String::from_utf8_lossy(&o.stdout);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .unwrap()
        .1
        .parse()
        .unwrap()
}

#[test]
fn time_wait_entries_on_the_servers_port_are_counted_exactly() {
    if !require_root("time_wait_entries_on_the_servers_port_are_counted_exactly") {
        return;
    }
    let _serial = serial();
    const N: u16 = 1009;
    let ns = NetNs::new("twt");
    // Keep every TIME_WAIT for its 60 s (no RST assassination), so `ss` can cross-check.
    ns.sysctl("net.ipv4.tcp_rfc1337", "1");
    let server = Peer::serve(&ns, "127.0.0.1:8080", 4096, "close-first");
    let t = Tracer::start(&[
        "--pid",
        &server.pid().to_string(),
        "--duration",
        "120s",
        "--json",
        "--quiet",
    ]);
    // N connections inside the window, from distinct client ports (a reused port's SYN would
    // recycle a server TIME_WAIT and spoil the `ss` cross-check, not the traced count).
    ns.run(|| {
        for p in 30_000..30_000 + N {
            let mut c = connect_from(&format!("127.0.0.1:{p}"), "127.0.0.1:8080");
            let mut b = [0u8; 1];
            assert_eq!(c.read(&mut b).unwrap(), 0, "the server must close first");
        }
    });
    // The last FIN/ACK exchanges may still be in flight under load: wait until only the
    // listener, TIME_WAIT and sockets the kernel stranded in FIN_WAIT2 are left (a 6.1 guest
    // under TCG once still had some after 30 s; `NetNs::settle` names them). A strand is a
    // server socket whose client's FIN was never processed: it waits out tcp_fin_timeout in
    // FIN_WAIT2 and is no TIME_WAIT in `ss`, but it passed FIN_WAIT2→CLOSE when the server
    // closed it, which the tracer counts as its entry, so the traced counts stay N.
    let (_, stranded) = ns.settle(8080, LIMIT);
    let strands = stranded.len();
    assert_eq!(
        ss_count(&ns, "state time-wait"),
        N as usize - strands,
        "{stranded:?}"
    );
    let out = t.interrupt();
    let r = report(&out);
    let n = &r["network"];
    assert_eq!(n["netns"], format!("pid {}", server.pid()));
    assert_eq!(
        n["ports"],
        serde_json::json!([8080]),
        "the target's listener"
    );
    assert_eq!(
        n["time_wait"]["count"], 0,
        "the census ran before the window"
    );
    let tr = &n["traced"];
    assert_eq!(tr["ports"], serde_json::json!([8080]));
    assert_eq!(
        tr["netns"],
        serde_json::json!([format!("pid {}", server.pid())])
    );
    let p = port(tr, 8080);
    // The server closed first: every connection entered TIME_WAIT on its side, once.
    assert_eq!(p["local"]["time_wait_entered"], N);
    assert_eq!(p["local"]["passive_opens"], N);
    assert_eq!(p["remote"]["time_wait_entered"], 0);
    // The clients (same namespace, remote port 8080) connected and closed second; a
    // stranded connection's client socket went without the server seeing its FIN, by an
    // abort or its own close, so those two add up to N.
    assert_eq!(p["remote"]["active_opens"], N);
    let remote_ends = |k: &str| p["remote"][k].as_u64().unwrap();
    if strands == 0 {
        assert_eq!(p["remote"]["passive_closes"], N);
        assert_eq!(p["remote"]["aborts"], 0);
    } else {
        assert_eq!(
            remote_ends("passive_closes") + remote_ends("aborts"),
            N as u64
        );
    }
    assert_eq!(p["local"]["aborts"], 0);
    for side in ["local", "remote"] {
        assert_eq!(p[side]["connect_failures"], 0, "{side}");
    }
    assert_eq!(tr["on_ports"]["time_wait_entered"], N);
    assert_eq!(sum(&tr["time_wait_entered_per_s"]), N as u64);
    assert_eq!(sum(&p["time_wait_entered_per_s"]), N as u64);
    assert_eq!(sum(&tr["new_connections_per_s"]), N as u64);
    assert!(tr["system"]["time_wait_entered"].as_u64().unwrap() >= N as u64);
    let entries = tr["time_wait_entered_per_s"].as_array().unwrap().len() as f64;
    let window = tr["window_s"].as_f64().unwrap();
    assert!(
        entries >= window && entries <= window + 1.01,
        "one entry per second begun: {entries} for {window} s"
    );
    // The kernel reports runs it skipped (fdinfo `recursion_misses`) from 5.12 on; before,
    // the report says it cannot know (null), never a made-up 0.
    if trapdetect_e2e::kernel_version() >= (5, 12) {
        assert_eq!(tr["missed_events"], 0);
    } else {
        assert_eq!(tr["missed_events"], Value::Null);
    }
    assert_eq!(tr["connect"], Value::Null, "no --watch-client");

    let f = finding(&r, "net.time-wait");
    assert_eq!(f["evidence"]["time_wait_entered_during_trace"], N);
    let rate = f["evidence"]["time_wait_growth_per_s"].as_f64().unwrap();
    assert!(
        (rate - N as f64 / window).abs() < 0.06,
        "{rate} vs {N} / {window}"
    );
    // One connection per request: not reused, and the server closed each one first.
    assert_eq!(f["evidence"]["new_connections_during_trace"], N);
    assert_eq!(f["evidence"]["requests_during_trace"], N);
    assert_eq!(f["evidence"]["time_wait_entered_server_side"], N);
    assert_eq!(f["evidence"]["time_wait_entered_client_side"], 0);
    let remedy = f["remedy"].as_str().unwrap();
    assert!(
        remedy.starts_with(&format!(
            "connections are not reused ({} new connections for {} requests, the server closing first)",
            fmt_thousands(N),
            fmt_thousands(N)
        )) && remedy.contains("trapdetect wait-drain --port 8080 --below 1000 --timeout 65s"),
        "{remedy}"
    );
    // The sockets the probes were attached for are gone with trapdetect.
    let probes = r["probes"].as_array().unwrap();
    let tcp = probes
        .iter()
        .find(|p| p["program"] == "inet_sock_set_state")
        .unwrap();
    assert_eq!(tcp["attached"], true);
    for c in ["sys_enter_connect", "sys_exit_connect"] {
        let row = probes.iter().find(|p| p["program"] == c).unwrap();
        assert_eq!(row["attached"], false);
        assert_eq!(row["note"], "not attached: no --watch-client");
    }
    drop(server);
}

#[test]
fn a_watched_client_that_fills_its_port_range_is_counted_by_errno() {
    if !require_root("a_watched_client_that_fills_its_port_range_is_counted_by_errno") {
        return;
    }
    let _serial = serial();
    let srv = NetNs::new("wcs");
    let cli = NetNs::new("wcc");
    srv.veth(&cli, "10.78.0.1/24", "10.78.0.2/24");
    cli.sysctl("net.ipv4.ip_local_port_range", "40000 40999");
    assert_eq!(cli.read_sysctl("net.ipv4.ip_local_reserved_ports"), "");
    let server = Peer::serve(&srv, "10.78.0.1:9000", 4096, "hold");
    const ATTEMPTS: u32 = 1201;
    let mut client = Peer::connect(&cli, "10.78.0.1:9000", ATTEMPTS);
    let t = Tracer::start(&[
        "--pid",
        &server.pid().to_string(),
        "--watch-client",
        &client.pid().to_string(),
        "--duration",
        "120s",
        "--json",
        "--quiet",
    ]);
    let done = client.go();
    let (ok, na, other) = (done[0], done[1], done[2]);
    assert_eq!((ok, na, other), (1000, 201, 0), "1,000 usable ports");
    let out = t.interrupt();
    let r = report(&out);
    let tr = &r["network"]["traced"];
    let c = &tr["connect"];
    assert_eq!(c["calls"], ATTEMPTS);
    assert_eq!(c["succeeded"], ok);
    assert_eq!(c["in_progress"], 0, "blocking connects");
    assert_eq!(c["failed"], na);
    assert_eq!(c["errors"], serde_json::json!({"EADDRNOTAVAIL": na}));
    assert_eq!(c["not_tcp"], 0);
    assert_eq!(tr["connect_eaddrnotavail"], na);
    assert_eq!(tr["connect_eaddrinuse"], 0);
    assert_eq!(c["clients"][0]["pid"], client.pid());
    assert_eq!(c["clients"][0]["same_netns_as_target"], false);
    let lat = &c["latency"];
    assert!(lat["max_us"].as_f64().unwrap() >= lat["p50_us"].as_f64().unwrap());
    assert_eq!(c["in_progress_latency"], Value::Null);
    // The kernel's view on the server's port, from both namespaces: the server's side of 1,000
    // handshakes, the client's side of them, and the 201 connects that died in SYN_SENT for
    // want of a local port.
    let p = port(tr, 9000);
    assert_eq!(p["local"]["passive_opens"], ok);
    assert_eq!(p["remote"]["active_opens"], ok);
    assert_eq!(p["remote"]["connect_failures"], na);
    assert_eq!(tr["netns"].as_array().unwrap().len(), 2, "{}", tr["netns"]);
    // The client's namespace, where the ports ran out, read at the end of the window.
    let cn = &tr["client_netns"];
    assert_eq!(cn["netns"], format!("pid {}", client.pid()));
    let e = &cn["ephemeral"];
    assert_eq!(e["range"], serde_json::json!([40000, 40999]));
    let g = &e["groups"][0];
    assert_eq!(
        (&g["client"], &g["server"], &g["server_port"]),
        (
            &Value::from("10.78.0.2"),
            &Value::from("10.78.0.1"),
            &Value::from(9000)
        )
    );
    assert_eq!(g["ports_used"], ok);
    assert_eq!(g["headroom"], 0);
    let f = finding(&r, "net.ephemeral-ports");
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["connect_eaddrnotavail"], na);
    assert_eq!(f["evidence"]["flow_group"], "10.78.0.2 -> 10.78.0.1:9000");
    assert_eq!(f["evidence"]["ephemeral_range"], "40000-40999");
    assert_eq!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == "net.ephemeral-ports")
            .count(),
        1,
        "judged once, in the client's namespace"
    );
    // The load generator's descriptors are checked too.
    let fds = r["network"]["fds"].as_array().unwrap();
    assert!(
        fds.iter()
            .any(|f| f["role"] == "generator" && f["pid"] == client.pid()),
        "{fds:?}"
    );
    assert_eq!(out.status.code(), Some(1), "a fail finding");
    drop(client);
    drop(server);
}

#[test]
fn listen_overflows_per_second_sum_to_the_kernels_delta() {
    if !require_root("listen_overflows_per_second_sum_to_the_kernels_delta") {
        return;
    }
    let _serial = serial();
    let ns = NetNs::new("lot");
    let listener = Peer::serve(&ns, "127.0.0.1:8081", 8, "never-accept");
    const FLOOD: u32 = 200;
    let mut flood = Peer::flood(&ns, "127.0.0.1:8081", FLOOD);
    let t = Tracer::start(&[
        "--pid",
        &listener.pid().to_string(),
        "--watch-client",
        &flood.pid().to_string(),
        "--duration",
        "120s",
        "--json",
        "--quiet",
    ]);
    let before = tcp_ext(&ns, "ListenOverflows");
    let t0 = Instant::now();
    let done = flood.go();
    let (zero, in_progress, other, connected, ms) = (done[0], done[1], done[2], done[3], done[4]);
    // Closed before the first SYN retransmission (1 s): each dropped SYN is counted once.
    assert!(ms < 900, "flood took {ms} ms");
    assert_eq!(connected, 9, "the accept queue holds backlog + 1");
    assert_eq!((zero + in_progress, other), (FLOOD as u64, 0));
    wait_until("the flood's sockets to be gone", LIMIT, || {
        ss_count(&ns, "state syn-sent") == 0
    });
    let after = tcp_ext(&ns, "ListenOverflows");
    assert_eq!(after - before, (FLOOD - 9) as u64);
    // A second passes, so the series has at least two entries to sum.
    std::thread::sleep(Duration::from_secs(1).saturating_sub(t0.elapsed()));
    let out = t.interrupt();
    let r = report(&out);
    let n = &r["network"];
    let tr = &n["traced"];
    assert!(tr["listen_overflows_per_s"].as_array().unwrap().len() >= 2);
    assert_eq!(sum(&tr["listen_overflows_per_s"]), after - before);
    assert_eq!(
        n["tcp_ext_delta"]["counters"]["ListenOverflows"],
        after - before,
        "the window's delta comes from the same readings"
    );
    let f = finding(&r, "net.listen-overflow");
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["listen_overflows"], after - before);
    assert_eq!(f["evidence"]["listener"], "127.0.0.1:8081");
    // The kernel's side: 9 handshakes completed into the queue; every dropped SYN left its
    // client in SYN_SENT until the close.
    let p = port(tr, 8081);
    assert_eq!(p["local"]["passive_opens"], 9);
    assert_eq!(p["remote"]["active_opens"], 9);
    assert_eq!(p["remote"]["connect_failures"], after - before);
    assert_eq!(sum(&p["new_connections_per_s"]), 9);
    // The flood's connect() calls: non-blocking, so EINPROGRESS (not an error) unless the
    // loopback handshake finished inside the call.
    let c = &tr["connect"];
    assert_eq!(c["calls"], FLOOD);
    assert_eq!(c["in_progress"], in_progress);
    assert_eq!(c["succeeded"], zero);
    assert_eq!(c["failed"], 0);
    assert_eq!(c["errors"], serde_json::json!({}));
    drop(flood);
    drop(listener);
}

/// `1009` as the report writes it, `1,009`.
fn fmt_thousands(n: u16) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A server that closes idle kept-alive connections after 1 s, on two families: Node's
/// `keepAliveTimeout` and Python's `BaseHTTPRequestHandler.timeout`.
const IDLE_CLOSERS: [(&str, &[&str]); 2] = [
    (
        "node",
        &[
            "node",
            "-e",
            "const s=require('http').createServer((q,r)=>r.end('ok'));s.keepAliveTimeout=1000;s.listen(+process.argv[1],'127.0.0.1')",
        ],
    ),
    (
        "python3",
        &[
            "python3",
            "-c",
            "import sys,http.server as h\nclass H(h.BaseHTTPRequestHandler):\n protocol_version='HTTP/1.1'\n timeout=1\n disable_nagle_algorithm=True\n def do_GET(self):\n  self.send_response(200);self.send_header('Content-Length','2');self.end_headers();self.wfile.write(b'ok')\n def log_message(self,*a):pass\nclass S(h.ThreadingHTTPServer):\n request_queue_size=4096\nS(('127.0.0.1',int(sys.argv[1])),H).serve_forever()",
        ],
    ),
];

/// `k` kept-alive connections, three requests on each, left idle until the server closes them
/// (its 1 s idle timeout), then closed: `k` TIME_WAIT sockets on the server's side, in a burst.
fn pool_closed_by_idle_timeout(port: u16, k: usize) {
    use std::{io::Write, net::TcpStream};
    let addr = format!("127.0.0.1:{port}");
    let mut pool: Vec<TcpStream> = (0..k)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            c.set_read_timeout(Some(LIMIT)).unwrap();
            for _ in 0..3 {
                c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let mut got = Vec::new();
                let mut b = [0u8; 512];
                while !got.ends_with(b"\r\n\r\nok") {
                    let n = c.read(&mut b).unwrap();
                    assert!(
                        n > 0,
                        "closed mid-response: {}",
                        String::from_utf8_lossy(&got)
                    );
                    got.extend_from_slice(&b[..n]);
                }
            }
            c
        })
        .collect();
    for c in &mut pool {
        let mut b = [0u8; 1];
        assert_eq!(
            c.read(&mut b).unwrap(),
            0,
            "the server must close the idle connection"
        );
    }
}

/// A kept-alive pool the server closes at once (its idle timeout) leaves as many TIME_WAIT
/// sockets as it had connections, in a second or two: a burst bounded by the pool, not a rate
/// the load keeps up. net.time-wait counts what it leaves instead of projecting the window's
/// mean over 60 s (600 closes in a 6 s window, projected, "settled near 6,000" and warned; a
/// clean Node server at half its capacity under `run` warned so from the generator's own pool).
/// Two families; 600 connections are no finding, 1,500 are a warning with their exact count.
#[test]
fn a_kept_alive_pool_closed_by_the_servers_idle_timeout_is_counted_not_projected() {
    if !require_root(
        "a_kept_alive_pool_closed_by_the_servers_idle_timeout_is_counted_not_projected",
    ) {
        return;
    }
    let _serial = serial();
    let mut lp = 8090u16;
    for (family, argv) in IDLE_CLOSERS {
        // A namespace each: the other family's TIME_WAIT would be context (an info) here.
        let ns = NetNs::new(&format!("twb{lp}"));
        for k in [600usize, 1_500] {
            lp += 1;
            let pid = ns.spawn(
                std::process::Command::new(argv[0])
                    .args(&argv[1..])
                    .arg(lp.to_string()),
            );
            wait_until(&format!("{family} listening on {lp}"), LIMIT, || {
                ss_count(&ns, &format!("state listening sport = :{lp}")) == 1
            });
            let t = Tracer::start(&[
                "--pid",
                &pid.to_string(),
                "--duration",
                "120s",
                "--json",
                "--quiet",
            ]);
            let start = Instant::now();
            ns.run(|| pool_closed_by_idle_timeout(lp, k));
            // Every close processed (or stranded: see `NetNs::settle`) before the window ends.
            ns.settle(lp, LIMIT);
            // The window goes on past the burst: six seconds at least.
            std::thread::sleep(Duration::from_secs(6).saturating_sub(start.elapsed()));
            let r = report(&t.interrupt());
            let tr = &r["network"]["traced"];
            // What this test judges is the rule on the trace's own count, which the finding
            // must repeat exactly. The count itself runs a few short under this burst of closes
            // (1,476 to 1,500 of 1,500 here, recursion misses 0 to 24; bpftrace's tracepoint
            // counted 1,494 to 1,500 FIN_WAIT2 entries of 1,500 under the same burst, `ss`
            // 1,500 TIME_WAIT each time: transitions neither program ran for), so it is held to
            // the kernel's `ss` count from above only; docs/net.md says so. Exact counts of
            // closes one at a time are `time_wait_entries_on_the_servers_port_are_counted_exactly`.
            let entered = tr["on_ports"]["time_wait_entered"].as_u64().unwrap();
            assert!(entered <= k as u64, "{family} {k}: {entered} entered");
            assert_eq!(port(tr, lp)["local"]["time_wait_entered"], entered);
            let series = tr["time_wait_entered_per_s"].as_array().unwrap();
            let with = series.iter().filter(|n| n.as_u64().unwrap() > 0).count();
            // The premise: the closes came in fewer than half the window's seconds.
            assert!(
                2 * with < series.len(),
                "{family} {k}: not a burst: {series:?}"
            );
            let f = r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["id"] == "net.time-wait");
            if k < 1_000 {
                assert!(f.is_none(), "{family} {k}: {f:#?}");
                continue;
            }
            let f = f.unwrap_or_else(|| panic!("{family} {k}: no net.time-wait"));
            assert_eq!(f["severity"], "warn");
            assert_eq!(
                f["title"],
                format!(
                    "the run leaves {} TIME_WAIT sockets, closed in a burst ({with} of its {} seconds)",
                    fmt_thousands(entered as u16),
                    series.len()
                )
            );
            assert_eq!(f["evidence"]["time_wait_left_by_run"], entered);
            assert_eq!(f["evidence"]["time_wait_burst_seconds"], with);
            assert_eq!(f["evidence"]["time_wait_entered_server_side"], entered);
            assert_eq!(f["evidence"]["time_wait_entered_client_side"], 0);
            assert!(
                !f["predicted"].as_str().unwrap().contains("settles near"),
                "{f:#}"
            );
        }
    }
}
