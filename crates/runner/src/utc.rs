//! UTC as iodig writes and reads it, without a time zone database: run directory names
//! (`20261122-170203`), RFC 3339 in messages and notes, and `--start-at`'s RFC 3339 input.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `YYYY-MM-DD(T| )HH:MM:SS[.fraction](Z|±HH:MM)`.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos = 0u64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let f = &frac[..digits.min(9)];
        nanos = f.parse::<u64>().ok()? * 10u64.pow(9 - f.len() as u32);
        rest = &frac[digits..];
    }
    let offset_secs = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (oh, om) = rest[1..].split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            let (oh, om): (i64, i64) = (oh.parse().ok()?, om.parse().ok()?);
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = iodig_model::utc::days_from_civil(y, mo as u32, d as u32);
    let unix = days * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
    let unix = u64::try_from(unix).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(unix) + Duration::from_nanos(nanos))
}

/// RFC 3339 in UTC with milliseconds, as messages and run.json notes show times.
pub fn format_utc(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let stamp = timestamp_utc(t);
    // `YYYYMMDD-HHMMSS` → `YYYY-MM-DDTHH:MM:SS`.
    format!(
        "{}-{}-{}T{}:{}:{}.{:03}Z",
        &stamp[0..4],
        &stamp[4..6],
        &stamp[6..8],
        &stamp[9..11],
        &stamp[11..13],
        &stamp[13..15],
        ms % 1000
    )
}

/// `YYYYMMDD-HHMMSS` in UTC, for directory names that sort by time.
pub fn timestamp_utc(t: SystemTime) -> String {
    let secs = unix_ms(t) / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = iodig_model::utc::civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Milliseconds since the Unix epoch (0 before it), as run.json and every series stamp time.
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp_utc(UNIX_EPOCH), "19700101-000000");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_363_200 + 3723); // 2026-11-22 17:02:03 UTC
        assert_eq!(timestamp_utc(t), "20261122-170203");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29 00:00:00 UTC
        assert_eq!(timestamp_utc(leap), "20000229-000000");
    }
}
