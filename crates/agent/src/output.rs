//! Writing a finished profile to disk without ever losing it: when the chosen
//! path cannot be written, the profile goes to a fallback file in the working
//! directory or the temp directory, and the log says where.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::flamegraph::{self, HtmlOptions};
use oxprof_profile::{OutputFormat, Profile};

use crate::log;
use crate::options::Config;

/// Serialises the profile in the configured format.
pub fn render(profile: &Profile, config: &Config, format: OutputFormat, out: impl Write) -> std::io::Result<()> {
    match format {
        OutputFormat::Collapsed => collapsed::write(profile, CollapsedOptions { counter: config.counter, annotate: config.annotate }, out),
        OutputFormat::FlameGraph => {
            let opts = HtmlOptions { title: profile.meta.title.clone(), counter: config.counter, ..HtmlOptions::default() };
            flamegraph::write_html(profile, &opts, out)
        }
    }
}

fn write_to(path: &Path, profile: &Profile, config: &Config, format: OutputFormat) -> std::io::Result<()> {
    let file = File::create(path)?;
    let mut w = BufWriter::new(file);
    render(profile, config, format, &mut w)?;
    w.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// The default output name when `file=` was not given.
pub fn default_path(format: OutputFormat) -> PathBuf {
    PathBuf::from(format!("oxprof-{}.{}", std::process::id(), format.extension()))
}

/// Writes the profile; returns the path actually written.
pub fn write_profile(profile: &Profile, config: &Config) -> Result<PathBuf, String> {
    let format = config.output_format();
    let wanted = config.file.clone().unwrap_or_else(|| default_path(format));
    let first_error = match write_to(&wanted, profile, config, format) {
        Ok(()) => return Ok(wanted),
        Err(e) => e,
    };
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let name = format!("oxprof-{}-{stamp}.{}", std::process::id(), format.extension());
    for dir in [std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")), std::env::temp_dir()] {
        let fallback = dir.join(&name);
        if write_to(&fallback, profile, config, format).is_ok() {
            log::warn(&format!("could not write the profile to {}: {first_error}; wrote it to {} instead", wanted.display(), fallback.display()));
            return Ok(fallback);
        }
    }
    Err(format!("could not write the profile to {} ({first_error}), nor to a fallback file in the working or temp directory", wanted.display()))
}

/// Checks at start-up that the output path looks writable, so a typo fails
/// before hours of recording rather than after.
pub fn check_writable(path: &Path) -> Result<(), String> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(format!("directory {} does not exist; create it or choose another file=", parent.display()));
    }
    if path.is_dir() {
        return Err(format!("{} is a directory; give a file name such as {}/profile.html", path.display(), path.display()));
    }
    let target = if path.exists() { path.to_path_buf() } else { parent.clone() };
    let c = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()).map_err(|_| "path contains a NUL byte".to_string())?;
    // SAFETY: access() with a valid NUL-terminated path.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("{} is not writable by this process ({})", target.display(), std::io::Error::last_os_error()));
    }
    Ok(())
}
