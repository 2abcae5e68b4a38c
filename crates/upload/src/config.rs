//! What an upload is configured with ([`UploadConfig`]) and how the agent's
//! option string fills it ([`UploadOptions`]): the store's URL and kind, the
//! service name and labels, where the credential is read from, the queue's
//! bounds, the time-outs, the retry limits, and where and how much of what
//! the store did not take is kept on disk. Every error is one line that
//! names the option and what it accepts; none repeats a credential.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use oxprof_profile::units::{parse_size_bytes, parse_wall_duration_ns};

/// Which kind of profile store the endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An OpenTelemetry collector: OTLP/HTTP profiles, binary protobuf, gzip.
    Otlp,
    /// Grafana Pyroscope's `/ingest` API (JFR or pprof bodies).
    Pyroscope,
}

impl Kind {
    pub const WORDS: &'static str = "otlp, pyroscope";

    /// `otlp` or `pyroscope`; `None` for any other word (the agent's
    /// `format=` also names output formats, which are not ours).
    pub fn from_word(word: &str) -> Option<Kind> {
        match word {
            "otlp" => Some(Kind::Otlp),
            "pyroscope" => Some(Kind::Pyroscope),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Otlp => "otlp",
            Kind::Pyroscope => "pyroscope",
        }
    }
}

/// Where the credential is read from. The value read is `Bearer TOKEN`,
/// `Basic user:password` (base64-encoded before sending; a value without a
/// colon is taken as already encoded) or a bare token (sent as a bearer
/// token). The value itself never appears in a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthSource {
    /// An environment variable, read once when the uploader starts.
    Env(String),
    /// A file, read again before each request (so a rotated secret is used).
    File(PathBuf),
}

/// The directories what the store did not take may be kept in
/// (`crate::spool`), in order of preference: the `n`-th is made (or found)
/// on call; `None` past the last. Called on the thread that writes, at the
/// first payload kept and after a directory failed.
#[derive(Clone)]
pub struct SpoolDirs(pub Arc<dyn Fn(usize) -> Option<io::Result<PathBuf>> + Send + Sync>);

impl fmt::Debug for SpoolDirs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SpoolDirs(..)")
    }
}

impl SpoolDirs {
    /// One directory, made if missing (tests; a caller with one place).
    pub fn one(dir: PathBuf) -> SpoolDirs {
        SpoolDirs(Arc::new(move |n| (n == 0).then(|| std::fs::create_dir_all(&dir).map(|()| dir.clone()))))
    }
}

/// OTLP/HTTP's recommended limit on a request body before compression.
pub const MAX_PAYLOAD_BYTES: usize = 64 << 20;

/// The default bound on the files kept of what the store did not take.
pub const DEFAULT_SPOOL_BYTES: u64 = 64 << 20;

/// Everything the uploader needs; build it with [`UploadConfig::new`] or
/// [`UploadOptions`], then adjust the public fields.
#[derive(Clone, Debug)]
pub struct UploadConfig {
    /// `http://` or `https://` URL of the store, without a trailing slash
    /// and without credentials. OTLP requests go to
    /// `{endpoint}/v1development/profiles`, Pyroscope's to `{endpoint}/ingest`
    /// (unless the endpoint already ends with that path).
    pub endpoint: String,
    pub kind: Kind,
    /// Pyroscope's application name (`[A-Za-z0-9_./-]`). For OTLP the
    /// payload carries its own resource attributes: the encoder reads this.
    pub service: String,
    /// Static labels, sorted by name; for Pyroscope they go into `name=`.
    pub labels: Vec<(String, String)>,
    pub auth: Option<AuthSource>,
    /// Pyroscope/Grafana tenant, sent as `X-Scope-OrgID`.
    pub tenant: Option<String>,
    /// At most this many payloads wait; a new one pushes out the oldest.
    pub queue_payloads: usize,
    /// At most this many bytes wait (uncompressed); also the largest payload.
    pub queue_bytes: usize,
    pub connect_timeout: Duration,
    /// The whole request: connect, send, wait for and read the answer.
    pub request_timeout: Duration,
    /// Attempts per payload before it is given up (counted failed).
    pub max_attempts: u32,
    /// A payload queued longer than this is given up instead of retried.
    pub max_age: Duration,
    /// Exponential backoff with full jitter: a retry waits a random time in
    /// `[0, min(cap, base * 2^n))`, unless the server said `Retry-After`.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// At most one log line per kind of failure in this interval.
    pub log_interval: Duration,
    /// A PEM file of extra root certificates trusted besides the system's
    /// (a private CA; the tests' self-signed server).
    pub extra_roots: Option<PathBuf>,
    /// Pyroscope's `spyName`: `javaspy` makes the server file the profiles
    /// as Java (the language it derives from the spy name).
    pub spy_name: String,
    /// Where a payload the store did not take is kept instead of being
    /// lost (given up, pushed out of the full queue, unsent at the shutdown
    /// deadline); `None`: nowhere (it is counted lost).
    pub spool_dirs: Option<SpoolDirs>,
    /// At most this many bytes of such files (`upload_spool_bytes`); the
    /// oldest are removed past it. 0 keeps none.
    pub spool_bytes: u64,
    /// Where the caller keeps every payload anyway (the agent's interval
    /// files with `file=`), said in messages instead of calling the
    /// payloads the store did not take lost.
    pub kept_by_caller: Option<String>,
}

