//! The layer check: a unit test that fails when a module imports one of a higher layer, so
//! observations keep flowing one way (gather → judge → render → orchestrate). The layers and the
//! reasons are in docs/DESIGN.md; `ALLOWED` lists today's known exceptions, to be shrunk. And
//! the size check: no product function over 100 lines, no command file over 300.

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
    ("sections", 4),
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

/// Every source under loader/src: its path there and its text.
fn sources() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// (file, imported module) pairs that climb, in product code (tests may reach anywhere).
fn upward_imports() -> Vec<(String, String)> {
    let mut out = vec![];
    for (rel, text) in sources() {
        let top = rel.split(['/', '.']).next().unwrap().to_string();
        let Some(own) = layer(&top) else {
            assert!(
                ["lib", "main", "layers"].contains(&top.as_str()),
                "{rel}: add its module to LAYERS"
            );
            continue;
        };
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

/// The longest function a product source may hold, and the longest file in `cmd/` (where each
/// command is flags, validation and one call): docs/DESIGN.md, "Adding a trap".
const MAX_FN_LINES: usize = 100;
const MAX_CMD_FILE_LINES: usize = 300;

/// `code` with string and character literals and comments blanked (braces in them are not
/// code); lines kept.
fn code_only(code: &str) -> String {
    let c: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            'r' if matches!(c.get(i + 1), Some('"' | '#'))
                && !c
                    .get(i.wrapping_sub(1))
                    .is_some_and(|p| p.is_alphanumeric() || *p == '_') =>
            {
                let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
                if c.get(i + 1 + hashes) != Some(&'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                let close: Vec<char> = std::iter::once('"')
                    .chain("#".repeat(hashes).chars())
                    .collect();
                while i < c.len() && !c[i..].starts_with(&close) {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
                i += close.len();
                out.push_str("\"\"");
                continue;
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
                continue;
            }
            // A character literal ('{', '\n', '\''), not a lifetime ('a).
            '\'' if c.get(i + 2) == Some(&'\'') || c.get(i + 1) == Some(&'\\') => {
                i += if c.get(i + 1) == Some(&'\\') { 2 } else { 1 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
                continue;
            }
            x => out.push(x),
        }
        i += 1;
    }
    out
}

/// (name, first line, lines) of every function in `code` longer than `max` lines.
fn long_functions(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let code = code_only(code);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = vec![];
    for (start, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let Some(at) = t.find("fn ") else { continue };
        let before = &t[..at];
        let head = before
            .split_whitespace()
            .all(|w| w.starts_with("pub") || ["const", "async", "unsafe", "extern"].contains(&w));
        if !head || !t[at + 3..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
            continue;
        }
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let mut depth = 0i32;
        let mut opened = false;
        for (n, body) in lines[start..].iter().enumerate() {
            for ch in body.chars() {
                match ch {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    ';' if !opened && depth == 0 => break,
                    _ => {}
                }
            }
            if !opened && body.trim_end().ends_with(';') {
                break;
            }
            if opened && depth == 0 {
                if n + 1 > max {
                    out.push((name.clone(), start + 1, n + 1));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn the_size_check_skips_literals_and_counts_bodies() {
    let code = "fn a() {\n    let s = \"}}\";\n    let c = '}';\n    // }\n    let r = r#\"{\"#;\n}\nfn b<'x>(v: &'x str) {\n\n\n}\nfn c();\n";
    assert_eq!(
        long_functions(code, 3),
        [("a".to_string(), 1, 6), ("b".to_string(), 7, 4)]
    );
    assert!(long_functions(code, 6).is_empty());
}

#[test]
fn no_function_is_over_100_lines_and_no_command_over_300() {
    let mut over = vec![];
    for (rel, text) in sources() {
        if rel.starts_with("cmd/") && text.lines().count() > MAX_CMD_FILE_LINES {
            over.push(format!("{rel}: {} lines", text.lines().count()));
        }
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (name, line, n) in long_functions(code, MAX_FN_LINES) {
            over.push(format!("{rel}:{line}: fn {name} is {n} lines"));
        }
    }
    assert!(
        over.is_empty(),
        "over the size limits:\n{}",
        over.join("\n")
    );
}
