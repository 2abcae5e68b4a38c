//! Pushes finished profiles to a profile store without ever hurting the JVM
//! it runs in: an OpenTelemetry collector (OTLP/HTTP profiles) or Grafana
//! Pyroscope (`/ingest`).
//!
//! [`Uploader::start`] spawns one thread, `oxprof-upload`, that owns every
//! request. [`Uploader::submit`] only moves the payload into a bounded queue
//! (a full queue drops its oldest payload and counts it) and never waits for
//! the network. Each request has a connect and a whole-request time-out;
//! failures are retried with exponential backoff and full jitter, honouring
//! `Retry-After`, until an attempt limit or an age limit, then counted
//! failed. Log lines go to the caller's callback, at most one per kind of
//! failure per minute. The credential never appears in a log line, the
//! status or an error. [`Uploader::shutdown`] sends what it can until its
//! deadline and returns by then whatever the server does.
//!
//! The request formats (and what they are based on) are in [`request`]'s
//! documentation; the retry rules in `response.rs`.

mod auth;
pub mod config;
mod http;
mod ratelog;
pub mod request;
mod response;
mod retry;
mod sender;

use std::fmt;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

pub use config::{parse_auth, parse_endpoint, parse_labels, sanitize_service, validate_service, AuthSource, Kind, UploadConfig, UploadOptions};
pub use ratelog::{LogFn, LogLevel};
pub use request::{Payload, PayloadFormat};

use sender::{Entry, Shared, State};

/// Reads the credential `auth=` names now, in this process (the JVM): an
/// unset variable, or a file that is missing, unreadable or holds no
/// credential, is an error naming the option (never the content).
pub fn check_credential(options: &UploadOptions) -> Result<(), String> {
    match options.auth_source() {
        None => Ok(()),
        Some(auth) => auth::CredentialSource::new(Some(auth))?.get().map(|_| ()),
    }
}

/// The last failure: when, and what (never holding the credential).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastError {
    pub at: SystemTime,
    pub message: String,
}

/// The uploader's counters, as [`Uploader::status`] returns them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Payloads given to `submit`.
    pub submitted: u64,
    /// Payloads the store accepted (a partial success included).
    pub uploaded: u64,
    /// Payloads given up: permanent errors, attempt or age limit, shutdown.
    pub failed: u64,
    /// Payloads pushed out of a full queue, refused by `submit`, or still
    /// queued when the thread stopped.
    pub dropped: u64,
    /// Attempts that were followed by another.
    pub retries: u64,
    /// OTLP uploads answered with a partial success, and the profiles rejected.
    pub partial: u64,
    pub rejected_profiles: u64,
    /// Payloads waiting (not counting the one being sent) and their bytes.
    pub queued: usize,
    pub queued_bytes: usize,
    /// A payload is being sent or waits for its retry.
    pub sending: bool,
    /// Request body bytes (compressed) of the successful uploads.
    pub bytes_sent: u64,
    pub last_error: Option<LastError>,
    pub last_success: Option<SystemTime>,
    /// The sender thread is running.
    pub running: bool,
    /// Payloads still queued or being sent when shutdown's deadline passed
    /// (counted in `dropped` too): lost, since the JVM ends.
    pub unsent_at_shutdown: u64,
}

fn ago(t: SystemTime) -> String {
    match SystemTime::now().duration_since(t) {
        Ok(d) => format!("{} s ago", d.as_secs()),
        Err(_) => "just now".to_string(),
    }
}

impl fmt::Display for Status {
    /// One line for the agent's status report.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} submitted, {} uploaded, {} failed, {} dropped, {} retries, {} queued{}, {} bytes sent",
            self.submitted,
            self.uploaded,
            self.failed,
            self.dropped,
            self.retries,
            self.queued,
            if self.sending { " (+1 sending)" } else { "" },
            self.bytes_sent
        )?;
        if self.partial > 0 {
            write!(f, ", {} partial ({} profiles rejected)", self.partial, self.rejected_profiles)?;
        }
        if let Some(t) = self.last_success {
            write!(f, ", last success {}", ago(t))?;
        }
        if let Some(e) = &self.last_error {
            write!(f, ", last error {}: {}", ago(e.at), e.message)?;
        }
        if self.unsent_at_shutdown > 0 {
            write!(f, ", {} not sent by the shutdown deadline (the store did not take them in time)", self.unsent_at_shutdown)?;
        }
        if !self.running {
            f.write_str(", stopped")?;
        }
        Ok(())
    }
}

/// The uploader: a queue and the thread that empties it. `Send + Sync`;
/// dropping it asks the thread to stop at once (without waiting).
pub struct Uploader {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    kind: Kind,
    max_payload: usize,
    queue_payloads: usize,
    queue_bytes: usize,
}

impl fmt::Debug for Uploader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Uploader").field("kind", &self.kind).finish_non_exhaustive()
    }
}