impl UploadConfig {
    /// A configuration with the defaults; fails with a one-line message when
    /// the URL or the service name is not acceptable.
    pub fn new(endpoint: &str, kind: Kind, service: &str) -> Result<UploadConfig, String> {
        let endpoint = parse_endpoint(endpoint)?;
        validate_service(service)?;
        Ok(UploadConfig {
            endpoint,
            kind,
            service: service.to_string(),
            labels: Vec::new(),
            auth: None,
            tenant: None,
            queue_payloads: 8,
            queue_bytes: 32 << 20,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_attempts: 8,
            max_age: Duration::from_secs(300),
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(30),
            log_interval: Duration::from_secs(60),
            extra_roots: None,
            spy_name: "javaspy".to_string(),
            spool_dirs: None,
            spool_bytes: DEFAULT_SPOOL_BYTES,
            kept_by_caller: None,
        })
    }

    /// The URL requests are posted to, without the query string.
    pub fn target_url(&self) -> String {
        let suffix = match self.kind {
            Kind::Otlp => "/v1development/profiles",
            Kind::Pyroscope => "/ingest",
        };
        if self.endpoint.ends_with(suffix) {
            self.endpoint.clone()
        } else {
            format!("{}{suffix}", self.endpoint)
        }
    }

    /// Pyroscope's `name` parameter: `service{k=v,k2=v2}`, labels sorted.
    pub fn pyroscope_name(&self) -> String {
        if self.labels.is_empty() {
            return self.service.clone();
        }
        let mut labels = self.labels.clone();
        labels.sort();
        let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}{{{}}}", self.service, inner.join(","))
    }
}

/// Validates an `upload=` URL: `http://` or `https://`, a host, an optional
/// port and path; no credentials, query or fragment. Returns it without a
/// trailing slash.
pub fn parse_endpoint(url: &str) -> Result<String, String> {
    const ACCEPTED: &str = "accepted: http://HOST[:PORT][/PATH] or https://..., e.g. http://otel-collector:4318";
    let url = url.trim();
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("upload: the URL has spaces or control characters; {ACCEPTED}"));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("upload: '{}' is not a URL; {ACCEPTED}", shown(url)));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("upload: scheme '{}' is not supported; {ACCEPTED}", shown(scheme)));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    if authority.contains('@') {
        // Not echoed: the part before '@' is a password.
        return Err("upload: credentials in the URL (user:password@) are not accepted; give them with auth=env:NAME or auth=file:PATH".to_string());
    }
    if path.contains(['?', '#']) {
        return Err(format!("upload: the URL may not have a query string or fragment; {ACCEPTED}"));
    }
    let (host, port) = if let Some(inner) = authority.strip_prefix('[') {
        let Some((h, after)) = inner.split_once(']') else {
            return Err(format!("upload: '{}' has an unclosed IPv6 address; {ACCEPTED}", shown(url)));
        };
        (h, after.strip_prefix(':').map(Some).unwrap_or(if after.is_empty() { None } else { Some("") }))
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || !host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')) {
        return Err(format!("upload: '{}' has no valid host name; {ACCEPTED}", shown(url)));
    }
    if let Some(p) = port {
        if !matches!(p.parse::<u16>(), Ok(n) if n > 0) {
            return Err(format!("upload: port '{}' is not a number from 1 to 65535; {ACCEPTED}", shown(p)));
        }
    }
    Ok(format!("{}://{}{}", scheme.to_ascii_lowercase(), authority, path.trim_end_matches('/')))
}

