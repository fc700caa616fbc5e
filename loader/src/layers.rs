//! The layer check: a unit test that fails when a module imports one of a higher layer, so
//! observations keep flowing one way (gather → judge → render → orchestrate). The layers and the
//! reasons are in docs/DESIGN.md; `ALLOWED` lists today's known exceptions, to be shrunk.

use std::path::{Path, PathBuf};

/// Layer of each top-level module of loader/src; lower may never import higher.
const LAYERS: &[(&str, u8)] = &[
    ("btf", 0),
    ("error", 0),
    ("escape", 0),
    ("figures", 0),
    ("input", 0),
    ("output", 0),
    ("util", 0),
    ("host", 1),
    ("probe", 1),
    ("version", 2),
    ("traps", 2),
    ("report", 3),
    ("agent", 4),
    ("load", 4),
    ("preflight", 4),
    ("trace", 4),
    ("sample", 4),
    ("strace", 4),
    ("cmd", 5),
    ("cli", 6),
    ("cli_checks", 6),
    // Fuzzing entry points reach every parser, whatever its layer.
    ("fuzzing", 7),
];

/// Known upward imports (file under loader/src, module imported). Each is a debt: move the
/// shared item down (as `figures` did for `round` and `Latency`), then delete the line.
const ALLOWED: &[(&str, &str)] = &[];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// Top-level modules a source names through `crate::` (plain paths and `use crate::{a, b::c}`).
fn imported(code: &str) -> Vec<String> {
    let mut out = vec![];
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (1, true);
            let mut ident = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start = true,
                    c if depth == 1 && start && (c.is_alphanumeric() || c == '_') => ident.push(c),
                    _ if !ident.is_empty() => {
                        out.push(std::mem::take(&mut ident));
                        start = false;
                    }
                    _ => {}
                }
            }
            if !ident.is_empty() {
                out.push(ident);
            }
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push(ident);
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// (file, imported module) pairs that climb, in product code (tests may reach anywhere).
fn upward_imports() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut out = vec![];
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let top = rel.split(['/', '.']).next().unwrap().to_string();
        let Some(own) = layer(&top) else {
            assert!(
                ["lib", "main", "layers"].contains(&top.as_str()),
                "{rel}: add its module to LAYERS"
            );
            continue;
        };
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for m in imported(code) {
            let theirs = layer(&m).unwrap_or_else(|| panic!("{rel}: crate::{m} not in LAYERS"));
            if theirs > own && !out.contains(&(rel.clone(), m.clone())) {
                out.push((rel.clone(), m));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_parser_sees_grouped_and_plain_paths() {
    let got = imported(
        "use crate::{error::{Error, Result}, escape};\nlet x = crate::traps::round(1.0, 2);",
    );
    assert_eq!(got, ["error", "escape", "traps"]);
}

#[test]
fn no_lower_layer_imports_a_higher_one() {
    let found = upward_imports();
    for (file, m) in &found {
        assert!(
            ALLOWED.contains(&(file.as_str(), m.as_str())),
            "{file} imports crate::{m}, a higher layer (docs/DESIGN.md, \"Layers\")"
        );
    }
    for (file, m) in ALLOWED {
        assert!(
            found.iter().any(|(f, x)| f == file && x == m),
            "{file} no longer imports crate::{m}: remove it from ALLOWED"
        );
    }
}
