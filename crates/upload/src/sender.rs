//! The sender thread and the state it shares with the caller: the bounded
//! queue (the oldest payload goes when a new one does not fit), the
//! payloads waiting to be kept on disk (`spool`), the counters, and the
//! shutdown deadline. The caller's side only takes the lock for a few
//! pointer moves; every request, retry wait and log line happens here, on
//! `oxprof-upload`. What the store did not take is written to the spool
//! here too, or by the caller's [`crate::Uploader::spool_pushed_out`], or,
//! when this thread is stuck in a request at the shutdown deadline, by a
//! short-lived `oxprof-spool` thread.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::auth::{Credential, CredentialSource};
use crate::config::{Kind, UploadConfig};
use crate::http::{Answer, Transport};
use crate::ratelog::{human, LogFn, LogLevel, RateLog};
use crate::request::{prepare, Payload, Prepared};
use crate::response::{error_text, otlp_partial_success, verdict, Verdict};
use crate::retry::{backoff, parse_retry_after, Rng};
use crate::spool::Spool;
use crate::{LastError, Status};

pub(crate) struct Entry {
    pub payload: Arc<Payload>,
    pub queued_at: Instant,
}

/// At most this many bytes wait to be written to the spool (payloads pushed
/// out of the queue while no thread has written them yet); past it the
/// oldest is lost, counted.
pub(crate) const MAX_SPILL_BYTES: usize = crate::config::MAX_PAYLOAD_BYTES;

#[derive(Default)]
pub(crate) struct State {
    pub queue: VecDeque<Entry>,
    pub queued_bytes: usize,
    pub status: Status,
    /// When shutdown was asked: the time by which the thread must be done.
    pub stop_at: Option<Instant>,
    /// The thread has ended (set even when it unwinds).
    pub finished: bool,
    /// Payloads dropped by `submit` that the sender has not logged yet.
    pub drops_to_log: u64,
    /// Payloads pushed out of the queue (or refused), waiting to be kept on
    /// disk (only with a spool), and their bytes.
    pub spill: VecDeque<Entry>,
    pub spill_bytes: usize,
    /// The payload being sent, while it may still have to be kept (only
    /// with a spool).
    pub in_flight: Option<Arc<Payload>>,
    /// What was left at shutdown has been taken (counted, and handed to the
    /// spool if any): by the sender's last step or by the `oxprof-spool`
    /// thread, whichever came first.
    pub unsent_taken: bool,
    /// The `oxprof-spool` thread has written what it took.
    pub helper_done: bool,
}

impl State {
    /// Shutdown's end: what is queued (and, with `in_flight`, the payload
    /// being sent) will not be sent. Empties the queue and counts those
    /// payloads as dropped and unsent; returns them with those still
    /// waiting to be kept (pushed out before), for the spool. Once only.
    pub(crate) fn take_unsent(&mut self, in_flight: bool) -> Vec<Arc<Payload>> {
        if std::mem::replace(&mut self.unsent_taken, true) {
            return Vec::new();
        }
        let left = self.queue.len() as u64 + u64::from(in_flight);
        let mut out: Vec<Arc<Payload>> = self.spill.drain(..).map(|e| e.payload).collect();
        out.extend(self.queue.drain(..).map(|e| e.payload));
        if in_flight {
            out.extend(self.in_flight.take());
        }
        self.spill_bytes = 0;
        self.queued_bytes = 0;
        self.status.queued = 0;
        self.status.queued_bytes = 0;
        self.status.dropped += left;
        self.status.unsent_at_shutdown += left;
        out
    }

    /// Moves a payload that will not be sent to the spill, for the spool
    /// (the oldest waiting are lost past [`MAX_SPILL_BYTES`]).
    pub(crate) fn spill(&mut self, entry: Entry) {
        let size = entry.payload.data.len();
        while !self.spill.is_empty() && self.spill_bytes + size > MAX_SPILL_BYTES {
            if let Some(old) = self.spill.pop_front() {
                self.spill_bytes -= old.payload.data.len();
                self.not_kept("payloads pushed out of the queue came faster than they could be written to disk".to_string());
            }
        }
        self.spill_bytes += size;
        self.spill.push_back(entry);
    }

