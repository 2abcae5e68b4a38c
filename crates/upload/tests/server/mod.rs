//! A loopback HTTP/1.1 server for the upload tests: records every request
//! (method, target, headers, body, arrival time) and answers from a script
//! (a status with headers and body, or hang without answering, or close),
//! with a default answer once the script is used up. It can be stopped
//! (listener closed and every open connection cut, as a killed server) and
//! another started on the same port; optionally it speaks TLS.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub enum Reply {
    Status {
        code: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Read the request, never answer; the connection closes when the
    /// server stops or `release_hangs` is called.
    Hang,
    /// Write these bytes as the answer, then close the connection.
    Raw(Vec<u8>),
    /// Answer with the request's Authorization header in the body (a
    /// server that echoes what it got in its error text).
    EchoAuth(u16),
}

impl Reply {
    pub fn ok() -> Reply {
        Reply::Status { code: 200, headers: vec![], body: vec![] }
    }
    pub fn status(code: u16) -> Reply {
        Reply::Status { code, headers: vec![], body: format!("status {code} from the test server").into_bytes() }
    }
    pub fn with_header(code: u16, name: &str, value: &str) -> Reply {
        Reply::Status { code, headers: vec![(name.to_string(), value.to_string())], body: vec![] }
    }
}

#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
    /// The query's parameters, percent-decoded.
    pub fn query(&self) -> Vec<(String, String)> {
        let q = self.target.split_once('?').map(|(_, q)| q).unwrap_or("");
        q.split('&').filter(|s| !s.is_empty()).map(|kv| kv.split_once('=').unwrap_or((kv, ""))).map(|(k, v)| (decode(k), decode(v))).collect()
    }
    pub fn param(&self, name: &str) -> Option<String> {
        self.query().into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).expect("percent escape"));
            i += 3;
        } else if b[i] == b'+' {
            out.push(b' ');
            i += 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8 query")
}

struct Inner {
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
    release: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    tls: Option<Arc<rustls::ServerConfig>>,
}

pub struct Server {
    pub port: u16,
    inner: Arc<Inner>,
    accept: Option<JoinHandle<()>>,
}

/// A port with nothing listening on it (bound once, then closed).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    pub fn start() -> Server {
        Server::start_on(0, None)
    }

    /// On `port` (0: any), with TLS when `tls` is given.
    pub fn start_on(port: u16, tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        // The port may still be held by the connections of a stopped server
        // for a moment: try for a while.
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("cannot bind 127.0.0.1:{port}: {e}"),
            }
        };
        let port = listener.local_addr().unwrap().port();
        let inner = Arc::new(Inner {
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(Reply::ok()),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            release: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            tls,
        });
        let i = inner.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if i.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                if let Ok(c) = conn.try_clone() {
                    i.conns.lock().unwrap().push(c);
                }
                let i2 = i.clone();
                std::thread::spawn(move || serve(i2, conn));
            }
        });
        Server { port, inner, accept: Some(accept) }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The next answers, in order; then the default.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.inner.script.lock().unwrap().extend(replies);
    }

    pub fn set_default(&self, r: Reply) {
        *self.inner.default.lock().unwrap() = r;
    }

    pub fn release_hangs(&self) {
        self.inner.release.store(true, Ordering::SeqCst);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.inner.requests.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived; panics after `timeout`.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> Vec<Request> {
        let end = Instant::now() + timeout;
        loop {
            let r = self.requests();
            if r.len() >= n {
                return r;
            }
            assert!(Instant::now() < end, "expected {n} requests within {timeout:?}, got {}: {:?}", r.len(), r.iter().map(|r| &r.target).collect::<Vec<_>>());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops like a killed process: no more accepts, every connection cut.
    pub fn stop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], self.port)), Duration::from_secs(1));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for c in self.inner.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

fn serve(inner: Arc<Inner>, conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_millis(50)));
    let raw = conn.try_clone().ok();
    let stream: Box<dyn Stream> = match &inner.tls {
        Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
            Ok(sc) => Box::new(rustls::StreamOwned::new(sc, conn)),
            Err(_) => return,
        },
        None => Box::new(conn),
    };
    let mut reader = BufReader::new(stream);
    loop {
        let req = match read_request(&inner, &mut reader) {
            Some(r) => r,
            None => return,
        };
        let reply = inner.script.lock().unwrap().pop_front().unwrap_or_else(|| inner.default.lock().unwrap().clone());
        let auth = req.header("authorization").unwrap_or("").to_string();
        inner.requests.lock().unwrap().push(req);
        let (code, headers, body) = match reply {
            Reply::Status { code, headers, body } => (code, headers, body),
            Reply::EchoAuth(code) => (code, vec![], format!("refused credential: {auth}").into_bytes()),
            Reply::Raw(bytes) => {
                let w = reader.get_mut();
                let _ = w.write_all(&bytes).and_then(|_| w.flush());
                if let Some(r) = raw {
                    let _ = r.shutdown(Shutdown::Both);
                }
                return;
            }
            Reply::Hang => {
                while !inner.stop.load(Ordering::SeqCst) && !inner.release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if let Some(r) = raw {
                    let _ = r.shutdown(Shutdown::Both);
                }
                return;
            }
        };
        let mut head = format!("HTTP/1.1 {code} Test\r\nContent-Length: {}\r\n", body.len());
        for (n, v) in headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let w = reader.get_mut();
        if w.write_all(head.as_bytes()).and_then(|_| w.write_all(&body)).and_then(|_| w.flush()).is_err() {
            return;
        }
    }
}

/// One request, waiting across read time-outs until the server stops.
fn read_request(inner: &Inner, r: &mut BufReader<Box<dyn Stream>>) -> Option<Request> {
    let mut head: Vec<String> = Vec::new();
    let mut line = Vec::new();
    loop {
        if inner.stop.load(Ordering::SeqCst) {
            return None;
        }
        match r.read_until(b'\n', &mut line) {
            Ok(0) => return None,
            Ok(_) if line.ends_with(b"\n") => {
                let l = String::from_utf8_lossy(&line).trim_end().to_string();
                line.clear();
                if l.is_empty() {
                    if head.is_empty() {
                        continue;
                    }
                    break;
                }
                head.push(l);
            }
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => return None,
        }
    }
    let at = Instant::now();
    let mut first = head[0].split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers: Vec<(String, String)> =
        head[1..].iter().filter_map(|h| h.split_once(':')).map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string())).collect();
    let len: usize = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    assert!(!headers.iter().any(|(n, _)| n == "transfer-encoding"), "the test server expects Content-Length bodies");
    let mut body = vec![0u8; len];
    let mut got = 0;
    while got < len {
        if inner.stop.load(Ordering::SeqCst) {
            return None;
        }
        match r.read(&mut body[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => return None,
        }
    }
    Some(Request { method, target, headers, body, at })
}
