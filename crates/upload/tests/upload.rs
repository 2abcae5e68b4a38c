//! The uploader against a loopback HTTP server that records what arrives and
//! misbehaves on cue: absent, failing, throttling, hanging, killed and
//! restarted, echoing the credential; plus one TLS server with a self-signed
//! root. No JVM needed.

mod server;

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use oxprof_upload::{AuthSource, Kind, LogFn, LogLevel, Payload, PayloadFormat, UploadConfig, Uploader};
use server::{free_port, Reply, Server};

type Lines = Arc<Mutex<Vec<(LogLevel, String)>>>;

fn logger() -> (LogFn, Lines) {
    let lines: Lines = Arc::new(Mutex::new(Vec::new()));
    let l = lines.clone();
    (Arc::new(move |level, msg: &str| l.lock().unwrap().push((level, msg.to_string()))), lines)
}

fn text(lines: &Lines) -> String {
    lines.lock().unwrap().iter().map(|(l, m)| format!("{l:?} {m}\n")).collect()
}

/// Short waits so the tests run in seconds.
fn config(url: &str, kind: Kind) -> UploadConfig {
    let mut c = UploadConfig::new(url, kind, "com.example.Shop").unwrap();
    c.backoff_base = Duration::from_millis(20);
    c.backoff_cap = Duration::from_millis(200);
    c.connect_timeout = Duration::from_secs(2);
    c.request_timeout = Duration::from_secs(5);
    c
}

fn data(n: u32) -> Vec<u8> {
    format!("profile number {n};").repeat(200 + n as usize).into_bytes()
}

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn otlp(n: u32) -> Payload {
    Payload::new(PayloadFormat::Otlp, data(n), t(1_700_000_000), t(1_700_000_015))
}

fn jfr(n: u32) -> Payload {
    Payload::new(PayloadFormat::Jfr, data(n), t(1_700_000_000 + 15 * n as u64), t(1_700_000_015 + 15 * n as u64))
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b).read_to_end(&mut out).expect("a gzip body");
    out
}

