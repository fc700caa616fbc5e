//! Small parsers and helpers shared by the commands.

use std::{io::IsTerminal, path::Path, time::Duration};

/// Now, in CLOCK_MONOTONIC nanoseconds: the clock eBPF's `bpf_ktime_get_ns` reads, shared by
/// the load generator and the samplers so their seconds join without conversion.
pub fn mono_ns() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    // CLOCK_MONOTONIC always exists on Linux; a failure would read as 0, as before.
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).unwrap_or(nix::sys::time::TimeSpec::new(0, 0));
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// A small text file (/proc, /sys), trimmed; `None` when it cannot be read.
pub fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The kernel's release string (`uname -r`) from `root`'s /proc (`/` on a live system), empty
/// when unreadable.
pub fn kernel_release(root: &Path) -> String {
    read_trim(&root.join("proc/sys/kernel/osrelease")).unwrap_or_default()
}

/// Where progress goes, the same in every command: a single updating line on a terminal; on
/// anything else (a CI log) nothing unless asked with `--progress`, then one line per update;
/// never with `-q`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// No progress.
    #[default]
    Off,
    /// One line, rewritten in place (stderr is a terminal).
    Line,
    /// A line per update (`--progress` into a file or pipe).
    Lines,
    /// No progress, and not the line a trace starts with either (the agent says its own
    /// line a window).
    Silent,
}

impl Progress {
    /// From `-q` and `--progress`.
    pub fn new(quiet: bool, forced: bool) -> Self {
        if quiet {
            Progress::Off
        } else if std::io::stderr().is_terminal() {
            Progress::Line
        } else if forced {
            Progress::Lines
        } else {
            Progress::Off
        }
    }

    /// Whether progress is shown at all (worth computing its text).
    pub fn shows(&self) -> bool {
        matches!(self, Progress::Line | Progress::Lines)
    }

    /// Shows `text` as the current progress.
    pub fn show(&self, text: &str) {
        match self {
            Progress::Off | Progress::Silent => {}
            Progress::Line => eprint!("\r{text}\x1b[K"),
            Progress::Lines => eprintln!("{text}"),
        }
    }

    /// Whether the line a trace starts with is printed.
    pub fn says_start(&self) -> bool {
        *self != Progress::Silent
    }

    /// Clears the updating line before other output.
    pub fn clear(&self) {
        if *self == Progress::Line {
            eprint!("\r\x1b[K");
        }
    }
}

/// Parses `10s`, `500ms`, `2m`, `1h`, `1.5s` or a plain number of seconds. Zero and values
/// above a day are refused (a typo, not a benchmark).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 10s, 500ms, 2m)"))?;
    let secs = match unit {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("`{s}`: a duration must be positive"));
    }
    if secs > 86_400.0 {
        return Err(format!(
            "`{s}`: longer than a day; that is a typo, not a benchmark"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a positive, finite rate.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("`{s}`: the rate must be greater than 0"));
    }
    if v > 10_000_000.0 {
        return Err(format!(
            "`{s}`: more than 10 million per second is not a rate this tool can keep"
        ));
    }
    Ok(v)
}

/// Parses a memory size: bytes, or a number with K, M, G, T (powers of 1024; `KiB`... too).
/// Decimal `MB`/`GB` are refused rather than guessed.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (try 2G, 512M, 1.5GiB)"))?;
    let mult: f64 = match unit {
        "" | "B" => 1.0,
        "K" | "k" | "KiB" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TiB" => 1024.0f64.powi(4),
        "KB" | "kB" | "MB" | "GB" | "TB" => {
            return Err(format!(
                "`{s}`: decimal units are ambiguous here; use K/M/G (powers of 1024) or a byte count"
            ));
        }
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use K, M, G or T)")),
    };
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(format!("`{s}`: the size must be at least one byte"));
    }
    if bytes > 2f64.powi(62) {
        return Err(format!("`{s}`: larger than any machine"));
    }
    Ok(bytes as u64)
}

/// Writes to stdout; a closed pipe (`trapdetect ... | head`) ends the program quietly, any
/// other failure is a lost report (see [`crate::output::stdout`]).
pub fn print(s: &str) -> crate::error::Result<()> {
    crate::output::stdout(s)
}

/// `sysconf(var)`, -1 when it fails or has no value (as libc's `sysconf` reports both).
pub fn sysconf(var: nix::unistd::SysconfVar) -> i64 {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .map_or(-1, i64::from)
}

/// The descriptor limit (soft, hard).
pub fn nofile_limit() -> (u64, u64) {
    // (0, 0) when it cannot be read.
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap_or((0, 0))
}

/// Raises the soft descriptor limit to the hard one: every eBPF map and program is a
/// descriptor, and so is every load-generator connection; a low soft limit (a harness's
/// `ulimit -n 64`) would otherwise fail halfway through setup.
pub fn raise_nofile_limit() {
    let (soft, hard) = nofile_limit();
    if soft < hard {
        // Raising soft up to hard needs no privilege; a failure leaves the limit as it was.
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Deserializers for the `&'static str` names of the typed model (`"probe-load"`, `"open"`),
/// for a saved report read back (`trapdetect report FILE.json`): they hold what the file says,
/// leaked. A saved report is read once per process, to be rendered, and leaking its few names
/// keeps one type for the live report and the saved one.
pub mod de {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer};

    /// A `&'static str` field read back with [`static_str`]. Spelled as an alias because the
    /// derive borrows a field spelled `&str` from the input, which a `'static` one cannot be.
    pub type Name = &'static str;

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    /// A `&'static str` field.
    pub fn static_str<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        String::deserialize(d).map(leak)
    }

    /// An `Option<&'static str>` field.
    pub fn opt_static_str<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<&'static str>, D::Error> {
        Option::<String>::deserialize(d).map(|o| o.map(leak))
    }

    /// A `Vec<&'static str>` field.
    pub fn static_strs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
        Vec::<String>::deserialize(d).map(|v| v.into_iter().map(leak).collect())
    }

    /// A map keyed by `&'static str`.
    pub fn static_keys<'de, D: Deserializer<'de>, V: Deserialize<'de>>(
        d: D,
    ) -> Result<BTreeMap<&'static str, V>, D::Error> {
        BTreeMap::<String, V>::deserialize(d)
            .map(|m| m.into_iter().map(|(k, v)| (leak(k), v)).collect())
    }
}

/// A file's modification time, Unix s.
pub fn mtime_unix(p: &std::path::Path) -> Option<f64> {
    let m = std::fs::metadata(p).ok()?.modified().ok()?;
    Some(m.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("2d").is_err());
        assert!(parse_duration("25h").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("800").unwrap(), 800.0);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("-3").is_err());
        assert!(parse_rate("NaN").is_err());
        assert!(parse_rate("inf").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert!(parse_size("2GB").unwrap_err().contains("ambiguous"));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
    }
}
