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
//! failed. What the store did not take (given up, pushed out of the full
//! queue, still unsent at the shutdown deadline) is written to the caller's
//! spool directory instead, as files `oxprof convert` reads, bounded in
//! total size (`spool.rs`). Log lines go to the caller's callback, at most
//! one per kind of failure per minute. The credential never appears in a
//! log line, the status or an error. [`Uploader::shutdown`] sends what it
//! can until shortly before its deadline, keeps the rest on disk, and
//! returns by the deadline whatever the server does.
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
mod spool;

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

pub use config::{parse_auth, parse_endpoint, parse_labels, sanitize_service, validate_service, AuthSource, Kind, SpoolDirs, UploadConfig, UploadOptions};
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
    /// (counted in `dropped` too): lost, since the JVM ends, unless kept.
    pub unsent_at_shutdown: u64,
    /// Payloads the store did not take (failed, dropped, unsent) written to
    /// the spool directory instead, and the directory.
    pub spooled: u64,
    pub spool_dir: Option<PathBuf>,
    /// Files of the spool removed to keep it within its bound.
    pub spool_removed: u64,
    /// Payloads the store did not take that could not be kept either.
    pub spool_failed: u64,
    /// Where the caller keeps every payload anyway (config's `kept_by_caller`).
    pub kept_by_caller: Option<String>,
}

fn ago(t: SystemTime) -> String {
    match SystemTime::now().duration_since(t) {
        Ok(d) => format!("{} s ago", d.as_secs()),
        Err(_) => "just now".to_string(),
    }
}

