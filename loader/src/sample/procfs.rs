//! The per-thread /proc files the sampling backend reads, parsed: what a thread is doing now
//! (`syscall`, `stat`'s state), what the scheduler has counted for it (`schedstat`) and what a
//! descriptor points at without touching its filesystem (`fdinfo`). Pure functions, tested on
//! recorded lines.

/// `/proc/PID/task/TID/syscall`: where the thread is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syscall {
    /// On a CPU (the kernel does not stop it to look).
    Running,
    /// Blocked outside any syscall (a page fault): `-1 SP PC`.
    Outside,
    /// In syscall `nr`, with its six arguments.
    In {
        /// Syscall number of the host's architecture.
        nr: u64,
        /// Arguments, as the registers hold them.
        args: [u64; 6],
    },
}

fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse::<i64>().ok().map(|v| v as u64),
    }
}

/// Parses `syscall`'s one line: `running`, `-1 SP PC`, or `NR A0 A1 A2 A3 A4 A5 SP PC`.
pub fn parse_syscall(text: &str) -> Option<Syscall> {
    let text = text.trim();
    if text == "running" {
        return Some(Syscall::Running);
    }
    let mut f = text.split_ascii_whitespace();
    let nr = f.next()?;
    if nr == "-1" {
        return Some(Syscall::Outside);
    }
    let nr = nr.parse::<u64>().ok()?;
    let mut args = [0u64; 6];
    for a in &mut args {
        *a = num(f.next()?)?;
    }
    Some(Syscall::In { nr, args })
}

/// The state letter of `stat` (`R` running or runnable, `S` sleeping, `D` uninterruptible,
/// `T`/`t` stopped, `Z`, `X`, `I` idle kernel thread), read after the last `)` of the comm.
pub fn parse_state(stat: &[u8]) -> Option<u8> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat[close + 1..]
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

pub use crate::host::process::parse_schedstat;

/// `fdinfo/N`: (mount id, inode number) of the open file; the inode line exists from Linux
/// 5.14 (0 before).
pub fn parse_fdinfo(text: &str) -> Option<(u32, u64)> {
    let mut mnt = None;
    let mut ino = 0;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("mnt_id:") {
            mnt = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("ino:") {
            ino = v.trim().parse().unwrap_or(0);
        }
    }
    Some((mnt?, ino))
}

/// What a descriptor's link names when it is not a file on a filesystem: a socket or a pipe
/// (a read there waits for a peer).
pub fn is_socket_or_pipe(link: &[u8]) -> bool {
    link.starts_with(b"socket:") || link.starts_with(b"pipe:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_as_the_kernel_writes_them() {
        // Recorded on 6.18 (x86_64): a php-fpm worker in flock(7, LOCK_EX), one in accept on
        // its listener, one in a page fault, one on a CPU.
        assert_eq!(
            parse_syscall("73 0x7 0x2 0x0 0x0 0x55d0c1a4e2b0 0x0 0x7ffd2b1c5a58 0x7f0e4b7a1d3b\n"),
            Some(Syscall::In {
                nr: 73,
                args: [7, 2, 0, 0, 0x55d0c1a4e2b0, 0]
            })
        );
        assert!(matches!(
            parse_syscall("43 0x5 0x0 0x0 0x0 0x0 0x0 0x7ffc8 0x7f1"),
            Some(Syscall::In { nr: 43, .. })
        ));
        assert_eq!(
            parse_syscall("-1 0x7ffd2b1c5a58 0x55d0c0e1a000\n"),
            Some(Syscall::Outside)
        );
        assert_eq!(parse_syscall("running\n"), Some(Syscall::Running));
        assert_eq!(parse_syscall(""), None);
        assert_eq!(parse_syscall("73 0x7"), None);
        assert_eq!(parse_syscall("x 0x7 0 0 0 0 0"), None);
    }

    #[test]
    fn state_after_a_comm_with_parentheses_and_spaces() {
        assert_eq!(
            parse_state(b"4242 (php-fpm: pool (x) y) S 1 4242 4242 0 -1"),
            Some(b'S')
        );
        assert_eq!(parse_state(b"7 (a) D 1"), Some(b'D'));
        assert_eq!(parse_state(b"no comm"), None);
    }

    #[test]
    fn fdinfo() {
        let fdinfo = "pos:\t0\nflags:\t0100002\nmnt_id:\t1234\nino:\t98765\nlock:\t1: FLOCK  ADVISORY  WRITE 4242 00:2e:98765 0 EOF\n";
        assert_eq!(parse_fdinfo(fdinfo), Some((1234, 98765)));
        assert_eq!(parse_fdinfo("pos:\t0\nmnt_id:\t7\n"), Some((7, 0)));
        assert_eq!(parse_fdinfo("pos:\t0\n"), None);
        assert!(is_socket_or_pipe(b"socket:[4242]"));
        assert!(is_socket_or_pipe(b"pipe:[17]"));
        assert!(!is_socket_or_pipe(b"/tmp/socket:[1]"));
    }
}
