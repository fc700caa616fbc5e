//! Everything the target hands us (paths, names, command lines) is untrusted bytes. They are
//! never interpreted; they are escaped once, here, into printable UTF-8 before any output
//! format sees them (JSON and HTML then apply their own escaping on top).
//!
//! Rules: printable ASCII except `\` passes through; `\` becomes `\\`; valid non-ASCII UTF-8
//! that is not a control or format character passes through; everything else (control bytes,
//! invalid UTF-8, bidi overrides) becomes `\xNN` per byte, so the original bytes can always be
//! recovered.

/// Escapes untrusted bytes for display.
pub fn bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    let mut rest = b;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                push_str(&mut out, s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                push_str(&mut out, std::str::from_utf8(good).unwrap_or_default());
                let n = e.error_len().unwrap_or(bad.len());
                for byte in &bad[..n] {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
                rest = &bad[n..];
            }
        }
    }
    out
}

/// Escapes an untrusted string (already UTF-8, e.g. from a lossy source) the same way.
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_str(&mut out, s);
    out
}

fn push_str(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x80 || is_invisible(c) => {
                let mut buf = [0u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
}

/// C1 controls, bidi controls and other invisible formatting characters that could make a
/// path print as something it is not.
fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        0x80..=0x9f | 0x200b..=0x200f | 0x202a..=0x202e | 0x2060..=0x206f | 0xfeff | 0xfff9..=0xfffb)
}

/// Escapes for HTML text and attribute values (apply to already-`bytes`-escaped strings).
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Quotes a string for a POSIX shell (for remedies that embed a path).
pub fn shell(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,=@%".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_invalid_bytes_are_escaped() {
        assert_eq!(bytes(b"/srv/www"), "/srv/www");
        assert_eq!(bytes(b"a\nb"), "a\\x0ab");
        assert_eq!(bytes(b"\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(bytes(b"bad\xffutf8"), "bad\\xffutf8");
        assert_eq!(bytes(b"back\\slash"), "back\\\\slash");
        assert_eq!(bytes("caf\u{e9}".as_bytes()), "caf\u{e9}");
        // U+202E RIGHT-TO-LEFT OVERRIDE would reverse what follows on a terminal.
        assert_eq!(
            bytes("x\u{202e}gpj.exe".as_bytes()),
            "x\\xe2\\x80\\xaegpj.exe"
        );
    }

    #[test]
    fn html_and_shell() {
        assert_eq!(html("<script>&'\""), "&lt;script&gt;&amp;&#39;&quot;");
        assert_eq!(shell("/srv/run"), "/srv/run");
        assert_eq!(shell("/tmp/it's here"), "'/tmp/it'\\''s here'");
    }
}
