//! `/metrics`: the last window's report as the OpenMetrics families `report --openmetrics`
//! writes (findings, exit code, trust, per-request figures by filesystem), labelled by target
//! and test id instead of command, plus the rates a dashboard plots and the agent's own
//! counters. Labels are bounded: the target's name, the test id, finding ids and severities,
//! the target's mount points and filesystem types, syscall names; never a path looked up, a
//! pid or a URL.

use serde_json::Value;

use super::State;
use crate::report::export::{self, Family, Kind, Labels, write_families};

/// The exposition text for the state as it is now.
pub fn text(s: &State) -> String {
    write_families(&families(s))
}

/// The families [`text`] writes (and remote-write pushes).
pub fn families(s: &State) -> Vec<Family> {
    let target = s
        .last
        .as_ref()
        .and_then(|d| d.doc["target"]["comm"].as_str())
        .unwrap_or("")
        .to_string();
    let mut base: Labels = vec![("target", target)];
    if let Some(t) = &s.test_id {
        base.push(("test_id", t.clone()));
    }
    let mut fams = match &s.last {
        Some(d) => {
            let mut f = export::families(&d.doc, &base);
            f.extend(rates(&d.doc, &base));
            f
        }
        None => vec![],
    };
    fams.extend(own(s, &base));
    fams
}

/// Gauges of one sample each, from the report's figures where present.
fn one(name: &'static str, help: &'static str, base: &Labels, v: Option<f64>) -> Family {
    Family {
        kind: Kind::Gauge,
        name,
        help,
        samples: v.into_iter().map(|v| (base.clone(), v)).collect(),
    }
}

/// Requests and lookups per second by filesystem, TIME_WAIT and ephemeral ports, the
/// tracer's own cost.
fn rates(doc: &Value, base: &Labels) -> Vec<Family> {
    let net = &doc["network"];
    let mut lookups = Family {
        kind: Kind::Gauge,
        name: "trapdetect_lookups_per_second",
        help: "Path components resolved per second of the window, per filesystem.",
        samples: vec![],
    };
    for r in doc["filesystems"].as_array().into_iter().flatten() {
        let Some(v) = r["lookups_per_second"].as_f64() else {
            continue;
        };
        let mut l = base.clone();
        l.push(("mount_point", str_of(&r["mount_point"])));
        l.push(("fs_type", str_of(&r["fs_type"])));
        lookups.samples.push((l, v));
    }
    vec![
        one(
            "trapdetect_requests_per_second",
            "Requests the target served per second of the window (basis in /report).",
            base,
            doc["requests"]["rate_per_s"].as_f64(),
        ),
        lookups,
        one(
            "trapdetect_time_wait_sockets",
            "TIME_WAIT sockets in the target's network namespace at the window's census.",
            base,
            net["time_wait"]["count"].as_f64(),
        ),
        one(
            "trapdetect_ephemeral_ports_usable",
            "Ports of ip_local_port_range not reserved.",
            base,
            net["ephemeral"]["usable"].as_f64(),
        ),
        one(
            "trapdetect_ephemeral_ports_in_use",
            "Distinct local ports of that range held by sockets at the census.",
            base,
            net["ephemeral"]["distinct_ports_in_range"].as_f64(),
        ),
        one(
            "trapdetect_tracer_cpu_ratio",
            "CPU the tracer's eBPF programs took, share of one CPU over the window.",
            base,
            doc["tracer"]["bpf_cpu_pct"].as_f64().map(|p| p / 100.0),
        ),
    ]
}

