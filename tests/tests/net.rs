//! The net.* traps staged for real, each in a network namespace of its own (host settings
//! untouched): a TIME_WAIT storm on one port and `wait-drain`, a 1,000-port ephemeral range
//! filled over a veth pair, a flooded listener with backlog 8, and nginx under `ulimit -n 256`
//! against a planned 400/s x 10 s run. Everything is bounded in count and time.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    process::Command,
    time::{Duration, Instant},
};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, json,
    netns::{Mode, NetNs, Server, connect_from, listen, sockaddr},
    require_root, schema, trapdetect, wait_until,
};

const LIMIT: Duration = Duration::from_secs(30);

fn finding<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding in {r:#}"))
}

/// `trapdetect net-census --json ARGS`: exit code and report, checked against the report's and
/// the `network` section's checked-in schemas.
fn census(args: &[&str]) -> (Option<i32>, Value) {
    let mut a = vec!["net-census", "--json"];
    a.extend(args);
    let out = trapdetect(&a, LIMIT);
    let r = json(&out);
    schema::validate(&schema::load("report.schema.json"), &r, "$");
    schema::validate(&schema::load("net.schema.json"), &r["network"], "$.network");
    (out.status.code(), r)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Clients that connect from ports `first..first + n`, wait for the server's FIN, then close.
/// Distinct client ports matter: a reused one would send a SYN that recycles a server
/// TIME_WAIT (connect()'s own port choice does repeat within 15,000 connections). Returns the
/// instants around the last connection (its TIME_WAIT is created in between).
fn close_first_batch(ns: &NetNs, dst: &'static str, first: u16, n: u16) -> (Instant, Instant) {
    ns.run(move || {
        let mut last = Instant::now();
        for port in first..first + n {
            last = Instant::now();
            let mut c = connect_from(&format!("127.0.0.1:{port}"), dst);
            let mut b = [0u8; 1];
            assert_eq!(c.read(&mut b).unwrap(), 0, "the server must close first");
        }
        (last, Instant::now())
    })
}

#[test]
fn time_wait_on_one_port_is_counted_by_port_and_wait_drain_behaves() {
    if !require_root("time_wait_on_one_port_is_counted_by_port_and_wait_drain_behaves") {
        return;
    }
    let ns = NetNs::new("tw");
    // Under CPU contention a server segment can reach a client socket that has already
    // closed; the client answers with a RST, which by default kills the server's TIME_WAIT
    // (TIME_WAIT assassination; seen here as Tcp OutRsts with reason NO_SOCKET). RFC 1337
    // behaviour keeps every TIME_WAIT for its 60 s, so the kernel's count is exactly the
    // connections closed.
    ns.sysctl("net.ipv4.tcp_rfc1337", "1");
    let server = Server::start(ns.run(|| listen("0.0.0.0:8080", 4096)), Mode::CloseFirst);
    // Two batches some seconds apart, to different server addresses: two flow groups, and
    // two generations of timers.
    let (a_last, a_end) = close_first_batch(&ns, "127.0.0.1:8080", 20_000, 15_000);
    std::thread::sleep(Duration::from_secs(2));
    let (b_last, b_end) = close_first_batch(&ns, "127.0.0.2:8080", 40_000, 5_000);
    assert_eq!(server.accepted(), 20_000);
    // With other tests loading both cores the last FINs and ACKs may still be in flight, and a
    // dump (ours or `ss`) is not atomic. Let the namespace settle first (see `NetNs::settle`).
    // The server enters TIME_WAIT when it processes the client's FIN, which under load can be
    // after the client loop returned: the latest a TIME_WAIT can have started is the end of
    // the poll that saw the namespace settled.
    let (settled, stranded) = ns.settle(8080, LIMIT);
    // The kernel's count is the truth the census must match: the connections closed, less any
    // the kernel stranded in FIN_WAIT2 (their own 60 s timer), by server address.
    let lost = |server_ip: &str| {
        let local = format!("{server_ip}:8080");
        stranded.iter().filter(|s| s.0 == local).count() as u64
    };
    let (na, nb) = (15_000 - lost("127.0.0.1"), 5_000 - lost("127.0.0.2"));
    let all = na + nb;
    assert_eq!(all + stranded.len() as u64, 20_000, "{stranded:?}");

    let before = Instant::now();
    let (code, r) = census(&["--netns", ns.name(), "--port", "8080"]);
    let after = Instant::now();
    assert_eq!(code, Some(1), "{all} TIME_WAIT is a fail finding: {r:#}");
    let n = &r["network"];
    assert_eq!(n["source"], "sock_diag");
    let tw = &n["time_wait"];
    assert_eq!(tw["count"], all, "{}", n["sockets"]);
    assert_eq!(n["sockets"]["TIME_WAIT"], all);
    if !stranded.is_empty() {
        assert_eq!(
            n["sockets"]["FIN_WAIT2"],
            stranded.len(),
            "{}",
            n["sockets"]
        );
    }
    assert_eq!(tw["local_ports_total"], 1);
    assert_eq!(tw["by_local_port"][0]["port"], 8080);
    assert_eq!(tw["by_local_port"][0]["count"], all);
    assert_eq!(tw["closed_first"]["server"], all);
    assert_eq!(tw["closed_first"]["client"], 0);
    assert_eq!(tw["closed_first"]["unknown"], 0);
    let groups = tw["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{groups:#?}");
    for (server_ip, count) in [("127.0.0.1", na), ("127.0.0.2", nb)] {
        let g = groups
            .iter()
            .find(|g| g["server"] == server_ip)
            .unwrap_or_else(|| panic!("no group to {server_ip}: {groups:#?}"));
        assert_eq!(g["client"], "127.0.0.1");
        assert_eq!(g["server_port"], 8080);
        assert_eq!(g["count"], count);
        assert_eq!(g["closed_first"], "server");
    }
    // The longest timer is the last socket of batch B: 60 s minus its age at the census.
    let tol = 50.0;
    let drain = tw["drain_all_ms"].as_f64().unwrap();
    let lo = 60_000.0 - ms(after - b_last) - tol;
    let hi = 60_000.0 - ms(before - settled.max(b_end)) + tol;
    assert!(
        (lo..=hi).contains(&drain),
        "drain_all_ms {drain} not in [{lo}, {hi}]"
    );
    let f = finding(&r, "net.time-wait");
    assert_eq!(f["severity"], "fail");
    assert_eq!(f["evidence"]["time_wait_sockets"], all);
    assert_eq!(f["evidence"]["top_local_port"], 8080);
    assert_eq!(f["evidence"]["time_wait_on_top_local_port"], all);
    assert_eq!(f["evidence"]["closed_first_by_server_sockets"], all);
    assert!(
        f["remedy"]
            .as_str()
            .unwrap()
            .contains("trapdetect wait-drain --port 8080 --below 1000"),
        "{f:#}"
    );

    // Above the threshold until the timeout: exit 1 with the count it saw, and the time the
    // sockets' own timers give (fewer than 5,001 once batch A's newest socket expires).
    let wd = |below: &str, timeout: &str| {
        let t0 = Instant::now();
        let out = trapdetect(
            &[
                "wait-drain",
                "--netns",
                ns.name(),
                "--port",
                "8080",
                "--below",
                below,
                "--timeout",
                timeout,
                "--interval",
                "100ms",
                "--json",
            ],
            LIMIT,
        );
        (out.status.code(), json(&out), t0, Instant::now())
    };
    let (code, v, t0, t1) = wd("5001", "1s");
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["drained"], false);
    assert_eq!(v["time_wait"], all);
    assert!(v["elapsed_s"].as_f64().unwrap() >= 1.0, "{v}");
    assert!(v["samples"].as_u64().unwrap() >= 2, "{v}");
    let eta = v["expected_below_in_s"].as_f64().unwrap() * 1000.0;
    let lo = 60_000.0 - ms(t1 - a_last) - tol;
    let hi = 60_000.0 - ms(t0 - a_end) + tol;
    assert!(
        (lo..=hi).contains(&eta),
        "expected_below_in_s {eta} ms not in [{lo}, {hi}]"
    );

    // Already below: exit 0 on the first count.
    let (code, v, _, _) = wd("20001", "5s");
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        (
            v["drained"].clone(),
            v["time_wait"].clone(),
            v["samples"].clone()
        ),
        (Value::from(true), Value::from(all), Value::from(1))
    );

    // Crossing while it polls. TIME_WAIT lasts 60 s, longer than this test may take, so batch
    // A is destroyed with `ss -K` (SOCK_DESTROY, the operator's lever) after wait-drain has
    // polled for a second; it must notice and exit 0 with exactly batch B left.
    let name = ns.name().to_string();
    let waiter = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = trapdetect(
            &[
                "wait-drain",
                "--netns",
                &name,
                "--port",
                "8080",
                "--below",
                "5001",
                "--timeout",
                "20s",
                "--interval",
                "100ms",
                "--json",
            ],
            LIMIT,
        );
        (out, t0.elapsed())
    });
    std::thread::sleep(Duration::from_secs(1));
    let killed = ns.exec(
        &["sh", "-c", "ss -HK state time-wait src 127.0.0.1 | wc -l"],
        LIMIT,
    );
    assert!(killed.status.success());
    assert_eq!(
        String::from_utf8_lossy(&killed.stdout).trim(),
        na.to_string()
    );
    let (out, took) = waiter.join().unwrap();
    let v = json(&out);
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["drained"], true);
    assert_eq!(v["time_wait"], nb);
    assert!(
        v["samples"].as_u64().unwrap() >= 2,
        "it must have polled before the drop: {v}"
    );
    assert!(v["elapsed_s"].as_f64().unwrap() >= 0.9, "{v}");
    assert!(took < Duration::from_secs(20));
    let (_, r) = census(&["--netns", ns.name(), "--port", "8080"]);
    assert_eq!(r["network"]["time_wait"]["count"], nb);
    drop(server);
}

