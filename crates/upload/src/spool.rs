//! Keeping on disk what the store did not take: a payload given up after
//! its retries (or refused for good), pushed out of the full queue, or still
//! unsent at the shutdown deadline is written to a spool directory the
//! caller names (the agent's private fallback directory) instead of being
//! lost. Each is one file `oxprof convert` and `report` read as it is: an
//! OTLP request `.otlp.pb`, a JFR recording `.jfr`, a pprof profile
//! `.pb.gz` (`.pb` when not compressed), named after the payload's interval
//! ([`crate::Payload::with_name`]). The files this spool wrote are bounded
//! in total size (`upload_spool_bytes`): past it the oldest are removed and
//! counted. Files are created exclusively (never through a link), mode
//! 0600; only files this spool wrote are removed. A directory that fails (a
//! full disk) gives way to the caller's next one.
//!
//! Called on the sender thread, or on a caller's thread that may write to
//! disk ([`crate::Uploader::spool_pushed_out`]), never under the queue's lock.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use crate::config::SpoolDirs;
use crate::request::{Payload, PayloadFormat};

/// A payload kept: where, and how many older files were removed to make
/// room for it.
#[derive(Debug)]
pub(crate) struct Kept {
    pub path: PathBuf,
    pub removed: u64,
}

struct Files {
    /// The next directory to try, and the one in use.
    candidate: usize,
    dir: Option<PathBuf>,
    /// Files written, oldest first, with their sizes.
    written: VecDeque<(PathBuf, u64)>,
    bytes: u64,
}

pub(crate) struct Spool {
    dirs: SpoolDirs,
    max_bytes: u64,
    files: Mutex<Files>,
}

/// The file extension for a payload's bytes.
fn extension(p: &Payload) -> &'static str {
    let gzipped = p.data.starts_with(&[0x1f, 0x8b]);
    match (p.format, gzipped) {
        (PayloadFormat::Otlp, false) => "otlp.pb",
        (PayloadFormat::Otlp, true) => "otlp.pb.gz",
        (PayloadFormat::Jfr, false) => "jfr",
        (PayloadFormat::Jfr, true) => "jfr.gz",
        (PayloadFormat::Pprof, false) => "pb",
        (PayloadFormat::Pprof, true) => "pb.gz",
    }
}

/// The file name's stem: the payload's name made safe (letters, digits,
/// `. _ -`, not starting with a dot, at most 100 characters), else its
/// start in Unix seconds.
fn stem(p: &Payload) -> String {
    let given: String =
        p.name.as_deref().unwrap_or("").chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).take(100).collect();
    let given = given.trim_start_matches('.');
    if given.is_empty() {
        format!("payload-{}", p.start.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0))
    } else {
        given.to_string()
    }
}