impl Uploader {
    /// Starts the sender thread. The configuration was validated when it was
    /// built; what can still fail here is an `auth=env:NAME` variable that is
    /// unset or holds no credential (read now, once), and spawning the
    /// thread. The root certificates (https) are read on the new thread.
    pub fn start(config: UploadConfig, log: LogFn) -> Result<Uploader, String> {
        let creds = auth::CredentialSource::new(config.auth.as_ref())?;
        let queue_payloads = config.queue_payloads.max(1);
        let queue_bytes = config.queue_bytes.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State { status: Status { running: true, ..Status::default() }, ..State::default() }),
            wake: Condvar::new(),
            done: Condvar::new(),
        });
        let kind = config.kind;
        let max_payload = queue_bytes.min(config::MAX_PAYLOAD_BYTES);
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("oxprof-upload".to_string())
            .stack_size(1024 * 1024)
            .spawn(move || sender::run(s, config, creds, log))
            .map_err(|e| format!("upload: cannot start the upload thread: {e}"))?;
        Ok(Uploader { shared, thread: Mutex::new(Some(handle)), kind, max_payload, queue_payloads, queue_bytes })
    }

    /// Queues a payload for the sender thread and returns at once: no I/O,
    /// no waiting beyond a short lock. When the queue is full (payloads or
    /// bytes), the oldest payloads are dropped (counted). Returns false, and
    /// counts it, when the payload is refused: its format does not fit the
    /// store, it is larger than the queue's byte cap (or 64 MiB), or the
    /// uploader is shutting down.
    pub fn submit(&self, payload: Payload) -> bool {
        let size = payload.data.len();
        let mut pushed_out: Vec<Entry> = Vec::new();
        {
            let mut st = self.shared.lock();
            st.status.submitted += 1;
            let refused = if st.stop_at.is_some() || st.finished {
                Some((true, "a payload was submitted after shutdown".to_string()))
            } else if !payload.format.fits(self.kind) {
                Some((false, format!("a {} payload cannot go to a {} store", payload.format.name(), self.kind.name())))
            } else if size > self.max_payload {
                Some((true, format!("a payload of {size} bytes is larger than the limit of {} bytes", self.max_payload)))
            } else {
                None
            };
            if let Some((dropped, message)) = refused {
                if dropped {
                    st.status.dropped += 1;
                } else {
                    st.status.failed += 1;
                }
                st.status.last_error = Some(LastError { at: SystemTime::now(), message });
                return false;
            }
            while !st.queue.is_empty() && (st.queue.len() >= self.queue_payloads || st.queued_bytes + size > self.queue_bytes) {
                if let Some(old) = st.queue.pop_front() {
                    st.queued_bytes -= old.payload.data.len();
                    st.status.dropped += 1;
                    st.drops_to_log += 1;
                    pushed_out.push(old);
                }
            }
            st.queued_bytes += size;
            st.queue.push_back(Entry { payload, queued_at: Instant::now() });
            st.status.queued = st.queue.len();
            st.status.queued_bytes = st.queued_bytes;
            self.shared.wake.notify_all();
        }
        // Freed outside the lock.
        drop(pushed_out);
        true
    }

    /// The counters now.
    pub fn status(&self) -> Status {
        self.shared.lock().status.clone()
    }

    /// Sends what is queued until `deadline` from now, then stops the
    /// thread, and returns the final counters no later than the deadline
    /// (plus scheduling noise). A request that was already under way when
    /// shutdown was asked cannot be cut short: if it is still waiting for
    /// the server at the deadline, the thread is left to end by that
    /// request's own time-out, unjoined, and `running` stays true.
    pub fn shutdown(&self, deadline: Duration) -> Status {
        let end = Instant::now() + deadline;
        // The thread is told to stop a little before the caller's deadline so
        // that its last give-up and the final counters are in by then: a
        // thread stopping at the very deadline lost that race to this wait.
        let thread_end = end - (deadline / 5).min(Duration::from_millis(100));
        let finished = {
            let mut st = self.shared.lock();
            st.stop_at = Some(st.stop_at.map_or(thread_end, |s| s.min(thread_end)));
            self.shared.wake.notify_all();
            loop {
                if st.finished {
                    break true;
                }
                let now = Instant::now();
                if now >= end {
                    break false;
                }
                st = self.shared.done.wait_timeout(st, end - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
            }
        };
        if finished {
            if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = h.join();
            }
        } else {
            // The thread is still inside a request: what it holds and what
            // waits behind it will not be sent. Counted as dropped now, so
            // that the last status says what was lost.
            let mut st = self.shared.lock();
            let sending = st.status.sending;
            st.drop_unsent(sending);
        }
        self.status()
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let now = Instant::now();
        st.stop_at = Some(st.stop_at.map_or(now, |s| s.min(now)));
        self.shared.wake.notify_all();
    }
}

#[cfg(test)]
mod credential_tests {
    use super::*;

    /// The credential is read in this process: a missing variable or file
    /// is named, its content never.
    #[test]
    fn credentials_are_checked_where_they_are_read() {
        let mut o3 = UploadOptions::default();
        o3.accept("auth", Some("env:OXPROF_TEST_SURELY_UNSET")).unwrap();
        let e = check_credential(&o3).unwrap_err();
        assert!(e.starts_with("auth=env:OXPROF_TEST_SURELY_UNSET: ") && e.contains("JVM's environment"), "{e}");
        let mut o4 = UploadOptions::default();
        o4.accept("auth", Some("file:/nonexistent/token")).unwrap();
        assert_eq!(check_credential(&o4).unwrap_err(), "auth=file:/nonexistent/token: cannot read it: no such file");
        let token = std::env::temp_dir().join(format!("oxprof-token-{}", std::process::id()));
        std::fs::write(&token, "Bearer s3cr3t-token\n").unwrap();
        let mut o5 = UploadOptions::default();
        o5.accept("auth", Some(&format!("file:{}", token.display()))).unwrap();
        assert_eq!(check_credential(&o5), Ok(()));
        let _ = std::fs::remove_file(&token);
    }
}
