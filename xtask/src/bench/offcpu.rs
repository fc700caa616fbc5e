//! Cost of the off-CPU probes `trapdetect run` attaches (sched_switch fires far more often than
//! path syscalls): a pipe ping-pong that context-switches as fast as it can, and php-fpm+nginx
//! at saturation, each untraced, traced by trapdetect's off-CPU probes (the blocked syscall
//! read from registers, `exact`, and recorded at syscall entry, `syscall-entry`, the method of
//! kernels before 5.15), and traced by bpftrace doing the same aggregation (off-CPU time per
//! thread, summed in the kernel); and a syscall loop of a process that is *not* traced, which
//! pays for `syscall-entry`'s program on every syscall of the host. Rounds are interleaved;
//! medians and ratios are reported.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use trapdetect_e2e::{TempDir, Tracer, servers::PhpStack};

use super::{median, record};
use crate::util::{self, has, wrk};
use trapdetect_e2e::target_file;

const ROUNDS: usize = 5;

/// Two processes bouncing a byte over pipes: every bounce blocks one side, so each round trip
/// is at least two context switches of the traced process tree.
const PINGPONG: &str = r#"
import os, sys, time
r1, w1 = os.pipe(); r2, w2 = os.pipe()
if os.fork() == 0:
    while True:
        b = os.read(r1, 1)
        if not b or b == b"q": os._exit(0)
        os.write(w2, b)
print("ready", flush=True)
sys.stdin.readline()
def switches():
    s = 0
    for t in os.listdir("/proc/self/task"):
        for l in open(f"/proc/self/task/{t}/status"):
            if l.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")): s += int(l.split()[1])
    return s
secs = float(sys.argv[1]); n = 0; s0 = switches(); t0 = time.monotonic()
while time.monotonic() - t0 < secs:
    for _ in range(200):
        os.write(w1, b"x"); os.read(r2, 1)
    n += 200
dt = time.monotonic() - t0
per = (switches() - s0) / n
os.write(w1, b"q")
print(n / dt, per, flush=True)
"#;

#[derive(Clone, Copy)]
enum Mode {
    Untraced,
    Trapdetect,
    TrapdetectEntry,
    Bpftrace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Trapdetect => "trapdetect, exact",
            Mode::TrapdetectEntry => "trapdetect, syscall-entry",
            Mode::Bpftrace => "bpftrace (same aggregation)",
        }
    }
}

enum Inner {
    Trapdetect(Tracer),
    Bpftrace(Child),
}

/// A tracer attached to a pid; detaches on drop.
struct Attached(Option<Inner>);

impl Attached {
    fn to(mode: Mode, pid: u32) -> Result<Attached> {
        Ok(Attached(match mode {
            Mode::Untraced => None,
            Mode::Trapdetect | Mode::TrapdetectEntry => {
                let method = match mode {
                    Mode::TrapdetectEntry => "syscall-entry",
                    _ => "exact",
                };
                Some(Inner::Trapdetect(Tracer::start_env(
                    &[
                        "--pid",
                        &pid.to_string(),
                        "--offcpu",
                        "--duration",
                        "600s",
                        "--quiet",
                    ],
                    &[("TRAPDETECT_CLASSES_METHOD", method)],
                )))
            }
            Mode::Bpftrace => {
                // Off-CPU time per thread of the process (and its children, by parent tgid
                // at the time: enough for the ping-pong and a php-fpm pool), summed in maps.
                let prog = format!(
                    "tracepoint:sched:sched_switch {{ if (pid == {pid} || curtask->real_parent->tgid == {pid}) {{ @start[tid] = nsecs; }} \
                     if (@start[args->next_pid]) {{ @off[args->next_pid] = sum(nsecs - @start[args->next_pid]); delete(@start[args->next_pid]); }} }}"
                );
                let mut c = Command::new("bpftrace")
                    .args(["-e", &prog])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("bpftrace")?;
                let mut out = BufReader::new(c.stdout.take().unwrap());
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let mut line = String::new();
                    let _ = out.read_line(&mut line);
                    let _ = tx.send(line);
                    let _ = std::io::copy(&mut out, &mut std::io::sink());
                });
                // bpftrace has been seen to hang before attaching on a locked-down kernel.
                match rx.recv_timeout(Duration::from_secs(30)) {
                    Ok(line) if line.starts_with("Attaching") => {}
                    other => {
                        let _ = c.kill();
                        let _ = c.wait();
                        bail!("bpftrace did not attach within 30 s: {other:?}");
                    }
                }
                Some(Inner::Bpftrace(c))
            }
        }))
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        match self.0.take() {
            None => {}
            Some(Inner::Trapdetect(t)) => {
                let _ = t.interrupt();
            }
            Some(Inner::Bpftrace(mut c)) => {
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                let _ = c.wait();
            }
        }
    }
}

