//! `cargo xtask bench load`: the open-loop generator side by side with `oha -q` (open loop,
//! crates.io) and `wrk` (closed loop, Debian) in one run, against nginx serving a small static
//! file on loopback; then trapdetect's memory with 10,000 requests in flight against a server
//! that never answers. Figures are ratios measured in the same run; absolute numbers on a
//! shared 2-core VM are noise.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::util::{self, has};

/// Rates tried, in order; a tool's ladder stops at its first miss.
const LADDER: &[u64] = &[
    10_000, 20_000, 30_000, 40_000, 50_000, 60_000, 70_000, 80_000, 100_000, 120_000,
];
/// Seconds per step.
const STEP_S: u64 = 3;
/// The oha release installed when it is missing (builds with Rust 1.95; no TLS needed).
const OHA_VERSION: &str = "1.16.0";

struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Nginx {
    fn start() -> Result<Nginx> {
        let dir =
            std::env::temp_dir().join(format!("trapdetect-bench-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("index.html"), "hello, benchmark\n")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let conf = format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 20000; }}\n\
             http {{ access_log off; keepalive_requests 10000000; keepalive_timeout 300s;\n\
               client_body_temp_path {d}; proxy_temp_path {d}; fastcgi_temp_path {d};\n\
               uwsgi_temp_path {d}; scgi_temp_path {d};\n\
               server {{ listen 127.0.0.1:{port} backlog=4096; root {d}; }} }}\n",
            d = dir.display()
        );
        std::fs::write(dir.join("nginx.conf"), conf)?;
        let child = Command::new("nginx")
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(&dir)
            .stderr(Stdio::null())
            .spawn()
            .context("start nginx")?;
        let n = Nginx { child, dir, port };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed() > Duration::from_secs(5) {
                bail!("nginx did not listen on {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(n)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/index.html", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| util::root().join("target"))
        .join("release")
}

/// oha from crates.io (its default rustls feature: 1.16 does not build without a TLS
/// backend). `None`, said aloud, when it cannot be installed: the rest still runs.
fn ensure_oha() -> Option<PathBuf> {
    if std::env::var_os("BENCH_SKIP_OHA").is_some() {
        eprintln!("xtask: BENCH_SKIP_OHA set; comparing with wrk only");
        return None;
    }
    if !has("oha") {
        eprintln!("xtask: installing oha {OHA_VERSION} from crates.io");
        let installed = util::run(Command::new("cargo").args([
            "install",
            "oha",
            "--locked",
            "--version",
            OHA_VERSION,
        ]));
        if let Err(e) = installed {
            eprintln!("xtask: oha could not be installed ({e:#}); comparing with wrk only");
            return None;
        }
    }
    Some(PathBuf::from("oha"))
}

fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("spawn {cmd:?}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One trapdetect step: (held?, delivered/s, lag p99 µs, note).
fn trapdetect_step(bin: &Path, url: &str, rate: u64) -> Result<(bool, f64, f64, String)> {
    let out = output(Command::new(bin).args([
        "load",
        "--json",
        "-q",
        "--url",
        url,
        "--rate",
        &rate.to_string(),
        "--duration",
        &format!("{STEP_S}s"),
        "--timeout",
        "2s",
    ]))?;
    let v: Value = serde_json::from_str(&out).context("trapdetect load JSON")?;
    let lag = v["sched_lag"]["p99_us"].as_f64().unwrap_or(f64::INFINITY);
    let delivered = v["delivered_rate_per_s"].as_f64().unwrap_or(0.0);
    let gen_errors = v["errors"]["fd_limit"].as_u64().unwrap_or(0)
        + v["errors"]["ports_exhausted"].as_u64().unwrap_or(0)
        + v["unsent"].as_u64().unwrap_or(0);
    let errors = v["errors_total"].as_u64().unwrap_or(0);
    let held = lag < 1_000.0 && gen_errors == 0 && errors == 0 && delivered >= 0.99 * rate as f64;
    let note = format!(
        "lag p99 {lag:.0} µs, max {:.0} µs, in-flight max {}, latency p99 {:.2} ms, cpu {:.2}s",
        v["sched_lag"]["max_us"].as_f64().unwrap_or(0.0),
        v["in_flight"]["max"],
        v["latency_2xx"]["p99_us"].as_f64().unwrap_or(0.0) / 1e3,
        v["generator"]["cpu_user_s"].as_f64().unwrap_or(0.0)
            + v["generator"]["cpu_sys_s"].as_f64().unwrap_or(0.0)
    );
    Ok((held, delivered, lag, note))
}

/// One oha step: oha reports no scheduling lag, so "held" is what it can say: every request
/// succeeded and the achieved rate reached 99 % of the target.
fn oha_step(oha: &Path, url: &str, rate: u64) -> Result<(bool, f64, String)> {
    let out = output(Command::new(oha).args([
        "--no-tui",
        "--output-format",
        "json",
        "-q",
        &rate.to_string(),
        "-z",
        &format!("{STEP_S}s"),
        "-c",
        "500",
        "-t",
        "2s",
        "--latency-correction",
        "--disable-keepalive=false",
        url,
    ]));
    let out = match out {
        Ok(o) if !o.trim().is_empty() => o,
        // Older/newer flag sets: retry with the minimal one.
        _ => output(Command::new(oha).args([
            "--no-tui",
            "-j",
            "-q",
            &rate.to_string(),
            "-z",
            &format!("{STEP_S}s"),
            "-c",
            "500",
            "--latency-correction",
            url,
        ]))?,
    };
    let v: Value = serde_json::from_str(&out).context("oha JSON")?;
    let s = &v["summary"];
    let success = s["successRate"].as_f64().unwrap_or(0.0);
    let rps = s["requestsPerSec"].as_f64().unwrap_or(0.0);
    let errors = v["errorDistribution"]
        .as_object()
        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum::<u64>());
    let held = success >= 1.0 && errors == 0 && rps >= 0.99 * rate as f64;
    let p99 = v["latencyPercentiles"]["p99"].as_f64().unwrap_or(0.0) * 1e3;
    Ok((
        held,
        rps,
        format!("success {success}, errors {errors}, latency p99 {p99:.2} ms (latency-corrected)"),
    ))
}

fn wrk_best(url: &str) -> Result<(f64, String)> {
    let mut best = (0.0, String::new());
    for (t, c) in [(1, 50), (2, 50), (2, 200)] {
        let out = output(Command::new("wrk").args([
            &format!("-t{t}"),
            &format!("-c{c}"),
            &format!("-d{STEP_S}s"),
            url,
        ]))?;
        let rps = out
            .lines()
            .find_map(|l| l.strip_prefix("Requests/sec:"))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        eprintln!("  wrk -t{t} -c{c}: {rps:.0} req/s");
        if rps > best.0 {
            best = (rps, format!("-t{t} -c{c}"));
        }
    }
    Ok(best)
}

/// Peak RSS (VmHWM, KiB) of a process, polled until it exits.
fn wait_hwm(mut child: Child) -> Result<(u64, String)> {
    let pid = child.id();
    let mut hwm = 0;
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(v) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            hwm = hwm.max(v);
        }
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    Ok((hwm, out))
}

fn memory(bin: &Path, oha: Option<&Path>) -> Result<()> {
    let mut server = Command::new(target_dir().join("misbehave"))
        .arg("never")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("start misbehave (cargo build --release builds it)")?;
    let mut port = String::new();
    {
        use std::io::BufRead;
        let stdout = server.stdout.take().context("misbehave stdout")?;
        std::io::BufReader::new(stdout).read_line(&mut port)?;
    }
    let url = format!("http://127.0.0.1:{}/", port.trim());
    // 1,250/s for 8 s with a 10 s timeout: in flight climbs to 10,000 before any times out.
    let child = Command::new(bin)
        .args([
            "load",
            "--json",
            "-q",
            "--url",
            &url,
            "--rate",
            "1250",
            "--duration",
            "8s",
            "--timeout",
            "10s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (hwm, out) = wait_hwm(child)?;
    let v: Value = serde_json::from_str(&out).context("trapdetect JSON")?;
    eprintln!(
        "  trapdetect load: in-flight max {}, timeouts {}, VmHWM {:.1} MiB (own report: {} MiB)",
        v["in_flight"]["max"],
        v["errors"]["timeout"],
        hwm as f64 / 1024.0,
        v["generator"]["rss_max_mib"]
    );
    if let Some(oha) = oha {
        let child = Command::new(oha)
            .args([
                "--no-tui",
                "--output-format",
                "json",
                "-q",
                "1250",
                "-z",
                "8s",
                "-c",
                "10000",
                "-t",
                "10s",
                &url,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let (ohwm, _) = wait_hwm(child)?;
        eprintln!(
            "  memory at 10,000 in flight: trapdetect {:.1} MiB (target <= 200), oha -q 1250 -c \
             10000 {:.1} MiB, ratio {:.2}",
            hwm as f64 / 1024.0,
            ohwm as f64 / 1024.0,
            hwm as f64 / ohwm.max(1) as f64
        );
    }
    drop(server.stdin.take());
    let _ = server.kill();
    let _ = server.wait();
    Ok(())
}

pub fn run() -> Result<()> {
    for tool in ["nginx", "wrk"] {
        if !has(tool) {
            bail!("{tool} is missing: run `cargo xtask setup`");
        }
    }
    let oha = ensure_oha();
    let bin = target_dir().join("trapdetect");
    let nginx = Nginx::start()?;
    let url = nginx.url();
    eprintln!("nginx (1 worker) on {url}; {STEP_S}s per step; 2-core VM, other load possible");

    let mut td_best = 0;
    for &rate in LADDER {
        let (held, got, _, note) = trapdetect_step(&bin, &url, rate)?;
        eprintln!(
            "  trapdetect load --rate {rate}: {} delivered {got:.0}/s; {note}",
            if held { "held  " } else { "missed" }
        );
        if !held {
            break;
        }
        td_best = rate;
    }
    let mut oha_best = 0;
    for &rate in LADDER {
        let Some(oha) = &oha else { break };
        let (held, got, note) = oha_step(oha, &url, rate)?;
        eprintln!(
            "  oha -q {rate}: {} {got:.0}/s; {note}",
            if held { "held  " } else { "missed" }
        );
        if !held {
            break;
        }
        oha_best = rate;
    }
    let (wrk_rps, wrk_flags) = wrk_best(&url)?;
    drop(nginx);
    eprintln!("result (highest rate held; wrk: best closed-loop throughput):");
    eprintln!("  trapdetect load  {td_best:>8} req/s  (lag p99 < 1 ms, no errors)");
    eprintln!("  oha -q           {oha_best:>8} req/s  (all 2xx, >= 99 % of the target)");
    eprintln!("  wrk {wrk_flags:<12} {wrk_rps:>8.0} req/s  (closed loop)");
    eprintln!(
        "  ratios: trapdetect/oha {:.2}, trapdetect/wrk {:.2}",
        td_best as f64 / oha_best.max(1) as f64,
        td_best as f64 / wrk_rps.max(1.0)
    );
    memory(&bin, oha.as_deref())
}
