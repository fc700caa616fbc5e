//! Tracer overhead, side by side in one run: a syscall-tight loop and php-fpm+nginx at
//! saturation, each untraced, traced by trapdetect, and traced by `strace -f` (the reference
//! for how bad it gets). Rounds are interleaved; medians and ratios are reported.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use trapdetect_e2e::{
    TempDir, Tracer,
    servers::{PhpStack, Proc},
    target_file,
};

use super::{median, record};

const ROUNDS: usize = 5;

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Untraced,
    Trapdetect,
    /// trapdetect tracing an unrelated process: what every other process pays.
    TrapdetectOther,
    Strace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Trapdetect => "trapdetect",
            Mode::TrapdetectOther => "trapdetect on another pid",
            Mode::Strace => "strace -f",
        }
    }
}

enum Inner {
    Trapdetect(Tracer),
    /// The tracer and the idle process it traces.
    Other(Tracer, Proc),
    Strace(Child),
}

/// A tracer of `mode` attached to `pids`; detaches on drop.
struct Attached(Option<Inner>);

impl Attached {
    fn to(mode: Mode, pids: &[u32]) -> Result<Attached> {
        Ok(Attached(match mode {
            Mode::Untraced => None,
            Mode::Trapdetect => Some(Inner::Trapdetect(Tracer::start(&[
                "--pid",
                &pids[0].to_string(),
                "--duration",
                "600s",
                "--quiet",
            ]))),
            Mode::TrapdetectOther => {
                let idle = Proc::spawn("sleep", Command::new("sleep").arg("600"));
                let t = Tracer::start(&[
                    "--pid",
                    &idle.pid().to_string(),
                    "--duration",
                    "600s",
                    "--quiet",
                ]);
                Some(Inner::Other(t, idle))
            }
            Mode::Strace => {
                let mut cmd = Command::new("strace");
                cmd.args(["-f", "-qq", "-o", "/dev/null"]);
                for p in pids {
                    cmd.arg("-p").arg(p.to_string());
                }
                let c = cmd
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("strace")?;
                // strace has no ready line with -qq: give it time to seize every thread.
                std::thread::sleep(Duration::from_millis(500));
                Some(Inner::Strace(c))
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
            Some(Inner::Other(t, _idle)) => {
                let _ = t.interrupt();
            }
            Some(Inner::Strace(mut c)) => {
                unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
                let _ = c.wait();
            }
        }
    }
}

/// One statloop run under `mode`: (iterations/s, syscalls per iteration).
fn statloop(mode: Mode, kind: &str, path: &str, secs: f64) -> Result<(f64, f64)> {
    let mut child = Command::new(target_file("statloop"))
        .args([kind, &secs.to_string(), path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("statloop")?;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line)?;
    let attached = Attached::to(mode, &[child.id()])?;
    writeln!(child.stdin.as_mut().unwrap(), "go")?;
    line.clear();
    out.read_line(&mut line)?;
    drop(attached);
    let _ = child.wait();
    let mut it = line.split_whitespace().map(|v| v.parse::<f64>());
    match (it.next(), it.next()) {
        (Some(Ok(rate)), Some(Ok(per))) => Ok((rate, per)),
        _ => bail!("statloop printed {line:?}"),
    }
}

use crate::util::wrk;

pub fn run() -> Result<()> {
    if std::env::var("BENCH_TRACE_ONLY").as_deref() == Ok("families") {
        return super::trace_families::run();
    }
    let modes = [
        Mode::Untraced,
        Mode::Trapdetect,
        Mode::TrapdetectOther,
        Mode::Strace,
    ];
    // 1. Syscall loops.
    // `getppid` is not a traced syscall: what enabling syscall tracepoints costs everything else.
    for (kind, path) in [
        ("stat", "/etc/hostname"),
        ("chdir", "/usr/share/doc"),
        ("getppid", "/"),
    ] {
        let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
        let mut per = 1.0;
        for round in 0..ROUNDS {
            // Rotate the order each round so drift (thermal, other load) hits every mode alike.
            for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
                let m = &modes[i];
                let (r, p) = statloop(*m, kind, path, 2.0)?;
                rates[i].push(r);
                per = p;
            }
        }
        let base = median(&rates[0]);
        let what = if kind == "getppid" {
            "a syscall trapdetect does not trace".to_string()
        } else {
            format!("{per} traced syscalls per iteration")
        };
        println!("\n{kind} loop ({what}), median of {ROUNDS} interleaved 2 s runs:");
        for (i, m) in modes.iter().enumerate() {
            let r = median(&rates[i]);
            let added_us = (1e6 / r - 1e6 / base) / per;
            println!(
                "  {:<26} {:>10.0} it/s  {:>6.1} % of untraced  {:>+7.3} µs per syscall",
                m.name(),
                r,
                100.0 * r / base,
                added_us
            );
            record(
                &format!("trace.{kind}_loop.{}", m.name()),
                serde_json::json!({"it_per_s": r, "ratio": r / base, "added_us_per_syscall": added_us}),
            );
        }
    }
    // 2. php-fpm + nginx at saturation (cwd on ext4: the overhead, not a trap).
    let run_dir = TempDir::new("bench-run");
    let stack = PhpStack::start(run_dir.path(), 4, "<?php echo \"ok\\n\";");
    let mut pids = vec![stack.fpm.pid()];
    pids.extend(stack.workers());
    let _ = wrk(&stack.url(), 2)?; // warm up
    // The server itself traced or not (tracing another pid is covered by the loops above).
    let modes = [Mode::Untraced, Mode::Trapdetect, Mode::Strace];
    let mut rates: Vec<Vec<f64>> = vec![vec![]; modes.len()];
    for round in 0..ROUNDS {
        for i in (0..modes.len()).map(|k| (k + round) % modes.len()) {
            let m = &modes[i];
            let attached = Attached::to(*m, &pids)?;
            rates[i].push(wrk(&stack.url(), 4)?);
            drop(attached);
        }
    }
    let base = median(&rates[0]);
    println!(
        "\nphp-fpm (4 workers) + nginx, wrk -t1 -c8, median of {ROUNDS} interleaved 4 s runs:"
    );
    for (i, m) in modes.iter().enumerate() {
        let r = median(&rates[i]);
        println!(
            "  {:<26} {:>8.0} req/s  {:>6.1} % of untraced  ({:+.1} % throughput)",
            m.name(),
            r,
            100.0 * r / base,
            100.0 * (r / base - 1.0)
        );
        record(
            &format!("trace.php_fpm.{}", m.name()),
            serde_json::json!({"req_per_s": r, "ratio": r / base}),
        );
    }
    drop(stack);
    // 3. What each probe family costs (issue 28).
    super::trace_families::run()
}