/// One ping-pong run: (round trips/s, context switches per round trip).
fn pingpong(mode: Mode, secs: f64) -> Result<(f64, f64)> {
    let mut child = Command::new("python3")
        .args(["-c", PINGPONG, &secs.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("python3")?;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line)?;
    let attached = Attached::to(mode, child.id())?;
    writeln!(child.stdin.as_mut().unwrap(), "go")?;
    line.clear();
    out.read_line(&mut line)?;
    drop(attached);
    let _ = child.wait();
    let mut it = line.split_whitespace().map(|v| v.parse::<f64>());
    match (it.next(), it.next()) {
        (Some(Ok(rate)), Some(Ok(per))) => Ok((rate, per)),
        _ => bail!("ping-pong printed {line:?}"),
    }
}

/// Debian's bpftrace (0.17), installed when missing (benches only: it pulls in a whole LLVM),
/// with debugfs mounted: 0.17 looks for tracepoints under /sys/kernel/debug/tracing only, and
/// a fresh machine has neither mounted. Whether it can run, said aloud when not.
pub(super) fn ensure_bpftrace() -> bool {
    if !has("bpftrace") {
        println!("installing Debian's bpftrace for the side-by-side column");
        let _ = util::run(
            Command::new("apt-get")
                .args(["install", "-y", "-q", "bpftrace"])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        );
    }
    if !has("bpftrace") {
        println!("bpftrace could not be installed: its column is left out");
        return false;
    }
    if !std::path::Path::new("/sys/kernel/debug/tracing/events").exists() {
        let _ = Command::new("mount")
            .args(["-t", "debugfs", "debugfs", "/sys/kernel/debug"])
            .status();
    }
    true
}

/// One run of `statloop getppid` (a syscall nothing traces) while trapdetect traces another,
/// idle process: getppid calls per second.
fn untraced_syscalls(mode: Mode, secs: f64) -> Result<f64> {
    let mut idle = Command::new("sleep").arg("600").spawn().context("sleep")?;
    let r = (|| {
        let mut child = Command::new(target_file("statloop"))
            .args(["getppid", &secs.to_string(), "."])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("statloop")?;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line)?;
        let attached = Attached::to(mode, idle.id())?;
        writeln!(child.stdin.as_mut().unwrap(), "go")?;
        line.clear();
        out.read_line(&mut line)?;
        drop(attached);
        let _ = child.wait();
        line.split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .with_context(|| format!("statloop printed {line:?}"))
    })();
    let _ = idle.kill();
    let _ = idle.wait();
    r
}

