//! The credential: reading it from where `auth=` says, turning it into an
//! `Authorization` header value, and scrubbing it from any text the
//! uploader keeps or logs. Its `Debug` never shows it.

use std::fmt;

use base64::Engine;

use crate::config::AuthSource;

/// An `Authorization` header value and the strings that must never be shown.
pub(crate) struct Credential {
    header: String,
    secrets: Vec<String>,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

impl Credential {
    /// From the text read: `Bearer TOKEN`, `Basic user:password` (encoded
    /// here), `Basic BASE64` (kept), or a bare token (bearer).
    pub(crate) fn from_text(text: &str) -> Result<Credential, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("is empty".to_string());
        }
        if text.chars().any(|c| c.is_control()) {
            return Err("has control characters (only one line is accepted)".to_string());
        }
        let (scheme, rest) = match text.split_once(' ') {
            Some((s, r)) if s.eq_ignore_ascii_case("bearer") || s.eq_ignore_ascii_case("basic") => (s.to_ascii_lowercase(), r.trim()),
            _ => ("bearer".to_string(), text),
        };
        if rest.is_empty() || rest.contains(char::is_whitespace) {
            return Err("is not 'Bearer TOKEN', 'Basic user:password' or a single token".to_string());
        }
        let mut secrets = vec![rest.to_string()];
        let header = if scheme == "basic" {
            if rest.contains(':') {
                let encoded = base64::engine::general_purpose::STANDARD.encode(rest.as_bytes());
                secrets.push(encoded.clone());
                if let Some((_, password)) = rest.split_once(':') {
                    if password.len() >= 4 {
                        secrets.push(password.to_string());
                    }
                }
                format!("Basic {encoded}")
            } else {
                format!("Basic {rest}")
            }
        } else {
            format!("Bearer {rest}")
        };
        Ok(Credential { header, secrets })
    }

    pub(crate) fn header(&self) -> &str {
        &self.header
    }

    /// `text` with every occurrence of the secret replaced.
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if !s.is_empty() && out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        out
    }
}

/// Where the credential comes from, with what was read once (environment).
pub(crate) enum CredentialSource {
    None,
    /// Read at start: the environment does not change under a running JVM
    /// (and reading it while the JVM may call setenv is not safe).
    Fixed(Result<Credential, String>),
    File(std::path::PathBuf),
}

impl CredentialSource {
    /// Reads an environment variable now (an error if it is unset or not a
    /// credential); a file is only read for each request.
    pub(crate) fn new(auth: Option<&AuthSource>) -> Result<CredentialSource, String> {
        Ok(match auth {
            None => CredentialSource::None,
            Some(AuthSource::Env(name)) => CredentialSource::Fixed(match std::env::var(name) {
                Ok(v) => Ok(Credential::from_text(&v).map_err(|e| format!("auth=env:{name}: the credential {e}"))?),
                Err(_) => {
                    return Err(format!(
                        "auth=env:{name}: the variable is not set in the JVM's environment (or not UTF-8); a JVM already running cannot be given one: use auth=file:PATH"
                    ))
                }
            }),
            Some(AuthSource::File(path)) => CredentialSource::File(path.clone()),
        })
    }

    /// The credential for the next request (a file is read again each time);
    /// errors name the source, never the content.
    pub(crate) fn get(&self) -> Result<Option<Credential>, String> {
        match self {
            CredentialSource::None => Ok(None),
            CredentialSource::Fixed(Ok(c)) => Ok(Some(Credential { header: c.header.clone(), secrets: c.secrets.clone() })),
            CredentialSource::Fixed(Err(e)) => Err(e.clone()),
            CredentialSource::File(path) => {
                let text = std::fs::read(path).map_err(|e| {
                    let why = match e.kind() {
                        std::io::ErrorKind::NotFound => "no such file".to_string(),
                        std::io::ErrorKind::PermissionDenied => "permission denied (the JVM's user must be able to read it)".to_string(),
                        _ => e.to_string(),
                    };
                    format!("auth=file:{}: cannot read it: {why}", path.display())
                })?;
                if text.len() > 64 * 1024 {
                    return Err(format!("auth=file:{}: larger than 64 KiB", path.display()));
                }
                let text = String::from_utf8(text).map_err(|_| format!("auth=file:{}: not UTF-8 text", path.display()))?;
                Credential::from_text(&text).map(Some).map_err(|e| format!("auth=file:{}: the credential {e}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(Credential::from_text("Bearer abc.def\n").unwrap().header(), "Bearer abc.def");
        assert_eq!(Credential::from_text("abc.def").unwrap().header(), "Bearer abc.def");
        // RFC 7617's example.
        assert_eq!(Credential::from_text("Basic Aladdin:open sesame").map(|c| c.header().to_string()).ok(), None);
        assert_eq!(Credential::from_text("Basic Aladdin:opensesame").unwrap().header(), "Basic QWxhZGRpbjpvcGVuc2VzYW1l");
        assert_eq!(Credential::from_text("basic QWxhZGRpbjpvcGVuc2VzYW1l").unwrap().header(), "Basic QWxhZGRpbjpvcGVuc2VzYW1l");
        assert!(Credential::from_text("").is_err());
        assert!(Credential::from_text("a\rb").is_err());
        let c = Credential::from_text("Basic user:hunter22").unwrap();
        let r = c.redact("got user:hunter22 and dXNlcjpodW50ZXIyMg== and hunter22");
        assert!(!r.contains("hunter22") && !r.contains("dXNlcjpodW50ZXIyMg=="), "{r}");
        assert_eq!(format!("{c:?}"), "Credential(<redacted>)");
    }
}
