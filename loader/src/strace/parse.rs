//! `strace -f -tt -T -y` output, one line at a time: the pid column (`N ` with `-o`, `[pid N] `
//! on a terminal, none for one process or an `-ff` file), the time (`-tt`, `-ttt`), the call,
//! its arguments, its result with `-y`/`-yy` annotations, and its time (`-T`). A call split by
//! another thread's line (`<unfinished ...>` then `<... name resumed>`) is joined per pid.
//! Signals and exits are recognised and skipped. Every byte is untrusted: the parser never
//! panics and keeps strings as bytes.

use std::collections::HashMap;

/// One completed call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Call {
    /// Pid (thread id) from the pid column or the `-ff` file name; `None` when the log has one
    /// process and no column.
    pub pid: Option<u32>,
    /// When it started, seconds (since midnight with `-tt`, since the epoch with `-ttt`).
    pub time_s: Option<f64>,
    /// Syscall name.
    pub name: String,
    /// Arguments, as strace printed them (a split call's two halves joined).
    pub args: String,
    /// Return value (`None`: `?`, or unparsable).
    pub ret: Option<i64>,
    /// Error name when it failed (`ENOENT`).
    pub errno: Option<String>,
    /// The `-y` annotation of the returned descriptor (`3</srv/www/index.php>`: the path).
    pub ret_path: Option<Vec<u8>>,
    /// Time in the call (`-T`), seconds.
    pub dur_s: Option<f64>,
}

/// What one line is.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// A complete call (or the second half of a split one, joined).
    Call(Call),
    /// The first half of a split call; the rest comes later on the same pid.
    Unfinished,
    /// A signal delivery, an exit, or anything else that is no call.
    Other,
}

/// Splits the pid column and the timestamp off a line.
fn prefix(line: &str) -> (Option<u32>, Option<f64>, &str) {
    let mut rest = line.trim_start();
    let mut pid = None;
    if let Some(r) = rest.strip_prefix("[pid") {
        let r = r.trim_start();
        if let Some(end) = r.find(']') {
            pid = r[..end].trim().parse().ok();
            rest = r[end + 1..].trim_start();
        }
    } else if let Some(sp) = rest.find(' ') {
        // A bare number followed by a time or a call: the pid column of `-f -o FILE`.
        let head = &rest[..sp];
        if !head.is_empty() && head.bytes().all(|b| b.is_ascii_digit()) && head.len() <= 10 {
            pid = head.parse().ok();
            rest = rest[sp..].trim_start();
        }
    }
    let mut time = None;
    if let Some(sp) = rest.find(' ') {
        let head = &rest[..sp];
        if let Some(t) = parse_time(head) {
            time = Some(t);
            rest = rest[sp..].trim_start();
        }
    }
    (pid, time, rest)
}

/// `HH:MM:SS.uuuuuu` (`-tt`), `HH:MM:SS` (`-t`) or `SECONDS.uuuuuu` (`-ttt`).
fn parse_time(s: &str) -> Option<f64> {
    if !s.bytes().next()?.is_ascii_digit() {
        return None;
    }
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        [h, m, sec] => {
            let h: f64 = h.parse().ok()?;
            let m: f64 = m.parse().ok()?;
            let sec: f64 = sec.parse().ok()?;
            Some(h * 3600.0 + m * 60.0 + sec)
        }
        [t] if t.contains('.') => t.parse().ok().filter(|v: &f64| v.is_finite()),
        _ => None,
    }
}

