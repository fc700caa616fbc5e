//! `trapdetect trace --from-strace FILE`: a real `strace -f -tt -T -y` log of php-fpm whose
//! working directory is 7 levels deep in the slow FUSE mount, read without eBPF: the same
//! exact per-request figures as the eBPF tracer (tests/tests/trace.rs), from the log alone.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, json, require_root, servers::PhpStack, servers::http_get, slowfs::SlowFs, trapdetect,
    wait_until,
};

const N: u32 = 37;

/// The php-fpm master and its workers.
fn tree(master: u32) -> Vec<u32> {
    let mut out = vec![master];
    let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
        .unwrap_or_default();
    out.extend(
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok()),
    );
    out
}

#[test]
fn a_real_strace_log_of_php_fpm_on_fuse_gives_the_exact_lookups() {
    if !require_root("a_real_strace_log_of_php_fpm_on_fuse_gives_the_exact_lookups") {
        return;
    }
    let fs = SlowFs::mount(200, |_| {});
    let deep = SlowFs::deep_dir(&fs.backing, &fs.mount, 7);
    let stack = PhpStack::start(&deep, 2, "<?php echo \"ok\\n\";");
    let dir = TempDir::new("strace");
    let log = dir.path().join("fpm.strace");
    let mountinfo = dir.path().join("mountinfo");
    std::fs::copy(format!("/proc/{}/mountinfo", stack.fpm.pid()), &mountinfo).unwrap();
    // The one-line capture docs/sample.md gives, on the master and its running workers.
    let mut cmd = Command::new("strace");
    cmd.args(["-f", "-tt", "-T", "-y", "-o"]).arg(&log);
    for p in tree(stack.fpm.pid()) {
        cmd.args(["-p", &p.to_string()]);
    }
    let mut strace = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strace (cargo xtask setup installs it)");
    // Attached once the workers' blocked accept shows in the log.
    wait_until("strace attached", Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("accept"))
    });
    for i in 0..N {
        let (status, _) = http_get(stack.port, "/").unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(status, 200);
    }
    // SAFETY: kill(2) on the strace this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(strace.id() as i32, libc::SIGINT) }, 0);
    strace.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    // A real log has what the parser must join: split calls and several pids.
    assert!(text.contains("<unfinished ...>") && text.contains("resumed>"));

    let out = trapdetect(
        &[
            "trace",
            "--from-strace",
            log.to_str().unwrap(),
            "--mountinfo",
            mountinfo.to_str().unwrap(),
            "--json",
        ],
        Duration::from_secs(30),
    );
    let r: Value = json(&out);
    eprintln!("{}", serde_json::to_string_pretty(&r["findings"]).unwrap());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The workers accepted one FastCGI connection per request.
    assert_eq!(r["requests"]["count"], N);
    assert_eq!(r["requests"]["basis"], "accepted-connections");
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "fs.cwd-slow")
        .unwrap_or_else(|| panic!("{}", r["findings"]));
    assert_eq!(f["severity"], "fail");
    let e = &f["evidence"];
    assert_eq!(e["mount_point"], fs.mount.to_str().unwrap());
    assert_eq!(e["fs_type"], "fuse.slowfs");
    assert_eq!(e["cwd_depth_below_mount"], 7);
    // NTS php-fpm chdirs back to its cwd once per request: 7 lookups, exactly, as under eBPF.
    assert_eq!(e["lookups_per_request"], 7.0);
    assert_eq!(e["walk_syscalls"], "chdir:1");
    let row = r["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fs_type"] == "fuse.slowfs")
        .unwrap();
    assert_eq!(row["lookups"], 7 * N as u64);
    // strace's -T times each chdir back: 7 lookups at 200 µs at least.
    assert!(e["walk_latency_mean_us"].as_f64().unwrap() >= 1400.0, "{e}");
    assert_eq!(r["measurement"]["unknown_path_calls"], Value::Null);
    assert_eq!(r["measurement"]["counters"]["unknown_path_calls"], 0);
}