/// Text from the user, shortened for a message.
fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Pyroscope's service-name characters: `[A-Za-z0-9_./-]`, not empty.
pub fn validate_service(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("service: needs a name of letters, digits and _ . / -".to_string());
    }
    if let Some(c) = name.chars().find(|&c| !service_char(c)) {
        return Err(format!("service: '{}' has the character {c:?}; accepted: letters, digits and _ . / -", shown(name)));
    }
    Ok(())
}

fn service_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// A service name made acceptable: other characters become `_` (a main
/// class `com.example.Main$Inner` gives `com.example.Main_Inner`); empty
/// gives `java`.
pub fn sanitize_service(name: &str) -> String {
    let s: String = name.trim().chars().map(|c| if service_char(c) { c } else { '_' }).collect();
    if s.is_empty() {
        "java".to_string()
    } else {
        s
    }
}

/// Parses `labels=k=v;k2=v2`: names of `[A-Za-z0-9_.]` (not `__name__`),
/// values without spaces, `{ } , = ;` or control characters (Pyroscope's
/// name syntax). Sorted by name; a name given twice is an error.
pub fn parse_labels(spec: &str) -> Result<Vec<(String, String)>, String> {
    const ACCEPTED: &str = "accepted: labels=NAME=VALUE;NAME=VALUE with names of letters, digits, _ and . and values without spaces or { } , = ;";
    let mut out: Vec<(String, String)> = Vec::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("labels: '{}' has no '='; {ACCEPTED}", shown(item)));
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
            return Err(format!("labels: name '{}' is not valid; {ACCEPTED}", shown(k)));
        }
        if k == "__name__" {
            return Err(format!("labels: the name __name__ is reserved; {ACCEPTED}"));
        }
        if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '{' | '}' | ',' | '=' | ';')) {
            return Err(format!("labels: the value of '{k}' is empty or has a space or one of {{ }} , = ;; {ACCEPTED}"));
        }
        if out.iter().any(|(n, _)| n == k) {
            return Err(format!("labels: '{k}' is given twice; {ACCEPTED}"));
        }
        out.push((k.to_string(), v.to_string()));
    }
    if out.is_empty() {
        return Err(format!("labels: no label given; {ACCEPTED}"));
    }
    out.sort();
    Ok(out)
}

/// Parses `auth=env:NAME` or `auth=file:PATH`. The message never repeats
/// the value (a user may have put the secret itself there).
pub fn parse_auth(spec: &str) -> Result<AuthSource, String> {
    const ACCEPTED: &str =
        "auth: accepted: env:NAME (an environment variable) or file:PATH (a file), holding 'Bearer TOKEN', 'Basic user:password' or a bare token";
    if let Some(name) = spec.strip_prefix("env:") {
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Ok(AuthSource::Env(name.to_string()));
        }
        return Err(format!("{ACCEPTED}; the variable name has letters, digits and _ only"));
    }
    if let Some(path) = spec.strip_prefix("file:") {
        if !path.is_empty() {
            return Ok(AuthSource::File(PathBuf::from(path)));
        }
    }
    Err(ACCEPTED.to_string())
}

