//! Latency histogram layout, shared by kernel and user side: log-linear buckets of nanoseconds,
//! four per power of two (each bucket spans about 19 % of its value, so a percentile read from
//! it is within about ±9 %), from 256 ns to about 68 s.
//!
//! Bucket 0 holds everything below 256 ns; the last bucket holds everything from about 60 s up.

/// Smallest octave with its own buckets: 2^8 ns = 256 ns.
pub const MIN_OCTAVE: u32 = 8;
/// Octaves covered: 2^8 .. 2^36 ns.
pub const OCTAVES: u32 = 28;
/// Buckets per octave.
pub const SUB: u32 = 4;
/// Number of buckets: one below 256 ns, then four per octave.
pub const HIST_BUCKETS: u32 = 1 + OCTAVES * SUB;

/// floor(log2(v)) for v > 0 (branchy, no loops: verifier friendly).
#[inline(always)]
fn log2(mut v: u64) -> u32 {
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
    r
}

/// Bucket index of a latency in nanoseconds.
#[inline(always)]
pub fn bucket_of(ns: u64) -> u32 {
    if ns < (1u64 << MIN_OCTAVE) {
        return 0;
    }
    let oct = log2(ns);
    // The two bits below the leading one pick the quarter of the octave.
    let sub = ((ns >> (oct - 2)) & 3) as u32;
    let b = 1 + (oct - MIN_OCTAVE) * SUB + sub;
    if b >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        b
    }
}

/// Lower bound (ns) of a bucket.
pub const fn bucket_low_ns(b: u32) -> u64 {
    if b == 0 {
        return 0;
    }
    let oct = MIN_OCTAVE + (b - 1) / SUB;
    let sub = ((b - 1) % SUB) as u64;
    (1u64 << oct) + sub * (1u64 << (oct - 2))
}

/// Upper bound (ns, exclusive) of a bucket; the last bucket is open-ended.
pub const fn bucket_high_ns(b: u32) -> u64 {
    if b == 0 {
        return 1u64 << MIN_OCTAVE;
    }
    bucket_low_ns(b) + (1u64 << (MIN_OCTAVE + (b - 1) / SUB - 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(255), 0);
        assert_eq!(bucket_high_ns(0), 256);
        for b in 1..HIST_BUCKETS {
            assert_eq!(bucket_low_ns(b), bucket_high_ns(b - 1), "bucket {b}");
            assert_eq!(bucket_of(bucket_low_ns(b)), b);
            assert_eq!(bucket_of(bucket_high_ns(b) - 1), b);
        }
        assert_eq!(bucket_of(u64::MAX), HIST_BUCKETS - 1);
        // 2.389 ms lands in [2.097, 2.621) ms.
        let b = bucket_of(2_389_000);
        assert_eq!(
            (bucket_low_ns(b), bucket_high_ns(b)),
            (2_097_152, 2_621_440)
        );
    }
}