fn wait_for(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_done(u: &Uploader, n: u64, timeout: Duration) -> oxprof_upload::Status {
    wait_for(timeout, "payloads to be done", || {
        let s = u.status();
        s.uploaded + s.failed >= n && !s.sending
    });
    u.status()
}

/// The `jfr` part of a multipart/form-data body.
fn jfr_part(content_type: &str, body: &[u8]) -> Vec<u8> {
    let boundary = content_type.split_once("boundary=").expect("a boundary").1;
    let delim = format!("--{boundary}");
    let s = body;
    let find = |hay: &[u8], needle: &[u8], from: usize| hay[from..].windows(needle.len()).position(|w| w == needle).map(|p| p + from);
    let start = find(s, delim.as_bytes(), 0).expect("first boundary");
    assert_eq!(start, 0, "the body starts with the boundary");
    let head_end = find(s, b"\r\n\r\n", start).expect("part headers") + 4;
    let head = String::from_utf8_lossy(&s[start..head_end]);
    assert!(head.contains("Content-Disposition: form-data; name=\"jfr\"; filename=\"jfr\""), "{head}");
    let end = find(s, format!("\r\n{delim}--\r\n").as_bytes(), head_end).expect("closing boundary");
    assert_eq!(end + delim.len() + 6, s.len(), "nothing after the closing boundary");
    s[head_end..end].to_vec()
}

#[test]
fn otlp_posts_gzip_protobuf_with_bearer_token() {
    let srv = Server::start();
    let mut c = config(&srv.url(), Kind::Otlp);
    // Set before the uploader starts, which reads it once.
    std::env::set_var("OXPROF_TEST_TOKEN_OTLP", "Bearer tok-123");
    c.auth = Some(AuthSource::Env("OXPROF_TEST_TOKEN_OTLP".into()));
    let (log, _lines) = logger();
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    assert!(u.submit(otlp(2)));
    let s = wait_done(&u, 2, Duration::from_secs(10));
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    let mut sent = 0;
    for (r, n) in reqs.iter().zip(1..) {
        assert_eq!(r.method, "POST");
        assert_eq!(r.target, "/v1development/profiles");
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(r.header("authorization"), Some("Bearer tok-123"));
        assert_eq!(gunzip(&r.body), data(n), "the body decompresses to what was submitted");
        sent += r.body.len() as u64;
    }
    assert_eq!((s.submitted, s.uploaded, s.failed, s.dropped, s.retries), (2, 2, 0, 0, 0));
    assert_eq!(s.bytes_sent, sent);
    assert!(s.last_success.is_some() && s.last_error.is_none());
}

#[test]
fn pyroscope_jfr_goes_as_multipart_with_name_labels_and_interval() {
    let srv = Server::start();
    let dir = std::env::temp_dir().join(format!("oxprof-upload-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("pyro-basic");
    std::fs::write(&secret, "Basic shop:pa55-word\n").unwrap();
    let mut c = config(&format!("{}/", srv.url()), Kind::Pyroscope);
    c.labels = oxprof_upload::parse_labels("region=eu-west-1;env=prod").unwrap();
    c.auth = Some(AuthSource::File(secret.clone()));
    c.tenant = Some("team-a".into());
    let (log, _lines) = logger();
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(jfr(1).with_sample_rate(100)));
    // A rotated secret is used from the next request on.
    wait_done(&u, 1, Duration::from_secs(10));
    std::fs::write(&secret, "rotated-token").unwrap();
    assert!(u.submit(jfr(2)));
    wait_done(&u, 2, Duration::from_secs(10));
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 2);
    let r = &reqs[0];
    assert_eq!(r.path(), "/ingest");
    let expected = [
        ("name", "com.example.Shop{env=prod,region=eu-west-1}"),
        ("units", "samples"),
        ("aggregationType", "sum"),
        ("from", "1700000015"),
        ("until", "1700000030"),
        ("spyName", "javaspy"),
        ("sampleRate", "100"),
        ("format", "jfr"),
    ];
    let q = r.query();
    assert_eq!(q, expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
    let ct = r.header("content-type").unwrap();
    assert!(ct.starts_with("multipart/form-data; boundary="), "{ct}");
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(gunzip(&jfr_part(ct, &r.body)), data(1));
    let basic = base64::engine::general_purpose::STANDARD.encode("shop:pa55-word");
    assert_eq!(r.header("authorization"), Some(format!("Basic {basic}").as_str()));
    assert_eq!(r.header("x-scope-orgid"), Some("team-a"));
    let r2 = &reqs[1];
    assert_eq!(r2.param("from").as_deref(), Some("1700000030"));
    assert_eq!(r2.param("sampleRate"), None);
    assert_eq!(gunzip(&jfr_part(r2.header("content-type").unwrap(), &r2.body)), data(2));
    assert_eq!(r2.header("authorization"), Some("Bearer rotated-token"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pyroscope_pprof_goes_as_the_raw_body() {
    let srv = Server::start();
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Pyroscope), log).unwrap();
    let p = Payload::new(PayloadFormat::Pprof, data(7), t(1_700_000_000), t(1_700_000_010)).with_sample_rate(99);
    assert!(u.submit(p));
    wait_done(&u, 1, Duration::from_secs(10));
    let r = &srv.requests()[0];
    assert_eq!(r.param("format").as_deref(), Some("pprof"));
    assert_eq!(r.param("name").as_deref(), Some("com.example.Shop"));
    assert_eq!(r.param("units"), None);
    assert_eq!(r.param("sampleRate").as_deref(), Some("99"));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.body, data(7));
}

#[test]
fn a_server_absent_at_start_is_retried_until_it_appears() {
    let port = free_port();
    let (log, lines) = logger();
    let mut c = config(&format!("http://127.0.0.1:{port}"), Kind::Otlp);
    c.max_attempts = 100;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    wait_for(Duration::from_secs(10), "a few refused attempts", || u.status().retries >= 3);
    let s = u.status();
    assert_eq!(s.uploaded, 0);
    assert!(s.last_error.as_ref().unwrap().message.contains("connection refused"), "{:?}", s.last_error);
    let srv = Server::start_on(port, None);
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed), (1, 0));
    assert_eq!(gunzip(&srv.requests()[0].body), data(1));
    assert!(text(&lines).contains("again after"), "{}", text(&lines));
}

#[test]
fn server_errors_are_retried_then_succeed() {
    let srv = Server::start();
    srv.script([Reply::status(500), Reply::status(502), Reply::status(503)]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Pyroscope), log).unwrap();
    assert!(u.submit(jfr(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed, s.retries), (1, 0, 3));
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 4);
    // The same request each time.
    assert!(reqs.iter().all(|r| r.target == reqs[0].target && r.body == reqs[0].body));
    // The last error is kept with its time, the success after it.
    let e = s.last_error.unwrap();
    assert!(e.message.contains("HTTP 503") && e.message.contains("status 503 from the test server"), "{}", e.message);
    assert!(s.last_success.unwrap() >= e.at);
}

#[test]
fn otlp_retries_only_the_statuses_the_spec_lists() {
    let srv = Server::start();
    // 500 and 400 are final for OTLP; 429, 502, 503, 504 are retried.
    srv.script([Reply::status(500), Reply::status(400), Reply::status(429), Reply::status(502), Reply::status(504), Reply::status(503)]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed, s.retries), (0, 1, 0));
    assert!(u.submit(otlp(2)));
    let s = wait_done(&u, 2, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed, s.retries), (0, 2, 0));
    assert!(s.last_error.unwrap().message.contains("HTTP 400"));
    assert!(u.submit(otlp(3)));
    let s = wait_done(&u, 3, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed, s.retries), (1, 2, 4));
    assert_eq!(srv.requests().len(), 7);
}

