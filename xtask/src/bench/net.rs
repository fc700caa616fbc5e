//! Socket census speed, side by side in one run: with 50,000 TIME_WAIT sockets in a namespace
//! made for the bench, `trapdetect net-census` (every TCP socket, both families, sysctls,
//! TcpExt, JSON report) against `ss -tan state time-wait | wc -l`. Both start inside the
//! namespace the same way (setns before exec); rounds are interleaved; medians and the ratio
//! are reported. Target: the census under 50 ms.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail, ensure};
use trapdetect_e2e::{
    netns::{Mode, NetNs, Server, connect_from, listen},
    target_file,
};

use super::{median, record};

const SOCKETS: u16 = 50_000;
const ROUNDS: usize = 15;
const TARGET_MS: f64 = 50.0;

fn timed(ns: &NetNs, cmd: &mut Command) -> Result<(f64, String)> {
    ns.enter_on_exec(cmd)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let t0 = Instant::now();
    let out = cmd.output().with_context(|| format!("spawn {cmd:?}"))?;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    // net-census exits 1 on a fail finding, which 50,000 TIME_WAIT is.
    if !matches!(out.status.code(), Some(0 | 1)) {
        bail!("{cmd:?} exited with {}", out.status);
    }
    Ok((ms, String::from_utf8(out.stdout)?))
}

fn children_cpu_s() -> f64 {
    // SAFETY: plain getrusage into a zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// CPU that `wait-drain` spends while it waits (default 200 ms interval, 3 s, never drained).
fn wait_drain_cpu(ns: &NetNs, bin: &std::path::Path) -> Result<f64> {
    let before = children_cpu_s();
    let (ms, out) = timed(
        ns,
        Command::new(bin).args([
            "wait-drain",
            "--port",
            "8080",
            "--below",
            "1",
            "--timeout",
            "3s",
            "--json",
            "--quiet",
        ]),
    )?;
    let cpu = children_cpu_s() - before;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let share = cpu / (ms / 1000.0);
    eprintln!(
        "net: wait-drain polling {} samples over {:.1} s used {:.0} ms CPU ({:.1} % of one CPU)",
        v["samples"],
        ms / 1000.0,
        cpu * 1000.0,
        share * 100.0
    );
    record(
        "net.wait_drain_poll",
        serde_json::json!({"time_wait_sockets": SOCKETS, "interval_ms": 200, "samples": v["samples"], "cpu_share_of_one_cpu": share}),
    );
    Ok(share)
}

/// Interleaved timings of one configuration.
struct Rounds {
    ours: Vec<f64>,
    census: Vec<f64>,
    ss: Vec<f64>,
}

fn rounds(ns: &NetNs, bin: &std::path::Path, n: usize) -> Result<Rounds> {
    let mut r = Rounds {
        ours: vec![],
        census: vec![],
        ss: vec![],
    };
    for _ in 0..n {
        let (ms, out) = timed(ns, Command::new(bin).args(["net-census", "--json"]))?;
        let v: serde_json::Value = serde_json::from_str(&out)?;
        let count = v["network"]["time_wait"]["count"].as_u64().unwrap_or(0);
        r.census
            .push(v["network"]["census_ms"].as_f64().unwrap_or(f64::NAN));
        r.ours.push(ms);
        let (ms, out) = timed(
            ns,
            Command::new("sh").args(["-c", "ss -tan state time-wait | wc -l"]),
        )?;
        // `ss` prints a header line.
        let peer = out.trim().parse::<u64>()?.saturating_sub(1);
        r.ss.push(ms);
        ensure!(
            count == SOCKETS as u64 && peer == SOCKETS as u64,
            "counts disagree: trapdetect {count}, ss {peer}, created {SOCKETS}"
        );
    }
    Ok(r)
}

fn report(what: &str, r: &Rounds) {
    let (o, p, s) = (median(&r.ours), median(&r.ss), median(&r.census));
    eprintln!(
        "net: {SOCKETS} TIME_WAIT sockets, {what}, {} interleaved rounds, medians:",
        r.ours.len()
    );
    eprintln!(
        "  trapdetect net-census --json            {o:7.1} ms wall  (census itself {s:.1} ms)"
    );
    eprintln!("  sh -c 'ss -tan state time-wait | wc -l' {p:7.1} ms wall");
    eprintln!(
        "  ratio trapdetect / ss = {:.2}; target < {TARGET_MS} ms: {}",
        o / p,
        if o < TARGET_MS { "met" } else { "MISSED" }
    );
}

pub fn run() -> Result<()> {
    let ns = NetNs::new("bench");
    // Keep every TIME_WAIT for its full 60 s (stray RSTs would otherwise kill a few).
    ns.sysctl("net.ipv4.tcp_rfc1337", "1");
    if ns
        .read_sysctl("net.ipv4.tcp_max_tw_buckets")
        .parse::<u64>()?
        < 2 * SOCKETS as u64
    {
        ns.sysctl(
            "net.ipv4.tcp_max_tw_buckets",
            &(2 * SOCKETS as u64).to_string(),
        );
    }
    let server = Server::start(ns.run(|| listen("0.0.0.0:8080", 4096)), Mode::CloseFirst);
    let t0 = Instant::now();
    ns.run(|| {
        use std::io::Read;
        for port in 10_000..10_000 + SOCKETS {
            let mut c = connect_from(&format!("127.0.0.1:{port}"), "127.0.0.1:8080");
            let _ = c.read(&mut [0u8; 1]);
        }
    });
    eprintln!(
        "net: {SOCKETS} connections closed server-first in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    // The server keeps listening, as between two benchmark points.
    std::thread::sleep(Duration::from_millis(300));

    let bin = target_file("trapdetect");
    let listening = rounds(&ns, &bin, ROUNDS)?;
    report("server listening", &listening);
    wait_drain_cpu(&ns, &bin)?;
    // The next point's fresh instance: the port's TIME_WAIT outlives the process.
    drop(server);
    let gone = rounds(&ns, &bin, ROUNDS)?;
    report("server gone", &gone);
    for (key, r) in [
        ("net.census", &listening),
        ("net.census_server_gone", &gone),
    ] {
        record(
            key,
            serde_json::json!({
                "time_wait_sockets": SOCKETS,
                "rounds": ROUNDS,
                "trapdetect_wall_ms_median": median(&r.ours),
                "trapdetect_census_ms_median": median(&r.census),
                "ss_wall_ms_median": median(&r.ss),
                "ratio_trapdetect_over_ss": median(&r.ours) / median(&r.ss),
                "target_ms": TARGET_MS,
                "target_met": median(&r.ours) < TARGET_MS,
            }),
        );
    }
    Ok(())
}
