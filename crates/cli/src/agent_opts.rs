//! Pieces shared by the subcommands that build agent option strings
//! (`record`, `attach`): value parsers for clap, the comma check, and the
//! options that choose what to sample.

use std::path::{Path, PathBuf};

use oxprof_profile::units::{parse_duration_ns, parse_size_bytes, parse_wall_duration_ns};

/// clap parser: a sampling interval such as `10ms` (kept as written).
pub fn parse_interval(s: &str) -> Result<String, String> {
    parse_duration_ns(s).map(|_| s.to_string())
}

/// clap parser: a size such as `512k` (kept as written).
pub fn parse_size(s: &str) -> Result<String, String> {
    parse_size_bytes(s).map(|_| s.to_string())
}

/// clap parser for `--alloc [SIZE]`: an empty value (the flag without SIZE)
/// is kept empty and becomes a bare `alloc`, so the agent picks the interval
/// (the last one used in that JVM, else 512 KiB).
pub fn parse_optional_size(s: &str) -> Result<String, String> {
    if s.is_empty() { Ok(String::new()) } else { parse_size(s) }
}

/// clap parser: a wall-clock duration such as `30s` (kept as written).
pub fn parse_wall(s: &str) -> Result<String, String> {
    parse_wall_duration_ns(s).map(|_| s.to_string())
}

/// Agent options are comma-separated, so values must not contain commas.
pub fn no_comma(what: &str, value: &str) -> Result<(), String> {
    if value.contains(',') {
        Err(format!("the {what} must not contain a comma ('{value}'): agent options are comma-separated"))
    } else {
        Ok(())
    }
}

/// A path made absolute against our working directory.
pub fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// `start` and what to sample: the CPU event (`cpu` unless only allocations
/// were asked for), the allocation interval and thread pattern.
pub fn start_options(event: Option<&str>, alloc: Option<&str>, alloc_threads: Option<&str>) -> Result<Vec<String>, String> {
    let mut opts = vec!["start".to_string()];
    match (event, alloc) {
        (Some(e), _) => opts.push(format!("event={e}")),
        (None, None) => opts.push("event=cpu".into()),
        (None, Some(_)) => {}
    }
    match alloc {
        Some("") => opts.push("alloc".into()),
        Some(size) => opts.push(format!("alloc={size}")),
        None => {}
    }
    if let Some(glob) = alloc_threads {
        no_comma("thread pattern", glob)?;
        opts.push(format!("alloc_threads={glob}"));
    }
    Ok(opts)
}