/// The upload options of the agent's option string, gathered one at a time
/// by [`UploadOptions::accept`] and checked together by
/// [`UploadOptions::finish`].
///
/// | option | meaning |
/// |---|---|
/// | `upload=URL` | the store (http:// or https://); without it nothing is uploaded |
/// | `format=otlp` / `format=pyroscope` | the kind of store (other `format=` words are not taken) |
/// | `service=NAME` | Pyroscope application name (default: what the caller passes, sanitized) |
/// | `labels=k=v;k2=v2` | static labels |
/// | `auth=env:NAME` / `auth=file:PATH` | where the credential is read |
/// | `upload_tenant=ID` | `X-Scope-OrgID` |
/// | `upload_queue=N` | payloads kept waiting (default 8) |
/// | `upload_queue_bytes=SIZE` | bytes kept waiting (default 32m) |
/// | `upload_connect_timeout=DUR` | default 5s |
/// | `upload_timeout=DUR` | whole request, default 30s |
/// | `upload_retries=N` | attempts per payload, default 8 |
/// | `upload_max_age=DUR` | give a payload up after this long queued, default 5m |
/// | `upload_ca=PATH` | PEM file of extra trusted root certificates |
/// | `upload_spool_bytes=SIZE` | what the store did not take, kept on disk: at most this much (default 64m, 0 keeps none) |
#[derive(Clone, Debug, Default)]
pub struct UploadOptions {
    endpoint: Option<String>,
    kind: Option<Kind>,
    service: Option<String>,
    labels: Option<Vec<(String, String)>>,
    auth: Option<AuthSource>,
    tenant: Option<String>,
    queue_payloads: Option<usize>,
    queue_bytes: Option<usize>,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    max_attempts: Option<u32>,
    max_age: Option<Duration>,
    extra_roots: Option<PathBuf>,
    spool_bytes: Option<u64>,
}

/// The option keys [`UploadOptions::accept`] takes (besides `format=otlp|pyroscope`).
pub const OPTION_KEYS: &str =
    "upload, service, labels, auth, upload_tenant, upload_queue, upload_queue_bytes, upload_connect_timeout, upload_timeout, upload_retries, upload_max_age, upload_ca, upload_spool_bytes";