#[test]
fn a_full_ephemeral_range_fails_with_the_ports_used() {
    if !require_root("a_full_ephemeral_range_fails_with_the_ports_used") {
        return;
    }
    let srv = NetNs::new("eps");
    let cli = NetNs::new("epc");
    srv.veth(&cli, "10.77.0.1/24", "10.77.0.2/24");
    cli.sysctl("net.ipv4.ip_local_port_range", "40000 40999");
    assert_eq!(cli.read_sysctl("net.ipv4.ip_local_reserved_ports"), "");
    let server = Server::start(srv.run(|| listen("10.77.0.1:9000", 4096)), Mode::Hold);
    let attempts = 1_200;
    let (held, eaddrnotavail) = cli.run(move || {
        let to: SocketAddr = "10.77.0.1:9000".parse().unwrap();
        let mut held = vec![];
        let mut na = 0u64;
        for _ in 0..attempts {
            match TcpStream::connect_timeout(&to, Duration::from_secs(5)) {
                Ok(s) => held.push(s),
                Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => na += 1,
                Err(e) => panic!("connect: {e}"),
            }
        }
        (held, na)
    });
    wait_until("the server to accept every connection", LIMIT, || {
        server.accepted() == held.len()
    });
    let (code, r) = census(&["--netns", cli.name(), "--port", "9000"]);
    assert_eq!(code, Some(1), "{r:#}");
    let e = &r["network"]["ephemeral"];
    assert_eq!(e["range"], serde_json::json!([40000, 40999]));
    assert_eq!(e["usable"], 1_000);
    assert_eq!(e["groups_total"], 1);
    let g = &e["groups"][0];
    assert_eq!(g["client"], "10.77.0.2");
    assert_eq!(g["server"], "10.77.0.1");
    assert_eq!(g["server_port"], 9000);
    assert_eq!(g["ports_used"], held.len() as u64);
    assert_eq!(g["headroom"], 0);
    let f = finding(&r, "net.ephemeral-ports");
    assert_eq!(f["severity"], "fail");
    let ev = &f["evidence"];
    assert_eq!(ev["ports_used"], 1_000);
    assert_eq!(ev["ports_usable"], 1_000);
    assert_eq!(ev["headroom_ports"], 0);
    assert_eq!(ev["flow_group"], "10.77.0.2 -> 10.77.0.1:9000");
    // Every attempt beyond the usable ports failed with EADDRNOTAVAIL, none before.
    assert_eq!(held.len(), 1_000);
    assert_eq!(
        eaddrnotavail,
        attempts as u64 - ev["ports_usable"].as_u64().unwrap()
    );
    drop(held);
    drop(server);
}