    fn not_kept(&mut self, why: String) {
        self.status.spool_failed += 1;
        self.status.last_error = Some(LastError { at: SystemTime::now(), message: format!("a payload the store did not take was lost: {why}") });
    }
}

pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Where what the store did not take is kept, if anywhere.
    pub spool: Option<Spool>,
    /// The sender waits here for work, the end of a retry wait, or shutdown.
    pub wake: Condvar,
    /// `shutdown` waits here for the thread's end.
    pub done: Condvar,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes `payload` to the spool (outside the lock) and counts it:
    /// `Ok(path)` kept, `Err(why)` lost, `None` without a spool.
    pub(crate) fn keep(&self, payload: &Payload) -> Option<Result<PathBuf, String>> {
        let spool = self.spool.as_ref()?;
        let kept = spool.keep(payload);
        let mut st = self.lock();
        match &kept {
            Ok(k) => {
                st.status.spooled += 1;
                st.status.spool_removed += k.removed;
                st.status.spool_dir = k.path.parent().map(PathBuf::from);
            }
            Err(e) => st.not_kept(e.clone()),
        }
        Some(kept.map(|k| k.path))
    }

    /// Writes the payloads waiting in the spill, on the calling thread.
    pub(crate) fn keep_spilled(&self) {
        if self.spool.is_none() {
            return;
        }
        loop {
            let Some(entry) = ({
                let mut st = self.lock();
                let e = st.spill.pop_front();
                if let Some(e) = &e {
                    st.spill_bytes -= e.payload.data.len();
                }
                e
            }) else {
                return;
            };
            self.keep(&entry.payload);
        }
    }

    /// Keeps what [`State::take_unsent`] returned.
    pub(crate) fn keep_all(&self, payloads: Vec<Arc<Payload>>) {
        for p in payloads {
            self.keep(&p);
        }
    }
}

/// The `oxprof-spool` thread's work: at the shutdown deadline the sender is
/// stuck in a request it cannot cut short; what is queued, waiting to be
/// kept, and being sent is written to the spool from here.
pub(crate) fn spool_for_stuck_sender(shared: Arc<Shared>) {
    let done = FinishHelper(shared.clone());
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let left = {
            let mut st = shared.lock();
            let sending = st.status.sending;
            st.take_unsent(sending)
        };
        shared.keep_all(left);
    }));
    drop(done);
}

/// Marks the `oxprof-spool` thread done however it ends.
struct FinishHelper(Arc<Shared>);

impl Drop for FinishHelper {
    fn drop(&mut self) {
        self.0.lock().helper_done = true;
        self.0.done.notify_all();
    }
}

/// Marks the thread finished however it ends.
struct FinishGuard(Arc<Shared>);

impl Drop for FinishGuard {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.finished = true;
        st.status.running = false;
        st.status.sending = false;
        self.0.done.notify_all();
    }
}

/// How one payload ended; a failure says why, for the log line that says
/// too whether it was kept on disk.
enum Outcome {
    Uploaded,
    Failed { kind: &'static str, message: String },
}

struct Sender {
    shared: Arc<Shared>,
    config: UploadConfig,
    log: RateLog,
    transport: Result<Transport, String>,
    creds: CredentialSource,
    /// The last credential read, kept to scrub it from any text.
    last_cred: Option<Credential>,
    rng: Rng,
    /// Failed attempts since the last success (for the "sending again" line).
    failures_since_success: u64,
}

pub(crate) fn run(shared: Arc<Shared>, config: UploadConfig, creds: CredentialSource, log: LogFn) {
    let _finish = FinishGuard(shared.clone());
    let log = RateLog::new(log, config.log_interval);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let transport = Transport::new(&config);
        let mut s = Sender { shared, config, log, transport, creds, last_cred: None, rng: Rng::new(), failures_since_success: 0 };
        s.main();
    }));
    // Nothing is left to report to if the loop itself panicked: the counters
    // stay as they were and the thread ends; the JVM is not affected.
    let _ = result;
}