impl UploadOptions {
    /// Offers one `key[=value]` option. `Ok(true)`: it was an upload option
    /// and is taken; `Ok(false)`: not ours (including `format=` with a word
    /// other than otlp or pyroscope); `Err`: ours but not acceptable.
    pub fn accept(&mut self, key: &str, value: Option<&str>) -> Result<bool, String> {
        let need = |what: &str| value.map(str::trim).filter(|v| !v.is_empty()).ok_or_else(|| format!("{key}: needs a value: {what}"));
        match key {
            "upload" => self.endpoint = Some(parse_endpoint(need("an http:// or https:// URL")?)?),
            "format" => match value.and_then(Kind::from_word) {
                Some(k) => self.kind = Some(k),
                None => return Ok(false),
            },
            "service" => {
                let v = need("a service name of letters, digits and _ . / -")?;
                validate_service(v)?;
                self.service = Some(v.to_string());
            }
            "labels" => self.labels = Some(parse_labels(need("NAME=VALUE;NAME=VALUE")?)?),
            "auth" => self.auth = Some(parse_auth(value.unwrap_or(""))?),
            "upload_tenant" => {
                let v = need("a tenant id")?;
                if !v.chars().all(|c| c.is_ascii_graphic()) {
                    return Err("upload_tenant: accepted: a tenant id of printable ASCII characters without spaces".to_string());
                }
                self.tenant = Some(v.to_string());
            }
            "upload_queue" => {
                let v = need("a number of payloads from 1 to 1000")?;
                match v.parse::<usize>() {
                    Ok(n) if (1..=1000).contains(&n) => self.queue_payloads = Some(n),
                    _ => return Err(format!("upload_queue: '{}' is not a number of payloads from 1 to 1000", shown(v))),
                }
            }
            "upload_queue_bytes" => {
                let v = need("a size such as 32m")?;
                let n = parse_size_bytes(v).map_err(|e| format!("upload_queue_bytes: {e}"))?;
                if !(64 * 1024..=MAX_PAYLOAD_BYTES as u64).contains(&n) {
                    return Err("upload_queue_bytes: accepted: a size from 64k to 64m".to_string());
                }
                self.queue_bytes = Some(n as usize);
            }
            "upload_connect_timeout" | "upload_timeout" | "upload_max_age" => {
                let v = need("a duration such as 30s or 2m")?;
                let ns = parse_wall_duration_ns(v).map_err(|e| format!("{key}: {e}"))?;
                let d = Duration::from_nanos(ns);
                if d < Duration::from_millis(100) || d > Duration::from_secs(24 * 3600) {
                    return Err(format!("{key}: accepted: a duration from 100ms to 24h, e.g. 30s"));
                }
                match key {
                    "upload_connect_timeout" => self.connect_timeout = Some(d),
                    "upload_timeout" => self.request_timeout = Some(d),
                    _ => self.max_age = Some(d),
                }
            }
            "upload_retries" => {
                let v = need("a number of attempts from 1 to 100")?;
                match v.parse::<u32>() {
                    Ok(n) if (1..=100).contains(&n) => self.max_attempts = Some(n),
                    _ => return Err(format!("upload_retries: '{}' is not a number of attempts from 1 to 100", shown(v))),
                }
            }
            "upload_ca" => self.extra_roots = Some(PathBuf::from(need("a PEM file of root certificates")?)),
            "upload_spool_bytes" => {
                const ACCEPTED: &str = "upload_spool_bytes: accepted: 0 (keep nothing on disk) or a size from 1m to 2g, e.g. 64m";
                let v = need("a size such as 64m, or 0")?;
                match parse_size_bytes(v) {
                    Ok(n) if n == 0 || (1 << 20..=2 << 30).contains(&n) => self.spool_bytes = Some(n),
                    _ => return Err(format!("{ACCEPTED}; got '{}'", shown(v))),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether any upload option was given.
    pub fn any(&self) -> bool {
        self.endpoint.is_some() || self.first_given().is_some()
    }

    /// The first upload option given, by its key.
    fn first_given(&self) -> Option<&'static str> {
        [
            ("service", self.service.is_some()),
            ("labels", self.labels.is_some()),
            ("auth", self.auth.is_some()),
            ("upload_tenant", self.tenant.is_some()),
            ("upload_queue", self.queue_payloads.is_some()),
            ("upload_queue_bytes", self.queue_bytes.is_some()),
            ("upload_connect_timeout", self.connect_timeout.is_some()),
            ("upload_timeout", self.request_timeout.is_some()),
            ("upload_retries", self.max_attempts.is_some()),
            ("upload_max_age", self.max_age.is_some()),
            ("upload_ca", self.extra_roots.is_some()),
            ("upload_spool_bytes", self.spool_bytes.is_some()),
        ]
        .into_iter()
        .find_map(|(key, given)| given.then_some(key))
    }

    /// Where `auth=` says the credential is (see `crate::check_credential`).
    pub fn auth_source(&self) -> Option<&AuthSource> {
        self.auth.as_ref()
    }

    /// The configuration, `None` when no `upload=` was given (an error if
    /// other upload options were). `default_service` (e.g. the main class)
    /// is sanitized with [`sanitize_service`] when `service=` is absent.
    pub fn finish(self, default_service: &str) -> Result<Option<UploadConfig>, String> {
        let Some(endpoint) = self.endpoint.clone() else {
            if let Some(key) = self.first_given() {
                return Err(format!(
                    "{key}: needs upload=URL (service, labels, auth and the upload_* options describe the profile store that intervals are pushed to)"
                ));
            }
            return Ok(None);
        };
        let Some(kind) = self.kind else {
            return Err("upload: needs the kind of store: format=otlp or format=pyroscope".to_string());
        };
        let service = self.service.clone().unwrap_or_else(|| sanitize_service(default_service));
        let mut c = UploadConfig::new(&endpoint, kind, &service)?;
        c.labels = self.labels.unwrap_or_default();
        c.auth = self.auth;
        c.tenant = self.tenant;
        c.extra_roots = self.extra_roots;
        if let Some(n) = self.queue_payloads {
            c.queue_payloads = n;
        }
        if let Some(n) = self.queue_bytes {
            c.queue_bytes = n;
        }
        if let Some(d) = self.connect_timeout {
            c.connect_timeout = d;
        }
        if let Some(d) = self.request_timeout {
            c.request_timeout = d;
        }
        if let Some(n) = self.max_attempts {
            c.max_attempts = n;
        }
        if let Some(d) = self.max_age {
            c.max_age = d;
        }
        if let Some(n) = self.spool_bytes {
            c.spool_bytes = n;
        }
        Ok(Some(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(parse_endpoint("http://collector:4318/").unwrap(), "http://collector:4318");
        assert_eq!(parse_endpoint("HTTPS://example.com/base/").unwrap(), "https://example.com/base");
        assert_eq!(parse_endpoint("http://[::1]:4040").unwrap(), "http://[::1]:4040");
        for bad in ["ftp://x", "collector:4318", "http://", "http://host:0", "http://host:99999", "http://host/p?q=1", "http://a b"] {
            let e = parse_endpoint(bad).unwrap_err();
            assert!(e.starts_with("upload: ") && !e.contains('\n'), "{e}");
        }
        let e = parse_endpoint("https://user:hunter2@host").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn labels_and_service() {
        assert_eq!(parse_labels("env=prod; region=eu-1").unwrap(), vec![("env".into(), "prod".into()), ("region".into(), "eu-1".into())]);
        for bad in ["env", "=x", "a b=c", "env=a,b", "env=a}", "__name__=x", "a=1;a=2", ""] {
            assert!(parse_labels(bad).unwrap_err().starts_with("labels: "), "{bad}");
        }
        assert!(validate_service("com.example/app-1_x").is_ok());
        assert!(validate_service("app{x}").is_err());
        assert_eq!(sanitize_service("com.Main$Inner"), "com.Main_Inner");
        assert_eq!(sanitize_service(""), "java");
    }

    #[test]
    fn auth_errors_never_repeat_the_value() {
        assert_eq!(parse_auth("env:OXPROF_TOKEN").unwrap(), AuthSource::Env("OXPROF_TOKEN".into()));
        assert_eq!(parse_auth("file:/run/secret").unwrap(), AuthSource::File("/run/secret".into()));
        for bad in ["s3cr3t-token", "env:", "env:A-B s3cr3t", "file:"] {
            let e = parse_auth(bad).unwrap_err();
            assert!(!e.contains("s3cr3t") && e.starts_with("auth: "), "{e}");
        }
    }

    #[test]
    fn options() {
        let mut o = UploadOptions::default();
        assert!(!o.accept("format", Some("jfr")).unwrap());
        assert!(!o.accept("interval", Some("10ms")).unwrap());
        assert_eq!(o.clone().finish("Main").unwrap().map(|c| c.endpoint), None);
        for (k, v) in [
            ("upload", "http://pyro:4040"),
            ("format", "pyroscope"),
            ("labels", "env=prod"),
            ("upload_timeout", "10s"),
            ("upload_queue", "3"),
            ("upload_spool_bytes", "16m"),
        ] {
            assert!(o.accept(k, Some(v)).unwrap(), "{k}");
        }
        let c = o.finish("com.example.Main$1").unwrap().unwrap();
        assert_eq!(c.kind, Kind::Pyroscope);
        assert_eq!(c.service, "com.example.Main_1");
        assert_eq!(c.request_timeout, Duration::from_secs(10));
        assert_eq!(c.queue_payloads, 3);
        assert_eq!(c.spool_bytes, 16 << 20);
        assert_eq!(c.target_url(), "http://pyro:4040/ingest");
        assert_eq!(c.pyroscope_name(), "com.example.Main_1{env=prod}");

        let mut o = UploadOptions::default();
        o.accept("upload", Some("http://c:4318")).unwrap();
        let mut o0 = o.clone();
        o0.accept("format", Some("otlp")).unwrap();
        assert_eq!(o0.clone().finish("x").unwrap().unwrap().spool_bytes, DEFAULT_SPOOL_BYTES);
        o0.accept("upload_spool_bytes", Some("0")).unwrap();
        assert_eq!(o0.finish("x").unwrap().unwrap().spool_bytes, 0);
        assert!(o.clone().finish("x").unwrap_err().contains("format=otlp or format=pyroscope"));
        let mut o2 = UploadOptions::default();
        o2.accept("labels", Some("a=b")).unwrap();
        assert!(o2.finish("x").unwrap_err().starts_with("labels: needs upload=URL"));

        for (k, v) in [
            ("upload_queue", "0"),
            ("upload_timeout", "forever"),
            ("upload_retries", "x"),
            ("upload_queue_bytes", "1g"),
            ("upload", ""),
            ("upload_spool_bytes", "5k"),
            ("upload_spool_bytes", "3g"),
            ("upload_spool_bytes", "lots"),
        ] {
            let e = o.accept(k, Some(v)).unwrap_err();
            assert!(e.starts_with(k) && !e.contains('\n'), "{e}");
        }
    }
}