#[test]
fn a_flooded_backlog_of_8_overflows_by_the_kernels_count() {
    if !require_root("a_flooded_backlog_of_8_overflows_by_the_kernels_count") {
        return;
    }
    let ns = NetNs::new("lo");
    let dir = TempDir::new("net-listen");
    let _listener = ns.run(|| listen("127.0.0.1:8081", 8));
    let base = trapdetect(
        &[
            "net-census",
            "--json",
            "--netns",
            ns.name(),
            "--port",
            "8081",
        ],
        LIMIT,
    );
    let base_json = json(&base);
    let base_path = dir.path().join("baseline.json");
    std::fs::write(&base_path, &base.stdout).unwrap();

    let flood = 200usize;
    let (elapsed, connected) = ns.run(move || {
        let SocketAddr::V4(to) = "127.0.0.1:8081".parse().unwrap() else {
            unreachable!()
        };
        let sa = sockaddr(&to);
        let t0 = Instant::now();
        let mut fds = vec![];
        for _ in 0..flood {
            // SAFETY: plain socket calls; every descriptor is closed below.
            unsafe {
                let fd = libc::socket(
                    libc::AF_INET,
                    libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    0,
                );
                assert!(fd >= 0);
                let rc = libc::connect(
                    fd,
                    (&sa as *const libc::sockaddr_in).cast(),
                    size_of::<libc::sockaddr_in>() as u32,
                );
                assert!(
                    rc == 0
                        || std::io::Error::last_os_error().raw_os_error()
                            == Some(libc::EINPROGRESS)
                );
                fds.push(fd);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let connected = trapdetect_e2e::netns::close_counting_connected(fds);
        (t0.elapsed(), connected)
    });
    // Closed before the first SYN retransmission (1 s): each dropped client counted once.
    assert!(
        elapsed < Duration::from_millis(900),
        "flood took {elapsed:?}"
    );
    assert_eq!(connected, 9, "the accept queue holds backlog + 1");

    let (code, r) = census(&[
        "--netns",
        ns.name(),
        "--port",
        "8081",
        "--baseline",
        base_path.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{r:#}");
    let f = finding(&r, "net.listen-overflow");
    assert_eq!(f["severity"], "fail");
    let ev = &f["evidence"];
    assert_eq!(ev["listen_overflows"], (flood - 9) as u64);
    assert_eq!(ev["listen_drops"], (flood - 9) as u64);
    assert_eq!(ev["listener"], "127.0.0.1:8081");
    assert_eq!(ev["accept_queue_connections"], 9);
    assert_eq!(ev["backlog_connections"], 8);
    // The kernel's own counter, read independently inside the namespace.
    let netstat = ns.exec(&["cat", "/proc/net/netstat"], LIMIT);
    let text = String::from_utf8_lossy(&netstat.stdout);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let now: u64 = names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ListenOverflows")
        .unwrap()
        .1
        .parse()
        .unwrap();
    let before = base_json["network"]["tcp_ext"]["counters"]["ListenOverflows"]
        .as_u64()
        .unwrap();
    assert_eq!(now - before, ev["listen_overflows"].as_u64().unwrap());
    let l = &r["network"]["listeners"][0];
    assert_eq!(
        (l["accept_queue"].clone(), l["backlog"].clone()),
        (Value::from(9), Value::from(8))
    );
}

#[test]
fn nginx_under_ulimit_256_cannot_hold_a_400_per_second_flood() {
    if !require_root("nginx_under_ulimit_256_cannot_hold_a_400_per_second_flood") {
        return;
    }
    let ns = NetNs::new("fd");
    let dir = TempDir::new("net-fd");
    let d = dir.path().display().to_string();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
               fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
               server {{ listen 127.0.0.1:8082; location / {{ return 200 \"ok\\n\"; }} }} }}\n"
        ),
    )
    .unwrap();
    let pid = ns.spawn(Command::new("sh").args([
        "-c",
        &format!(
            "ulimit -n 256 && exec nginx -e {d}/error.log -c {}",
            conf.display()
        ),
    ]));
    wait_until("nginx to answer", LIMIT, || {
        ns.run(|| {
            let Ok(mut s) = TcpStream::connect("127.0.0.1:8082") else {
                return false;
            };
            let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
            let mut body = String::new();
            let _ = s.read_to_string(&mut body);
            body.starts_with("HTTP/1.1 200")
        })
    });
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    let (code, r) = census(&[
        "--pid",
        &pid.to_string(),
        "--rate",
        "400",
        "--timeout",
        "10s",
    ]);
    assert_eq!(code, Some(1), "{r:#}");
    let f = finding(&r, "net.fd-limit");
    assert_eq!(f["severity"], "fail");
    let ev = &f["evidence"];
    assert_eq!(ev["pid"], pid);
    assert_eq!(ev["role"], "target");
    assert_eq!(ev["in_flight_needed_connections"], 4_000);
    assert_eq!(ev["soft_limit_fds"], 256);
    assert_eq!(ev["hard_limit_fds"], 256);
    assert_eq!(ev["open_fds"], open);
    assert_eq!(ev["headroom_fds"], 256 - open);
    let need = open + 4_000;
    let predicted = f["predicted"].as_str().unwrap();
    assert!(
        predicted.contains("400 /s x 10 s = 4,000 connections in flight")
            && predicted.contains(&format!("needs {},{:03}", need / 1000, need % 1000)),
        "{predicted}"
    );
    let suggested = (need + need / 4).div_ceil(1024) * 1024;
    assert!(
        f["remedy"].as_str().unwrap().contains(&format!(
            "sudo prlimit --pid {pid} --nofile={suggested}:{suggested}"
        )),
        "{f:#}"
    );
    // The census ran in nginx's namespace (entered through /proc/PID/ns/net) and found its
    // listener by socket inode.
    let n = &r["network"];
    assert_eq!(n["netns"], format!("pid {pid}"));
    let l = &n["listeners"][0];
    assert_eq!(l["local"], "127.0.0.1:8082");
    assert_eq!(l["target"], true);
    assert_eq!(n["ports"], serde_json::json!([8082]));
}
