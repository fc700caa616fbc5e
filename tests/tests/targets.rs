//! The server named instead of given by pid (issue 24): `--comm`, `--unit`, `--cgroup`,
//! `--container` resolve to the root of one process tree in `trace`, `run` and `preflight`,
//! say how in the report, and refuse what names nothing or several servers (exit 2).
//! Containers and units are the cgroups their runtimes create (`system.slice/docker-ID.scope`,
//! `system.slice/NAME.service`), made by the test in systemd's hierarchy: trapdetect matches
//! them through /proc/PID/cgroup, as it would a runtime's.

use std::time::Duration;

use serde_json::Value;
use trapdetect_e2e::{
    TempDir,
    cgroup::{NamedCgroup, container_id},
    require_root,
    servers::{Proc, StaticNginx, tree_of},
    trapdetect, unique,
    zoo::{Gunicorn, Work},
};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs trapdetect and returns (exit code, JSON report on stdout, stderr).
fn json_run(args: &[&str]) -> (i32, Value, String) {
    let out = trapdetect(args, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, err)
}

#[test]
fn a_server_named_by_comm_unit_cgroup_or_container_is_its_tree() {
    if !require_root("a_server_named_by_comm_unit_cgroup_or_container_is_its_tree") {
        return;
    }
    let _s = serial();
    let id = container_id();
    let unit = unique("td-e2e-");
    // Declared first, dropped last: the servers stop before their groups are removed.
    let container = NamedCgroup::create(&format!("system.slice/docker-{id}.scope"));
    let service = NamedCgroup::create(&format!("system.slice/{unit}.service"));
    let cwd = TempDir::new("targets");
    let nginx = StaticNginx::start_with(
        &[("index.html", b"ok\n")],
        trapdetect_e2e::servers::StaticOptions {
            workers: 2,
            ..Default::default()
        },
    );
    let master = nginx.nginx.pid();
    let nginx_tree = tree_of(master).len();
    assert_eq!(nginx_tree, 3, "master and 2 workers");
    assert_eq!(service.add_tree(master), 3);
    let g = Gunicorn::start(cwd.path(), 2, Work::Plain);
    let arbiter = g.master.pid();
    assert_eq!(container.add_tree(arbiter), 3);
    // A `docker exec` session: started later in the container's group, not a child of its
    // init. It is named, not traced.
    let mut exec = Proc::spawn("sleep", std::process::Command::new("sleep").arg("60"));
    assert_eq!(container.add_tree(exec.pid()), 1);

    // By name: nginx's master, the root of its 3 processes.
    let (code, r, err) = json_run(&["trace", "--comm", "nginx", "-d", "1s", "--json", "-q"]);
    assert_eq!(code, 0, "{err}");
    let how = format!("--comm nginx: pid {master} (nginx), the root of 3 processes named nginx");
    assert_eq!(r["target"]["pid"], master, "{err}");
    assert_eq!(r["target"]["processes"], 3);
    assert_eq!(r["target"]["selected_by"], how.as_str());
    assert!(err.contains(&format!("trapdetect: {how}")), "{err}");

    // By unit, bare name and full.
    for name in [unit.clone(), format!("{unit}.service")] {
        let (code, r, err) = json_run(&["trace", "--unit", &name, "-d", "1s", "--json", "-q"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(r["target"]["pid"], master);
        assert_eq!(
            r["target"]["selected_by"],
            format!(
                "--unit {name}: pid {master} (nginx), the root of 3 processes in unit {unit}.service"
            )
            .as_str()
        );
    }

    // By container id prefix: the init (gunicorn's arbiter) and its workers; the exec named.
    let short = &id[..12];
    let exec_pid = exec.pid();
    let arbiter_comm = std::fs::read_to_string(format!("/proc/{arbiter}/comm")).unwrap();
    let arbiter_comm = arbiter_comm.trim_end();
    let container_how = |flag: &str| {
        format!(
            "{flag}: pid {arbiter} ({arbiter_comm}), the root of 3 processes in {}; not traced, started later beside it: pid {exec_pid} (sleep)",
            if flag.starts_with("--container") {
                format!("container {short}")
            } else {
                format!("cgroup {}", container.path)
            }
        )
    };
    let (code, r, err) = json_run(&["trace", "--container", short, "-d", "1s", "--json", "-q"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["target"]["pid"], arbiter);
    assert_eq!(r["target"]["processes"], 3);
    assert_eq!(
        r["target"]["selected_by"],
        container_how(&format!("--container {short}")).as_str()
    );
    // By the name of what its interpreter runs: no process's comm is gunicorn (python3 -m
    // gunicorn), its command line says it.
    let (code, r, err) = json_run(&["trace", "--comm", "gunicorn", "-d", "1s", "--json", "-q"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["target"]["pid"], arbiter);
    assert_eq!(
        r["target"]["selected_by"],
        format!(
            "--comm gunicorn: pid {arbiter} ({arbiter_comm}), the root of 3 processes named gunicorn (on its command line)"
        )
        .as_str()
    );
    // By its cgroup: the directory under the mount, and the path /proc shows.
    let dir = container.dir();
    for arg in [dir.to_str().unwrap(), container.path.as_str()] {
        let (code, r, err) = json_run(&["preflight", "--cgroup", arg, "--json", "--no-sample"]);
        assert!(code == 0 || code == 1, "{err}");
        assert_eq!(r["target"]["pid"], arbiter, "{arg}: {err}");
        assert_eq!(
            r["target"]["selected_by"],
            container_how(&format!("--cgroup {}", arg)).as_str()
        );
    }
    // `run` with the built-in load, by container: the arbiter's tree served the requests.
    let (code, r, err) = json_run(&[
        "run",
        "--container",
        short,
        "--url",
        &g.url(),
        "--rate",
        "50",
        "-d",
        "2s",
        "--json",
        "-q",
    ]);
    assert!(code == 0 || code == 1, "{err}");
    assert_eq!(r["target"]["pid"], arbiter, "{err}");
    assert_eq!(
        r["target"]["selected_by"],
        container_how(&format!("--container {short}")).as_str()
    );
    assert!(
        r["verdict"]["delivered_per_s"].as_f64().unwrap_or(0.0) > 40.0,
        "{}",
        r["verdict"]
    );
    exec.stop();
    drop(g);
    drop(nginx);
}

#[test]
fn a_name_that_matches_nothing_or_two_servers_is_refused_with_exit_2() {
    if !require_root("a_name_that_matches_nothing_or_two_servers_is_refused_with_exit_2") {
        return;
    }
    let _s = serial();
    let dir = TempDir::new("targets-twins");
    // Two separate processes with one name of our own.
    let name = format!("tdtwin{}", std::process::id() % 100_000);
    let bin = dir.path().join(&name);
    std::fs::copy("/bin/sleep", &bin).unwrap();
    let a = Proc::spawn(&name, std::process::Command::new(&bin).arg("60"));
    let b = Proc::spawn(&name, std::process::Command::new(&bin).arg("60"));
    let (mut first, mut second) = (a.pid(), b.pid());
    let start = |p: u32| {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap();
        let rest = s.rsplit(')').next().unwrap().to_string();
        rest.split_whitespace()
            .nth(19)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    if (start(second), second) < (start(first), first) {
        std::mem::swap(&mut first, &mut second);
    }
    for cmd in ["trace", "preflight", "run"] {
        let mut args = vec![cmd, "--comm", name.as_str(), "--json"];
        if cmd == "run" {
            args.extend(["--url", "http://127.0.0.1:9/", "--rate", "10", "-d", "1s"]);
        }
        let (code, _, err) = json_run(&args);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert_eq!(
            err.trim_end(),
            format!(
                "trapdetect: --comm {name}: 2 separate processes are named {name} (pid {first} ({name}), pid {second} ({name})); give the one to trace with --pid"
            ),
            "{cmd}"
        );
    }
    drop(a);
    drop(b);
    let (code, _, err) = json_run(&["trace", "--comm", &name, "--json"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        format!("trapdetect: --comm {name}: no process is running named {name}")
    );
    let (code, _, err) = json_run(&["trace", "--container", "0123456789ab", "--json"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        "trapdetect: --container 0123456789ab: no process is running in a container with that id or name"
    );
    let (code, _, err) = json_run(&["trace", "--cgroup", "/", "--json"]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim_end(),
        "trapdetect: --cgroup /: the root cgroup holds every process; name the server's own cgroup"
    );
    // One way of naming the target at a time.
    let (code, _, err) = json_run(&["trace", "--comm", "nginx", "--pid", "1", "--json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}