impl Sender {
    fn main(&mut self) {
        self.always(LogLevel::Info, &format!("upload: sending profiles to {} ({})", self.config.target_url(), self.config.kind.name()));
        if let Err(e) = &self.transport {
            let e = e.clone();
            self.note_error(&e);
            self.always(LogLevel::Error, &format!("upload: cannot upload: {e}"));
        }
        while let Some(entry) = self.next() {
            let outcome = self.process(entry);
            let unsent = {
                let mut st = self.shared.lock();
                st.status.sending = false;
                let unsent = st.in_flight.take();
                match outcome {
                    Outcome::Uploaded => st.status.uploaded += 1,
                    Outcome::Failed { .. } => st.status.failed += 1,
                }
                unsent
            };
            if let Outcome::Failed { kind, message } = outcome {
                let fate = match unsent.and_then(|p| self.shared.keep(&p)) {
                    Some(Ok(path)) => format!("; kept in {} (oxprof convert reads it)", path.display()),
                    Some(Err(e)) => format!("; lost: {e}"),
                    None => match &self.config.kept_by_caller {
                        Some(k) => format!("; not lost: {k}"),
                        None => String::new(),
                    },
                };
                self.limited(LogLevel::Error, kind, &format!("{message}{fate}"));
            }
        }
        // What is left (queued at the deadline, or pushed out and not yet
        // written) goes to the spool, if any.
        let (left, queued_left) = {
            let mut st = self.shared.lock();
            let before = st.status.unsent_at_shutdown;
            let left = st.take_unsent(false);
            (left, st.status.unsent_at_shutdown - before)
        };
        self.shared.keep_all(left);
        let (uploaded, failed, dropped, status) = {
            let st = self.shared.lock();
            (st.status.uploaded, st.status.failed, st.status.dropped, st.status.clone())
        };
        let suppressed = self.log.suppressed();
        let mut line = format!("upload: stopped: {uploaded} uploaded, {failed} failed, {dropped} dropped");
        if queued_left > 0 {
            line.push_str(&format!(" ({queued_left} still queued at the shutdown deadline)"));
        }
        line.push_str(&status.kept_text("; "));
        if let Some(k) = status.kept_by_caller.as_ref().filter(|_| failed + dropped > 0) {
            line.push_str(&format!("; those not uploaded are not lost: {k}"));
        }
        if suppressed > 0 {
            line.push_str(&format!("; {suppressed} repeated log lines were suppressed"));
        }
        self.always(LogLevel::Info, &line);
    }