#[test]
fn pyroscope_client_errors_are_final_except_408_and_429() {
    let srv = Server::start();
    srv.script([Reply::status(401), Reply::status(408), Reply::status(429), Reply::status(404)]);
    let (log, lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Pyroscope), log).unwrap();
    assert!(u.submit(jfr(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed, s.retries), (0, 1, 0));
    assert!(text(&lines).contains("HTTP 401") && text(&lines).contains("check auth="), "{}", text(&lines));
    assert!(u.submit(jfr(2)));
    let s = wait_done(&u, 2, Duration::from_secs(10));
    // 408 and 429 retried, then 404 final.
    assert_eq!((s.uploaded, s.failed, s.retries), (0, 2, 2));
    assert_eq!(srv.requests().len(), 4);
}

#[test]
fn retry_after_in_seconds_is_honoured() {
    let srv = Server::start();
    srv.script([Reply::with_header(429, "Retry-After", "1"), Reply::with_header(503, "Retry-After", "1")]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.retries), (1, 2));
    let r = srv.requests();
    assert_eq!(r.len(), 3);
    // Without Retry-After the backoff here is under 200 ms.
    for w in r.windows(2) {
        let gap = w[1].at - w[0].at;
        assert!(gap >= Duration::from_secs(1), "retried after {gap:?}, before Retry-After");
    }
}

#[test]
fn retry_after_as_an_http_date_is_honoured() {
    let srv = Server::start();
    // Two seconds ahead, rounded down to the second: 1 to 2 s from now.
    let at = SystemTime::now() + Duration::from_secs(2);
    let secs = at.duration_since(UNIX_EPOCH).unwrap().as_secs();
    srv.script([Reply::with_header(503, "Retry-After", &http_date(secs))]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    wait_done(&u, 1, Duration::from_secs(10));
    let r = srv.requests();
    assert_eq!(r.len(), 2);
    let retried_at = SystemTime::now() - r[1].at.elapsed();
    assert!(retried_at >= UNIX_EPOCH + Duration::from_secs(secs) - Duration::from_millis(20), "retried before the date");
}

/// IMF-fixdate for Unix seconds.
fn http_date(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil from days (H. Hinnant).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize];
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][(m - 1) as usize];
    format!("{wd}, {d:02} {mon} {y} {:02}:{:02}:{:02} GMT", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[test]
fn a_hanging_server_times_out_and_submit_never_waits() {
    let srv = Server::start();
    srv.script([Reply::Hang]);
    let (log, lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.request_timeout = Duration::from_secs(1);
    c.queue_payloads = 4;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    srv.wait_requests(1, Duration::from_secs(5));
    // While the sender waits on the hanging server, submit still returns at once.
    let mut worst = Duration::ZERO;
    for n in 2..=30 {
        let p = otlp(n);
        let t0 = Instant::now();
        assert!(u.submit(p));
        worst = worst.max(t0.elapsed());
    }
    assert!(worst < Duration::from_millis(50), "submit took {worst:?} while the server hung");
    // The hung attempt ends by the time-out, then everything queued goes out.
    let s = wait_done(&u, 5, Duration::from_secs(15));
    let reqs = srv.requests();
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(950) && gap < Duration::from_secs(4), "second request {gap:?} after the hung one");
    assert!(s.last_error.unwrap().message.contains("no answer within 1000 ms"));
    assert_eq!((s.uploaded, s.failed, s.retries), (5, 0, 1));
    // 29 submitted behind the first, 4 kept: the newest ones.
    assert_eq!(s.dropped, 25);
    let bodies: Vec<Vec<u8>> = reqs.iter().map(|r| gunzip(&r.body)).collect();
    assert_eq!(bodies, [1, 1, 27, 28, 29, 30].map(data).to_vec());
    assert!(text(&lines).contains("25 oldest payload(s) dropped"), "{}", text(&lines));
}

#[test]
fn the_byte_cap_also_pushes_out_the_oldest() {
    let srv = Server::start();
    srv.script([Reply::Hang]);
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.request_timeout = Duration::from_secs(1);
    c.queue_payloads = 100;
    c.queue_bytes = data(15).len() * 3 + 10;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    srv.wait_requests(1, Duration::from_secs(5));
    for n in 10..16 {
        assert!(u.submit(otlp(n)));
    }
    let s = u.status();
    assert_eq!((s.queued, s.dropped), (3, 3));
    assert!(s.queued_bytes <= data(15).len() * 3 + 10);
    // Larger than the cap: refused and counted.
    assert!(!u.submit(Payload::new(PayloadFormat::Otlp, vec![0; data(10).len() * 4], t(0), t(1))));
    assert_eq!(u.status().dropped, 4);
    // A payload of the wrong format for the store: refused, failed.
    assert!(!u.submit(jfr(1)));
    assert_eq!(u.status().failed, 1);
    let s = wait_done(&u, 5, Duration::from_secs(15));
    let bodies: Vec<Vec<u8>> = srv.requests().iter().map(|r| gunzip(&r.body)).collect();
    assert_eq!(bodies, [1, 1, 13, 14, 15].map(data).to_vec());
    assert_eq!(s.submitted, 9);
}

#[test]
fn uploads_resume_after_the_server_is_killed_and_restarted() {
    let mut srv = Server::start();
    let port = srv.port;
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Pyroscope);
    c.max_attempts = 100;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(jfr(1)));
    wait_done(&u, 1, Duration::from_secs(10));
    srv.stop();
    assert!(u.submit(jfr(2)));
    wait_for(Duration::from_secs(10), "failed attempts on the dead server", || u.status().retries >= 2);
    let srv2 = Server::start_on(port, None);
    assert!(u.submit(jfr(3)));
    let s = wait_done(&u, 3, Duration::from_secs(15));
    assert_eq!((s.uploaded, s.failed), (3, 0));
    let got: Vec<Vec<u8>> = srv2.requests().iter().map(|r| gunzip(&jfr_part(r.header("content-type").unwrap(), &r.body))).collect();
    assert_eq!(got, vec![data(2), data(3)]);
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn shutdown_returns_by_its_deadline_while_the_server_hangs() {
    let srv = Server::start();
    srv.set_default(Reply::Hang);
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.request_timeout = Duration::from_secs(30);
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    assert!(u.submit(otlp(2)));
    srv.wait_requests(1, Duration::from_secs(5));
    let t0 = Instant::now();
    let s = u.shutdown(Duration::from_millis(800));
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(790) && took < Duration::from_millis(1800), "shutdown took {took:?}");
    // The request under way is left to its own time-out; nothing new is
    // taken. It and the payload behind it are counted as lost.
    assert_eq!((s.uploaded, s.dropped, s.unsent_at_shutdown), (0, 2, 2));
    assert!(s.to_string().contains("2 not sent by the shutdown deadline"), "{s}");
    assert!(!u.submit(otlp(3)));
    assert_eq!(u.status().dropped, 3);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(srv.requests().len(), 1);
}

