//! Sending one request: the HTTP client (ureq, HTTP/1.1, keep-alive) with
//! rustls and the ring crypto provider, trusting the system's root
//! certificates (read by rustls-native-certs) and any extra roots the
//! configuration names; no proxy, no redirects followed. Each attempt is
//! bounded by a connect and a whole-request time-out. What comes back is an
//! [`Answer`]: a status with the headers and body we use, or a failure
//! sorted into a kind for the log.

use std::sync::Arc;
use std::time::Duration;

use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

use crate::config::UploadConfig;
use crate::request::Prepared;

/// OTLP's recommended limit on a response body (and plenty for Pyroscope).
const MAX_RESPONSE_BYTES: u64 = 4 << 20;

pub(crate) enum Answer {
    Status { code: u16, retry_after: Option<String>, body: Vec<u8>, body_too_large: bool },
    Failed { kind: &'static str, message: String },
}

pub(crate) struct Transport {
    agent: ureq::Agent,
}

/// The system's root certificates plus those of `extra` (a PEM file).
fn root_certs(extra: Option<&std::path::Path>) -> Result<Vec<Certificate<'static>>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut certs: Vec<Certificate<'static>> = found.certs.iter().map(|c| Certificate::from_der(c.as_ref()).to_owned()).collect();
    if let Some(path) = extra {
        let pem = std::fs::read(path).map_err(|e| format!("upload_ca={}: cannot read: {}", path.display(), e.kind()))?;
        let before = certs.len();
        for item in ureq::tls::parse_pem(&pem) {
            match item {
                Ok(PemItem::Certificate(c)) => certs.push(c),
                Ok(_) => {}
                Err(e) => return Err(format!("upload_ca={}: not a PEM file of certificates: {e}", path.display())),
            }
        }
        if certs.len() == before {
            return Err(format!("upload_ca={}: holds no certificate", path.display()));
        }
    }
    if certs.is_empty() {
        return Err("no root certificates found in the system's store (set SSL_CERT_FILE, or give upload_ca=PATH)".to_string());
    }
    Ok(certs)
}

impl Transport {
    /// Reads the root certificates when the endpoint is https.
    pub(crate) fn new(config: &UploadConfig) -> Result<Transport, String> {
        let https = config.endpoint.starts_with("https://");
        let roots = if https { root_certs(config.extra_roots.as_deref())? } else { Vec::new() };
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(RootCerts::Specific(Arc::new(roots)))
            .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .proxy(None)
            .user_agent(concat!("oxprof/", env!("CARGO_PKG_VERSION")))
            .timeout_connect(Some(config.connect_timeout))
            .timeout_global(Some(config.request_timeout))
            .max_idle_connections(2)
            .max_idle_age(Duration::from_secs(60))
            .tls_config(tls)
            .build()
            .new_agent();
        Ok(Transport { agent })
    }

    /// One attempt, bounded by `timeout` as a whole and `connect_timeout`
    /// for the connection.
    pub(crate) fn send(&self, req: &Prepared, authorization: Option<&str>, tenant: Option<&str>, timeout: Duration, connect_timeout: Duration) -> Answer {
        let mut r = self
            .agent
            .post(&req.url)
            .config()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(connect_timeout.min(timeout)))
            .build()
            .header("Content-Type", &req.content_type);
        if let Some(enc) = req.content_encoding {
            r = r.header("Content-Encoding", enc);
        }
        if let Some(a) = authorization {
            r = r.header("Authorization", a);
        }
        if let Some(t) = tenant {
            r = r.header("X-Scope-OrgID", t);
        }
        match r.send(&req.body[..]) {
            Ok(mut resp) => {
                let code = resp.status().as_u16();
                let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
                let (body, body_too_large) = match resp.body_mut().with_config().limit(MAX_RESPONSE_BYTES).read_to_vec() {
                    Ok(b) => (b, false),
                    Err(ureq::Error::BodyExceedsLimit(_)) => (Vec::new(), true),
                    // The status is what counts; a body cut short only loses detail.
                    Err(_) => (Vec::new(), false),
                };
                Answer::Status { code, retry_after, body, body_too_large }
            }
            Err(e) => failure(e, timeout, connect_timeout),
        }
    }
}

fn failure(e: ureq::Error, timeout: Duration, connect_timeout: Duration) -> Answer {
    use ureq::Error as E;
    let (kind, message) = match e {
        E::Timeout(t) => {
            if matches!(t, ureq::Timeout::Connect) {
                ("timeout", format!("no connection within {} ms", connect_timeout.min(timeout).as_millis()))
            } else {
                ("timeout", format!("no answer within {} ms", timeout.as_millis()))
            }
        }
        E::HostNotFound => ("connect", "host not found".to_string()),
        E::ConnectionFailed => ("connect", "connection failed".to_string()),
        E::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => ("connect", "connection refused".to_string()),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ("timeout", format!("no answer within {} ms", timeout.as_millis())),
            _ if io.to_string().contains("certificate") || io.to_string().contains("TLS") => ("tls", format!("TLS: {io}")),
            _ => ("connection", format!("connection broken: {io}")),
        },
        E::Tls(m) => ("tls", format!("TLS: {m}")),
        E::Rustls(r) => ("tls", format!("TLS: {r}")),
        E::Protocol(p) => ("connection", format!("bad HTTP answer: {p}")),
        other => ("connection", other.to_string()),
    };
    Answer::Failed { kind, message }
}
