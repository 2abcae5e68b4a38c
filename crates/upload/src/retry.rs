//! When to try again: exponential backoff with full jitter (a random wait in
//! `[0, min(cap, base * 2^n))`), and the server's `Retry-After` (delay in
//! seconds, or an HTTP date in any of RFC 9110's three forms).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A small random source (no crate needed): xorshift64*, seeded from the
/// process's random hash keys.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Rng {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0));
        Rng(h.finish() | 1)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-enough in `[0, bound)`; 0 when `bound` is 0.
    fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            0
        } else {
            self.next_u64() % bound
        }
    }
}

/// The wait before retry number `retry` (0 for the first retry).
pub(crate) fn backoff(rng: &mut Rng, base: Duration, cap: Duration, retry: u32) -> Duration {
    let ceiling = base.saturating_mul(1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX)).min(cap);
    Duration::from_micros(rng.below(ceiling.as_micros().min(u64::MAX as u128) as u64))
}

/// `Retry-After` as a delay from `now`: whole seconds or an HTTP date (a
/// date in the past gives zero). `None` when it is neither.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX).min(u32::MAX as u64)));
    }
    let at = parse_http_date(v)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime (`Sun Nov  6 08:49:37 1994`).
pub(crate) fn parse_http_date(s: &str) -> Option<SystemTime> {
    let cleaned: String = s.chars().map(|c| if c == ',' || c == '-' { ' ' } else { c }).collect();
    let tokens: Vec<&str> = cleaned.split_whitespace().collect();
    if tokens.len() < 5 {
        return None;
    }
    let month = tokens.iter().skip(1).find_map(|t| MONTHS.iter().position(|m| t.eq_ignore_ascii_case(m)))? as u32 + 1;
    let time = tokens.iter().find(|t| t.contains(':'))?;
    let hms: Vec<u32> = time.split(':').map(|p| p.parse().ok()).collect::<Option<Vec<u32>>>()?;
    let [h, mi, se] = hms[..] else { return None };
    let numbers: Vec<&str> = tokens.iter().skip(1).filter(|t| !t.contains(':') && t.bytes().all(|b| b.is_ascii_digit())).copied().collect();
    // In all three forms the day comes before the year.
    let [day, year] = numbers[..] else { return None };
    let day: u32 = day.parse().ok()?;
    let mut year: i64 = year.parse().ok()?;
    if year < 100 {
        year += if year < 70 { 2000 } else { 1900 };
    }
    if !(1..=31).contains(&day) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + se);
    u64::try_from(secs).ok().map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(784_111_777); // 1994-11-06 08:49:37 UTC
        assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), Some(t));
        assert_eq!(parse_http_date("Sun Nov  6 08:49:37 1994"), Some(t));
        assert_eq!(parse_http_date("soon"), None);
        assert_eq!(parse_retry_after("120", t), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", t), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", t), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("-1", t), None);
    }

    #[test]
    fn backoff_stays_under_the_ceiling() {
        let mut rng = Rng::new();
        let (base, cap) = (Duration::from_millis(100), Duration::from_secs(1));
        let mut seen_high = false;
        for retry in 0..40 {
            for _ in 0..50 {
                let d = backoff(&mut rng, base, cap, retry);
                let ceiling = (base * 2u32.pow(retry.min(20))).min(cap);
                assert!(d < ceiling, "{d:?} {retry}");
                seen_high |= d > Duration::from_millis(500);
            }
        }
        assert!(seen_high, "full jitter reaches up to the cap");
    }
}