/// A payload waiting for a retry due after the shutdown deadline gets one
/// last attempt at shutdown: the store may be back by then.
#[test]
fn shutdown_cuts_a_backoff_short_for_one_last_attempt() {
    let port = free_port();
    let (log, _lines) = logger();
    let mut c = config(&format!("http://127.0.0.1:{port}"), Kind::Otlp);
    (c.backoff_base, c.backoff_cap, c.max_attempts) = (Duration::from_secs(60), Duration::from_secs(60), 100);
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    wait_for(Duration::from_secs(10), "a refused attempt", || u.status().retries >= 1);
    let srv = Server::start_on(port, None);
    let t0 = Instant::now();
    let s = u.shutdown(Duration::from_secs(3));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!((s.uploaded, s.failed, s.dropped), (1, 0, 0), "{s}");
    assert_eq!(gunzip(&srv.requests()[0].body), data(1));
}

#[test]
fn shutdown_sends_what_is_queued_and_stops_the_thread() {
    let srv = Server::start();
    srv.script([Reply::status(503)]);
    let (log, lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    for n in 1..=3 {
        assert!(u.submit(otlp(n)));
    }
    let t0 = Instant::now();
    let s = u.shutdown(Duration::from_secs(10));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!((s.uploaded, s.failed, s.dropped, s.retries), (3, 0, 0, 1));
    assert!(!s.running);
    assert!(text(&lines).contains("upload: stopped: 3 uploaded, 0 failed, 0 dropped"), "{}", text(&lines));
}

#[test]
fn shutdown_with_a_server_that_refuses_gives_up_by_the_deadline() {
    let port = free_port();
    let (log, _lines) = logger();
    let mut c = config(&format!("http://127.0.0.1:{port}"), Kind::Otlp);
    c.max_attempts = 1000;
    let u = Uploader::start(c, log).unwrap();
    for n in 1..=3 {
        assert!(u.submit(otlp(n)));
    }
    let t0 = Instant::now();
    let s = u.shutdown(Duration::from_millis(500));
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1500), "shutdown took {took:?}");
    assert!(!s.running);
    assert_eq!(s.uploaded, 0);
    assert_eq!(s.failed + s.dropped, 3);
}