/// Writes `data` to a new file `stem.ext` (or `stem-2.ext`, ...) in `dir`.
fn write_new(dir: &Path, stem: &str, ext: &str, data: &[u8]) -> io::Result<PathBuf> {
    for n in 1..100 {
        let path = if n == 1 { dir.join(format!("{stem}.{ext}")) } else { dir.join(format!("{stem}-{n}.{ext}")) };
        // create_new: O_CREAT|O_EXCL, which also refuses a symbolic link.
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        return match file.write_all(data).and_then(|()| file.flush()) {
            Ok(()) => Ok(path),
            Err(e) => {
                drop(file);
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        };
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{stem}.{ext} and 98 variants are taken")))
}

impl Spool {
    pub(crate) fn new(dirs: SpoolDirs, max_bytes: u64) -> Spool {
        Spool { dirs, max_bytes, files: Mutex::new(Files { candidate: 0, dir: None, written: VecDeque::new(), bytes: 0 }) }
    }

    /// Writes `p` to the spool, first removing the oldest files kept when
    /// the bound would be passed. The error is one line saying why it could
    /// not be kept.
    pub(crate) fn keep(&self, p: &Payload) -> Result<Kept, String> {
        let size = p.data.len() as u64;
        if size > self.max_bytes {
            return Err(format!("a payload of {size} bytes is larger than upload_spool_bytes={}", self.max_bytes));
        }
        let mut f = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        while f.bytes + size > self.max_bytes {
            let Some((old, n)) = f.written.pop_front() else { break };
            f.bytes -= n;
            // Our own file in a private directory; gone already is fine.
            let _ = std::fs::remove_file(&old);
            removed += 1;
        }
        let (stem, ext) = (stem(p), extension(p));
        let mut last_error = String::from("no directory was given");
        loop {
            let dir = match &f.dir {
                Some(d) => d.clone(),
                None => match (self.dirs.0)(f.candidate) {
                    None => return Err(format!("cannot keep it on disk: {last_error}")),
                    Some(Err(e)) => {
                        last_error = format!("cannot make a directory for it: {e}");
                        f.candidate += 1;
                        continue;
                    }
                    Some(Ok(d)) => {
                        f.dir = Some(d.clone());
                        d
                    }
                },
            };
            match write_new(&dir, &stem, ext, &p.data) {
                Ok(path) => {
                    f.written.push_back((path.clone(), size));
                    f.bytes += size;
                    return Ok(Kept { path, removed });
                }
                Err(e) => {
                    // A full disk or a directory gone: the next one.
                    last_error = format!("{}: {e}", dir.display());
                    f.dir = None;
                    f.candidate += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    fn payload(format: PayloadFormat, data: Vec<u8>, name: Option<&str>) -> Payload {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let p = Payload::new(format, data, t, t + Duration::from_secs(1));
        match name {
            Some(n) => p.with_name(n),
            None => p,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "oxprof-spool-test-{name}-{}-{}",
            std::process::id(),
            SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn files_are_named_after_the_interval_and_bounded_oldest_first() {
        let dir = scratch("bound");
        let s = Spool::new(SpoolDirs::one(dir.clone()), 250);
        let k = s.keep(&payload(PayloadFormat::Otlp, vec![1; 100], Some("interval-0-20250101-120000"))).unwrap();
        assert_eq!(k.path, dir.join("interval-0-20250101-120000.otlp.pb"));
        assert_eq!(k.removed, 0);
        let k = s.keep(&payload(PayloadFormat::Pprof, vec![0x1f, 0x8b, 0, 0], Some("../x/interval-1.cpu"))).unwrap();
        assert_eq!(k.path, dir.join("_x_interval-1.cpu.pb.gz"));
        let k = s.keep(&payload(PayloadFormat::Jfr, vec![2; 100], None)).unwrap();
        assert_eq!(k.path, dir.join("payload-1700000000.jfr"));
        // 204 bytes kept: 100 more do not fit under 250 without the oldest.
        let k = s.keep(&payload(PayloadFormat::Otlp, vec![3; 100], Some("interval-0-20250101-120000"))).unwrap();
        assert_eq!((k.path, k.removed), (dir.join("interval-0-20250101-120000.otlp.pb"), 1));
        assert!(s.keep(&payload(PayloadFormat::Otlp, vec![3; 251], None)).unwrap_err().contains("larger than upload_spool_bytes=250"));
        let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["_x_interval-1.cpu.pb.gz", "interval-0-20250101-120000.otlp.pb", "payload-1700000000.jfr"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_fails_gives_way_to_the_next() {
        let good = scratch("next");
        let g = good.clone();
        let dirs = SpoolDirs(Arc::new(move |n| match n {
            0 => Some(Err(io::Error::from(io::ErrorKind::PermissionDenied))),
            1 => Some(Ok(PathBuf::from("/nonexistent/oxprof-spool"))),
            2 => Some(std::fs::create_dir_all(&g).map(|()| g.clone())),
            _ => None,
        }));
        let s = Spool::new(dirs, 1 << 20);
        let k = s.keep(&payload(PayloadFormat::Otlp, vec![1; 10], Some("iv"))).unwrap();
        assert_eq!(k.path, good.join("iv.otlp.pb"));
        let none = Spool::new(SpoolDirs(Arc::new(|_| None)), 1 << 20);
        assert!(none.keep(&payload(PayloadFormat::Otlp, vec![1; 10], None)).unwrap_err().starts_with("cannot keep it on disk"));
        let _ = std::fs::remove_dir_all(&good);
    }
}
