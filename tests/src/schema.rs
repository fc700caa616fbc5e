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
