//! nginx as it runs (issue 23): the masters found by process name, the configuration each one
//! was started with (`-c`, `-p` and `-e` from the title nginx keeps: `nginx: master process
//! <argv>`; Debian's defaults otherwise), and the `error_log` and `access_log` directives of
//! that configuration with their `include`s, each with the file and line it was written at.
//! Read-only; every string from the files is escaped here.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::process::ProcEntry;

/// Debian's `--conf-path`.
pub const DEFAULT_CONF: &str = "/etc/nginx/nginx.conf";
/// Debian's `--prefix`.
pub const DEFAULT_PREFIX: &str = "/usr/share/nginx";
/// Files and bytes read per configuration, at most.
const MAX_FILES: usize = 64;
const MAX_FILE_BYTES: u64 = 4 << 20;

/// A logging directive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LogDirective {
    /// `error_log` or `access_log`.
    pub directive: String,
    /// Its arguments (escaped).
    pub args: Vec<String>,
    /// `file:line` (escaped).
    pub at: String,
}

impl LogDirective {
    /// The target path, when it is a file (not `off`, `syslog:`, `stderr`, `memory:`).
    pub fn path(&self) -> Option<&str> {
        let p = self.args.first()?.as_str();
        (p.starts_with('/') && !p.starts_with("/dev/")).then_some(p)
    }

    /// The level of an `error_log` (`error` when not given).
    pub fn level(&self) -> &str {
        self.args.get(1).map(String::as_str).unwrap_or("error")
    }

    /// An `access_log` with `buffer=` writes in batches, not per request.
    pub fn buffered(&self) -> bool {
        self.args.iter().any(|a| a.starts_with("buffer="))
    }
}

/// One nginx master and its logging.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NginxMaster {
    /// Pid.
    pub pid: u32,
    /// The configuration file (escaped).
    pub conf: String,
    /// `-e FILE` from its command line: where it logs before the configuration is read.
    pub early_error_log: Option<String>,
    /// Logging directives, in file order.
    pub logs: Vec<LogDirective>,
    /// Files that could not be read (escaped, with the reason).
    pub unreadable: Vec<String>,
}

/// Splits nginx configuration text into directives: (words, line of the first word). Blocks
/// open with `{` (the words before it are the block's directive, returned too) and close with
/// `}`; `#` starts a comment; quotes group words.
pub fn directives(text: &str) -> Vec<(Vec<String>, usize)> {
    let mut out = vec![];
    let mut words: Vec<String> = vec![];
    let mut line = 1;
    let mut start = 1;
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    let flush = |cur: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(cur));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                flush(&mut cur, &mut in_word, &mut words);
                line += 1;
            }
            '#' if !in_word => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            '"' | '\'' if !in_word => {
                if words.is_empty() {
                    start = line;
                }
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    if q == '\n' {
                        line += 1;
                    }
                    cur.push(q);
                }
                in_word = true;
            }
            ';' | '{' | '}' => {
                flush(&mut cur, &mut in_word, &mut words);
                if !words.is_empty() {
                    out.push((std::mem::take(&mut words), start));
                }
            }
            c if c.is_whitespace() => flush(&mut cur, &mut in_word, &mut words),
            c => {
                if !in_word && words.is_empty() {
                    start = line;
                }
                cur.push(c);
                in_word = true;
            }
        }
    }
    out
}

/// The `-c`, `-p` and `-e` of a master's title (`nginx: master process nginx -p P -c C`).
pub fn flags_from_title(title: &[u8]) -> Option<(Option<String>, Option<String>, Option<String>)> {
    let t = std::str::from_utf8(title.strip_prefix(b"nginx: master process ")?).ok()?;
    let w: Vec<&str> = t.split_ascii_whitespace().collect();
    let get = |f: &str| {
        w.iter()
            .position(|x| *x == f)
            .and_then(|i| w.get(i + 1))
            .map(|s| s.to_string())
    };
    Some((get("-c"), get("-p"), get("-e")))
}

fn read_conf(path: &Path, conf_dir: &Path, m: &mut NginxMaster, seen: &mut Vec<PathBuf>) {
    if seen.len() >= MAX_FILES || seen.contains(&path.to_path_buf()) {
        return;
    }
    seen.push(path.to_path_buf());
    let text = match crate::input::read_capped_io(path, MAX_FILE_BYTES) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            m.unreadable.push(format!(
                "{}: {e}",
                crate::escape::text(&path.display().to_string())
            ));
            return;
        }
    };
    for (words, line) in directives(&text) {
        match words[0].as_str() {
            "include" if words.len() == 2 => {
                let pat = if words[1].starts_with('/') {
                    words[1].clone()
                } else {
                    conf_dir.join(&words[1]).display().to_string()
                };
                for f in super::fpm::glob(&pat).unwrap_or_default() {
                    read_conf(&f, conf_dir, m, seen);
                }
            }
            "error_log" | "access_log" => m.logs.push(LogDirective {
                directive: words[0].clone(),
                args: words[1..].iter().map(|a| crate::escape::text(a)).collect(),
                at: crate::escape::text(&format!("{}:{line}", path.display())),
            }),
            _ => {}
        }
    }
}

