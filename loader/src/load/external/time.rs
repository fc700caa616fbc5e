//! RFC 3339 timestamps as the generators write them (vegeta, k6: `2024-05-09T14:34:45.625742514+02:00`),
//! to Unix seconds, without a date library: the join needs only the instant.

/// Days from 1970-01-01 to a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date (proleptic Gregorian) of a day count from 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// An instant, ns since the Unix epoch, as RFC 3339 in UTC with milliseconds
/// (`2024-12-05T12:00:00.500Z`).
pub fn format_rfc3339(unix_ns: i128) -> String {
    let ms = unix_ns.div_euclid(1_000_000);
    let (secs, ms) = (ms.div_euclid(1_000) as i64, ms.rem_euclid(1_000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3_600,
        sod % 3_600 / 60,
        sod % 60
    )
}

fn num(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Unix seconds of an RFC 3339 timestamp (`T` or space between date and time, optional
/// fraction, `Z` or `±HH:MM`); `None` when it is not one.
pub fn rfc3339(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.len() < 20 || !s.is_char_boundary(10) || !s.is_char_boundary(19) {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let mut d = date.split('-');
    let (y, mo, da) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (hms, mut rest) = rest.split_at(8);
    let mut t = hms.split(':');
    let (h, mi, se) = (num(t.next()?)?, num(t.next()?)?, num(t.next()?)?);
    if h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut frac = 0.0;
    if let Some(f) = rest.strip_prefix('.') {
        let n = f.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 12 {
            return None;
        }
        frac = format!("0.{}", &f[..n]).parse().ok()?;
        rest = &f[n..];
    }
    if !rest.is_ascii() {
        return None;
    }
    let offset = match rest {
        "Z" | "z" => 0i64,
        _ if rest.len() == 6 => {
            let sign = match &rest[..1] {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            let (oh, om) = (num(&rest[1..3])?, num(&rest[4..6])?);
            if &rest[3..4] != ":" || oh > 23 || om > 59 {
                return None;
            }
            sign * (oh as i64 * 3600 + om as i64 * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y as i64, mo, da);
    let secs = days * 86_400 + h as i64 * 3600 + mi as i64 * 60 + se as i64 - offset;
    Some(secs as f64 + frac)
}

#[cfg(test)]
mod tests {
    use super::{format_rfc3339, rfc3339};

    #[test]
    fn offsets_fractions_and_garbage() {
        assert_eq!(rfc3339("1970-01-01T00:00:00Z"), Some(0.0));
        // `date -d 2024-05-09T12:34:45Z +%s`
        assert_eq!(rfc3339("2024-05-09T12:34:45Z"), Some(1_715_258_085.0));
        assert_eq!(rfc3339("2024-05-09T14:34:45+02:00"), Some(1_715_258_085.0));
        let t = rfc3339("2024-05-09T14:34:45.625742514+02:00").unwrap();
        assert!((t - 1_715_258_085.625_742_5).abs() < 1e-6, "{t}");
        assert_eq!(rfc3339("2000-02-29T00:00:00-00:30"), Some(951_784_200.0));
        for bad in [
            "",
            "2024-05-09",
            "2024-13-09T12:34:45Z",
            "2024-05-09T12:34:45",
            "2024-05-09T12:34:45.Z",
            "2024-05-09T12:34:45+0200",
            "2024-05-09T12:3é:45Z",
            "ééééééééééééééééééééé",
            "2024-05-09T12:34:45é:000",
        ] {
            assert_eq!(rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_utc_with_milliseconds_and_reads_back() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000Z");
        // `date -u -d @1733400000.5 +%FT%T.%3NZ`
        assert_eq!(
            format_rfc3339(1_733_400_000_500_000_000),
            "2024-12-05T12:00:00.500Z"
        );
        assert_eq!(
            format_rfc3339(951_782_400_999_999_999),
            "2000-02-29T00:00:00.999Z"
        );
        assert_eq!(format_rfc3339(-1_000_000), "1969-12-31T23:59:59.999Z");
        for ns in [1_715_258_085_625_000_000i128, 4_102_444_800_000_000_000] {
            let back = rfc3339(&format_rfc3339(ns)).unwrap();
            assert_eq!((back * 1e3).round() as i128, ns / 1_000_000);
        }
    }
}
