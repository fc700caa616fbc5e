//! The example harness in docs/harness.sh, run as a user would run it against a real server:
//! every step runs, every artifact is written and matches its checked-in schema.

use std::{path::Path, process::Command, time::Duration};

use serde_json::Value;
use trapdetect_e2e::{
    TempDir, bin, free_port, require_root, run_bounded, schema,
    servers::{Proc, http_get},
    wait_until,
};

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_example_harness_gates_loads_traces_and_keeps_every_artifact() {
    if !require_root("the_example_harness_gates_loads_traces_and_keeps_every_artifact") {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cwd = TempDir::new("harness-cwd");
    let out = TempDir::new("harness-out");
    let port = free_port();
    let server = Proc::spawn(
        "walkserver",
        Command::new("python3")
            .arg(root.join("fixtures/walkserver.py"))
            .arg("chdir")
            .arg(port.to_string())
            .arg(std::env::temp_dir())
            .current_dir(cwd.path()),
    );
    wait_until("walkserver to answer", Duration::from_secs(10), || {
        http_get(port, "/").is_ok()
    });
    let url = format!("http://127.0.0.1:{port}/");
    // The host's own noise and sockets are real findings on a shared CI machine, not this
    // test's subject: the harness takes site-specific ignores exactly for that.
    let ignores = "--ignore host.noise --ignore net.time-wait --ignore net.listen-overflow \
                   --ignore net.ephemeral-ports --ignore net.fd-limit";
    let o = run_bounded(
        Command::new("sh")
            .arg(root.join("../docs/harness.sh"))
            .args([&url, &port.to_string(), &server.pid().to_string()])
            .arg(out.path())
            .env("TRAPDETECT", bin())
            .env("RATES", "50 100")
            .env("DURATION", "2s")
            .env("PREFLIGHT_FLAGS", ignores),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "harness failed:\n{err}");

    let summary = std::fs::read_to_string(out.path().join("summary.txt")).unwrap();
    assert_eq!(
        summary,
        "preflight exit 0\nwait-drain before 50/s exit 0\nload 50/s exit 0\n\
         wait-drain before 100/s exit 0\nload 100/s exit 0\ntrace exit 0\npreflight --since exit 0\n",
        "{err}"
    );
    let version = std::fs::read_to_string(out.path().join("version.txt")).unwrap();
    assert!(version.contains("eBPF object  sha256:"), "{version}");

    let pre = read_json(&out.path().join("preflight.json"));
    schema::validate(&schema::load("report.schema.json"), &pre, "$");
    assert_eq!(pre["exit_code"], 0);
    for rate in [50u64, 100] {
        let l = read_json(&out.path().join(format!("load-{rate}.json")));
        schema::validate(&schema::load("load.schema.json"), &l, "$");
        assert_eq!(l["exit_code"], 0);
        // 2 s at `rate` per second, open loop: exactly rate × 2 arrivals in the window.
        assert_eq!(l["scheduled"], rate * 2, "{l:#}");
    }
    let t = read_json(&out.path().join("trace.json"));
    schema::validate(&schema::load("report.schema.json"), &t, "$");
    assert_eq!(t["measurement"]["trusted"], true, "{t:#}");
    assert_eq!(t["exit_code"], 0);
    assert!(t["requests"]["count"].as_u64().unwrap() > 0, "{t:#}");
    // The gate after the run compared the environment with the one saved before it.
    let before = read_json(&out.path().join("env-before.json"));
    assert_eq!(before["schema"], "trapdetect.snapshot/1");
    let after = read_json(&out.path().join("preflight-after.json"));
    schema::validate(&schema::load("report.schema.json"), &after, "$");
    assert_eq!(
        after["fingerprint"], before["fingerprint"],
        "same server, same machine"
    );
    assert!(
        after["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| !(f["id"] == "env.drift" && f["severity"] == "fail")),
        "{after:#}"
    );
}
