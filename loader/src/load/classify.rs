//! What came back when no HTTP status did: a transport-error taxonomy classified from the error
//! itself (errno, io::ErrorKind, our own timer), never from message strings. Each kind means
//! something different operationally, so "4 % errors" is never one number.

use std::io;

use nix::errno::Errno;
use serde::Serialize;

/// Why a request got no HTTP status.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No complete answer within the timeout: the server said nothing (also ETIMEDOUT).
    Timeout,
    /// ECONNREFUSED: nothing listening; mid-run it usually means the process is gone.
    ConnRefused,
    /// ECONNRESET, ECONNABORTED or EPIPE: the peer reset or closed the connection under us.
    ConnReset,
    /// The connection closed before a complete response (0-byte read): something died
    /// mid-response, or the server closes connections it will not serve.
    Eof,
    /// The server sent bytes that are not an HTTP/1.x response.
    BadResponse,
    /// The TLS handshake failed: the certificate was not trusted (see `--cacert`,
    /// `--insecure`) or the server sent an alert.
    Tls,
    /// Any other connection error (unreachable, ...).
    ConnError,
    /// Generator side: EMFILE/ENFILE, the generator ran out of file descriptors.
    FdLimit,
    /// Generator side: EADDRNOTAVAIL, no local ephemeral port left for the 4-tuple.
    PortsExhausted,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Timeout,
        ErrorKind::ConnRefused,
        ErrorKind::ConnReset,
        ErrorKind::Eof,
        ErrorKind::BadResponse,
        ErrorKind::Tls,
        ErrorKind::ConnError,
        ErrorKind::FdLimit,
        ErrorKind::PortsExhausted,
    ];

    /// Its name in reports and samples.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::ConnRefused => "conn_refused",
            ErrorKind::ConnReset => "conn_reset",
            ErrorKind::Eof => "eof",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::Tls => "tls",
            ErrorKind::ConnError => "conn_error",
            ErrorKind::FdLimit => "fd_limit",
            ErrorKind::PortsExhausted => "ports_exhausted",
        }
    }

    /// Index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What an overloaded server does to arrivals beyond what it serves: leaves them
    /// unanswered past the timeout (queued, or their SYN dropped by a full accept queue),
    /// resets them (an overflowing accept queue with `tcp_abort_on_overflow`, a proxy's
    /// upstream gone), or closes connections it will not serve. Not a refusal (nothing
    /// listening), a malformed answer, TLS, or the generator's own limits.
    pub fn of_an_overload(self) -> bool {
        matches!(
            self,
            ErrorKind::Timeout | ErrorKind::ConnReset | ErrorKind::Eof
        )
    }

    /// The generator failed, not the server: the run measured the generator.
    pub fn generator_side(self) -> bool {
        matches!(self, ErrorKind::FdLimit | ErrorKind::PortsExhausted)
    }
}

/// Classifies an I/O error by errno first, then by its kind.
pub fn classify(e: &io::Error) -> ErrorKind {
    if let Some(errno) = e.raw_os_error() {
        return match Errno::from_raw(errno) {
            Errno::ECONNREFUSED => ErrorKind::ConnRefused,
            Errno::ECONNRESET | Errno::ECONNABORTED | Errno::EPIPE => ErrorKind::ConnReset,
            Errno::ETIMEDOUT => ErrorKind::Timeout,
            Errno::EMFILE | Errno::ENFILE => ErrorKind::FdLimit,
            Errno::EADDRNOTAVAIL => ErrorKind::PortsExhausted,
            _ => ErrorKind::ConnError,
        };
    }
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::ConnRefused,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => ErrorKind::ConnReset,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        io::ErrorKind::UnexpectedEof => ErrorKind::Eof,
        io::ErrorKind::InvalidData => ErrorKind::BadResponse,
        io::ErrorKind::AddrNotAvailable => ErrorKind::PortsExhausted,
        _ => ErrorKind::ConnError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_decides() {
        let k = |n: Errno| classify(&io::Error::from_raw_os_error(n as i32));
        assert_eq!(k(Errno::ECONNREFUSED), ErrorKind::ConnRefused);
        assert_eq!(k(Errno::ECONNRESET), ErrorKind::ConnReset);
        assert_eq!(k(Errno::EPIPE), ErrorKind::ConnReset);
        assert_eq!(k(Errno::ECONNABORTED), ErrorKind::ConnReset);
        assert_eq!(k(Errno::ETIMEDOUT), ErrorKind::Timeout);
        assert_eq!(k(Errno::EMFILE), ErrorKind::FdLimit);
        assert_eq!(k(Errno::ENFILE), ErrorKind::FdLimit);
        assert_eq!(k(Errno::EADDRNOTAVAIL), ErrorKind::PortsExhausted);
        assert_eq!(k(Errno::EHOSTUNREACH), ErrorKind::ConnError);
        let kind = |k| classify(&io::Error::from(k));
        assert_eq!(kind(io::ErrorKind::UnexpectedEof), ErrorKind::Eof);
        assert_eq!(kind(io::ErrorKind::InvalidData), ErrorKind::BadResponse);
        assert_eq!(kind(io::ErrorKind::Other), ErrorKind::ConnError);
    }

    #[test]
    fn names_are_stable_and_match_serde() {
        for k in ErrorKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
            assert_eq!(ErrorKind::ALL[k.index()], k);
        }
        assert!(ErrorKind::FdLimit.generator_side());
        assert!(!ErrorKind::Timeout.generator_side());
    }
}
