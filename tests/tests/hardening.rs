//! Issue 11 (hardening), end to end: output files that must not follow symlinks, inputs that
//! must not be read without bound, reports that must not be lost silently, a Ctrl-C and a low
//! descriptor limit during setup, and the preflight JSON validated with every section it can
//! carry. Each test guards one item of the issue and failed before its fix.

use std::{
    os::unix::fs::symlink,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use trapdetect_e2e::{TempDir, bin, json, require_root, run_bounded, schema, trapdetect};

const LIMIT: Duration = Duration::from_secs(40);

fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One line on stderr naming `needle`, exit 2, nothing on stdout.
fn bad_input(args: &[&str], needle: &str) {
    let started = Instant::now();
    let out = trapdetect(args, LIMIT);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err}");
    assert!(err.starts_with("trapdetect: "), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    assert!(out.stdout.is_empty(), "{args:?}: no report on bad input");
    assert!(
        !err.contains("Tracing pid"),
        "{args:?}: refused before attaching"
    );
    // Refused up front, not after a window: every command here asks for 20 s or more.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{args:?} took {:?}",
        started.elapsed()
    );
}

/// Issue 11 item 1: no output flag writes through a symlink planted at its path.
#[test]
fn output_files_never_follow_a_symlink() {
    let dir = TempDir::new("symlink");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = dir.path().join("report");
    symlink(&victim, &link).unwrap();
    let l = link.to_str().unwrap();
    let me = std::process::id().to_string();
    let url = "http://127.0.0.1:9/";
    for args in [
        vec!["--pid", &me, "-d", "20s", "--json-out", l],
        vec!["--pid", &me, "-d", "20s", "--html", l],
        vec!["preflight", "--no-sample", "--json-out", l],
        vec!["preflight", "--no-sample", "--html", l],
        vec!["preflight", "--no-sample", "--mark", "--mark-file", l],
        vec![
            "load",
            "--url",
            url,
            "--rate",
            "1",
            "-d",
            "20s",
            "--json-out",
            l,
        ],
        vec![
            "load",
            "--url",
            url,
            "--rate",
            "1",
            "-d",
            "20s",
            "--samples-out",
            l,
        ],
    ] {
        bad_input(&args, "is a symbolic link; refusing to follow it");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }
    // Nothing else appeared in the directory: no temporary file left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["report", "victim"]);
}

/// Issue 11 item 4: an unusable output path is refused before anything is attached.
#[test]
fn output_paths_are_checked_before_the_window() {
    let dir = TempDir::new("outdir");
    let d = dir.path().to_str().unwrap();
    let missing = format!("{d}/no/such/dir/r.json");
    let me = std::process::id().to_string();
    bad_input(
        &["--pid", &me, "-d", "20s", "--json-out", d],
        "is a directory",
    );
    bad_input(
        &["--pid", &me, "-d", "20s", "--html", &missing],
        "does not exist",
    );
    bad_input(
        &["preflight", "--no-sample", "--json-out", "/dev/null"],
        "not a regular file",
    );
}

