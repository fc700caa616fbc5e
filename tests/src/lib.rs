//! Fixtures for trapdetect's end-to-end tests: the binary under test, real servers (php-fpm,
//! nginx), a slow FUSE filesystem, network namespaces. Everything a fixture starts or mounts is
//! torn down by its `Drop`, also when a test panics.

pub mod slowfs;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

/// The release (or debug) `trapdetect` binary next to this test executable.
pub fn bin() -> PathBuf {
    target_file("trapdetect")
}

/// A binary built by this workspace, found next to the running test executable
/// (`target/<profile>/deps/<test>` → `target/<profile>/<name>`).
pub fn target_file(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let p = profile_dir.join(name);
    assert!(
        p.exists(),
        "{} not built: run `cargo xtask test` (it builds it first)",
        p.display()
    );
    p
}

/// True when running as root; otherwise prints why the test is skipped. CI runs as root, so a
/// skip there would be visible in the log.
pub fn require_root(test: &str) -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIP {test}: needs root (eBPF, mounts, namespaces)");
    }
    root
}

/// A name unique to this process and call, for namespaces, sockets and directories.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A temporary directory removed on drop (on ext4 under /tmp unless told otherwise).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `/tmp/trapdetect-e2e-<unique>`.
    pub fn new(prefix: &str) -> Self {
        let p = std::env::temp_dir().join(unique(&format!("trapdetect-e2e-{prefix}-")));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the trapdetect binary with `args`, bounded by `limit`.
pub fn trapdetect(args: &[&str], limit: Duration) -> Output {
    run_bounded(Command::new(bin()).args(args), limit)
}

/// Runs a command to completion, killing it after `limit`.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "{cmd:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("wait_with_output")
}

/// Waits until `f` returns true, polling every 20 ms, or panics after `limit` naming `what`.
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses stdout as JSON, with the output in the panic message when it is not.
pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e})\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests in one process).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}
