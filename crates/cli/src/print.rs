//! Writing the CLI's own lines to stdout and stderr without panicking (the
//! `outln!`, `errln!` and `err_print!` macros; every message of the CLI
//! goes through them, never `println!`/`eprintln!`). A reader that closed
//! stdout (`| head`) ends the output quietly; a stdout that fails otherwise
//! (a full disk, `> /dev/full`) is said once on stderr and makes the exit
//! code 2 ([`stdout_failed`]); a closed or failing stderr is ignored, so
//! that `oxprof record` still passes on the program's exit code.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

/// What became of stdout: open, closed by its reader, or failed.
static STDOUT: AtomicU8 = AtomicU8::new(OPEN);

/// Writes to stdout (nothing once it was closed or failed).
pub fn out(args: fmt::Arguments) {
    if STDOUT.load(Ordering::SeqCst) != OPEN {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        stdout_error(&e);
    }
}

/// Notes an error writing stdout: a reader gone ends the output quietly;
/// another error is said once on stderr.
pub fn stdout_error(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STDOUT.store(CLOSED, Ordering::SeqCst);
    } else if STDOUT.swap(FAILED, Ordering::SeqCst) != FAILED {
        err(format_args!("oxprof: cannot write to stdout: {e}\n"));
    }
}

/// Whether writing stdout failed (other than its reader closing it).
pub fn stdout_failed() -> bool {
    STDOUT.load(Ordering::SeqCst) == FAILED
}

/// Writes to stderr; errors are ignored (there is nowhere left to say them).
pub fn err(args: fmt::Arguments) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args).and_then(|()| e.flush());
}

/// `println!` that never panics: see [`out`].
macro_rules! outln {
    ($($t:tt)*) => { $crate::print::out(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprintln!` that never panics: see [`err`].
macro_rules! errln {
    () => { $crate::print::err(format_args!("\n")) };
    ($($t:tt)*) => { $crate::print::err(format_args!("{}\n", format_args!($($t)*))) };
}

/// `eprint!` that never panics: see [`err`].
macro_rules! err_print {
    ($($t:tt)*) => { $crate::print::err(format_args!($($t)*)) };
}