    /// The next payload, or `None` when shutting down with nothing left (or
    /// past the deadline).
    fn next(&mut self) -> Option<Entry> {
        loop {
            // Payloads pushed out of the queue are kept first (when the
            // caller did not do it already).
            self.shared.keep_spilled();
            let mut drops = 0;
            let entry = {
                let mut st = self.shared.lock();
                loop {
                    drops += std::mem::take(&mut st.drops_to_log);
                    if drops > 0 {
                        break None;
                    }
                    if let Some(stop) = st.stop_at {
                        if Instant::now() >= stop {
                            return None;
                        }
                    }
                    if !st.spill.is_empty() {
                        break None;
                    }
                    if let Some(e) = st.queue.pop_front() {
                        st.queued_bytes -= e.payload.data.len();
                        st.status.queued = st.queue.len();
                        st.status.queued_bytes = st.queued_bytes;
                        st.status.sending = true;
                        if self.shared.spool.is_some() {
                            st.in_flight = Some(e.payload.clone());
                        }
                        break Some(e);
                    }
                    if st.stop_at.is_some() {
                        return None;
                    }
                    st = self.shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            };
            if drops > 0 {
                self.shared.keep_spilled();
                let (payloads, mib) = (self.config.queue_payloads, self.config.queue_bytes >> 20);
                let fate = match self.shared.lock().status.spool_dir.clone() {
                    Some(dir) if self.shared.spool.is_some() => format!("pushed out, kept in {}/ instead", dir.display()),
                    _ => "dropped".to_string(),
                };
                self.limited(
                    LogLevel::Warn,
                    "dropped",
                    &format!("upload: the queue was full ({payloads} payloads or {mib} MiB): {drops} oldest payload(s) {fate} (the store is slower than the profiles come)"),
                );
                continue;
            }
            if entry.is_some() {
                return entry;
            }
        }
    }

    fn process(&mut self, entry: Entry) -> Outcome {
        let prepared = match prepare(&self.config, &entry.payload, self.rng.next_u64()) {
            Ok(p) => p,
            Err(e) => return self.give_up("internal", format!("upload: cannot build the request: {e}")),
        };
        let size = entry.payload.data.len();
        let queued_at = entry.queued_at;
        drop(entry);
        let mut attempt: u32 = 0;
        let mut last_try = false;
        loop {
            attempt += 1;
            let now = Instant::now();
            let stop_at = self.shared.lock().stop_at;
            let mut timeout = self.config.request_timeout;
            if let Some(stop) = stop_at {
                if now >= stop {
                    return self.give_up("shutdown", format!("upload: a payload of {size} bytes was not sent before the shutdown deadline"));
                }
                timeout = timeout.min(stop - now);
            }
            let step = self.attempt(&prepared, timeout);
            let (retry_after, message, kind) = match step {
                Step::Done(outcome) => return outcome,
                Step::Retry { retry_after, message, kind } => (retry_after, message, kind),
            };
            self.failures_since_success += 1;
            self.note_error(&message);
            if attempt >= self.config.max_attempts {
                return self.give_up("gave up", format!("upload: gave up a payload of {size} bytes after {attempt} attempts; last: {message}"));
            }
            let delay = retry_after.unwrap_or_else(|| backoff(&mut self.rng, self.config.backoff_base, self.config.backoff_cap, attempt - 1));
            if queued_at.elapsed() + delay > self.config.max_age {
                return self.give_up(
                    "gave up",
                    format!(
                        "upload: gave up a payload of {size} bytes: it would be older than {} at the next attempt; last: {message}",
                        human(self.config.max_age)
                    ),
                );
            }
            self.limited(
                LogLevel::Warn,
                kind,
                &format!("upload: {message}; retry {attempt} of {} in {}", self.config.max_attempts.saturating_sub(1), human(delay)),
            );
            self.shared.lock().status.retries += 1;
            if !self.wait(delay) {
                // Shutdown comes before the retry: the backoff is cut short
                // for one last attempt in the time left (the store may be
                // back), but a store that asked for a later retry is obeyed.
                if retry_after.is_some() || last_try {
                    return self
                        .give_up("shutdown", format!("upload: a payload of {size} bytes was not sent before the shutdown deadline (its retry was due later)"));
                }
                last_try = true;
            }
        }
    }

    /// Waits `delay`; false if shutdown needs the thread done before then.
    /// Payloads pushed out of the queue meanwhile are kept on disk.
    fn wait(&self, delay: Duration) -> bool {
        let until = Instant::now() + delay;
        let mut st = self.shared.lock();
        loop {
            if let Some(stop) = st.stop_at {
                if stop <= until {
                    return false;
                }
            }
            if !st.spill.is_empty() && self.shared.spool.is_some() {
                drop(st);
                self.shared.keep_spilled();
                st = self.shared.lock();
                continue;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            st = self.shared.wake.wait_timeout(st, until - now).map(|(g, _)| g).unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn attempt(&mut self, req: &Prepared, timeout: Duration) -> Step {
        let transport = match &self.transport {
            Ok(t) => t,
            Err(e) => {
                let e = e.clone();
                return Step::Done(self.give_up("tls", format!("upload: cannot upload: {e}")));
            }
        };
        let cred = match self.creds.get() {
            Ok(c) => c,
            Err(e) => {
                let fixed = matches!(self.creds, CredentialSource::Fixed(_));
                if fixed {
                    return Step::Done(self.give_up("auth", format!("upload: {e}")));
                }
                return Step::Retry { retry_after: None, message: e, kind: "auth" };
            }
        };
        if cred.is_some() {
            self.last_cred = cred;
        }
        let authorization = self.last_cred.as_ref().filter(|_| self.config.auth.is_some()).map(|c| c.header().to_string());
        let (tenant, connect) = (self.config.tenant.clone(), self.config.connect_timeout);
        let answer = catch_unwind(AssertUnwindSafe(|| transport.send(req, authorization.as_deref(), tenant.as_deref(), timeout, connect)))
            .unwrap_or_else(|_| Answer::Failed { kind: "internal", message: "the HTTP client failed unexpectedly".to_string() });
        let target = self.config.target_url();
        match answer {
            Answer::Failed { kind, message } => Step::Retry { retry_after: None, message: format!("{message} ({target})"), kind },
            Answer::Status { code, retry_after, body, body_too_large } => match verdict(self.config.kind, code) {
                Verdict::Success if body_too_large && self.config.kind == Kind::Otlp => {
                    Step::Done(self.give_up("answer", format!("upload: HTTP {code} from {target} with an answer over 4 MiB (discarded, not retried)")))
                }
                Verdict::Success => {
                    if self.config.kind == Kind::Otlp {
                        if let Some((rejected, msg)) = otlp_partial_success(&body) {
                            let mut st = self.shared.lock();
                            st.status.partial += 1;
                            st.status.rejected_profiles += rejected.max(0) as u64;
                            drop(st);
                            let text = format!("upload: the collector accepted the profiles only in part: {rejected} rejected: {msg}");
                            self.limited(LogLevel::Warn, "partial", &text);
                        }
                    }
                    let sent = req.body.len() as u64;
                    let mut st = self.shared.lock();
                    st.status.bytes_sent += sent;
                    st.status.last_success = Some(SystemTime::now());
                    drop(st);
                    if self.failures_since_success > 0 {
                        let n = std::mem::take(&mut self.failures_since_success);
                        self.always(LogLevel::Info, &format!("upload: sending to {target} again after {n} failed attempt(s)"));
                    }
                    self.always(LogLevel::Debug, &format!("upload: sent {sent} bytes to {target}"));
                    Step::Done(Outcome::Uploaded)
                }
                Verdict::Retry => {
                    let text = error_text(self.config.kind, &body);
                    let wait = retry_after.as_deref().and_then(|v| parse_retry_after(v, SystemTime::now()));
                    let message = if text.is_empty() { format!("HTTP {code} from {target}") } else { format!("HTTP {code} from {target}: {text}") };
                    Step::Retry { retry_after: wait, message, kind: status_kind(code) }
                }
                Verdict::Permanent => {
                    let text = error_text(self.config.kind, &body);
                    let hint = match code {
                        300..=399 => " (redirects are not followed: give the final URL in upload=)",
                        401 | 403 => " (check auth=)",
                        404 => " (check the URL in upload=)",
                        _ => "",
                    };
                    let message = if text.is_empty() { format!("HTTP {code} from {target}{hint}") } else { format!("HTTP {code} from {target}{hint}: {text}") };
                    Step::Done(self.give_up(status_kind(code), format!("upload: {message}; not retried, payload dropped")))
                }
            },
        }
    }

    /// Counts nothing itself and logs nothing (the caller does, once it
    /// knows whether the payload was kept); records why it was given up.
    fn give_up(&mut self, kind: &'static str, message: String) -> Outcome {
        self.note_error(message.trim_start_matches("upload: "));
        Outcome::Failed { kind, message }
    }

    /// Every line goes through here or [`Sender::always`]: scrubbed of the credential.
    fn limited(&mut self, level: LogLevel, kind: &str, msg: &str) {
        let msg = self.redact(msg);
        self.log.limited(level, kind, &msg);
    }

    fn always(&self, level: LogLevel, msg: &str) {
        self.log.always(level, &self.redact(msg));
    }

    fn redact(&self, text: &str) -> String {
        match &self.last_cred {
            Some(c) => c.redact(text),
            None => text.to_string(),
        }
    }

    fn note_error(&self, message: &str) {
        let message = self.redact(message);
        self.shared.lock().status.last_error = Some(LastError { at: SystemTime::now(), message });
    }
}

enum Step {
    Done(Outcome),
    Retry { retry_after: Option<Duration>, message: String, kind: &'static str },
}

/// The log kind of an HTTP status: each status is its own kind of failure.
fn status_kind(code: u16) -> &'static str {
    match code {
        300..=399 => "http 3xx",
        401 => "http 401",
        403 => "http 403",
        404 => "http 404",
        408 => "http 408",
        413 => "http 413",
        429 => "http 429",
        400..=499 => "http 4xx",
        500 => "http 500",
        502 => "http 502",
        503 => "http 503",
        504 => "http 504",
        _ => "http 5xx",
    }
}