pub fn run() -> Result<()> {
    let mut modes = vec![Mode::Untraced, Mode::Trapdetect, Mode::TrapdetectEntry];
    if ensure_bpftrace() {
        modes.push(Mode::Bpftrace);
    }
    // A process nobody traces, making syscalls: what syscall-entry's program costs the rest of
    // the host (bpftrace's sched_switch program does not run per syscall: not compared).
    let sys_modes = [Mode::Untraced, Mode::Trapdetect, Mode::TrapdetectEntry];
    let mut sys_rates: Vec<Vec<f64>> = vec![vec![]; sys_modes.len()];
    for round in 0..ROUNDS {
        for i in (0..sys_modes.len()).map(|k| (k + round) % sys_modes.len()) {
            sys_rates[i].push(untraced_syscalls(sys_modes[i], 2.0)?);
        }
    }
    let base = median(&sys_rates[0]);
    println!(
        "\nan untraced process's syscalls (statloop getppid) while another process is traced, median of {ROUNDS} interleaved 2 s runs:"
    );
    for (i, m) in sys_modes.iter().enumerate() {
        let r = median(&sys_rates[i]);
        let added_ns = (1e9 / r - 1e9 / base).max(0.0);
        println!(
            "  {:<28} {:>10.0} syscalls/s  {:>6.1} % of untraced  {:>+7.0} ns per syscall",
            m.name(),
            r,
            100.0 * r / base,
            added_ns
        );
        record(
            &format!("offcpu.untraced_syscalls.{}", m.name()),
            serde_json::json!({"syscalls_per_s": r, "ratio": r / base, "added_ns_per_syscall": added_ns}),
        );
    }
    let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
    let mut per = 1.0;
    for round in 0..ROUNDS {
        for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
            // A peer that fails to attach (tracefs unmounted under it by another tracer on a
            // shared machine) loses that round, not the benchmark.
            let (r, p) = match pingpong(modes[i], 2.0) {
                Ok(v) => v,
                Err(e) if matches!(modes[i], Mode::Bpftrace) => {
                    println!("  {} round {round} lost: {e}", modes[i].name());
                    continue;
                }
                Err(e) => return Err(e),
            };
            rates[i].push(r);
            if i == 0 {
                per = p;
            }
        }
    }
    let base = median(&rates[0]);
    println!(
        "\npipe ping-pong ({per:.2} context switches of the traced process per round trip), median of {ROUNDS} interleaved 2 s runs:"
    );
    for (i, m) in modes.iter().enumerate() {
        if rates[i].is_empty() {
            continue;
        }
        let r = median(&rates[i]);
        let added_us = (1e6 / r - 1e6 / base) / per.max(1e-9);
        println!(
            "  {:<28} {:>9.0} round trips/s  {:>6.1} % of untraced  {:>+7.3} µs per context switch",
            m.name(),
            r,
            100.0 * r / base,
            added_us
        );
        record(
            &format!("offcpu.pingpong.{}", m.name()),
            serde_json::json!({"round_trips_per_s": r, "ratio": r / base, "added_us_per_switch": added_us}),
        );
    }
    let dir = TempDir::new("bench-offcpu");
    let stack = PhpStack::start(dir.path(), 4, "<?php echo \"ok\\n\";");
    let _ = wrk(&stack.url(), 2)?;
    let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
    for round in 0..ROUNDS {
        for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
            let a = match Attached::to(modes[i], stack.fpm.pid()) {
                Ok(a) => a,
                Err(e) if matches!(modes[i], Mode::Bpftrace) => {
                    println!("  {} round {round} lost: {e}", modes[i].name());
                    continue;
                }
                Err(e) => return Err(e),
            };
            std::thread::sleep(Duration::from_millis(100));
            rates[i].push(wrk(&stack.url(), 4)?);
            drop(a);
        }
    }
    let base = median(&rates[0]);
    println!(
        "\nphp-fpm (4 workers) + nginx at saturation, wrk -t1 -c8, median of {ROUNDS} interleaved 4 s runs:"
    );
    for (i, m) in modes.iter().enumerate() {
        if rates[i].is_empty() {
            continue;
        }
        let r = median(&rates[i]);
        println!(
            "  {:<28} {:>8.0} req/s  {:>6.1} % of untraced  ({:+.1} % throughput)",
            m.name(),
            r,
            100.0 * r / base,
            100.0 * (r / base - 1.0)
        );
        record(
            &format!("offcpu.php_fpm.{}", m.name()),
            serde_json::json!({"req_per_s": r, "ratio": r / base}),
        );
    }
    Ok(())
}
