//! `trapdetect wait-drain`: for harness scripts between benchmark points. Polls the TIME_WAIT
//! sockets on one port (local or remote) until fewer than N remain, then exits 0; at the
//! timeout it exits 1 with the count it saw. Each poll is one sock_diag dump filtered to
//! TIME_WAIT in the kernel, on a socket opened once inside the target's namespace.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{
    error::{Error, Result, exit},
    host::net::{Netns, TimeWaitWatch},
    util::{parse_duration, print},
};

/// Flags of `trapdetect wait-drain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0  the count dropped below --below
  1  --timeout passed first (the last count and the time the kernel's timers still need are printed)
  2  bad usage or input (no such process or namespace)
  3  the sockets could not be counted (netlink and /proc/net/tcp both failed)
  4  no privilege to enter the namespace (CAP_SYS_ADMIN)")]
pub struct WaitDrainArgs {
    /// Port whose TIME_WAIT sockets are counted, as local or as remote port (the server's port
    /// covers both the server's and the clients' TIME_WAIT).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Succeed once fewer than N TIME_WAIT sockets remain on the port.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub below: u64,
    /// Give up after this long (exit 1). TIME_WAIT lasts 60 s on Linux.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Count in the network namespace of this process (default: trapdetect's own).
    #[arg(long, short = 'p', value_name = "PID", conflicts_with = "netns")]
    pub pid: Option<u32>,
    /// Count in this named namespace (as in `ip netns list`).
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// Time between counts.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration)]
    pub interval: Duration,
    /// Print the outcome as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr (errors, warnings and the start line remain).
    #[arg(long, short = 'q', conflicts_with = "progress")]
    pub quiet: bool,
    /// Progress on stderr even when it is not a terminal (a line per change, for a log).
    #[arg(long)]
    pub progress: bool,
}

/// Runs the command; returns the exit code (0 drained, 1 timed out).
pub fn run(a: WaitDrainArgs) -> Result<i32> {
    if a.interval < Duration::from_millis(10) {
        return Err(Error::usage(
            "--interval below 10ms would spend the CPU the benchmark needs",
        ));
    }
    let ns = match (&a.pid, &a.netns) {
        (Some(p), _) => Netns::Pid(*p),
        (None, Some(n)) => Netns::named(n).map_err(Error::usage)?,
        (None, None) => Netns::Own,
    };
    let mut watch = TimeWaitWatch::open(&ns)?;
    let progress = crate::util::Progress::new(a.quiet, a.progress);
    {
        eprintln!(
            "wait-drain: TIME_WAIT on port {} in netns {} ({}): waiting for fewer than {}, at most {:.1} s",
            a.port,
            ns.label(),
            watch.source,
            a.below,
            a.timeout.as_secs_f64()
        );
    }
    let start = Instant::now();
    let mut last: Option<(Instant, u64)> = None;
    let mut samples = 0u64;
    loop {
        let s = watch.sample(a.port)?;
        samples += 1;
        let elapsed = start.elapsed();
        let eta = s.until_below(a.below);
        let drained = s.count < a.below;
        if drained || elapsed >= a.timeout {
            progress.clear();
            let line = if drained {
                format!(
                    "wait-drain: port {}: {} TIME_WAIT, fewer than {} after {:.1} s\n",
                    a.port,
                    s.count,
                    a.below,
                    elapsed.as_secs_f64()
                )
            } else {
                format!(
                    "wait-drain: timed out after {:.1} s: port {} still has {} TIME_WAIT sockets (waiting for fewer than {}); their timers put that {:.1} s away\n",
                    elapsed.as_secs_f64(),
                    a.port,
                    s.count,
                    a.below,
                    eta.as_secs_f64()
                )
            };
            if a.json {
                let v = json!({
                    "schema": "trapdetect.wait-drain/1",
                    "port": a.port,
                    "below": a.below,
                    "drained": drained,
                    "time_wait": s.count,
                    "elapsed_s": elapsed.as_secs_f64(),
                    "expected_below_in_s": eta.as_secs_f64(),
                    "samples": samples,
                    // The text label quotes a name in backticks; JSON carries it bare.
                    "netns": ns.label().trim_matches('`'),
                    "source": watch.source,
                });
                print(&format!("{v}\n"))?;
            } else {
                print(&line)?;
            }
            return Ok(if drained { exit::OK } else { exit::FAIL });
        }
        let due = match last {
            None => true,
            Some((t, c)) => {
                t.elapsed() >= Duration::from_secs(1)
                    && (c != s.count || t.elapsed() >= Duration::from_secs(5))
            }
        };
        if due {
            progress.show(&format!(
                "wait-drain: {:5.1} s  port {}: {} TIME_WAIT; fewer than {} in {:.1} s by their timers",
                elapsed.as_secs_f64(),
                a.port,
                s.count,
                a.below,
                eta.as_secs_f64()
            ));
            last = Some((Instant::now(), s.count));
        }
        std::thread::sleep(a.interval.min(a.timeout.saturating_sub(elapsed)));
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn parse(args: &[&str]) -> Result<super::WaitDrainArgs, clap::Error> {
        let mut v = vec!["trapdetect", "wait-drain"];
        v.extend(args);
        match Cli::try_parse_from(v)?.command {
            Some(Command::WaitDrain(a)) => Ok(a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags() {
        let a = parse(&["--port", "8080", "--below", "1000", "--timeout", "65s"]).unwrap();
        assert_eq!((a.port, a.below), (8080, 1000));
        assert_eq!(a.timeout, std::time::Duration::from_secs(65));
        assert_eq!(a.interval, std::time::Duration::from_millis(200));
        let a = parse(&[
            "--port",
            "1",
            "--below",
            "1",
            "--timeout",
            "1s",
            "--netns",
            "b",
            "--interval",
            "50ms",
        ])
        .unwrap();
        assert_eq!(a.netns.as_deref(), Some("b"));
        for bad in [
            vec!["--port", "0", "--below", "1", "--timeout", "1s"],
            vec!["--port", "70000", "--below", "1", "--timeout", "1s"],
            vec!["--port", "80", "--below", "0", "--timeout", "1s"],
            vec!["--port", "80", "--below", "5"],
            vec![
                "--port",
                "80",
                "--below",
                "5",
                "--timeout",
                "1s",
                "--pid",
                "1",
                "--netns",
                "x",
            ],
        ] {
            assert_eq!(parse(&bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
    }
}
