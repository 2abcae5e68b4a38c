//! The parsers of bytes a JVM (or whoever runs it) controls, exposed for the
//! fuzz targets in `fuzz/` (feature `fuzzing`; not a public API): the reply
//! on the attach socket, the `load` reply text, the request we build from
//! our own arguments, `/proc/<pid>/status`, `maps`, `cmdline` and the JDK
//! `release` file, and the filter that makes a target's text printable.

use std::path::PathBuf;

use crate::error::AttachError;
use crate::protocol::Reply;

/// The attach listener's raw reply (status line, then text).
pub fn reply(raw: &[u8]) -> Result<Reply, AttachError> {
    crate::protocol::parse_reply(std::process::id(), raw)
}

/// The request bytes for `command` and its arguments.
pub fn request(command: &str, args: &[&str]) -> Result<Vec<u8>, AttachError> {
    crate::protocol::encode_request(command, args)
}

/// `/proc/<pid>/status`: (state, nspid, euid, egid, caught signals, groups).
pub fn status(text: &str) -> Option<(char, u32, u32, u32, u64, Vec<u32>)> {
    crate::process::parse_status(1, text).map(|s| (s.state, s.ns_pid, s.uid, s.gid, s.caught, s.groups))
}

/// The distinct files of `/proc/<pid>/maps`.
pub fn maps(text: &str) -> Vec<PathBuf> {
    crate::process::parse_maps(text)
}

/// `/proc/<pid>/cmdline` split like the `java` launcher does: (JVM options,
/// main), and whether `-XX:+ReduceSignalUsage` is among the options.
pub fn cmdline(raw: &[u8]) -> (Vec<String>, Option<String>, Option<bool>) {
    let args = crate::list::parse_java_args(&crate::process::split_nul(raw));
    let rs = crate::list::flag_in(&args.options, "ReduceSignalUsage");
    (args.options, args.main, rs)
}

/// `JAVA_VERSION` of a JDK `release` file, as `oxprof list` shows it.
pub fn release(text: &str) -> Option<String> {
    crate::list::parse_release(text)
}

/// A target's text as `oxprof list` prints a main class: one printable line.
pub fn one_printable_line(text: &str) -> String {
    crate::list::one_printable_line(text)
}
