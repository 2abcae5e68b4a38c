//! Output: writing a finished profile to disk without ever losing it
//! (this file), opening files safely (`files`), and the streamed JFR
//! recording (`jfr_stream`, `jfr_frames`), continuous profiling's
//! intervals (`intervals`). Uses `profiler`, `heap`,
//! `sampling`, `native` (names), `jvmti`, `symbols`, `options`, `log`.
//!
//! Writing a finished profile to disk without ever losing it: when the chosen
//! path cannot be written (or is a symbolic link, see `files`), the profile
//! goes to a fallback file in a private directory (`oxprof-<pid>-XXXXXX`,
//! 0700) under the working directory or the temp directory, and the log says
//! where. What went elsewhere is also noted ([`warn_noted`]) for the reply
//! of the command that wrote it (`oxprof attach ... stop`), which would
//! otherwise name only the file written.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};

pub mod files;
pub mod intervals;
pub mod jfr_frames;
pub mod jfr_stream;

use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::flamegraph::{self, HtmlOptions, View};
use oxprof_profile::{otlp, pprof, OutputFormat, Profile};

use crate::log;
use files::{MayReplace, Written};

/// Sites printed in the text leak report.
pub const REPORT_SITES: usize = 20;

/// Warnings about where output went instead of where it was asked to go,
/// kept (a few) for the reply of the next command (see [`take_notes`]).
static NOTES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
/// At most this many notes wait for a reply; later ones are only logged.
const MAX_NOTES: usize = 16;

/// Logs `msg` as a warning and keeps it for the reply of the command that
/// is writing (or the next one): an attached JVM's log is quiet, and the
/// reply is where `oxprof attach` users look.
pub fn warn_noted(msg: &str) {
    log::warn(msg);
    keep_note(msg);
}

/// [`warn_noted`], logged as an error.
pub fn error_noted(msg: &str) {
    log::error(msg);
    keep_note(msg);
}

fn keep_note(msg: &str) {
    let mut notes = NOTES.lock().unwrap_or_else(|e| e.into_inner());
    if notes.len() < MAX_NOTES {
        notes.push(msg.to_string());
    }
}

