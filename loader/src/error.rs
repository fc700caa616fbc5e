//! One error type for the binary, each variant mapped to the exit code harness scripts rely on.
//!
//! Exit codes: 0 no `fail` finding · 1 at least one `fail` finding · 2 bad usage, bad input or
//! a report that could not be written ·
//! 3 the measurement itself cannot be trusted · 4 insufficient privilege or kernel support.

use std::io;

/// Process exit codes (documented in README and `--help`).
pub mod exit {
    /// No `fail` finding.
    pub const OK: i32 = 0;
    /// At least one `fail` finding.
    pub const FAIL: i32 = 1;
    /// Bad usage or bad input.
    pub const USAGE: i32 = 2;
    /// The measurement itself cannot be trusted.
    pub const UNTRUSTED: i32 = 3;
    /// Insufficient privilege or kernel support.
    pub const PRIVILEGE: i32 = 4;
}

/// Everything that can stop trapdetect before it has a report to print.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command line or bad input (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A file or process we were pointed at cannot be read (exit 2).
    #[error("{what}: {source}")]
    Input {
        /// What we tried to read.
        what: String,
        /// Why it failed.
        source: io::Error,
    },
    /// Missing privilege, named (exit 4).
    #[error("{0}")]
    Privilege(String),
    /// Missing kernel support, named (exit 4).
    #[error("{0}")]
    Kernel(String),
    /// A syscall failed while setting up the measurement (exit 3).
    #[error("{call} failed: {source}")]
    Syscall {
        /// The call.
        call: String,
        /// The errno.
        source: io::Error,
    },
    /// The measurement cannot be trusted and there is nothing to report (exit 3).
    #[error("{0}")]
    Untrusted(String),
    /// A report (stdout or an output file) could not be written (exit 2): a harness must never
    /// read a lost report as a pass.
    #[error("cannot write {what}: {source}")]
    Output {
        /// The flag and path, or "the report on stdout".
        what: String,
        /// Why.
        source: io::Error,
    },
    /// The measurement was printed or kept, but some of its outputs were lost (exit 2).
    #[error("{0}")]
    ReportLost(String),
}

impl Error {
    /// The exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Input { .. } | Error::Output { .. } | Error::ReportLost(_) => {
                exit::USAGE
            }
            Error::Privilege(_) | Error::Kernel(_) => exit::PRIVILEGE,
            Error::Syscall { .. } | Error::Untrusted(_) => exit::UNTRUSTED,
        }
    }

    /// Shorthand for a usage error.
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    /// Shorthand for an unreadable input.
    pub fn input(what: impl Into<String>, source: io::Error) -> Self {
        Error::Input {
            what: what.into(),
            source,
        }
    }
}

impl Error {
    /// Shorthand for an output that could not be written.
    pub fn output(what: impl Into<String>, source: io::Error) -> Self {
        Error::Output {
            what: what.into(),
            source,
        }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