impl Status {
    /// What was kept on disk, after `sep`: `; 4 kept in DIR/ (oxprof
    /// convert reads them)`, with the files removed past the bound and the
    /// payloads lost; empty when nothing was to be kept.
    pub fn kept_text(&self, sep: &str) -> String {
        let mut out = String::new();
        if let (n @ 1.., Some(dir)) = (self.spooled, &self.spool_dir) {
            out.push_str(&format!("{sep}{n} kept in {}/ (oxprof convert reads them)", dir.display()));
            if self.spool_removed > 0 {
                out.push_str(&format!(", {} of them removed since to stay within upload_spool_bytes", self.spool_removed));
            }
        }
        if self.spool_failed > 0 {
            out.push_str(&format!("{sep}{} could not be kept on disk either (lost)", self.spool_failed));
        }
        out
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
        match (&self.kept_by_caller, self.unsent_at_shutdown) {
            (Some(k), 1..) => write!(f, ", {} not sent by the shutdown deadline (not lost: {k})", self.unsent_at_shutdown)?,
            (None, 1..) => write!(f, ", {} not sent by the shutdown deadline (the store did not take them in time)", self.unsent_at_shutdown)?,
            (Some(k), 0) if self.failed + self.dropped > 0 => write!(f, ", those not uploaded are not lost: {k}")?,
            _ => {}
        }
        f.write_str(&self.kept_text(", "))?;
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
        let spool = config.spool_dirs.clone().filter(|_| config.spool_bytes > 0).map(|dirs| spool::Spool::new(dirs, config.spool_bytes));
        let status = Status { running: true, kept_by_caller: config.kept_by_caller.clone(), ..Status::default() };
        let shared = Arc::new(Shared { state: Mutex::new(State { status, ..State::default() }), spool, wake: Condvar::new(), done: Condvar::new() });
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
    /// bytes), the oldest payloads are dropped (counted): with a spool, they
    /// wait to be written to it by [`Uploader::spool_pushed_out`] or the
    /// sender. Returns false, and counts it, when the payload is refused:
    /// its format does not fit the store, it is larger than the queue's
    /// byte cap (or 64 MiB: kept in the spool if it fits there), or the
    /// uploader is shutting down.
    pub fn submit(&self, payload: Payload) -> bool {
        let size = payload.data.len();
        let spooling = self.shared.spool.is_some();
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
                if spooling && dropped && size > self.max_payload && !st.unsent_taken {
                    st.spill(Entry { payload: Arc::new(payload), queued_at: Instant::now() });
                    self.shared.wake.notify_all();
                }
                return false;
            }
            while !st.queue.is_empty() && (st.queue.len() >= self.queue_payloads || st.queued_bytes + size > self.queue_bytes) {
                if let Some(old) = st.queue.pop_front() {
                    st.queued_bytes -= old.payload.data.len();
                    st.status.dropped += 1;
                    st.drops_to_log += 1;
                    if spooling {
                        st.spill(old);
                    } else {
                        pushed_out.push(old);
                    }
                }
            }
            st.queued_bytes += size;
            st.queue.push_back(Entry { payload: Arc::new(payload), queued_at: Instant::now() });
            st.status.queued = st.queue.len();
            st.status.queued_bytes = st.queued_bytes;
            self.shared.wake.notify_all();
        }
        // Freed outside the lock.
        drop(pushed_out);
        true
    }

    /// Writes the payloads [`Uploader::submit`] pushed out of the full queue
    /// to the spool, on the calling thread (one that may write to disk: the
    /// agent's interval thread). The sender writes those still waiting at
    /// its next turn; without a spool this does nothing.
    pub fn spool_pushed_out(&self) {
        self.shared.keep_spilled();
    }

    /// The counters now.
    pub fn status(&self) -> Status {
        self.shared.lock().status.clone()
    }

    /// Sends what is queued until shortly before `deadline` from now,
    /// keeps what is left in the spool, stops the thread, and returns the
    /// final counters no later than the deadline (plus scheduling noise). A
    /// request that was already under way when shutdown was asked cannot be
    /// cut short: if it is still waiting for the server when sending must
    /// end, a short-lived `oxprof-spool` thread keeps what is left (that
    /// payload included), and the sender is left to end by that request's
    /// own time-out, unjoined, and `running` stays true.
    pub fn shutdown(&self, deadline: Duration) -> Status {
        let end = Instant::now() + deadline;
        // The thread is told to stop a little before the caller's deadline so
        // that its last give-up, the files it keeps and the final counters
        // are in by then: a thread stopping at the very deadline lost that
        // race to this wait.
        let spooling = self.shared.spool.is_some();
        let margin = if spooling { (deadline / 4).min(Duration::from_millis(500)) } else { (deadline / 5).min(Duration::from_millis(100)) };
        let thread_end = end - margin;
        let finished = {
            let mut st = self.shared.lock();
            st.stop_at = Some(st.stop_at.map_or(thread_end, |s| s.min(thread_end)));
            self.shared.wake.notify_all();
            let mut helper = false;
            loop {
                if st.finished || (helper && st.helper_done) {
                    break st.finished;
                }
                let now = Instant::now();
                if now >= end {
                    break false;
                }
                if spooling && !helper && now >= thread_end && st.status.sending && !st.unsent_taken {
                    // Stuck in a request: what waits is kept from a thread
                    // of its own (this one may be the JVM's).
                    helper = true;
                    let s = self.shared.clone();
                    let spawned =
                        std::thread::Builder::new().name("oxprof-spool".to_string()).stack_size(256 * 1024).spawn(move || sender::spool_for_stuck_sender(s));
                    if spawned.is_err() {
                        st.helper_done = true;
                    }
                    continue;
                }
                let until = if spooling && !helper && now < thread_end { thread_end } else { end };
                st = self.shared.done.wait_timeout(st, until - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
            }
        };
        if finished {
            if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = h.join();
            }
        } else {
            // The thread is still inside a request: what it holds and what
            // waits behind it will not be sent. Counted as dropped now (if
            // the `oxprof-spool` thread did not take them), so that the
            // last status says what was not sent.
            let mut st = self.shared.lock();
            let sending = st.status.sending;
            drop(st.take_unsent(sending));
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
