//! Syscall names as strace prints them, to the x86_64 numbers `run`'s classes are keyed by
//! (`trapdetect_common::offcpu::class_of_x86_64`): every number that function puts in a class
//! of its own. A name is the same on every architecture, so an arm64 log is classed through
//! this table too (arm64 lacks some of the names, never gives one another meaning).

/// (name, x86_64 number), from arch/x86/entry/syscalls/syscall_64.tbl.
pub const X86_64: &[(&str, u64)] = &[
    ("read", 0),
    ("write", 1),
    ("open", 2),
    ("close", 3),
    ("stat", 4),
    ("fstat", 5),
    ("lstat", 6),
    ("poll", 7),
    ("lseek", 8),
    ("pread64", 17),
    ("pwrite64", 18),
    ("readv", 19),
    ("writev", 20),
    ("access", 21),
    ("select", 23),
    ("pause", 34),
    ("nanosleep", 35),
    ("sendfile", 40),
    ("accept", 43),
    ("recvfrom", 45),
    ("recvmsg", 47),
    ("execve", 59),
    ("fcntl", 72),
    ("flock", 73),
    ("fsync", 74),
    ("fdatasync", 75),
    ("truncate", 76),
    ("ftruncate", 77),
    ("getdents", 78),
    ("getcwd", 79),
    ("chdir", 80),
    ("fchdir", 81),
    ("rename", 82),
    ("mkdir", 83),
    ("rmdir", 84),
    ("creat", 85),
    ("link", 86),
    ("unlink", 87),
    ("symlink", 88),
    ("readlink", 89),
    ("chmod", 90),
    ("fchmod", 91),
    ("chown", 92),
    ("fchown", 93),
    ("lchown", 94),
    ("rt_sigtimedwait", 128),
    ("rt_sigsuspend", 130),
    ("utime", 132),
    ("statfs", 137),
    ("setxattr", 188),
    ("lsetxattr", 189),
    ("getxattr", 191),
    ("lgetxattr", 192),
    ("fgetxattr", 193),
    ("listxattr", 194),
    ("llistxattr", 195),
    ("futex", 202),
    ("getdents64", 217),
    ("fadvise64", 221),
    ("clock_nanosleep", 230),
    ("epoll_wait", 232),
    ("utimes", 235),
    ("openat", 257),
    ("mkdirat", 258),
    ("mknodat", 259),
    ("fchownat", 260),
    ("futimesat", 261),
    ("newfstatat", 262),
    ("unlinkat", 263),
    ("renameat", 264),
    ("linkat", 265),
    ("symlinkat", 266),
    ("readlinkat", 267),
    ("fchmodat", 268),
    ("faccessat", 269),
    ("pselect6", 270),
    ("ppoll", 271),
    ("sync_file_range", 277),
    ("utimensat", 280),
    ("epoll_pwait", 281),
    ("fallocate", 285),
    ("accept4", 288),
    ("preadv", 295),
    ("pwritev", 296),
    ("recvmmsg", 299),
    ("syncfs", 306),
    ("renameat2", 316),
    ("execveat", 322),
    ("copy_file_range", 326),
    ("preadv2", 327),
    ("pwritev2", 328),
    ("statx", 332),
    ("openat2", 437),
    ("faccessat2", 439),
    ("epoll_pwait2", 441),
    ("futex_waitv", 449),
    ("fchmodat2", 452),
    ("futex_wake", 454),
    ("futex_wait", 455),
    ("futex_requeue", 456),
];

/// The x86_64 number of the syscall strace calls `name` (strace's aliases: `fstatat64` and
/// `newfstatat` are one call; `stat64`, `lstat64` the 32-bit names of two).
pub fn number(name: &str) -> Option<u64> {
    let name = match name {
        "fstatat64" => "newfstatat",
        "stat64" => "stat",
        "lstat64" => "lstat",
        n => n,
    };
    X86_64.iter().find(|(n, _)| *n == name).map(|(_, nr)| *nr)
}

#[cfg(test)]
mod tests {
    use trapdetect_common::offcpu::{CLASS_OTHER, class_of_x86_64};

    use super::*;

    /// Every number `class_of_x86_64` classes has its name here, once.
    #[test]
    fn every_classed_number_is_named_once() {
        for nr in 0..512u64 {
            let named = X86_64.iter().filter(|(_, n)| *n == nr).count();
            if class_of_x86_64(nr).0 != CLASS_OTHER {
                assert_eq!(named, 1, "syscall {nr} has a class and no name");
            }
        }
        let mut names: Vec<&str> = X86_64.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), X86_64.len());
    }

    /// The numbers are the kernel's: the x86_64 uapi header (linux-libc-dev) where it names
    /// the call (older headers lack the newest calls).
    #[test]
    fn the_numbers_are_the_uapi_headers() {
        let header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
        let text = std::fs::read_to_string(header).expect("linux-libc-dev's uapi header");
        let mut found = 0;
        for l in text.lines() {
            let mut w = l.split_whitespace();
            let (Some("#define"), Some(n), Some(v)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let (Some(name), Ok(v)) = (n.strip_prefix("__NR_"), v.parse::<u64>()) else {
                continue;
            };
            if let Some((_, nr)) = X86_64.iter().find(|(n, _)| *n == name) {
                assert_eq!(*nr, v, "{name}");
                found += 1;
            }
        }
        assert!(found >= 96, "{found} of {} names in {header}", X86_64.len());
        assert_eq!(number("fstatat64"), Some(262));
        assert_eq!(number("nosuchcall"), None);
    }
}
