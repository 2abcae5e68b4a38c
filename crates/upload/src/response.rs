//! Reading what the store answered: which HTTP statuses are retried (per
//! kind of store), OTLP's partial success and error `Status` messages (a
//! few protobuf fields read by hand), and any server text made safe to
//! keep and log (printable, one line, short).

use crate::config::Kind;

/// What to do after an HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Success,
    Retry,
    Permanent,
}

/// OTLP/HTTP ("Retryable Response Codes"): only 429, 502, 503 and 504 are
/// retried, every other 4xx/5xx MUST NOT be. Pyroscope (as pyroscope-java
/// retries): 429 and every 5xx, plus 408. 3xx is not followed (a redirect
/// would drop the body or carry the credential elsewhere): permanent.
pub(crate) fn verdict(kind: Kind, status: u16) -> Verdict {
    match (kind, status) {
        (_, 200..=299) => Verdict::Success,
        (Kind::Otlp, 429 | 502 | 503 | 504) => Verdict::Retry,
        (Kind::Pyroscope, 408 | 429 | 500..=599) => Verdict::Retry,
        _ => Verdict::Permanent,
    }
}

/// Iterates the fields of a protobuf message: (number, varint or bytes).
fn fields(mut b: &[u8]) -> impl Iterator<Item = (u64, Field<'_>)> {
    std::iter::from_fn(move || {
        let key = varint(&mut b)?;
        let field = match key & 7 {
            0 => Field::Varint(varint(&mut b)?),
            1 => {
                b = b.get(8..)?;
                Field::Other
            }
            2 => {
                let n = usize::try_from(varint(&mut b)?).ok()?;
                let v = b.get(..n)?;
                b = b.get(n..)?;
                Field::Bytes(v)
            }
            5 => {
                b = b.get(4..)?;
                Field::Other
            }
            _ => return None,
        };
        Some((key >> 3, field))
    })
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn varint(b: &mut &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// `ExportProfilesServiceResponse.partial_success`: (rejected_profiles,
/// error_message), when the field is set with something in it.
pub(crate) fn otlp_partial_success(body: &[u8]) -> Option<(i64, String)> {
    for (n, f) in fields(body) {
        if let (1, Field::Bytes(ps)) = (n, f) {
            let mut rejected = 0i64;
            let mut message = String::new();
            for (m, g) in fields(ps) {
                match (m, g) {
                    (1, Field::Varint(v)) => rejected = v as i64,
                    (2, Field::Bytes(s)) => message = clean_text(s),
                    _ => {}
                }
            }
            if rejected != 0 || !message.is_empty() {
                return Some((rejected, message));
            }
        }
    }
    None
}

/// The message of an error response: `google.rpc.Status.message` for OTLP
/// (when the body is one), else the body as text.
pub(crate) fn error_text(kind: Kind, body: &[u8]) -> String {
    if kind == Kind::Otlp {
        let mut it = fields(body);
        let msg = it.find_map(|(n, f)| match (n, f) {
            (2, Field::Bytes(s)) => std::str::from_utf8(s).ok().map(|_| clean_text(s)),
            _ => None,
        });
        if let Some(m) = msg.filter(|m| !m.is_empty()) {
            return m;
        }
    }
    if std::str::from_utf8(body).is_ok() {
        clean_text(body)
    } else {
        String::new()
    }
}

/// Server text made safe to keep: lossy UTF-8, control characters and runs
/// of spaces become one space, at most 200 characters.
pub(crate) fn clean_text(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let mut out = String::new();
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if out.chars().count() >= 200 {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(verdict(Kind::Otlp, 200), Verdict::Success);
        assert_eq!(verdict(Kind::Otlp, 503), Verdict::Retry);
        assert_eq!(verdict(Kind::Otlp, 500), Verdict::Permanent);
        assert_eq!(verdict(Kind::Otlp, 408), Verdict::Permanent);
        assert_eq!(verdict(Kind::Pyroscope, 500), Verdict::Retry);
        assert_eq!(verdict(Kind::Pyroscope, 408), Verdict::Retry);
        assert_eq!(verdict(Kind::Pyroscope, 401), Verdict::Permanent);
        assert_eq!(verdict(Kind::Pyroscope, 302), Verdict::Permanent);
    }

    #[test]
    fn partial_success() {
        // partial_success { rejected_profiles: 3, error_message: "bad\nstack" }
        let inner = [&[0x08, 0x03, 0x12, 0x09][..], b"bad\nstack"].concat();
        let body = [&[0x0a, inner.len() as u8][..], &inner].concat();
        assert_eq!(otlp_partial_success(&body), Some((3, "bad stack".to_string())));
        assert_eq!(otlp_partial_success(&[]), None);
        assert_eq!(otlp_partial_success(&[0x0a, 0x00]), None);
        assert_eq!(otlp_partial_success(&[0x0a, 0x7f]), None);
        // Status { code: 3, message: "no" }
        assert_eq!(error_text(Kind::Otlp, &[0x08, 0x03, 0x12, 0x02, b'n', b'o']), "no");
        assert_eq!(error_text(Kind::Pyroscope, b"  too\tlarge \n"), "too large");
    }
}