fn to_dev_full(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    // Not `run_bounded`: it pipes stdout.
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Issue 11 item 3: `>/dev/full` exited 0 with the report lost.
#[test]
fn a_report_lost_on_a_full_disk_is_a_failure() {
    for args in [
        &["preflight", "--no-sample", "--json"][..],
        &["preflight", "--no-sample"][..],
    ] {
        let out = to_dev_full(args);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(
            err.contains("cannot write the report on stdout: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// Issue 11 items 3 and 4 for trace: the report still printed when a file cannot be written,
/// and a full stdout is a failure (both after a real window).
#[test]
fn trace_keeps_its_report_when_an_output_file_fails() {
    if !require_root("trace_keeps_its_report_when_an_output_file_fails") {
        return;
    }
    let me = std::process::id().to_string();
    let out = to_dev_full(&["--pid", &me, "-d", "1s", "-q"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot write the report on stdout"),
        "{}",
        stderr(&out)
    );
    // A file that fails at the end (its directory removed during the window) is named, the
    // text report is still printed, and the exit code is not 0.
    let dir = TempDir::new("vanish");
    let target = dir.path().join("sub");
    std::fs::create_dir(&target).unwrap();
    let json_out = target.join("r.json");
    let child = Command::new(bin())
        .args(["--pid", &me, "-d", "3s", "-q", "--json-out"])
        .arg(&json_out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_dir_all(&target).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(text.contains("PROBES"), "text report printed: {text}");
    assert!(
        stderr(&out).contains(&format!("cannot write --json-out {}", json_out.display())),
        "{}",
        stderr(&out)
    );
}

/// Issue 11 item 2: /dev/zero, a FIFO, an oversized file: refused at once, exit 2.
#[test]
fn file_inputs_are_regular_files_with_a_cap() {
    let dir = TempDir::new("inputs");
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap();
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    let big = big.to_str().unwrap();
    let inc_zero = dir.path().join("inc-zero.conf");
    std::fs::write(&inc_zero, "include=/dev/zero\n").unwrap();
    let inc_zero = inc_zero.to_str().unwrap();
    let url = "http://127.0.0.1:9/";
    let load = |extra: &[&str]| {
        let mut v = vec!["load", "--url", url, "--rate", "1", "-d", "20s"];
        v.extend_from_slice(extra);
        v.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (load(&["--hosts", "/dev/zero"]), "not a regular file"),
        (load(&["--hosts", fifo]), "not a regular file"),
        (load(&["--hosts", big]), "larger than the 16 MiB limit"),
        (load(&["--body", "@/dev/zero"]), "not a regular file"),
        (
            vec![
                "preflight".into(),
                "--fpm-config".into(),
                "/dev/zero".into(),
            ],
            "not a regular file",
        ),
        (
            vec!["preflight".into(), "--fpm-config".into(), fifo.into()],
            "not a regular file",
        ),
        (
            vec!["preflight".into(), "--fpm-config".into(), big.into()],
            "larger than the 4 MiB limit",
        ),
        (
            vec!["preflight".into(), "--fpm-config".into(), inc_zero.into()],
            "not a regular file",
        ),
    ];
    for (args, needle) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        bad_input(&a, needle);
    }
}

/// Issue 11 item 2 for --btf (read only by a privileged trace).
#[test]
fn btf_from_a_device_is_bad_input() {
    if !require_root("btf_from_a_device_is_bad_input") {
        return;
    }
    let me = std::process::id().to_string();
    bad_input(
        &["--pid", &me, "-d", "20s", "--btf", "/dev/zero"],
        "--btf /dev/zero: not a regular file",
    );
}

/// Issue 11 item 9: an `include=` of a file that is not an FPM config must not print it.
#[test]
fn an_include_of_a_secret_does_not_print_it() {
    let dir = TempDir::new("secret");
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$y$j9T$s3cr3tHASH:19000:0:99999:7:::\n").unwrap();
    let conf = dir.path().join("fpm.conf");
    std::fs::write(&conf, format!("include={}\n", secret.display())).unwrap();
    let out = trapdetect(
        &["preflight", "--fpm-config", conf.to_str().unwrap()],
        LIMIT,
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(!stderr(&out).contains("s3cr3t"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not an FPM configuration"),
        "{}",
        stderr(&out)
    );
}

/// Issue 11 item 5: a Ctrl-C during setup ended nothing; the trace ran its whole window.
#[test]
fn ctrl_c_during_setup_ends_the_trace() {
    if !require_root("ctrl_c_during_setup_ends_the_trace") {
        return;
    }
    let me = std::process::id().to_string();
    let child = Command::new(bin())
        .args(["--pid", &me, "-d", "60s", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.code().is_some(),
        "exited, not killed by the signal: {:?}",
        out.status
    );
    assert!(
        stderr(&out).contains("interrupted after"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the 60 s window was cut short"
    );
}

/// Issue 11 item 6: a low soft descriptor limit is raised; a low hard one is named EMFILE.
#[test]
fn a_low_descriptor_limit_is_raised_or_named() {
    if !require_root("a_low_descriptor_limit_is_raised_or_named") {
        return;
    }
    let me = std::process::id().to_string();
    let prlimit_with = |limit: &str, extra: &[&str]| {
        run_bounded(
            Command::new("prlimit")
                .arg(format!("--nofile={limit}"))
                .arg("--")
                .arg(bin())
                .args(["--pid", &me, "-d", "1s", "-q", "--json"])
                .args(extra),
            LIMIT,
        )
    };
    let prlimit = |limit: &str| prlimit_with(limit, &[]);
    // Soft 16, hard 4096: raised at start, the trace runs and reports.
    let out = prlimit("16:4096");
    assert!(
        [0, 1].contains(&code(&out)),
        "{}: {}",
        code(&out),
        stderr(&out)
    );
    assert_eq!(json(&out)["measurement"]["trusted"], true);
    // Hard 16: cannot be raised; EMFILE is named, not the kernel blamed. With the eBPF backend
    // asked for, that is exit 4; under the default `auto` the same reason is said and the
    // trace samples /proc instead (issue 25).
    let out = prlimit_with("16:16", &["--backend", "ebpf"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 4, "{err}");
    assert!(err.contains("out of file descriptors (EMFILE"), "{err}");
    assert!(err.contains("ulimit -n"), "{err}");
    let out = prlimit("16:16");
    let err = stderr(&out);
    assert!([0, 1].contains(&code(&out)), "{}: {err}", code(&out));
    assert!(err.contains("out of file descriptors (EMFILE"), "{err}");
    assert!(err.contains("sampling /proc instead"), "{err}");
    assert_eq!(json(&out)["measurement"]["backend"]["name"], "sample");
}

/// Issue 11 item 7: preflight JSON broke its schema whenever an FPM config was read. Every
/// option that adds a section, validated on real output.
#[test]
fn preflight_json_matches_its_schema_with_every_section() {
    let s = schema::load("report.schema.json");
    let net = schema::load("net.schema.json");
    let dir = TempDir::new("schema");
    let mark = dir.path().join("kmsg.mark");
    let mark = mark.to_str().unwrap();
    // A config with an include, as Debian's has (the fixture's pool.d is relative to /usr).
    let pool = dir.path().join("www.conf");
    std::fs::write(
        &pool,
        format!(
            "[www]\nlisten = {}\npm = dynamic\npm.max_children = 5\npm.start_servers = 2\npm.min_spare_servers = 1\npm.max_spare_servers = 3\n",
            dir.path().join("www.sock").display()
        ),
    )
    .unwrap();
    let conf = dir.path().join("fpm.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nerror_log = {}\ninclude = {}\n",
            dir.path().join("fpm.log").display(),
            pool.display()
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap().to_string();
    let me = std::process::id().to_string();
    for extra in [
        vec![],
        vec!["--fpm-config", &conf],
        vec!["--rate", "100", "--timeout", "2s", "--port", "9"],
        vec!["--dir", "/tmp", "--pid", &me],
        vec!["--mark", "--mark-file", mark],
    ] {
        let mut a = vec!["preflight", "--json", "--no-sample"];
        a.extend_from_slice(&extra);
        let out = trapdetect(&a, LIMIT);
        assert!([0, 1].contains(&code(&out)), "{a:?}: {}", stderr(&out));
        let j = json(&out);
        schema::validate(&s, &j, "$");
        if j.get("network").is_some() {
            schema::validate(&net, &j["network"], "$.network");
        }
        if extra.first() == Some(&"--fpm-config") {
            assert!(j["fpm"].is_array(), "the fpm section is present");
        }
    }
}

/// Issue 11 item 9: values that were silently taken, and usage errors that lost their hint.
#[test]
fn smaller_usage_errors_are_refused_with_their_names() {
    let url = "http://127.0.0.1:9/";
    let me = std::process::id().to_string();
    let load = |extra: &[&'static str]| {
        let mut v: Vec<&str> = vec!["load", "--url", url, "--rate", "10", "-d", "20s"];
        v.extend_from_slice(extra);
        v
    };
    bad_input(&load(&["--path-mix", "/=-1"]), "weight `-1` in `/=-1`");
    bad_input(&load(&["--path-mix", "/=1.5"]), "weight `1.5`");
    bad_input(
        &load(&["--ignore", "gen.lagg"]),
        "--ignore gen.lagg: no such finding id (known: ",
    );
    bad_input(
        &["load", "--url", url, "--rate", "1e-9", "-d", "1s"],
        "schedules no request",
    );
    bad_input(&["preflight", "--port", "0"], "--port <PORT>");
    bad_input(
        &["--pid", &me, "-d", "20s", "--ignore", "fs.cwd-slwo"],
        "--ignore fs.cwd-slwo: no such finding id",
    );
    bad_input(&["load"], "--url <URL>");
    bad_input(
        &["preflight", "--jsn"],
        "tip: a similar argument exists: '--json'",
    );
}

/// Issue 11 item 9: a zombie pid gave "/proc/N/mountinfo: Invalid argument".
#[test]
fn a_zombie_pid_is_named_as_one() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id().to_string();
    trapdetect_e2e::wait_until("the child to become a zombie", LIMIT, || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
    });
    bad_input(&["preflight", "--no-sample", "--pid", &pid], "is a zombie");
    if unsafe { libc::geteuid() } == 0 {
        bad_input(&["--pid", &pid, "-d", "20s"], "is a zombie");
    }
    child.wait().unwrap();
}
