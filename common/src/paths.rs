//! Path-lookup aggregation: the kernel counts calls per *path key* (syscall, hashed path, the
//! filesystem a relative path starts on) and sends each key's path string once, on first
//! sighting. Strings are only ever sampled; counts are exact.

use crate::hist::HIST_BUCKETS;

/// Longest path prefix captured; longer paths are hashed over this prefix and flagged.
pub const PATH_CAP: usize = 512;

/// The path began with `/`.
pub const PF_ABSOLUTE: u16 = 1;
/// Relative to a directory file descriptor (not the working directory).
pub const PF_DIRFD: u16 = 2;
/// No path walked: `getcwd`, `fchdir`, or an empty path with `AT_EMPTY_PATH`.
pub const PF_NO_PATH: u16 = 4;
/// `AT_SYMLINK_NOFOLLOW` was set (`newfstatat` used as `lstat`).
pub const PF_NOFOLLOW: u16 = 8;
/// The path was longer than [`PATH_CAP`] and was truncated.
pub const PF_TRUNCATED: u16 = 16;
/// The path could not be read from user memory.
pub const PF_UNREADABLE: u16 = 32;

/// Length in bytes (without the NUL) of a string `bpf_probe_read_user_str` returned `n` for,
/// or `None` when the read failed. The helper counts the NUL, but returns 0 instead of 1 for an
/// empty string on kernels before 6.18 (5.10, 6.1, 6.12 measured): glibc's `fstat(fd)` is
/// `newfstatat(fd, "", AT_EMPTY_PATH)`, so 0 is a valid empty path, not a lost one.
#[inline(always)]
pub fn user_str_len(n: i64) -> Option<usize> {
    if n < 0 {
        None
    } else {
        Some((n.max(1) - 1) as usize)
    }
}

/// Key of the `PATH_STATS` map.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathKey {
    /// 64-bit hash of the path bytes (0 when there is no path).
    pub hash: u64,
    /// `s_dev` of the filesystem a relative walk starts on (cwd or dirfd), 0 for absolute paths.
    pub base_dev: u32,
    /// Syscall kind (see [`crate::syscalls`]).
    pub kind: u16,
    /// `PF_*` flags.
    pub flags: u16,
}

/// Value of the `PATH_STATS` map (one per CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PathStat {
    /// Completed calls.
    pub count: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Summed latency, ns.
    pub sum_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
    /// Latency histogram, see [`crate::hist`].
    pub hist: [u32; HIST_BUCKETS as usize],
}

impl PathStat {
    /// All zero.
    pub const ZERO: PathStat = PathStat {
        count: 0,
        errors: 0,
        sum_ns: 0,
        max_ns: 0,
        hist: [0; HIST_BUCKETS as usize],
    };
}

/// A syscall in flight, between its enter and exit tracepoints. Slot `tid % INFLIGHT_SLOTS`
/// of the `INFLIGHT` array (a plain array: cheaper than a hash insert and delete per call).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Inflight {
    /// Thread id that owns the slot (0 = empty).
    pub tid: u32,
    /// Padding.
    pub _pad: u32,
    /// Entry timestamp, ns (`bpf_ktime_get_ns`).
    pub ts: u64,
    /// User pointer of the path argument, to read the string again on first sighting.
    pub uptr: u64,
    /// The key the call will be counted under.
    pub key: PathKey,
}

/// Number of in-flight slots (a power of two).
pub const INFLIGHT_SLOTS: u32 = 65536;

/// First sighting of a key: sent through the `PATH_EVENTS` ring buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PathEvent {
    /// The key.
    pub key: PathKey,
    /// Process (tgid) that made the call.
    pub tgid: u32,
    /// Bytes read including the NUL, or a negative errno.
    pub len: i32,
    /// The path bytes (untrusted; not necessarily UTF-8).
    pub path: [u8; PATH_CAP],
}

#[cfg(feature = "user")]
unsafe impl aya::Pod for PathKey {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for PathStat {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for PathEvent {}
#[cfg(feature = "user")]
unsafe impl aya::Pod for Inflight {}

/// FNV-style mixing of one 8-byte word; kernel and user side must agree.
#[inline(always)]
pub fn mix(h: u64, w: u64) -> u64 {
    let h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3);
    h ^ (h >> 29)
}

/// Hash seed.
pub const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// Hash of a path as the kernel side computes it: 8-byte little-endian words, the last one
/// zero-padded, then the length.
pub fn hash_path(bytes: &[u8]) -> u64 {
    let mut h = HASH_SEED;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(w));
    }
    mix(h, bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: kernels 5.10-6.12 return 0 for `""` (6.18 returns 1); both are an empty
    /// path, which `fstat(3)` passes on every call. Only a negative return is a failed read.
    #[test]
    fn empty_string_reads_are_valid_on_old_and_new_kernels() {
        assert_eq!(user_str_len(0), Some(0), "5.10-6.12");
        assert_eq!(user_str_len(1), Some(0), "6.18");
        assert_eq!(user_str_len(5), Some(4));
        assert_eq!(user_str_len(-14), None, "EFAULT");
    }
}
