//! What is sent for one payload: the [`Payload`] the caller submits, and the
//! request built from it for each kind of store (URL with query, content
//! type, content encoding, body). Built once per payload on the sender
//! thread and reused by its retries.
//!
//! OTLP/HTTP (opentelemetry-proto `docs/specification.md`, "OTLP/HTTP" and
//! `collector/profiles/v1development/profiles_service_http.yaml`): POST
//! `/v1development/profiles`, `Content-Type: application/x-protobuf`, the
//! binary `ExportProfilesServiceRequest` gzip-compressed with
//! `Content-Encoding: gzip`.
//!
//! Pyroscope, as Grafana's Java agent sends it (pyroscope-java
//! `agent/src/main/java/io/pyroscope/javaagent/impl/PyroscopeExporter.java`,
//! `urlForSnapshot` and `requestBody`; server side read in grafana/pyroscope
//! `pkg/ingester/pyroscope/ingest_handler.go` and `pkg/og/convert/jfr/profile.go`):
//! POST `/ingest?name=SERVICE{k=v,...}&units=samples&aggregationType=sum&from=S&until=S&spyName=javaspy[&sampleRate=HZ]&format=jfr`
//! (`from`/`until` in Unix seconds; `sampleRate` for CPU and wall profiles)
//! with a `multipart/form-data` body whose part `jfr` (filename `jfr`) holds
//! the gzip-compressed JFR recording; the server recognises gzip by its magic
//! bytes, so the part has no encoding header, and no `Content-Encoding` is
//! set on the request. The optional `labels` part (dynamic context labels)
//! is not sent. pprof goes as the raw body with `format=pprof` (the handler
//! reads the body as the profile when the format is pprof).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::config::{Kind, UploadConfig};

/// What the bytes of a [`Payload`] are (uncompressed, as the caller has them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadFormat {
    /// A binary-encoded OTLP `ExportProfilesServiceRequest` (for [`Kind::Otlp`]).
    Otlp,
    /// A JFR recording (for [`Kind::Pyroscope`]).
    Jfr,
    /// A pprof profile, gzip-compressed or not, sent as is (for [`Kind::Pyroscope`]).
    Pprof,
}

impl PayloadFormat {
    pub fn name(self) -> &'static str {
        match self {
            PayloadFormat::Otlp => "otlp",
            PayloadFormat::Jfr => "jfr",
            PayloadFormat::Pprof => "pprof",
        }
    }

    /// Whether a store of this kind takes this format.
    pub fn fits(self, kind: Kind) -> bool {
        matches!((kind, self), (Kind::Otlp, PayloadFormat::Otlp) | (Kind::Pyroscope, PayloadFormat::Jfr | PayloadFormat::Pprof))
    }
}

/// One finished interval of profile, handed to [`crate::Uploader::submit`].
#[derive(Clone, Debug)]
pub struct Payload {
    pub format: PayloadFormat,
    /// The encoded profile, uncompressed (the uploader compresses it).
    pub data: Vec<u8>,
    /// The interval the profile covers (Pyroscope's `from` and `until`).
    pub start: SystemTime,
    pub end: SystemTime,
    /// Samples per second of a CPU or wall profile (Pyroscope's `sampleRate`).
    pub sample_rate_hz: Option<u64>,
    /// What the payload is, for the file it is kept in when the store does
    /// not take it (`interval-3-20250101-120000`, `interval-3-….alloc`);
    /// not sent.
    pub name: Option<String>,
}

impl Payload {
    pub fn new(format: PayloadFormat, data: Vec<u8>, start: SystemTime, end: SystemTime) -> Payload {
        Payload { format, data, start, end, sample_rate_hz: None, name: None }
    }

    pub fn with_name(mut self, name: impl Into<String>) -> Payload {
        self.name = Some(name.into());
        self
    }

    pub fn with_sample_rate(mut self, hz: u64) -> Payload {
        self.sample_rate_hz = Some(hz);
        self
    }
}

/// A request ready to send (and to send again).
pub(crate) struct Prepared {
    pub url: String,
    pub content_type: String,
    pub content_encoding: Option<&'static str>,
    pub body: Vec<u8>,
}

fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// zlib's default level: measured on javac's 10 s intervals, 19-24% smaller
/// requests than the fastest level for about 2.5 ms more per request
/// (bench/fleet/results-2026-11-26.md), once per interval on the sender.
fn gzip(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut enc = GzEncoder::new(Vec::with_capacity(data.len() / 4 + 64), Compression::default());
    enc.write_all(data).map_err(|e| format!("gzip: {e}"))?;
    enc.finish().map_err(|e| format!("gzip: {e}"))
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A multipart boundary that does not occur in `body`.
fn boundary_for(body: &[u8], seed: u64) -> String {
    let mut x = seed | 1;
    loop {
        // xorshift64*: only has to differ from what the body holds.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let b = format!("oxprof-{:016x}", x.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let needle = format!("--{b}");
        if !body.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            return b;
        }
    }
}

pub(crate) fn prepare(config: &UploadConfig, p: &Payload, seed: u64) -> Result<Prepared, String> {
    match (config.kind, p.format) {
        (Kind::Otlp, PayloadFormat::Otlp) => {
            Ok(Prepared { url: config.target_url(), content_type: "application/x-protobuf".to_string(), content_encoding: Some("gzip"), body: gzip(&p.data)? })
        }
        (Kind::Pyroscope, PayloadFormat::Jfr | PayloadFormat::Pprof) => {
            let jfr = p.format == PayloadFormat::Jfr;
            let mut url = format!("{}?name={}", config.target_url(), query_escape(&config.pyroscope_name()));
            if jfr {
                // What pyroscope-java sends for its CPU/wall snapshots; the
                // server derives the real units from the JFR events.
                url.push_str("&units=samples&aggregationType=sum");
            }
            // Whole seconds: an interval inside one second still spans one,
            // since Pyroscope takes `until` = `from` for an empty range.
            let from = unix_seconds(p.start);
            let until = unix_seconds(p.end).max(from + 1);
            url.push_str(&format!("&from={from}&until={until}&spyName={}", query_escape(&config.spy_name)));
            if let Some(hz) = p.sample_rate_hz {
                url.push_str(&format!("&sampleRate={hz}"));
            }
            url.push_str(if jfr { "&format=jfr" } else { "&format=pprof" });
            if !jfr {
                return Ok(Prepared { url, content_type: "application/octet-stream".to_string(), content_encoding: None, body: p.data.clone() });
            }
            let compressed = gzip(&p.data)?;
            let boundary = boundary_for(&compressed, seed);
            let mut body = Vec::with_capacity(compressed.len() + 256);
            body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\n\r\n").as_bytes());
            body.extend_from_slice(&compressed);
            body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
            Ok(Prepared { url, content_type: format!("multipart/form-data; boundary={boundary}"), content_encoding: None, body })
        }
        (kind, format) => Err(format!("a {} payload cannot go to a {} store", format.name(), kind.name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pyroscope_query() {
        let mut c = UploadConfig::new("http://h:4040", Kind::Pyroscope, "my.app").unwrap();
        c.labels = vec![("zone".into(), "b".into()), ("env".into(), "prod".into())];
        let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let p = Payload::new(PayloadFormat::Jfr, b"JFR".to_vec(), t0, t0 + Duration::from_secs(15)).with_sample_rate(100);
        let r = prepare(&c, &p, 7).unwrap();
        assert_eq!(
            r.url,
            "http://h:4040/ingest?name=my.app%7Benv%3Dprod%2Czone%3Db%7D&units=samples&aggregationType=sum&from=1700000000&until=1700000015&spyName=javaspy&sampleRate=100&format=jfr"
        );
        assert!(r.content_type.starts_with("multipart/form-data; boundary=oxprof-"));
        assert_eq!(r.content_encoding, None);
        // An interval within one second still spans one.
        let short = Payload::new(PayloadFormat::Jfr, b"JFR".to_vec(), t0 + Duration::from_millis(100), t0 + Duration::from_millis(600));
        assert!(prepare(&c, &short, 7).unwrap().url.contains("&from=1700000000&until=1700000001&"));
    }

    #[test]
    fn mismatched_format() {
        let c = UploadConfig::new("http://h:4318", Kind::Otlp, "a").unwrap();
        let p = Payload::new(PayloadFormat::Jfr, vec![], UNIX_EPOCH, UNIX_EPOCH);
        assert!(prepare(&c, &p, 1).is_err());
    }
}
