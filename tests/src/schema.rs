//! A minimal JSON Schema (draft 2020-12 subset) validator for the checked-in wire formats.
//!
//! The checked-in schemas use only: type (string or list), properties, required,
//! additionalProperties (bool or schema), items, enum, const, minimum, $ref to #/$defs/...
//! Anything else in the schema is rejected, so the schema cannot silently say more than this
//! checks.

use std::path::PathBuf;

use serde_json::Value;

/// Reads a checked-in schema from docs/.
pub fn load(name: &str) -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(name);
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .expect("schema is JSON")
}

/// Panics with the path of the first violation when `v` does not match `root`.
pub fn validate(root: &Value, v: &Value, at: &str) {
    check(root, root, v, at);
}

fn check(root: &Value, s: &Value, v: &Value, at: &str) {
    let s = s
        .as_object()
        .unwrap_or_else(|| panic!("schema at {at} is not an object"));
    for k in s.keys() {
        assert!(
            [
                "$schema",
                "$id",
                "$defs",
                "title",
                "description",
                "type",
                "properties",
                "required",
                "additionalProperties",
                "items",
                "enum",
                "const",
                "minimum",
                "$ref",
            ]
            .contains(&k.as_str()),
            "schema keyword {k} at {at} is not supported by this validator"
        );
    }
    if let Some(r) = s.get("$ref") {
        let name = r
            .as_str()
            .unwrap()
            .strip_prefix("#/$defs/")
            .expect("local $ref");
        return check(root, &root["$defs"][name], v, at);
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().map(|x| x.as_str().unwrap()).collect(),
            _ => panic!("bad type at {at}"),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => panic!("unknown type {t}"),
        });
        assert!(ok, "{at}: {v} is not {types:?}");
    }
    if let Some(e) = s.get("enum") {
        assert!(e.as_array().unwrap().contains(v), "{at}: {v} not in {e}");
    }
    if let Some(c) = s.get("const") {
        assert_eq!(v, c, "{at}");
    }
    if let (Some(m), Some(x)) = (s.get("minimum"), v.as_f64()) {
        assert!(x >= m.as_f64().unwrap(), "{at}: {x} < {m}");
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(o.contains_key(r.as_str().unwrap()), "{at}: missing {r}");
        }
        for (k, x) in o {
            let sub = format!("{at}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(ps) => check(root, ps, x, &sub),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => panic!("{sub}: not in the schema"),
                    Some(Value::Bool(true)) | None => {}
                    Some(ap) => check(root, ap, x, &sub),
                },
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(root, items, x, &format!("{at}[{i}]"));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// A run section as `trapdetect run --json` prints it (one second, trimmed to what the
    /// schema requires plus the optional charged_cores).
    fn run_report() -> serde_json::Value {
        let classes = json!({"path": 0.0, "file_io": 0.0, "file_lock": 0.0, "futex": 0.4,
            "wait_work": 1.5, "sleep": 0.0, "other": 0.0, "no_syscall": 0.0, "unknown": 0.0});
        json!({
            "schema": "trapdetect.report/1", "command": "run", "version": "0.1.0",
            "findings": [], "exit_code": 0,
            "measurement": {"trusted": true, "problems": [], "notes": [], "counters": {}},
            "run": {
                "window_s": 5.0, "cores": 2.0, "workers": 4, "classified": true,
                "thread_seconds": {"on_cpu": 4.1, "run_queue": 0.2, "off_cpu": classes},
                "switches": 1200, "locks": [], "quota": null,
                "timeline": [{
                    "t_s": 0, "offered": 100, "ok_2xx": 100, "non_2xx": 0, "errors": {},
                    "p99_us": 950.0, "in_flight": 3, "cores_busy": 0.9,
                    "target_cpus_busy": 0.9, "noise_cores": 0.0, "target_cores": 0.8,
                    "charged_cores": 0.8, "run_queue": 0.04, "off_cpu": classes, "threads": 5,
                    "busy_threads": 1, "path_calls": 300, "fs_ops": {"/": 12},
                    "accept_queue": 0, "throttled_periods": null, "throttled_ms": null,
                    "marks": []
                }],
                "load_columns_missing": [], "delivered_basis": "generator-2xx",
                "classes_method": "exact"
            }
        })
    }

    fn check(v: &serde_json::Value) -> Result<(), String> {
        let s = super::load("report.schema.json");
        std::panic::catch_unwind(|| super::validate(&s, v, "$")).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "panic".into())
        })
    }

    #[test]
    fn the_run_section_is_described_field_by_field() {
        assert_eq!(check(&run_report()), Ok(()));
        // A field the schema does not know, one it requires missing, a wrong type, an unknown
        // mark or off-CPU class: each refused where it is.
        let mut v = run_report();
        v["run"]["timeline"][0]["extra"] = json!(1);
        assert_eq!(
            check(&v),
            Err("$.run.timeline[0].extra: not in the schema".into())
        );
        let mut v = run_report();
        v["run"]["timeline"][0]
            .as_object_mut()
            .unwrap()
            .remove("in_flight");
        assert_eq!(
            check(&v),
            Err("$.run.timeline[0]: missing \"in_flight\"".into())
        );
        let mut v = run_report();
        v["run"]["workers"] = json!(-1);
        assert!(check(&v).unwrap_err().starts_with("$.run.workers: -1 < 0"));
        let mut v = run_report();
        v["run"]["timeline"][0]["marks"] = json!(["slow"]);
        assert!(
            check(&v)
                .unwrap_err()
                .starts_with("$.run.timeline[0].marks[0]: \"slow\" not in")
        );
        let mut v = run_report();
        v["run"]["thread_seconds"]["off_cpu"]["gc"] = json!(0.1);
        assert_eq!(
            check(&v),
            Err("$.run.thread_seconds.off_cpu.gc: not in the schema".into())
        );
    }
}
