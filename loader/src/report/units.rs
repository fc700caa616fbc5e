//! Durations, sizes and counts in the units a person reads ("8.0 s", not "7.995407s"), shared
//! by the text, HTML and chart renderers.

/// A count or rate in few characters: 950, 12.5k, 3.2M.
pub fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 || (a - a.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A duration given in µs, in the unit that reads best: 850 µs, 12.5 ms, 8.0 s.
pub fn duration_us(us: f64) -> String {
    // One decimal below 10 of the unit; none above, or when it would be `.0` (10 ms, not 10.0).
    let fmt = |v: f64, unit: &str| {
        if v.abs() >= 100.0 || (v.abs() >= 10.0 && (v - v.round()).abs() < 0.05) {
            format!("{v:.0} {unit}")
        } else {
            format!("{v:.1} {unit}")
        }
    };
    let a = us.abs();
    if a >= 1e6 {
        fmt(us / 1e6, "s")
    } else if a >= 1e3 {
        fmt(us / 1e3, "ms")
    } else if a == 0.0 {
        "0 µs".into()
    } else {
        fmt(us, "µs")
    }
}

/// A number for people: integers as they are, others to 3 significant figures.
pub fn fmt_num(v: f64) -> String {
    if (v == v.trunc() && v.abs() < 1e15) || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A number whose key names its unit, in human units (`_us`, `_ms`, `_s`, `_bytes`).
pub fn by_key(key: &str, v: f64) -> String {
    if key.ends_with("_us") {
        duration_us(v)
    } else if key.ends_with("_ms") || key.ends_with("_ms_per_request") {
        // A zero reads in the key's own unit.
        if v == 0.0 {
            "0 ms".into()
        } else {
            duration_us(v * 1e3)
        }
    } else if key.ends_with("_s") && !key.ends_with("_per_s") {
        seconds(v)
    } else if key.ends_with("_bytes") {
        bytes(v)
    } else {
        fmt_num(v)
    }
}

/// A size in bytes: 512 B, 1.5 KiB, 3.2 MiB.
pub fn bytes(v: f64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = v;
    let mut i = 0;
    while x.abs() >= 1024.0 && i < U.len() - 1 {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{x:.0} B")
    } else {
        format!("{x:.1} {}", U[i])
    }
}

/// Seconds, in the unit that reads best (see [`duration_us`]).
pub fn seconds(s: f64) -> String {
    // A zero given in seconds reads as seconds ("below 1,000 in 0 s"), not "0 µs".
    if s == 0.0 {
        return "0 s".into();
    }
    duration_us(s * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human(950.0), "950");
        assert_eq!(human(12_500.0), "12k");
        assert_eq!(human(1_500.0), "1.5k");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(duration_us(850.0), "850 µs");
        assert_eq!(seconds(0.0), "0 s");
        assert_eq!(by_key("below_1000_in_s", 0.0), "0 s");
        assert_eq!(by_key("mean_wait_ms", 0.0), "0 ms");
        assert_eq!(by_key("mean_wait_ms", 0.078), "78 µs");
        assert_eq!(seconds(8.0), "8.0 s");
        assert_eq!(duration_us(12_500.0), "12.5 ms");
        assert_eq!(duration_us(7_995_407.0), "8.0 s");
        assert_eq!(seconds(10.0), "10 s");
        assert_eq!(duration_us(10_000.0), "10 ms");
        assert_eq!(duration_us(35_200.0), "35.2 ms");
        assert_eq!(duration_us(5.0), "5.0 µs");
    }

    #[test]
    fn human_units_follow_the_key() {
        assert_eq!(by_key("mean_us", 1500.0), "1.5 ms");
        assert_eq!(by_key("window_s", 7.995407), "8.0 s");
        assert_eq!(by_key("body_bytes", 1536.0), "1.5 KiB");
        assert_eq!(by_key("offered_rate_per_s", 100.0), "100");
        assert_eq!(by_key("lookups", 7.0), "7");
    }
}
