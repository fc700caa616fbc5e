//! Latency histogram layout: log2 buckets of nanoseconds, shared by kernel and user side.
//!
//! Bucket `b` holds latencies in `[2^b, 2^(b+1))` ns; bucket 0 also holds 0 and 1 ns; the last
//! bucket holds everything from `2^(HIST_BUCKETS-1)` ns (about 2.1 s) up.

/// Number of buckets.
pub const HIST_BUCKETS: u32 = 32;

/// Bucket index of a latency in nanoseconds (branchy floor(log2), verifier friendly).
#[inline(always)]
pub fn bucket_of(ns: u64) -> u32 {
    let mut v = ns;
    let mut r = 0u32;
    if v >> 32 != 0 {
        v >>= 32;
        r += 32;
    }
    if v >> 16 != 0 {
        v >>= 16;
        r += 16;
    }
    if v >> 8 != 0 {
        v >>= 8;
        r += 8;
    }
    if v >> 4 != 0 {
        v >>= 4;
        r += 4;
    }
    if v >> 2 != 0 {
        v >>= 2;
        r += 2;
    }
    if v >> 1 != 0 {
        r += 1;
    }
    if r >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        r
    }
}

/// Lower bound (ns) of a bucket.
pub const fn bucket_low_ns(b: u32) -> u64 {
    if b == 0 { 0 } else { 1u64 << b }
}

/// Upper bound (ns, exclusive) of a bucket; the last bucket is open-ended.
pub const fn bucket_high_ns(b: u32) -> u64 {
    1u64 << (b + 1)
}