/// Reads the logging of the master `pid` from its title and configuration.
pub fn read_master(pid: u32) -> Option<NginxMaster> {
    let title = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let title = title.split(|&c| c == 0).next().unwrap_or(&[]).to_vec();
    let (c, p, e) = flags_from_title(&title)?;
    let prefix = PathBuf::from(p.unwrap_or_else(|| DEFAULT_PREFIX.into()));
    let conf = match c {
        Some(c) if c.starts_with('/') => PathBuf::from(c),
        Some(c) => prefix.join(c),
        None => PathBuf::from(DEFAULT_CONF),
    };
    // Relative paths in the configuration resolve against its directory (nginx's conf prefix),
    // read through the master's root so a container's files are its own.
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let on_root = |p: &Path| root.join(p.strip_prefix("/").unwrap_or(p));
    let conf_dir = conf.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut m = NginxMaster {
        pid,
        conf: crate::escape::text(&conf.display().to_string()),
        early_error_log: e.map(|e| crate::escape::text(&e)),
        ..Default::default()
    };
    let mut seen = vec![];
    read_conf(&on_root(&conf), &on_root(&conf_dir), &mut m, &mut seen);
    // Shown as the master sees them, not through /proc/PID/root.
    let r = crate::escape::text(&root.display().to_string());
    for d in &mut m.logs {
        if let Some(s) = d.at.strip_prefix(&r) {
            d.at = s.to_string();
        }
    }
    Some(m)
}

/// nginx masters: `pid` itself or its parent when it is a worker, else every master running.
pub fn masters(scan: &[ProcEntry], pid: Option<u32>) -> Vec<u32> {
    let is_master = |e: &ProcEntry| {
        e.stat.comm == b"nginx"
            && std::fs::read(format!("/proc/{}/cmdline", e.pid))
                .is_ok_and(|t| t.starts_with(b"nginx: master process"))
    };
    match pid {
        Some(p) => scan
            .iter()
            .find(|e| e.pid == p)
            .and_then(|e| {
                if is_master(e) {
                    Some(e.pid)
                } else {
                    scan.iter()
                        .find(|m| m.pid == e.stat.ppid && is_master(m))
                        .map(|m| m.pid)
                }
            })
            .into_iter()
            .collect(),
        None => scan
            .iter()
            .filter(|e| is_master(e))
            .map(|e| e.pid)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_with_blocks_comments_and_quotes() {
        let t = "user root; # who\nerror_log /var/log/nginx/e.log  debug;\nhttp {\n  access_log \"/srv/log dir/a.log\" combined buffer=32k;\n  server { listen 80; }\n}\n";
        let d = directives(t);
        assert_eq!(
            d[1],
            (
                vec![
                    "error_log".into(),
                    "/var/log/nginx/e.log".into(),
                    "debug".into()
                ],
                2
            )
        );
        assert_eq!(d[2].0, ["http"]);
        assert_eq!(
            d[3],
            (
                vec![
                    "access_log".into(),
                    "/srv/log dir/a.log".into(),
                    "combined".into(),
                    "buffer=32k".into()
                ],
                4
            )
        );
        assert_eq!(d[4].0, ["server"]);
        assert_eq!(d[5], (vec!["listen".into(), "80".into()], 5));
    }

    #[test]
    fn title_flags() {
        assert_eq!(
            flags_from_title(b"nginx: master process nginx -p /x -c /x/n.conf -e /x/e.log"),
            Some((
                Some("/x/n.conf".into()),
                Some("/x".into()),
                Some("/x/e.log".into())
            ))
        );
        assert_eq!(
            flags_from_title(
                b"nginx: master process /usr/sbin/nginx -g daemon on; master_process on;"
            ),
            Some((None, None, None))
        );
        assert_eq!(flags_from_title(b"nginx: worker process"), None);
    }

    #[test]
    fn log_directive_targets() {
        let d = |a: &[&str]| LogDirective {
            directive: "access_log".into(),
            args: a.iter().map(|s| s.to_string()).collect(),
            at: "x:1".into(),
        };
        assert_eq!(d(&["/var/log/a.log"]).path(), Some("/var/log/a.log"));
        assert_eq!(d(&["off"]).path(), None);
        assert_eq!(d(&["syslog:server=x"]).path(), None);
        assert_eq!(d(&["/dev/stderr"]).path(), None);
        assert!(d(&["/a", "combined", "buffer=64k"]).buffered());
        assert_eq!(d(&["/a"]).level(), "error");
    }
}