/// The offset just past the `)` that closes the argument list opened before `s` (strings,
/// brackets and `-y` annotations skipped), or `None` when the line ends first.
fn args_end(s: &[u8]) -> Option<usize> {
    let mut depth = 0i32;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' => {
                i += 1;
                while i < s.len() && s[i] != b'"' {
                    if s[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            // `-y`: `3</a/b(c)>` after a digit or AT_FDCWD holds a path that may hold anything
            // but a newline; it ends at the first `>` followed by a separator.
            b'<' if i > 0 && (s[i - 1].is_ascii_digit() || s[i - 1] == b'D') => {
                i += 1;
                while i < s.len() {
                    if s[i] == b'>'
                        && s.get(i + 1)
                            .is_none_or(|c| matches!(c, b',' | b')' | b' ' | b']' | b'}'))
                    {
                        break;
                    }
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                if depth == 0 {
                    return Some(i + 1);
                }
                depth -= 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `= RET [ERRNO (text)] [<dur>]` after the arguments.
fn result(call: &mut Call, tail: &str) {
    let tail = tail.trim();
    if let Some(open) = tail.rfind('<')
        && tail.ends_with('>')
        && let Ok(d) = tail[open + 1..tail.len() - 1].parse::<f64>()
        && d.is_finite()
    {
        call.dur_s = Some(d);
    }
    let Some(r) = tail.strip_prefix('=') else {
        return;
    };
    let r = r.trim_start();
    let word_end = r.find([' ', '<']).unwrap_or(r.len());
    let word = &r[..word_end];
    call.ret = if let Some(h) = word.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().map(|v| v as i64)
    } else {
        word.parse().ok()
    };
    let after = &r[word_end..];
    // `3</srv/www/index.php>`: the descriptor's path.
    if let Some(a) = after.strip_prefix('<')
        && let Some(end) = a.rfind("> <").or_else(|| a.strip_suffix('>').map(str::len))
    {
        call.ret_path = Some(unescape(&a[..end]));
    }
    if call.ret.is_some_and(|v| v < 0) {
        call.errno = after
            .split_whitespace()
            .next()
            .filter(|e| e.starts_with('E'))
            .map(str::to_string);
    }
}

/// Parses one line; `pending` holds each pid's unfinished call.
pub fn line(text: &str, pending: &mut HashMap<Option<u32>, (Option<f64>, String, String)>) -> Line {
    let (pid, time, rest) = prefix(text);
    if rest.starts_with("---") || rest.starts_with("+++") || rest.is_empty() {
        return Line::Other;
    }
    if let Some(r) = rest.strip_prefix("<... ") {
        // `<... openat resumed>, O_RDONLY) = 3 <0.1>`
        let Some(end) = r.find(" resumed>") else {
            return Line::Other;
        };
        let name = r[..end].to_string();
        let more = &r[end + " resumed>".len()..];
        let Some((t0, n0, head)) = pending.remove(&pid) else {
            return Line::Other;
        };
        if n0 != name {
            return Line::Other;
        }
        let Some(close) = args_end(more.as_bytes()) else {
            return Line::Other;
        };
        let mut c = Call {
            pid,
            time_s: t0.or(time),
            name,
            args: format!("{head}{}", &more[..close - 1]),
            ..Default::default()
        };
        result(&mut c, &more[close..]);
        return Line::Call(c);
    }
    let Some(open) = rest.find('(') else {
        return Line::Other;
    };
    let name = &rest[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Line::Other;
    }
    let body = &rest[open + 1..];
    if let Some(head) = body.strip_suffix("<unfinished ...>") {
        if pending.len() < 100_000 {
            pending.insert(pid, (time, name.to_string(), head.trim_end().to_string()));
        }
        return Line::Unfinished;
    }
    let Some(close) = args_end(body.as_bytes()) else {
        return Line::Other;
    };
    let mut c = Call {
        pid,
        time_s: time,
        name: name.to_string(),
        args: body[..close - 1].to_string(),
        ..Default::default()
    };
    result(&mut c, &body[close..]);
    Line::Call(c)
}

/// Decodes strace's escapes (`\n`, `\t`, `\"`, `\\`, `\xNN`, octal `\NNN`) into bytes.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 >= b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        match b[i] {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let hex = std::str::from_utf8(&b[i + 1..(i + 3).min(b.len())]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) if hex.len() == 2 => {
                        out.push(v);
                        i += 2;
                    }
                    _ => out.push(b'x'),
                }
            }
            b'0'..=b'7' => {
                let mut v: u32 = 0;
                let mut n = 0;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + (b[i] - b'0') as u32;
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// The top-level arguments of a call (split at commas outside strings and brackets).
pub fn split_args(args: &str) -> Vec<&str> {
    let b = args.as_bytes();
    let mut out = vec![];
    let (mut depth, mut start, mut i) = (0i32, 0, 0);
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'<' if i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'D') => {
                while i < b.len() && !(b[i] == b'>' && b.get(i + 1).is_none_or(|c| *c == b',')) {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b',' if depth == 0 => {
                out.push(args[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = args.get(start..).unwrap_or("").trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// A string argument's bytes (`"a/b"`, or `"a/b"...` when strace cut it short: `None`, the
/// path is not whole).
pub fn string_arg(arg: &str) -> Option<Vec<u8>> {
    let inner = arg.strip_prefix('"')?.strip_suffix('"')?;
    Some(unescape(inner))
}

/// A descriptor argument: its number and its `-y` path (`3</srv/www>`, `AT_FDCWD</srv/www>`
/// with strace 6's `-y`, or plain `AT_FDCWD` / `3`).
pub fn fd_arg(arg: &str) -> Option<(i64, Option<Vec<u8>>)> {
    let (head, path) = match arg.find('<') {
        Some(i) if arg.ends_with('>') => (&arg[..i], Some(unescape(&arg[i + 1..arg.len() - 1]))),
        _ => (arg, None),
    };
    let fd = if head == "AT_FDCWD" {
        -100
    } else {
        head.parse().ok()?
    };
    Some((fd, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Line {
        line(text, &mut HashMap::new())
    }

    #[test]
    fn a_call_with_pid_time_annotations_and_duration() {
        let Line::Call(c) = one(
            r#"4242  12:00:01.250000 openat(AT_FDCWD</srv/a b>, "index.php", O_RDONLY|O_CLOEXEC) = 5</srv/a b/index.php> <0.000213>"#,
        ) else {
            panic!()
        };
        assert_eq!(c.pid, Some(4242));
        assert_eq!(c.time_s, Some(43201.25));
        assert_eq!(c.name, "openat");
        assert_eq!(c.ret, Some(5));
        assert_eq!(c.ret_path.as_deref(), Some(&b"/srv/a b/index.php"[..]));
        assert_eq!(c.dur_s, Some(0.000213));
        let a = split_args(&c.args);
        assert_eq!(a.len(), 3);
        assert_eq!(fd_arg(a[0]), Some((-100, Some(b"/srv/a b".to_vec()))));
        assert_eq!(string_arg(a[1]), Some(b"index.php".to_vec()));
    }

    #[test]
    fn errors_brackets_and_strings_with_parentheses() {
        let Line::Call(c) = one(
            r#"[pid  77] 1733140801.5 newfstatat(AT_FDCWD, "/x/a) = 3 (b\"c", {st_mode=S_IFREG|0644, st_size=1, ...}, 0) = -1 ENOENT (No such file or directory) <0.000010>"#,
        ) else {
            panic!()
        };
        assert_eq!(c.pid, Some(77));
        assert_eq!(c.time_s, Some(1733140801.5));
        assert_eq!(c.ret, Some(-1));
        assert_eq!(c.errno.as_deref(), Some("ENOENT"));
        let a = split_args(&c.args);
        assert_eq!(a.len(), 4, "{a:?}");
        assert_eq!(string_arg(a[1]), Some(b"/x/a) = 3 (b\"c".to_vec()));
    }

    #[test]
    fn unfinished_and_resumed_join_per_pid() {
        let mut p = HashMap::new();
        assert_eq!(
            line(
                r#"10 12:00:00.000001 chdir("/mnt/slow/a" <unfinished ...>"#,
                &mut p
            ),
            Line::Unfinished
        );
        assert_eq!(
            line(
                "11 12:00:00.000002 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---",
                &mut p
            ),
            Line::Other
        );
        assert_eq!(
            line("11 12:00:00.000003 +++ exited with 0 +++", &mut p),
            Line::Other
        );
        let Line::Call(c) = line(
            "10 12:00:00.000900 <... chdir resumed>) = 0 <0.000899>",
            &mut p,
        ) else {
            panic!()
        };
        assert_eq!(c.name, "chdir");
        assert_eq!(
            string_arg(split_args(&c.args)[0]),
            Some(b"/mnt/slow/a".to_vec())
        );
        assert_eq!(c.time_s, Some(43200.000001));
        assert_eq!(c.dur_s, Some(0.000899));
        // A resumption without its start is skipped.
        assert_eq!(
            line("9 <... read resumed>\"x\", 1) = 1", &mut p),
            Line::Other
        );
    }

    #[test]
    fn escapes_and_truncated_strings() {
        assert_eq!(unescape(r#"a\x41\101\n\\\"z"#), b"aAA\n\\\"z".to_vec());
        assert_eq!(unescape(r"\x4"), b"x4".to_vec());
        assert_eq!(string_arg(r#""/very/long"..."#), None);
        assert_eq!(fd_arg("3</a>"), Some((3, Some(b"/a".to_vec()))));
        assert_eq!(fd_arg("AT_FDCWD"), Some((-100, None)));
        assert_eq!(fd_arg("x"), None);
        // getcwd's result string, -ff file lines without a pid, a `= ?` result.
        let Line::Call(c) = one(r#"getcwd("/srv/www", 4096) = 9"#) else {
            panic!()
        };
        assert_eq!((c.pid, c.ret), (None, Some(9)));
        let Line::Call(c) = one("exit_group(0) = ?") else {
            panic!()
        };
        assert_eq!(c.ret, None);
    }
}
