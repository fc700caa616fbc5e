//! Preflight speed, side by side in one run with the shell commands a harness would run to
//! look at the same things (findmnt, ss -s, ps, dmesg, cat of /proc and /sys files). Rounds
//! are interleaved; medians, the 90th percentile and the ratio are reported. Target: a full
//! preflight without the --pid sampling window under 200 ms on this machine, plus the
//! directory probe of each --dir (issue 23: about 40 ms a side; the `host-no-dir` case is the
//! rest alone, so the difference is the probe).

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Result, bail};
use trapdetect_e2e::{TempDir, target_file};

use super::{median, record};

const ROUNDS: usize = 30;
const TARGET_MS: f64 = 200.0;

/// What `preflight` reads, as a harness would read it with standard tools.
const SHELL_HOST: &str = "\
findmnt >/dev/null
ss -s >/dev/null
ps -eo pid,ppid,comm,time,rss,args >/dev/null
dmesg 2>/dev/null | tail -n 200 >/dev/null
cat /proc/loadavg /proc/meminfo /proc/vmstat /proc/stat /proc/version /proc/cpuinfo \
    /proc/pressure/cpu /proc/pressure/memory /proc/self/cgroup /proc/self/status >/dev/null 2>&1
cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us \
    /sys/fs/cgroup/cpu/cpu.stat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat >/dev/null 2>&1
cat /sys/devices/system/cpu/online /sys/devices/system/cpu/smt/control \
    /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor \
    /sys/devices/system/cpu/intel_pstate/no_turbo /sys/devices/system/cpu/cpufreq/boost \
    /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name >/dev/null 2>&1
df -T \"$DIR\" >/dev/null
";

/// The per-process part, for a run with --pid.
const SHELL_PID: &str = "\
readlink /proc/$PID/exe /proc/$PID/cwd >/dev/null
sha256sum /proc/$PID/exe >/dev/null
ls /proc/$PID/fd >/dev/null
cat /proc/$PID/status /proc/$PID/stat /proc/$PID/cgroup /proc/$PID/mountinfo >/dev/null
grep -h TracerPid /proc/$PID/task/*/status >/dev/null
";

fn time_ms(cmd: &mut Command) -> Result<f64> {
    let t = Instant::now();
    let st = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    // preflight exits 1 on a fail finding, which is a result, not a failure of the bench.
    if st.code().is_none_or(|c| c > 1) {
        bail!("{cmd:?} exited with {st}");
    }
    Ok(ms)
}

fn p90(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() as f64 * 0.9).ceil() as usize)
        .saturating_sub(1)
        .min(s.len() - 1)]
}

pub fn run() -> Result<()> {
    let bin = target_file("trapdetect");
    let dir = TempDir::new("bench-preflight");
    let d = dir.path().to_str().unwrap_or("/tmp").to_string();
    let mut server = Command::new("sleep")
        .arg("600")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .spawn()?;
    let pid = server.id().to_string();
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        // Without --dir: no directory probe (issue 23), the rest of the checks alone.
        (
            "host-no-dir",
            vec!["preflight".into(), "--no-sample".into(), "--json".into()],
            SHELL_HOST.replace("df -T \"$DIR\" >/dev/null\n", ""),
        ),
        (
            "host",
            vec![
                "preflight".into(),
                "--no-sample".into(),
                "--json".into(),
                "--dir".into(),
                d.clone(),
            ],
            SHELL_HOST.to_string(),
        ),
        (
            "pid",
            vec![
                "preflight".into(),
                "--no-sample".into(),
                "--json".into(),
                "--dir".into(),
                d.clone(),
                "--pid".into(),
                pid.clone(),
            ],
            format!("{SHELL_HOST}{SHELL_PID}"),
        ),
    ];
    let result = (|| -> Result<()> {
        for (name, args, script) in &cases {
            // Warm the page cache for both sides.
            time_ms(Command::new(&bin).args(args))?;
            time_ms(
                Command::new("sh")
                    .args(["-c", script])
                    .env("DIR", &d)
                    .env("PID", &pid),
            )?;
            let (mut ours, mut shell) = (vec![], vec![]);
            for round in 0..ROUNDS {
                let mut a = || -> Result<()> {
                    ours.push(time_ms(Command::new(&bin).args(args))?);
                    Ok(())
                };
                let mut b = || -> Result<()> {
                    shell.push(time_ms(
                        Command::new("sh")
                            .args(["-c", script])
                            .env("DIR", &d)
                            .env("PID", &pid),
                    )?);
                    Ok(())
                };
                // Alternate the order so drift hits both alike.
                if round % 2 == 0 {
                    a()?;
                    b()?;
                } else {
                    b()?;
                    a()?;
                }
            }
            let (m_ours, m_shell) = (median(&ours), median(&shell));
            println!(
                "\npreflight ({name}), median of {ROUNDS} interleaved runs:\n  trapdetect {} \n  {:<40} {:>7.1} ms  p90 {:>7.1} ms  {}\n  {:<40} {:>7.1} ms  p90 {:>7.1} ms\n  ratio trapdetect / shell: {:.2}",
                args.join(" "),
                "trapdetect preflight",
                m_ours,
                p90(&ours),
                if m_ours < TARGET_MS {
                    format!("(target < {TARGET_MS:.0} ms: met)")
                } else {
                    format!("(target < {TARGET_MS:.0} ms: MISSED)")
                },
                "shell equivalent (findmnt, ss -s, ps...)",
                m_shell,
                p90(&shell),
                m_ours / m_shell
            );
            record(
                &format!("preflight.{name}"),
                serde_json::json!({
                    "trapdetect_ms_median": m_ours,
                    "trapdetect_ms_p90": p90(&ours),
                    "shell_ms_median": m_shell,
                    "shell_ms_p90": p90(&shell),
                    "ratio": m_ours / m_shell,
                    "target_ms": TARGET_MS,
                    "met": m_ours < TARGET_MS,
                    "rounds": ROUNDS,
                }),
            );
        }
        Ok(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    std::thread::sleep(Duration::from_millis(10));
    result
}
