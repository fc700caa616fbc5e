//! Colour for FAIL/WARN/ok in text output, on a terminal only: never when stdout is not a TTY,
//! when NO_COLOR is set (https://no-color.org), or with `--color never`; `--color always`
//! forces it (for `less -R`).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::traps::Severity;

/// `--color`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Choice {
    /// On a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

static ON: AtomicBool = AtomicBool::new(false);

/// Whether to colour, from the flag, NO_COLOR's value and whether stdout is a terminal.
pub fn decide(choice: Choice, no_color: Option<&std::ffi::OsStr>, tty: bool) -> bool {
    match choice {
        Choice::Always => true,
        Choice::Never => false,
        Choice::Auto => tty && no_color.is_none_or(|v| v.is_empty()),
    }
}

/// Sets colour for this process (called once by `main`).
pub fn init(choice: Choice) {
    // isatty(1), as std does it.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let on = decide(choice, std::env::var_os("NO_COLOR").as_deref(), tty);
    ON.store(on, Ordering::Relaxed);
}

fn paint(code: &str, s: &str) -> String {
    if ON.load(Ordering::Relaxed) {
        format!("\x1b[{code}m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

/// A severity label (`FAIL` bold red, `WARN` yellow, `INFO` plain).
pub fn severity(s: Severity) -> String {
    match s {
        Severity::Fail => paint("1;31", s.label()),
        Severity::Warn => paint("33", s.label()),
        Severity::Info => s.label().to_string(),
    }
}

/// A verdict: green when the exit code is 0, red otherwise.
pub fn verdict(text: &str, exit_code: i32) -> String {
    paint(if exit_code == 0 { "32" } else { "1;31" }, text)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(decide(Choice::Auto, None, true));
        assert!(!decide(Choice::Auto, None, false));
        assert!(!decide(Choice::Auto, Some(OsStr::new("1")), true));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(decide(Choice::Auto, Some(OsStr::new("")), true));
        assert!(decide(Choice::Always, Some(OsStr::new("1")), false));
        assert!(!decide(Choice::Never, None, true));
    }
}
