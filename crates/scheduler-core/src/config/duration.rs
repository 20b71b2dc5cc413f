//! Go `time.Duration` text (`15s`, `1m30s`, `500ms`), as used by metav1.Duration fields.

use std::time::Duration;

/// Parses a Go duration string. Negative durations are rejected: every duration in the
/// scheduler config must be positive, so a sign is a mistake worth reporting early.
pub fn parse_go_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".to_string());
    }
    let (neg, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(format!("invalid duration {text:?}"));
    }
    let mut total: u128 = 0; // nanoseconds
    let mut rest = body;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, after) = rest.split_at(num_end);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!("invalid duration {text:?}"));
        }
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in duration {text:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {text:?}")),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| format!("invalid duration {text:?}"))?
        };
        let mut frac_ns: u128 = 0;
        let mut div: u128 = 1;
        for b in frac_part.bytes().take(18) {
            frac_ns = frac_ns * 10 + u128::from(b - b'0');
            div *= 10;
        }
        total = total
            .checked_add(int * scale + frac_ns * scale / div)
            .ok_or_else(|| format!("duration {text:?} is too large"))?;
        rest = next;
    }
    if neg && total > 0 {
        return Err(format!("duration {text:?} is negative"));
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| format!("duration {text:?} is too large"))?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

fn frac(nanos: u32, width: usize) -> String {
    if nanos == 0 {
        return String::new();
    }
    let s = format!(".{nanos:0width$}");
    s.trim_end_matches('0').to_string()
}

/// Formats like Go's `Duration.String()`: `0s`, `500ms`, `15s`, `1m30s`, `1h0m0s`.
pub fn format_go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_string();
    }
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    if secs == 0 {
        return if nanos < 1_000 {
            format!("{nanos}ns")
        } else if nanos < 1_000_000 {
            format!("{}{}µs", nanos / 1_000, frac(nanos % 1_000, 3))
        } else {
            format!("{}{}ms", nanos / 1_000_000, frac(nanos % 1_000_000, 6))
        };
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h{m}m"));
    } else if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{s}{}s", frac(nanos, 9)));
    out
}

pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_go_duration(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_go_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert!(parse_go_duration("15").is_err());
        assert!(parse_go_duration("ten").is_err());
        assert!(parse_go_duration("-5s").unwrap_err().contains("negative"));
        assert!(
            parse_go_duration("5d")
                .unwrap_err()
                .contains("unknown unit")
        );
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::ZERO), "0s");
        assert_eq!(format_go_duration(Duration::from_secs(15)), "15s");
        assert_eq!(format_go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_go_duration(Duration::from_millis(500)), "500ms");
        for s in ["15s", "1m30s", "1h0m0s", "1.5s", "500ms", "2h3m4.005s"] {
            assert_eq!(format_go_duration(parse_go_duration(s).unwrap()), s);
        }
    }
}