/// The agent's own counters: windows, coverage, whether the target was traced.
fn own(s: &State, base: &Labels) -> Vec<Family> {
    let end = s.last.as_ref();
    let round = |v: f64| crate::traps::round(v, 3);
    vec![
        one(
            "trapdetect_agent_up",
            "1 when the last window traced the target, 0 when it found no target or failed.",
            base,
            Some(if s.up() { 1.0 } else { 0.0 }),
        ),
        one(
            "trapdetect_agent_windows",
            "Windows that traced the target since the agent started.",
            base,
            Some(s.windows as f64),
        ),
        one(
            "trapdetect_agent_windows_failed",
            "Windows that traced nothing (no target, or an error; the reason is on stderr).",
            base,
            Some(s.failed as f64),
        ),
        one(
            "trapdetect_agent_observed_seconds",
            "Seconds the windows that traced the target covered.",
            base,
            Some(round(s.observed_s)),
        ),
        one(
            "trapdetect_agent_unobserved_seconds",
            "Seconds no window covered: attach, detach and judging between windows, and \
             windows that traced nothing.",
            base,
            Some(round(s.unobserved_s)),
        ),
        one(
            "trapdetect_agent_remote_write_failures",
            "Pushes to --remote-write that failed (the reason is on stderr).",
            base,
            s.remote.then_some(s.push_failures as f64),
        ),
        one(
            "trapdetect_agent_window_end_timestamp_seconds",
            "When the last window that traced the target ended (Unix time).",
            base,
            end.map(|d| d.end_unix_s),
        ),
        one(
            "trapdetect_agent_window_seconds",
            "The last window's length.",
            base,
            end.and_then(|d| d.doc["window_s"].as_f64()),
        ),
    ]
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last window's report in families labelled by target and test id: the same
    /// findings and per-request figures as `report --openmetrics`, the rates, the agent's own
    /// gauges; before any window only the agent's own, with up 0.
    #[test]
    fn a_window_becomes_labelled_families_and_none_only_the_agents_own() {
        let mut s = State::new(Some("run-7".into()), false);
        let before = text(&s);
        assert!(before.ends_with("# EOF\n"), "{before}");
        assert!(
            before.contains("trapdetect_agent_windows{target=\"\",test_id=\"run-7\"} 0\n"),
            "{before}"
        );
        assert!(!before.contains("trapdetect_finding"), "{before}");
        let doc = serde_json::json!({
            "schema": "trapdetect.report/1", "command": "trace", "window_s": 2.0,
            "exit_code": 1, "measurement": {"trusted": true},
            "target": {"pid": 9, "comm": "php-fpm\"8"},
            "requests": {"count": 100, "rate_per_s": 50.0},
            "findings": [{"id": "fs.cwd-slow", "severity": "fail"}],
            "filesystems": [{"mount_point": "/mnt/slow", "fs_type": "fuse.slowfs",
                "lookups_per_request": 7.0, "lookups_per_second": 350.0,
                "syscall_ms_per_request": 2.5}],
            "network": {"time_wait": {"count": 12}, "ephemeral": {"usable": 28232,
                "distinct_ports_in_range": 3}},
            "tracer": {"bpf_cpu_pct": 0.5},
            "threads": {"window_s": 2.0, "threads": 3, "lost_intervals": 0,
                "thread_seconds": {"on_cpu": 0.5, "run_queue": 0.1, "wait_work": 4.2,
                    "path": 1.2}},
        });
        s.windows = 1;
        s.observed_s = 2.0;
        s.unobserved_s = 0.4321;
        s.last = Some(super::super::Done {
            json: doc.to_string(),
            doc,
            end_unix_s: 1_800_000_000.5,
        });
        let t = text(&s);
        let lines: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        let l = "target=\"php-fpm\\\"8\",test_id=\"run-7\"";
        for want in [
            format!("trapdetect_finding{{{l},id=\"fs.cwd-slow\",severity=\"fail\"}} 1"),
            format!("trapdetect_exit_code{{{l}}} 1"),
            format!(
                "trapdetect_lookups_per_request{{{l},mount_point=\"/mnt/slow\",fs_type=\"fuse.slowfs\"}} 7"
            ),
            format!(
                "trapdetect_syscall_seconds_per_request{{{l},mount_point=\"/mnt/slow\",fs_type=\"fuse.slowfs\"}} 0.0025"
            ),
            format!(
                "trapdetect_lookups_per_second{{{l},mount_point=\"/mnt/slow\",fs_type=\"fuse.slowfs\"}} 350"
            ),
            format!("trapdetect_requests_per_second{{{l}}} 50"),
            format!("trapdetect_time_wait_sockets{{{l}}} 12"),
            format!("trapdetect_ephemeral_ports_in_use{{{l}}} 3"),
            format!("trapdetect_tracer_cpu_ratio{{{l}}} 0.005"),
            format!("trapdetect_threads{{{l},state=\"on_cpu\"}} 0.25"),
            format!("trapdetect_threads{{{l},state=\"run_queue\"}} 0.05"),
            format!("trapdetect_threads{{{l},state=\"wait_work\"}} 2.1"),
            format!("trapdetect_threads{{{l},state=\"path\"}} 0.6"),
            format!("trapdetect_agent_up{{{l}}} 1"),
            format!("trapdetect_agent_windows{{{l}}} 1"),
            format!("trapdetect_agent_window_end_timestamp_seconds{{{l}}} 1800000000.5"),
            format!("trapdetect_agent_window_seconds{{{l}}} 2"),
            format!("trapdetect_agent_observed_seconds{{{l}}} 2"),
            format!("trapdetect_agent_unobserved_seconds{{{l}}} 0.432"),
        ] {
            assert!(lines.contains(&want.as_str()), "missing {want}:\n{t}");
        }
        // No pid, no command label.
        assert!(!t.contains("pid="), "{t}");
        assert!(!t.contains("command="), "{t}");
    }
}
