//! The plan's inputs read from files: the Host header values of `--hosts FILE` and the request
//! body of `--body @FILE` (both through `crate::input`, capped).

use std::path::Path;

use crate::error::{Error, Result};

/// The Host header values of `--hosts FILE`: one a line, blank lines and `#` comments skipped.
pub fn hosts_file(f: &Path) -> Result<Vec<String>> {
    let what = format!("--hosts {}", f.display());
    let bytes = crate::input::read_capped(&what, f, crate::input::HOSTS_CAP)?;
    let text =
        String::from_utf8(bytes).map_err(|_| Error::usage(format!("{what}: not UTF-8 text")))?;
    let hosts: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    if hosts.is_empty() {
        return Err(Error::usage(format!(
            "--hosts {}: no host in the file",
            f.display()
        )));
    }
    Ok(hosts)
}

/// The request body of `--body`: none, the text given, or the bytes of FILE for `@FILE`.
pub fn body(arg: Option<&str>) -> Result<Vec<u8>> {
    Ok(match arg {
        None => vec![],
        Some(b) => match b.strip_prefix('@') {
            Some(f) => crate::input::read_capped(
                &format!("--body @{f}"),
                std::path::Path::new(f),
                crate::input::BODY_CAP,
            )?,
            None => b.as_bytes().to_vec(),
        },
    })
}