#[test]
fn the_credential_never_shows_in_status_errors_or_log() {
    for (credential, secret_forms) in [
        ("Bearer s3cr3t-T0KEN-value", vec!["s3cr3t-T0KEN-value".to_string()]),
        ("Basic shop:s3cr3t-pa55", vec!["s3cr3t-pa55".to_string(), base64::engine::general_purpose::STANDARD.encode("shop:s3cr3t-pa55")]),
    ] {
        let srv = Server::start();
        // The server echoes the Authorization header it got in its error text.
        srv.script([Reply::EchoAuth(503), Reply::EchoAuth(503)]);
        srv.set_default(Reply::EchoAuth(401));
        let dir = std::env::temp_dir().join(format!("oxprof-upload-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, credential).unwrap();
        let (log, lines) = logger();
        let mut c = config(&srv.url(), Kind::Pyroscope);
        c.auth = Some(AuthSource::File(file.clone()));
        c.log_interval = Duration::ZERO;
        let u = Uploader::start(c.clone(), log).unwrap();
        assert!(u.submit(jfr(1)));
        let s = wait_done(&u, 1, Duration::from_secs(10));
        assert_eq!((s.failed, s.retries), (1, 2));
        // It was sent, and the server did echo it.
        let reqs = srv.requests();
        assert_eq!(reqs.len(), 3);
        assert!(secret_forms.iter().any(|f| reqs[0].header("authorization").unwrap().contains(f.as_str())));
        let e = s.last_error.clone().unwrap().message;
        assert!(e.contains("HTTP 401") && e.contains("refused credential"), "{e}");
        let shown = format!("{}\n{:?}\n{}\n{:?}\n{c:?}", text(&lines), s, s, u);
        for f in &secret_forms {
            assert!(!shown.contains(f.as_str()), "the secret shows in:\n{shown}");
        }
        assert!(shown.contains("<redacted>"), "{shown}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_missing_credential_file_is_reported_without_sending() {
    let srv = Server::start();
    let (log, lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.auth = Some(AuthSource::File("/nonexistent/oxprof/token".into()));
    c.max_attempts = 2;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!(s.failed, 1);
    assert!(srv.requests().is_empty());
    assert!(s.last_error.unwrap().message.contains("auth=file:/nonexistent/oxprof/token: cannot read"));
    assert!(text(&lines).contains("gave up"));
}

#[test]
fn failure_lines_are_rate_limited_per_kind() {
    let srv = Server::start();
    srv.set_default(Reply::status(503));
    let (log, lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.max_attempts = 6;
    c.backoff_base = Duration::from_millis(1);
    c.backoff_cap = Duration::from_millis(2);
    let u = Uploader::start(c.clone(), log).unwrap();
    assert!(u.submit(otlp(1)));
    assert!(u.submit(otlp(2)));
    let s = wait_done(&u, 2, Duration::from_secs(10));
    assert_eq!((s.failed, s.retries), (2, 10));
    let all = lines.lock().unwrap().clone();
    let retries: Vec<_> = all.iter().filter(|(l, m)| *l == LogLevel::Warn && m.contains("HTTP 503")).collect();
    let gave_up: Vec<_> = all.iter().filter(|(l, m)| *l == LogLevel::Error && m.contains("gave up")).collect();
    assert_eq!((retries.len(), gave_up.len()), (1, 1), "{}", text(&lines));

    // With a short interval, the next line says how many were left out.
    let srv = Server::start();
    srv.set_default(Reply::status(503));
    let (log, lines) = logger();
    c.endpoint = srv.url();
    c.max_attempts = 30;
    c.log_interval = Duration::from_millis(300);
    c.backoff_base = Duration::from_millis(20);
    c.backoff_cap = Duration::from_millis(40);
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    wait_done(&u, 1, Duration::from_secs(10));
    let t = text(&lines);
    assert!(t.contains("suppressed in the last 300 ms)"), "{t}");
    let warn_lines = lines.lock().unwrap().iter().filter(|(l, _)| *l == LogLevel::Warn).count();
    assert!(warn_lines < 15, "{t}");
}

#[test]
fn a_payload_too_old_is_given_up() {
    let srv = Server::start();
    srv.set_default(Reply::status(503));
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Otlp);
    c.max_attempts = 1000;
    c.max_age = Duration::from_millis(600);
    c.backoff_base = Duration::from_millis(100);
    c.backoff_cap = Duration::from_millis(100);
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!(s.failed, 1);
    assert!(s.last_error.unwrap().message.contains("older than"));
    assert!(srv.requests().len() < 20);
}

#[test]
fn otlp_partial_success_is_counted_and_logged() {
    let srv = Server::start();
    // ExportProfilesServiceResponse { partial_success { rejected_profiles: 2, error_message: "unknown mapping" } }
    let msg = b"unknown mapping";
    let inner = [&[0x08, 0x02, 0x12, msg.len() as u8][..], msg].concat();
    let body = [&[0x0a, inner.len() as u8][..], &inner].concat();
    srv.script([Reply::Status { code: 200, headers: vec![("Content-Type".into(), "application/x-protobuf".into())], body }]);
    let (log, lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.partial, s.rejected_profiles, s.retries), (1, 1, 2, 0));
    assert!(text(&lines).contains("2 rejected: unknown mapping"), "{}", text(&lines));
}

#[test]
fn redirects_are_not_followed() {
    let srv = Server::start();
    srv.script([Reply::with_header(307, "Location", "http://127.0.0.1:9/elsewhere")]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.failed, s.retries), (1, 0));
    assert!(s.last_error.unwrap().message.contains("redirects are not followed"));
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn https_with_an_extra_root_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = std::env::temp_dir().join(format!("oxprof-upload-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let tls = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(vec![cert.cert.der().clone()], key).unwrap();
    let srv = Server::start_on(0, Some(Arc::new(tls)));
    let url = format!("https://localhost:{}", srv.port);

    // Not trusted without the extra root: a TLS failure, retried, nothing received.
    let (log, _lines) = logger();
    let mut c = config(&url, Kind::Otlp);
    c.max_attempts = 2;
    let u = Uploader::start(c.clone(), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed), (0, 1));
    let e = s.last_error.unwrap().message;
    assert!(e.contains("TLS") || e.to_lowercase().contains("certificate"), "{e}");
    assert!(srv.requests().is_empty());

    c.extra_roots = Some(ca.clone());
    let (log, _lines) = logger();
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(otlp(2)));
    let s = wait_done(&u, 1, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.failed), (1, 0), "{:?}", s.last_error);
    let r = &srv.requests()[0];
    assert_eq!(r.target, "/v1development/profiles");
    assert_eq!(gunzip(&r.body), data(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_sender_survives_garbage_answers() {
    let srv = Server::start();
    srv.script([
        Reply::Raw(b"HELLO\r\n\r\n".to_vec()),
        Reply::Raw(vec![]),
        Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort".to_vec()),
        Reply::Raw(format!("HTTP/1.1 503 X\r\nX-Big: {}\r\n\r\n", "a".repeat(200_000)).into_bytes()),
        Reply::Raw(b"HTTP/1.1 999999 What\r\n\r\n".to_vec()),
    ]);
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Pyroscope);
    c.max_attempts = 10;
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(jfr(1)));
    let s = wait_done(&u, 1, Duration::from_secs(15));
    // A 200 whose body is cut short counts as accepted; the rest are retried.
    assert_eq!((s.uploaded, s.failed, s.running), (1, 0, true));
    assert_eq!(s.retries, 2);
    // Later payloads still go out after the other kinds of garbage.
    assert!(u.submit(jfr(2)));
    let s = wait_done(&u, 2, Duration::from_secs(15));
    assert_eq!((s.uploaded, s.failed), (2, 0));
    assert_eq!(s.retries, 4);
    assert_eq!(srv.requests().len(), 6);
}

#[test]
fn an_otlp_answer_over_4_mib_is_not_trusted() {
    let srv = Server::start();
    srv.script([Reply::Status { code: 200, headers: vec![], body: vec![b'x'; (4 << 20) + 1] }]);
    let (log, _lines) = logger();
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    let s = wait_done(&u, 1, Duration::from_secs(15));
    assert_eq!((s.uploaded, s.failed, s.retries), (0, 1, 0));
    assert!(s.last_error.unwrap().message.contains("over 4 MiB"));
    assert_eq!(srv.requests().len(), 1);
}

#[test]
fn an_unset_credential_variable_stops_start_with_one_line() {
    let c = |name: &str| {
        let mut c = config("http://127.0.0.1:9", Kind::Otlp);
        c.auth = Some(AuthSource::Env(name.into()));
        c
    };
    let (log, _lines) = logger();
    let e = Uploader::start(c("OXPROF_TEST_UNSET_VARIABLE"), log.clone()).unwrap_err();
    assert!(e.starts_with("auth=env:OXPROF_TEST_UNSET_VARIABLE: the variable is not set in the JVM's environment"), "{e}");
    std::env::set_var("OXPROF_TEST_BAD_CREDENTIAL", "two words s3cr3t");
    let e = Uploader::start(c("OXPROF_TEST_BAD_CREDENTIAL"), log).unwrap_err();
    assert!(e.starts_with("auth=env:OXPROF_TEST_BAD_CREDENTIAL: the credential is not") && !e.contains("s3cr3t") && !e.contains('\n'), "{e}");
}

#[test]
fn a_log_callback_that_panics_does_not_stop_uploads() {
    let srv = Server::start();
    srv.script([Reply::status(503)]);
    let log: LogFn = Arc::new(|_, _: &str| panic!("the log is broken"));
    let u = Uploader::start(config(&srv.url(), Kind::Otlp), log).unwrap();
    assert!(u.submit(otlp(1)));
    assert!(u.submit(otlp(2)));
    let s = wait_done(&u, 2, Duration::from_secs(10));
    assert_eq!((s.uploaded, s.retries, s.running), (2, 1, true));
}

/// Reads captured requests the way the Go servers do, with Go's standard
/// library: the query with net/url, Pyroscope's form with mime/multipart
/// (the `jfr` file part, gunzipped when it starts with gzip's magic, as
/// Pyroscope's ingest handler does), OTLP's body with compress/gzip.
const GO_READER: &str = r#"package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
)

func must(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func gunzip(b []byte) []byte {
	r, err := gzip.NewReader(bytes.NewReader(b))
	must(err)
	out, err := io.ReadAll(r)
	must(err)
	return out
}

func main() {
	dir := os.Args[1]
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		must(err)
		return b
	}
	u, err := url.ParseRequestURI(string(read("pyro.target")))
	must(err)
	q := u.Query()
	for _, k := range []string{"name", "from", "until", "format", "spyName", "sampleRate"} {
		fmt.Printf("%s=%s\n", k, q.Get(k))
	}
	_, params, err := mime.ParseMediaType(string(read("pyro.ctype")))
	must(err)
	form, err := multipart.NewReader(bytes.NewReader(read("pyro.body")), params["boundary"]).ReadForm(32 << 20)
	must(err)
	f, err := form.File["jfr"][0].Open()
	must(err)
	jfr, err := io.ReadAll(f)
	must(err)
	if len(jfr) > 2 && jfr[0] == 0x1f && jfr[1] == 0x8b {
		jfr = gunzip(jfr)
	}
	must(os.WriteFile(filepath.Join(dir, "jfr.out"), jfr, 0o600))
	must(os.WriteFile(filepath.Join(dir, "otlp.out"), gunzip(read("otlp.body")), 0o600))
	fmt.Println("ok")
}
"#;

#[test]
fn requests_are_read_by_gos_standard_library() {
    let dir = std::env::temp_dir().join(format!("oxprof-upload-go-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let srv = Server::start();
    let (log, _lines) = logger();
    let mut c = config(&srv.url(), Kind::Pyroscope);
    c.labels = oxprof_upload::parse_labels("env=prod").unwrap();
    let u = Uploader::start(c, log.clone()).unwrap();
    assert!(u.submit(jfr(3).with_sample_rate(250)));
    wait_done(&u, 1, Duration::from_secs(10));
    let srv2 = Server::start();
    let u2 = Uploader::start(config(&srv2.url(), Kind::Otlp), log).unwrap();
    assert!(u2.submit(otlp(4)));
    wait_done(&u2, 1, Duration::from_secs(10));
    let (p, o) = (&srv.requests()[0], &srv2.requests()[0]);
    std::fs::write(dir.join("pyro.target"), &p.target).unwrap();
    std::fs::write(dir.join("pyro.ctype"), p.header("content-type").unwrap()).unwrap();
    std::fs::write(dir.join("pyro.body"), &p.body).unwrap();
    std::fs::write(dir.join("otlp.body"), &o.body).unwrap();
    std::fs::write(dir.join("reader.go"), GO_READER).unwrap();
    let out = std::process::Command::new("go")
        .args(["run", "reader.go"])
        .arg(&dir)
        .current_dir(&dir)
        .env("GOCACHE", dir.join("gocache"))
        .env("GO111MODULE", "off")
        .output()
        .expect("go (golang-go) is needed: scripts/test.sh installs it");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "go run: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout, "name=com.example.Shop{env=prod}\nfrom=1700000045\nuntil=1700000060\nformat=jfr\nspyName=javaspy\nsampleRate=250\nok\n");
    assert_eq!(std::fs::read(dir.join("jfr.out")).unwrap(), data(3));
    assert_eq!(std::fs::read(dir.join("otlp.out")).unwrap(), data(4));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory of its own under the temp directory, for a spool.
fn spool_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("oxprof-upload-spool-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).map(|r| r.map(|e| e.unwrap().file_name().into_string().unwrap()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// A payload the store refuses for good is kept in the spool, under its
/// name, as the bytes given (what `oxprof convert` reads); past
/// `spool_bytes` the oldest files go, counted.
#[test]
fn payloads_the_store_refuses_are_kept_in_the_spool_within_its_bound() {
    let srv = Server::start();
    srv.set_default(Reply::status(400));
    let (log, lines) = logger();
    let dir = spool_dir("refused");
    let mut c = config(&srv.url(), Kind::Otlp);
    c.spool_dirs = Some(oxprof_upload::SpoolDirs::one(dir.clone()));
    c.spool_bytes = (data(1).len() + data(2).len() + data(3).len()) as u64;
    let u = Uploader::start(c, log).unwrap();
    for n in 1..=4 {
        assert!(u.submit(otlp(n).with_name(format!("interval-{n}"))));
        wait_done(&u, n as u64, Duration::from_secs(10));
    }
    let s = u.status();
    assert_eq!((s.failed, s.spooled, s.spool_removed, s.spool_failed), (4, 4, 2, 0), "{s}");
    assert_eq!(s.spool_dir.as_deref(), Some(dir.as_path()));
    // 1 and 2 removed to make room for 4.
    assert_eq!(names_in(&dir), ["interval-3.otlp.pb", "interval-4.otlp.pb"]);
    assert_eq!(std::fs::read(dir.join("interval-4.otlp.pb")).unwrap(), data(4));
    assert!(s.to_string().contains(&format!("4 kept in {}/ (oxprof convert reads them), 2 of them removed", dir.display())), "{s}");
    let log = text(&lines);
    assert!(log.contains(&format!("not retried, payload dropped; kept in {}", dir.join("interval-1.otlp.pb").display())), "{log}");
    let s = u.shutdown(Duration::from_secs(2));
    assert!(text(&lines).contains(&format!("upload: stopped: 0 uploaded, 4 failed, 0 dropped; 4 kept in {}/", dir.display())), "{}", text(&lines));
    assert_eq!(s.spooled, 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Payloads pushed out of the full queue are written by the caller's
/// `spool_pushed_out` at once, while the sender waits on a hanging store.
#[test]
fn payloads_pushed_out_of_the_full_queue_are_kept_by_the_caller() {
    let srv = Server::start();
    srv.set_default(Reply::Hang);
    let (log, _lines) = logger();
    let dir = spool_dir("pushed-out");
    let mut c = config(&srv.url(), Kind::Pyroscope);
    c.request_timeout = Duration::from_secs(30);
    c.queue_payloads = 2;
    c.spool_dirs = Some(oxprof_upload::SpoolDirs::one(dir.clone()));
    let u = Uploader::start(c, log).unwrap();
    assert!(u.submit(jfr(1).with_name("interval-1")));
    srv.wait_requests(1, Duration::from_secs(5));
    for n in 2..=6 {
        assert!(u.submit(jfr(n).with_name(format!("interval-{n}"))));
    }
    let t0 = Instant::now();
    u.spool_pushed_out();
    assert!(t0.elapsed() < Duration::from_secs(1));
    // 1 is being sent, 5 and 6 wait; 2, 3 and 4 were pushed out.
    assert_eq!(names_in(&dir), ["interval-2.jfr", "interval-3.jfr", "interval-4.jfr"]);
    assert_eq!(std::fs::read(dir.join("interval-3.jfr")).unwrap(), data(3));
    let s = u.status();
    assert_eq!((s.dropped, s.spooled, s.queued), (3, 3, 2), "{s}");
    srv.release_hangs();
    let _ = std::fs::remove_dir_all(&dir);
}

/// At the deadline the sender is stuck in a request it cannot cut short:
/// that payload and those queued behind it are kept all the same, by the
/// deadline.
#[test]
fn shutdown_keeps_what_a_stuck_sender_holds_by_the_deadline() {
    let srv = Server::start();
    srv.set_default(Reply::Hang);
    let (log, _lines) = logger();
    let dir = spool_dir("stuck");
    let mut c = config(&srv.url(), Kind::Otlp);
    c.request_timeout = Duration::from_secs(30);
    c.spool_dirs = Some(oxprof_upload::SpoolDirs::one(dir.clone()));
    let u = Uploader::start(c, log).unwrap();
    for n in 1..=3 {
        assert!(u.submit(otlp(n).with_name(format!("interval-{n}"))));
    }
    srv.wait_requests(1, Duration::from_secs(5));
    let t0 = Instant::now();
    let s = u.shutdown(Duration::from_millis(800));
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1000), "shutdown took {took:?}");
    assert_eq!((s.uploaded, s.unsent_at_shutdown, s.spooled), (0, 3, 3), "{s}");
    assert!(s.to_string().contains(&format!("3 kept in {}/", dir.display())), "{s}");
    assert_eq!(names_in(&dir), ["interval-1.otlp.pb", "interval-2.otlp.pb", "interval-3.otlp.pb"]);
    assert_eq!(std::fs::read(dir.join("interval-1.otlp.pb")).unwrap(), data(1));
    srv.release_hangs();
    let _ = std::fs::remove_dir_all(&dir);
}
