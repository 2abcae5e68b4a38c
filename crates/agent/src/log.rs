//! The agent's log: one `[oxprof] level: message` line per event, to stderr or
//! to the file named by `log=`. Never used from the signal handler.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use crate::options::LogLevel;

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);
static FILE: Mutex<Option<File>> = Mutex::new(None);

/// Sets the level and, optionally, the log file, which the caller opened
/// (see [`open_file`]).
pub fn configure(level: LogLevel, file: Option<File>) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    if let Some(f) = file {
        *FILE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    }
}

pub fn enabled(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

fn write(level: LogLevel, tag: &str, msg: &str) {
    if !enabled(level) {
        return;
    }
    let line = format!("[oxprof] {tag}{msg}\n");
    let mut file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    match file.as_mut() {
        Some(f) => {
            let _ = f.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

pub fn error(msg: &str) {
    write(LogLevel::Error, "error: ", msg)
}

pub fn warn(msg: &str) {
    write(LogLevel::Warn, "warning: ", msg)
}

pub fn info(msg: &str) {
    write(LogLevel::Info, "", msg)
}

pub fn debug(msg: &str) {
    write(LogLevel::Debug, "debug: ", msg)
}
