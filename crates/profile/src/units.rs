//! Durations with units, shared by the agent's options and the CLI's flags.

/// Parses `N[ns|us|ms|s]`; a bare number is nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    parse_scaled(s, &[("", 1.0), ("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]).ok_or_else(|| {
        format!("'{s}' is not a duration; use a positive number with an optional unit ns, us, ms or s (bare numbers are nanoseconds), e.g. 10ms")
    })
}

/// Parses a wall-clock duration for the CLI: `N[ms|s|m|h]`, bare number = seconds.
pub fn parse_wall_duration_ns(s: &str) -> Result<u64, String> {
    parse_scaled(s, &[("", 1e9), ("ms", 1e6), ("s", 1e9), ("m", 60e9), ("min", 60e9), ("h", 3600e9)])
        .ok_or_else(|| format!("'{s}' is not a duration; use e.g. 30s, 5m, 1h or 500ms"))
}

/// Parses a size in bytes: `N[k|m|g]` (binary multiples; `kb`, `KiB` also
/// accepted), bare numbers are bytes. Zero is allowed.
pub fn parse_size_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => 0,
    };
    let n: Option<u64> = num.parse().ok();
    match (n, scale) {
        (Some(n), scale) if scale > 0 => {
            n.checked_mul(scale).filter(|&v| v <= i32::MAX as u64).ok_or_else(|| format!("'{s}' is too large; the JVM accepts at most 2g"))
        }
        _ => Err(format!("'{s}' is not a size; use a whole number of bytes with an optional suffix k, m or g, e.g. 512k")),
    }
}

fn parse_scaled(s: &str, units: &[(&str, f64)]) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = units.iter().find(|(u, _)| *u == unit.trim())?.1;
    let n: f64 = num.parse().ok()?;
    let v = n * scale;
    (v.is_finite() && (1.0..1e18).contains(&v)).then(|| v.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("1000000"), Ok(1_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert!(parse_duration_ns("-5ms").is_err());
        assert!(parse_duration_ns("abc").is_err());
        assert!(parse_duration_ns("10h").is_err());
        assert!(parse_duration_ns("0").is_err());
        assert_eq!(parse_wall_duration_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_wall_duration_ns("2m"), Ok(120_000_000_000));
        assert!(parse_wall_duration_ns("2 weeks").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("512k"), Ok(512 * 1024));
        assert_eq!(parse_size_bytes("1m"), Ok(1 << 20));
        assert_eq!(parse_size_bytes("2KiB"), Ok(2048));
        assert_eq!(parse_size_bytes("0"), Ok(0));
        assert_eq!(parse_size_bytes("100"), Ok(100));
        assert!(parse_size_bytes("-1").is_err());
        assert!(parse_size_bytes("lots").is_err());
        assert!(parse_size_bytes("1.5m").is_err());
        assert!(parse_size_bytes("4g").is_err());
    }
}