/// The notes kept since the last call ([`warn_noted`]), oldest first.
pub fn take_notes() -> Vec<String> {
    std::mem::take(&mut *NOTES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// One finished profile, ready to write.
pub struct Built {
    /// What it shows, e.g. "CPU" or "Allocations".
    pub label: String,
    /// Short name used in file names of extra outputs, e.g. "alloc".
    pub key: &'static str,
    pub profile: Profile,
    /// The log's one-line summary.
    pub summary_line: String,
    /// The leak report, for the live profile (written as text for `.txt`).
    pub leak: Option<Box<oxprof_profile::leak::LeakReport>>,
}

use crate::options::Config;

/// Serialises profiles in a format. HTML holds every profile as a view of
/// one page; collapsed stacks hold one profile.
pub fn render(built: &[&Built], config: &Config, format: OutputFormat, out: impl Write) -> std::io::Result<()> {
    match format {
        OutputFormat::Collapsed => match built.first() {
            Some(b) => collapsed::write(&b.profile, CollapsedOptions { counter: config.counter, annotate: config.annotate }, out),
            None => Ok(()),
        },
        OutputFormat::FlameGraph => {
            // The live view lists its leak report's top sites above the graph.
            let views: Vec<View<'_>> = built.iter().map(|b| View::labelled(b.label.clone(), &b.profile, config.counter).with_leak(b.leak.as_deref())).collect();
            // `title=` set every profile's title; otherwise the page is
            // titled after all of its tabs, not the first one.
            let title = config.title.clone().unwrap_or_default();
            flamegraph::write_html_multi(&views, &HtmlOptions { title, counter: config.counter, ..HtmlOptions::default() }, out)
        }
        // Allocations and live objects together are one heap profile (four
        // sample types, as Go writes them); anything else is one profile.
        OutputFormat::Pprof => match built {
            [] => Ok(()),
            [b] => pprof::write(&b.profile, out),
            more => pprof::write_parts(&more.iter().map(|b| &b.profile).collect::<Vec<_>>(), out),
        },
        // One OTLP request holds every profile (one shared dictionary).
        OutputFormat::Otlp => {
            let resource = intervals::file_resource();
            otlp::write(&built.iter().map(|b| &b.profile).collect::<Vec<_>>(), &resource, out)
        }
        // A recording that streams JFR writes it in `jfr_stream`; this is a
        // dump to `.jfr` of one that does not: events made from the counts.
        OutputFormat::Jfr => {
            let parts: Vec<(&str, &oxprof_profile::Profile)> = built.iter().map(|b| (b.key, &b.profile)).collect();
            let (start, length) = built.first().map_or((0, 0), |b| (b.profile.meta.start_ns, b.profile.meta.duration_ns));
            oxprof_profile::jfr::from_profiles::write(out, &parts, start, start.saturating_add(length)).map(|_| ())
        }
    }
}

fn write_to(file: File, built: &[&Built], config: &Config, format: OutputFormat) -> std::io::Result<()> {
    let mut w = BufWriter::new(file);
    render(built, config, format, &mut w)?;
    finish(w)
}

/// Writes with `write` to `wanted` ([`files::write_chosen`]: an existing
/// file is replaced only by a complete new one, and only if `may_replace`),
/// or, when that fails, to a new file `stem.ext` in this process's private
/// directory under the working directory, then under the temp directory.
/// Returns the file written and, for a fallback, why `wanted` was not; or
/// the first error.
fn write_with_fallback(
    wanted: &Path,
    may_replace: MayReplace<'_>,
    stem: &str,
    ext: &str,
    write: impl Fn(File) -> std::io::Result<()>,
) -> Result<(Written, Option<std::io::Error>), std::io::Error> {
    let first_error = match files::write_chosen(wanted, may_replace, &write) {
        Ok((existed, id)) => {
            if existed {
                crate::log::info(&format!("overwriting the existing file {}", wanted.display()));
            }
            return Ok((Written { path: wanted.to_path_buf(), id }, None));
        }
        Err(e) => e,
    };
    for base in files::fallback_bases() {
        let Ok((path, file)) = files::open_fallback(&base, stem, ext) else { continue };
        if let Ok(id) = files::write_probed(file, &write) {
            return Ok((Written { path, id }, Some(first_error)));
        }
        files::discard_fallback(&path);
    }
    Err(first_error)
}

/// The name of the fallback file for `wanted` (holding `what`, written as
/// `ext`): an interval's own name, which carries its number (`%n`, `%t`),
/// under continuous profiling; else `oxprof-<pid>-<time>-<what>`.
fn fallback_stem(wanted: &Path, ext: &str, what: &str) -> String {
    if let Some(stem) = intervals::is_active().then(|| files::interval_stem(wanted, ext)).flatten() {
        return stem;
    }
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format!("oxprof-{}-{stamp}-{what}", std::process::id())
}

/// Flushes and closes an output file, reporting errors that only show at
/// close (NFS, quotas), so that the caller can still write the fallback
/// file. There is no fsync: the profile reaches the page cache like any
/// program's output, and forcing it to the disk at JVM exit took tens of
/// milliseconds per file on this project's VM.
fn finish(w: BufWriter<File>) -> std::io::Result<()> {
    let fd = w.into_inner().map_err(|e| e.into_error())?.into_raw_fd();
    // SAFETY: `fd` came from `into_raw_fd`, so we own it and close it once.
    if unsafe { libc::close(fd) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The default output name when `file=` was not given.
pub fn default_path(format: OutputFormat) -> PathBuf {
    PathBuf::from(format!("oxprof-{}.{}", std::process::id(), format.extension()))
}

/// `dir/name.ext` → `dir/name.KEY.ext`, for the second profile of a
/// collapsed recording.
fn sibling(path: &Path, key: &str) -> PathBuf {
    if let Some(stem) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".pb.gz")) {
        return path.with_file_name(format!("{stem}.{key}.pb.gz"));
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{key}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{key}"),
    };
    path.with_file_name(name)
}

/// Writes the profiles; returns the files actually written. An existing
/// regular file at a path is replaced only if `may_replace` (continuous
/// profiling's interval files replace only their own). HTML puts all of
/// them in one page; collapsed stacks and pprof write the first to the chosen
/// file and each further one beside it (`profile.alloc.collapsed`,
/// `profile.alloc.pb.gz`): one pprof file per kind is what Go's pprof and
/// Pyroscope expect (one period type per file), except that live objects
/// join the allocations' file as Go's heap profiles have them
/// (`alloc_objects alloc_space inuse_objects inuse_space`).
pub fn write_profiles(built: &[Built], config: &Config, may_replace: MayReplace<'_>) -> Result<Vec<Written>, String> {
    let format = config.output_format();
    let wanted = config.file.clone().unwrap_or_else(|| default_path(format));
    // With live tracking, `.txt` (or format=leaks) is the leak report, and
    // collapsed output puts the live profile in the file asked for.
    if let Some(live) = built.iter().find(|b| b.leak.is_some()) {
        let txt = wanted.extension().is_some_and(|e| e.eq_ignore_ascii_case("txt"));
        if config.live.report_format || (config.format.is_none() && txt) {
            let mut paths = vec![write_leak_report(&wanted, live, may_replace)?];
            for b in built.iter().filter(|b| b.leak.is_none()) {
                paths.push(write_one(&sibling(&wanted.with_extension("collapsed"), b.key), &[b], config, OutputFormat::Collapsed, may_replace)?);
            }
            return Ok(paths);
        }
        if format == OutputFormat::Collapsed {
            let mut ordered: Vec<&Built> = vec![live];
            ordered.extend(built.iter().filter(|b| b.leak.is_none()));
            return ordered
                .iter()
                .enumerate()
                .map(|(i, b)| write_one(&if i == 0 { wanted.clone() } else { sibling(&wanted, b.key) }, &[b], config, format, may_replace))
                .collect();
        }
    }
    let groups: Vec<(PathBuf, Vec<&Built>)> = match format {
        OutputFormat::FlameGraph | OutputFormat::Jfr | OutputFormat::Otlp => vec![(wanted, built.iter().collect())],
        OutputFormat::Collapsed => built.iter().enumerate().map(|(i, b)| (if i == 0 { wanted.clone() } else { sibling(&wanted, b.key) }, vec![b])).collect(),
        OutputFormat::Pprof => {
            // The live profile joins the allocation profile's file.
            let mut groups: Vec<(PathBuf, Vec<&Built>)> = Vec::new();
            for b in built {
                if b.key == "live" {
                    if let Some(g) = groups.iter_mut().find(|(_, g)| g.first().is_some_and(|a| a.key == "alloc")) {
                        g.1.push(b);
                        continue;
                    }
                }
                let path = if groups.is_empty() { wanted.clone() } else { sibling(&wanted, b.key) };
                groups.push((path, vec![b]));
            }
            groups
        }
    };
    groups.into_iter().map(|(path, group)| write_one(&path, &group, config, format, may_replace)).collect()
}

fn write_one(wanted: &Path, built: &[&Built], config: &Config, format: OutputFormat, may_replace: MayReplace<'_>) -> Result<Written, String> {
    let stem = fallback_stem(wanted, format.extension(), built.first().map(|b| b.key).unwrap_or("profile"));
    match write_with_fallback(wanted, may_replace, &stem, format.extension(), |file| write_to(file, built, config, format)) {
        Ok((written, None)) => Ok(written),
        Ok((fallback, Some(first_error))) => {
            warn_noted(&format!("could not write the profile to {}: {first_error}; wrote it to {} instead", wanted.display(), fallback.path.display()));
            Ok(fallback)
        }
        Err(first_error) => {
            Err(format!("could not write the profile to {} ({first_error}), nor to a fallback file in the working or temp directory", wanted.display()))
        }
    }
}

/// Writes the text leak report, with the same fallback as profiles.
fn write_leak_report(wanted: &Path, live: &Built, may_replace: MayReplace<'_>) -> Result<Written, String> {
    let Some(report) = live.leak.as_deref() else { return Err("no leak report".into()) };
    let write = |file: File| -> std::io::Result<()> {
        let mut w = BufWriter::new(file);
        report.write_text(REPORT_SITES, &mut w)?;
        finish(w)
    };
    match write_with_fallback(wanted, may_replace, &fallback_stem(wanted, "txt", "leaks"), "txt", write) {
        Ok((written, None)) => Ok(written),
        Ok((fallback, Some(first_error))) => {
            warn_noted(&format!("could not write the leak report to {}: {first_error}; wrote it to {} instead", wanted.display(), fallback.path.display()));
            Ok(fallback)
        }
        Err(first_error) => Err(format!("could not write the leak report to {} ({first_error}), nor to a fallback file", wanted.display())),
    }
}

/// Checks at start-up that the output path looks writable, so a typo fails
/// before hours of recording rather than after.
pub fn check_writable(path: &Path) -> Result<(), String> {
    // Linux's limits: PATH_MAX bytes with the NUL, NAME_MAX per name.
    let len = path.as_os_str().len();
    if len >= libc::PATH_MAX as usize {
        return Err(format!("name too long: the path has {len} bytes, and Linux takes at most {}", libc::PATH_MAX - 1));
    }
    if let Some(long) = path.components().map(|c| c.as_os_str().to_string_lossy()).find(|c| c.len() > 255) {
        let start: String = long.chars().take(24).collect();
        return Err(format!("name too long: '{start}…' has {} bytes, and a file or directory name takes at most 255", long.len()));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match std::fs::metadata(&parent) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory; choose another file=", parent.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("directory {} does not exist; create it or choose another file=", parent.display()))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => return Err(format!("name too long: {e}")),
        Err(e) => return Err(format!("cannot reach directory {}: {e}", parent.display())),
    }
    if path.is_dir() {
        let dir = path.to_string_lossy();
        let dir = dir.trim_end_matches('/');
        return Err(format!("{} is a directory; give a file name such as {dir}/profile.html", path.display()));
    }
    let target = if path.exists() { path.to_path_buf() } else { parent.clone() };
    let c = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).map_err(|_| "path contains a NUL byte".to_string())?;
    // SAFETY: access() with a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("{} is not writable by this process ({})", target.display(), std::io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_paths_are_checked_with_the_right_reason() {
        let long = format!("/tmp/{}/p.html", "d/".repeat(2100));
        let e = check_writable(Path::new(&long)).unwrap_err();
        assert!(e.starts_with("name too long: the path has"), "{e}");
        let e = check_writable(Path::new(&format!("/tmp/{}.html", "n".repeat(300)))).unwrap_err();
        assert!(e.starts_with("name too long: 'nnn") && e.contains("at most 255"), "{e}");
        let e = check_writable(Path::new("/tmp/no-such-dir-oxprof/p.html")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        let e = check_writable(Path::new("/tmp/")).unwrap_err();
        assert!(e.contains("such as /tmp/profile.html"), "{e}");
    }
}
