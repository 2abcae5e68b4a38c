//! Opening the files the agent writes (profiles, JFR recordings, leak
//! reports, the log, command replies, the status file) without being led to
//! write anywhere else. The JVM's user writes them under names others can
//! guess, sometimes in shared directories, and a symbolic link planted at
//! such a name must not make it truncate or append to a file it points to.
//! So a new file is created exclusively (O_CREAT|O_EXCL, which also refuses
//! any symbolic link, dangling or not) and no-follow, mode 0600; a path that
//! exists is reused only when it is a regular file reached without following
//! a symbolic link in its last component; fallback files go to a private
//! directory made with mkdtemp (0700); a file replaced by rename is first
//! written under a random name, created exclusively.
//!
//! Symbolic links in the directories above the file are followed: those
//! directories are the user's choice (`file=`, `log=`), or the CLI's.
//!
//! Continuous profiling's interval files are named by oxprof, not the user
//! (`%n`, `%t`): an existing regular file at such a name is someone's (a
//! file of the user's, an earlier run's interval) and is never replaced;
//! writes take a [`MayReplace`] that says which existing files they may
//! replace, and return the [`FileId`] of the file written so that `keep=`
//! later deletes only that file.

use std::ffi::CString;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Mode of every file the agent creates (before the umask).
pub const FILE_MODE: u32 = 0o600;

/// Which file a path named once it was written: its device, inode and
/// status-change time. A file put in its place later, or a link, is another
/// file: the inode number alone is not enough, since a file system hands a
/// freed inode number to the next file made (ext4 does at once). Nobody can
/// set a ctime (any change to the file moves it to now), so a file of
/// someone else's made later at a reused inode differs in it; a change to
/// our file since makes it another file too, which only ever keeps it.
/// Taken after the last write (which moves the ctime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    ctime: (i64, i64),
}

impl FileId {
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        FileId { dev: meta.dev(), ino: meta.ino(), ctime: (meta.ctime(), meta.ctime_nsec()) }
    }

    /// The identity of the open file `probe` (a descriptor of the file
    /// written, kept open beside the writer's), if it can be read.
    pub fn of_open(probe: &Option<File>) -> Option<FileId> {
        probe.as_ref().and_then(|f| f.metadata().ok()).map(|m| FileId::of(&m))
    }

    /// Whether `meta` (from `symlink_metadata` or `fstat`) is this file.
    pub fn is(&self, meta: &std::fs::Metadata) -> bool {
        *self == FileId::of(meta)
    }
}

/// A file written, and which file it was (`None` if that could not be
/// told: such a file is never taken for ours).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    pub id: Option<FileId>,
}

impl Written {
    /// Whether `meta` is this file, as it was written.
    pub fn is(&self, meta: &std::fs::Metadata) -> bool {
        self.id.is_some_and(|id| id.is(meta))
    }
}

/// Whether an existing regular file (its metadata) may be replaced by a
/// write to its path.
pub type MayReplace<'a> = &'a dyn Fn(&std::fs::Metadata) -> bool;

/// Any regular file may be replaced: a path the user named.
pub fn any_file(_: &std::fs::Metadata) -> bool {
    true
}

/// Why an existing file was not replaced ([`MayReplace`] said no).
pub const NOT_OURS: &str = "it exists and this recording did not write it (an interval never replaces another file)";

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"))
}

fn open_raw(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let c = c_path(path)?;
    loop {
        // SAFETY: open() with a valid NUL-terminated path; the mode argument
        // is only read with O_CREAT.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, FILE_MODE as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: a descriptor open() just returned; the File owns it.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn is_errno(e: &io::Error, errno: libc::c_int) -> bool {
    e.raw_os_error() == Some(errno)
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why)
}

/// Creates `path` for writing; it must not exist, not even as a symbolic
/// link. Mode 0600 (less the umask).
pub fn open_new(path: &Path) -> io::Result<File> {
    open_raw(path, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW)
}

/// Opens the existing regular file `path` for writing, truncated or (with
/// `append`) appended to. A character device (`/dev/null`) is written as
/// it is. Refuses a symbolic link in the last component, anything else
/// that is not a regular file (FIFOs and devices are opened
/// non-blocking, only to look at them), and, like the kernel's
/// `protected_regular`, a file of another user in a sticky world-writable
/// directory such as /tmp, where anyone could have put it.
pub fn open_existing(path: &Path, append: bool) -> io::Result<File> {
    open_existing_with(path, append, !append)
}

/// [`open_existing`], truncating the file only if `truncate`.
fn open_existing_with(path: &Path, append: bool, truncate: bool) -> io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | if append { libc::O_APPEND } else { 0 };
    let file = match open_raw(path, flags) {
        Ok(f) => f,
        Err(e) if is_errno(&e, libc::ELOOP) && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Err(refused("it is a symbolic link, which oxprof does not follow"));
        }
        Err(e) if is_errno(&e, libc::ENXIO) => return Err(refused("it exists and is not a regular file")),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if meta.file_type().is_char_device() {
        // `/dev/null`, a terminal: asked for by name, nothing to truncate.
        // SAFETY: as below, on a descriptor the File owns.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & libc::O_APPEND) };
        return Ok(file);
    }
    if !meta.file_type().is_file() {
        return Err(refused("it exists and is not a regular file"));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(dir) = std::fs::metadata(parent) {
        // SAFETY: geteuid() cannot fail.
        let me = unsafe { libc::geteuid() };
        let shared = dir.mode() & (libc::S_ISVTX | libc::S_IWOTH) == (libc::S_ISVTX | libc::S_IWOTH);
        if shared && meta.uid() != me && meta.uid() != dir.uid() {
            return Err(refused("it belongs to another user in a shared directory"));
        }
    }
    // SAFETY: fcntl on a descriptor the File owns; clears O_NONBLOCK (if
    // that fails it stays set, which a regular file ignores).
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & libc::O_APPEND) };
    if truncate {
        file.set_len(0)?;
    }
    Ok(file)
}

/// Writes an output the user named (`file=`, the default name) with
/// `write`. A new file is created (exclusively, 0600) and written in place.
/// An existing regular file, accepted as [`open_existing`] accepts it and
/// by `may_replace`, is never truncated: the output goes to a new file
/// beside it (random name, 0600) that is renamed over it once complete, so
/// a write that fails half way (a full disk, a quota) leaves the previous
/// file whole. A character device (`/dev/null`) is written as it is.
/// Returns whether something was there before, and which file was written
/// (see [`FileId`]); on an error nothing of this write is left behind: a
/// new file that could not be written whole (a full disk) is removed, so
/// that no empty or cut-off file is left under the name.
pub fn write_chosen(path: &Path, may_replace: MayReplace<'_>, write: impl Fn(File) -> io::Result<()>) -> io::Result<(bool, Option<FileId>)> {
    let create = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
    let mut last = None;
    // Between the two opens the file can vanish or appear: try again.
    for _ in 0..3 {
        match open_raw(path, create) {
            Ok(f) => {
                let probe = f.try_clone().ok();
                return match write(f) {
                    Ok(()) => Ok((false, FileId::of_open(&probe))),
                    Err(e) => {
                        let _ = remove_if_still(path, &probe);
                        Err(e)
                    }
                };
            }
            Err(e) if is_errno(&e, libc::EEXIST) => {}
            Err(e) => return Err(e),
        }
        let existing = match open_existing_with(path, false, false) {
            Ok(f) => f,
            Err(e) if is_errno(&e, libc::ENOENT) => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let meta = existing.metadata()?;
        if meta.file_type().is_char_device() {
            return write(existing).map(|()| (true, None));
        }
        if !may_replace(&meta) {
            return Err(refused(NOT_OURS));
        }
        drop(existing);
        let tmp = beside_name(path)?;
        // The identity after the rename, which moves the ctime on ext4.
        let written = open_new(&tmp).and_then(|f| {
            let probe = f.try_clone().ok();
            write(f)?;
            std::fs::rename(&tmp, path)?;
            Ok(FileId::of_open(&probe))
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        return written.map(|id| (true, id));
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOENT)))
}

/// Writes the new file `f` with `write` and returns which file it was once
/// written (read from a second descriptor, since `write` closes its own).
pub fn write_probed(f: File, write: impl Fn(File) -> io::Result<()>) -> io::Result<Option<FileId>> {
    let probe = f.try_clone().ok();
    write(f)?;
    Ok(FileId::of_open(&probe))
}

/// Removes `path` if it still names the open file `probe` (not a file or
/// a link put in its place since). Returns whether it did.
pub fn remove_if_still(path: &Path, probe: &Option<File>) -> io::Result<bool> {
    let Some(id) = FileId::of_open(probe) else { return Ok(false) };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() && id.is(&m) => std::fs::remove_file(path).map(|()| true),
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the open regular file whose `fstat` is `meta` is no longer at
/// `path`: deleted (no link left), its directory removed, or another file
/// (or none) at the name now. An error other than "not found" when looking
/// at `path` (a directory made unsearchable) is not taken for a removal.
pub fn gone_from(path: &Path, meta: &std::fs::Metadata) -> bool {
    if meta.nlink() == 0 {
        return true;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => m.dev() != meta.dev() || m.ino() != meta.ino(),
        Err(e) => e.kind() == io::ErrorKind::NotFound || is_errno(&e, libc::ENOTDIR),
    }
}

/// What happened to `path`, a file [`gone_from`] its name, in words.
pub fn how_gone(path: &Path) -> &'static str {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        "its directory was removed"
    } else if std::fs::symlink_metadata(path).is_err() {
        "it was deleted"
    } else {
        "another file was put at its name"
    }
}

/// Copies the first `len` bytes of the open file `from` to `to`, at `to`'s
/// offset. `from` may be open for writing only, and deleted: it is opened
/// again for reading through `/proc/self/fd`, which reaches a deleted
/// file's data for as long as a descriptor holds it.
pub fn copy_open(from: &File, len: u64, to: &mut File) -> io::Result<()> {
    let src = open_raw(Path::new(&format!("/proc/self/fd/{}", from.as_raw_fd())), libc::O_RDONLY)?;
    let n = io::copy(&mut io::Read::take(src, len), to)?;
    if n != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("only {n} of its {len} bytes could be read back")));
    }
    Ok(())
}

/// The fallback name of an interval's file `wanted` that holds `ext`: its
/// own name less the extension (`iv-7.jfr` → `iv-7`), so that the interval's
/// number stays in the name.
pub fn interval_stem(wanted: &Path, ext: &str) -> Option<String> {
    let name = wanted.file_name()?.to_string_lossy().into_owned();
    let stem = name.strip_suffix(&format!(".{ext}")).unwrap_or(&name);
    (!stem.is_empty()).then(|| stem.to_string())
}

/// Opens a path the user chose (`file=`, the default output name, `log=`):
/// creates it, or reuses it if it is an existing regular file (see
/// [`open_existing`]). Returns whether the file existed.
pub fn open_chosen(path: &Path, append: bool) -> io::Result<(File, bool)> {
    open_chosen_with(path, append, &any_file)
}

/// [`open_chosen`], reusing an existing regular file only if `may_replace`.
pub fn open_chosen_with(path: &Path, append: bool, may_replace: MayReplace<'_>) -> io::Result<(File, bool)> {
    let create = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | if append { libc::O_APPEND } else { 0 };
    let mut last = None;
    // Between the two opens the file can vanish or appear: try again.
    for _ in 0..3 {
        match open_raw(path, create) {
            Ok(f) => return Ok((f, false)),
            Err(e) if is_errno(&e, libc::EEXIST) => {}
            Err(e) => return Err(e),
        }
        match open_existing_with(path, append, false) {
            Ok(f) => {
                let meta = f.metadata()?;
                if meta.file_type().is_file() {
                    if !may_replace(&meta) {
                        return Err(refused(NOT_OURS));
                    }
                    if !append {
                        f.set_len(0)?;
                    }
                }
                return Ok((f, true));
            }
            Err(e) if is_errno(&e, libc::ENOENT) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::ENOENT)))
}

/// [`open_chosen`] for output files (truncated), with a log line when an
/// existing file is overwritten.
pub fn open_output(path: &Path, may_replace: MayReplace<'_>) -> io::Result<File> {
    let (file, existed) = open_chosen_with(path, false, may_replace)?;
    if existed {
        crate::log::info(&format!("overwriting the existing file {}", path.display()));
    }
    Ok(file)
}

/// The private fallback directories made so far (at most one per base).
static PRIVATE_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Where fallback files go, in order: the working directory, then the temp
/// directory.
pub fn fallback_bases() -> [PathBuf; 2] {
    [std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")), std::env::temp_dir()]
}

/// This process's private directory under `base` (`oxprof-<pid>-XXXXXX`,
/// mode 0700, made by mkdtemp), made on first use.
pub fn private_dir(base: &Path) -> io::Result<PathBuf> {
    let mut dirs = PRIVATE_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid() cannot fail.
    let me = unsafe { libc::geteuid() };
    let still_ours = |d: &Path| std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0);
    dirs.retain(|d| still_ours(d));
    if let Some(d) = dirs.iter().find(|d| d.parent() == Some(base)) {
        return Ok(d.clone());
    }
    let template = c_path(&base.join(format!("oxprof-{}-XXXXXX", std::process::id())))?;
    let mut bytes = template.into_bytes_with_nul();
    // SAFETY: mkdtemp rewrites the XXXXXX of the NUL-terminated template we
    // own in place and returns it, or null.
    if unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) }.is_null() {
        return Err(io::Error::last_os_error());
    }
    bytes.pop();
    let dir = PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes));
    dirs.push(dir.clone());
    Ok(dir)
}

/// Whether `path` is in one of this process's private fallback directories.
pub fn in_private_dir(path: &Path) -> bool {
    path.parent().is_some_and(|dir| PRIVATE_DIRS.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|d| d == dir))
}

/// Creates a new fallback file `stem.ext` (or `stem-2.ext`, ... if taken) in
/// the private directory under `base`.
pub fn open_fallback(base: &Path, stem: &str, ext: &str) -> io::Result<(PathBuf, File)> {
    let dir = private_dir(base)?;
    let mut last = None;
    for n in 1..100 {
        let path = if n == 1 { dir.join(format!("{stem}.{ext}")) } else { dir.join(format!("{stem}-{n}.{ext}")) };
        match open_new(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if is_errno(&e, libc::EEXIST) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EEXIST)))
}

/// Removes a fallback file that could not be written whole, and its
/// private directory if that is now empty (so that the next base gets a
/// try without leaving an empty directory behind).
pub fn discard_fallback(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        if std::fs::remove_dir(dir).is_ok() {
            PRIVATE_DIRS.lock().unwrap_or_else(|e| e.into_inner()).retain(|d| d != dir);
        }
    }
}

/// A name no one can guess: 64 bits from a hasher the standard library
/// seeds from the OS's random source, mixed with the time and a counter.
fn random_suffix() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    format!("{:016x}", h.finish())
}

/// A name beside `path` for a file to be renamed over it once complete:
/// hidden and random (`.NAME.RANDOM.tmp`).
fn beside_name(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    Ok(path.with_file_name(format!(".{}.{}.tmp", name.to_string_lossy(), random_suffix())))
}

/// A new file beside `path`, to be renamed over it once complete: hidden,
/// a random name (`.NAME.RANDOM.tmp`), created exclusively, 0600.
pub fn open_beside(path: &Path) -> io::Result<(PathBuf, File)> {
    let tmp = beside_name(path)?;
    open_new(&tmp).map(|f| (tmp, f))
}

/// Replaces `path` with `contents`: written to a new file with a random
/// name beside it (created exclusively, 0600), then renamed over `path`
/// (rename replaces a symbolic link at `path`, never follows it).
pub fn replace(path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = beside_name(path)?;
    let mut file = open_new(&tmp)?;
    let written = file.write_all(contents).and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let d = std::env::temp_dir().join(format!("oxprof-files-test-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir(&d).unwrap();
            Scratch(d)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(f: File, text: &str) {
        let mut f = f;
        f.write_all(text.as_bytes()).unwrap();
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_planted_symlink_is_not_followed_and_its_target_is_untouched() {
        let s = Scratch::new("symlink");
        let victim = s.0.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let link = s.0.join("out.html");
        symlink(&victim, &link).unwrap();
        for append in [false, true] {
            let e = open_chosen(&link, append).expect_err("opened a symbolic link");
            assert_eq!(e.to_string(), "it is a symbolic link, which oxprof does not follow");
        }
        assert!(open_new(&link).is_err());
        assert!(open_existing(&link, false).is_err());
        assert!(open_output(&link, &any_file).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        // A dangling link is not created through either.
        let dangling = s.0.join("dangling");
        let target = s.0.join("would-be-created");
        symlink(&target, &dangling).unwrap();
        assert!(open_chosen(&dangling, false).is_err());
        assert!(open_chosen(&dangling, true).is_err());
        assert!(!target.exists());
    }

    #[test]
    fn an_existing_regular_file_is_overwritten_and_reported() {
        let s = Scratch::new("overwrite");
        let p = s.0.join("out.collapsed");
        std::fs::write(&p, "an old profile that is longer than the new one\n").unwrap();
        let (f, existed) = open_chosen(&p, false).unwrap();
        assert!(existed, "overwriting was not reported");
        write(f, "new\n");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        // Appending (the log) keeps what was there.
        let (f, existed) = open_chosen(&p, true).unwrap();
        assert!(existed);
        write(f, "more\n");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\nmore\n");
        // A new file is not reported as overwritten.
        let (_, existed) = open_chosen(&s.0.join("fresh"), false).unwrap();
        assert!(!existed);
    }

    /// An existing output is replaced whole or not at all: a write that
    /// fails half way leaves the previous file as it was, and no temporary
    /// file behind.
    #[test]
    fn an_existing_output_survives_a_failed_write() {
        let s = Scratch::new("replace-fail");
        let p = s.0.join("out.collapsed");
        std::fs::write(&p, "the previous profile\n").unwrap();
        let e = write_chosen(&p, &any_file, |mut f| {
            f.write_all(b"half of a new pro")?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err();
        assert!(is_errno(&e, libc::ENOSPC), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "the previous profile\n");
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 1, "a temporary file was left");
        // A write that succeeds replaces it, and says it was there.
        let (existed, id) = write_chosen(&p, &any_file, |mut f| f.write_all(b"new\n")).unwrap();
        assert!(existed);
        assert!(id.unwrap().is(&std::fs::symlink_metadata(&p).unwrap()), "the id is not the file's renamed into place");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(mode(&p), 0o600);
        // A new file is written in place and not reported as replaced.
        let (existed, id) = write_chosen(&s.0.join("fresh"), &any_file, |mut f| f.write_all(b"x")).unwrap();
        assert!(!existed);
        assert!(id.unwrap().is(&std::fs::symlink_metadata(s.0.join("fresh")).unwrap()));
        // A planted symbolic link is refused, its target untouched.
        let target = s.0.join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = s.0.join("link");
        symlink(&target, &link).unwrap();
        assert!(write_chosen(&link, &any_file, |mut f| f.write_all(b"x")).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    /// A new file that could not be written whole (a full disk) is not
    /// left behind, empty or cut off.
    #[test]
    fn a_new_file_that_fails_to_write_is_removed() {
        let s = Scratch::new("new-fail");
        let p = s.0.join("iv-3.html");
        let e = write_chosen(&p, &any_file, |mut f| {
            f.write_all(b"<html>half of a pro")?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err();
        assert!(is_errno(&e, libc::ENOSPC), "{e}");
        assert!(std::fs::symlink_metadata(&p).is_err(), "the failed file was left behind");
        assert_eq!(interval_stem(&p, "html").as_deref(), Some("iv-3"));
        assert_eq!(interval_stem(Path::new("/x/iv-4.alloc.pb.gz"), "pb.gz").as_deref(), Some("iv-4.alloc"));
        // A file put in its place is another file, and stays.
        let (f, _) = open_chosen(&p, false).unwrap();
        let probe = f.try_clone().ok();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "the user's\n").unwrap();
        assert!(!remove_if_still(&p, &probe).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "the user's\n");
    }

    /// A write that may replace only certain files (an interval's) leaves
    /// any other existing regular file as it is, and says why.
    #[test]
    fn a_file_may_replace_refuses_is_left_whole() {
        let s = Scratch::new("may-replace");
        let p = s.0.join("iv-3.collapsed");
        std::fs::write(&p, "the user's\n").unwrap();
        let never = |_: &std::fs::Metadata| false;
        let e = write_chosen(&p, &never, |mut f| f.write_all(b"x")).unwrap_err();
        assert_eq!(e.to_string(), NOT_OURS);
        let e = open_chosen_with(&p, false, &never).unwrap_err();
        assert_eq!(e.to_string(), NOT_OURS);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "the user's\n");
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 1, "a temporary file was left");
        // The file a write made may be replaced by the next, by its id.
        let q = s.0.join("iv-4.collapsed");
        let (_, first) = write_chosen(&q, &never, |mut f| f.write_all(b"dump\n")).unwrap();
        let first = first.unwrap();
        let ours = move |m: &std::fs::Metadata| first.is(m);
        let (existed, second) = write_chosen(&q, &ours, |mut f| f.write_all(b"interval\n")).unwrap();
        let second = second.unwrap();
        assert!(existed && second != first);
        assert_eq!(std::fs::read_to_string(&q).unwrap(), "interval\n");
        let (f, existed) = open_chosen_with(&q, false, &|m: &std::fs::Metadata| second.is(m)).unwrap();
        assert!(existed);
        assert_eq!(f.metadata().unwrap().len(), 0, "reused but not truncated");
        drop(f);
        // Deleted and made again at once, a file gets the freed inode
        // number on ext4: still another file.
        let r = s.0.join("iv-5.collapsed");
        let (_, id) = write_chosen(&r, &never, |mut f| f.write_all(b"interval\n")).unwrap();
        let id = id.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_file(&r).unwrap();
        std::fs::write(&r, "the user's\n").unwrap();
        assert!(!id.is(&std::fs::symlink_metadata(&r).unwrap()), "a new file at {} taken for the one written", r.display());
    }

    /// A file deleted, or its directory removed, while written: noticed,
    /// and what the descriptor holds can still be copied out whole.
    #[test]
    fn a_deleted_file_is_noticed_and_copied_out_of_its_descriptor() {
        let s = Scratch::new("gone");
        let dir = s.0.join("d");
        std::fs::create_dir(&dir).unwrap();
        let p = dir.join("r.jfr");
        let mut f = open_new(&p).unwrap();
        f.write_all(b"chunk one, chunk two").unwrap();
        assert!(!gone_from(&p, &f.metadata().unwrap()));
        std::fs::remove_file(&p).unwrap();
        assert!(gone_from(&p, &f.metadata().unwrap()));
        assert_eq!(how_gone(&p), "it was deleted");
        std::fs::write(&p, "someone else's").unwrap();
        assert!(gone_from(&p, &f.metadata().unwrap()), "another file at the name");
        assert_eq!(how_gone(&p), "another file was put at its name");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(how_gone(&p), "its directory was removed");
        let q = s.0.join("copy.jfr");
        let mut to = open_new(&q).unwrap();
        copy_open(&f, 9, &mut to).unwrap();
        to.write_all(b"!").unwrap();
        assert_eq!(std::fs::read(&q).unwrap(), b"chunk one!");
        assert!(copy_open(&f, 100, &mut to).is_err(), "more than the file holds");
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused() {
        let s = Scratch::new("special");
        let fifo = s.0.join("fifo");
        let c = c_path(&fifo).unwrap();
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without a reader, a blocking open would hang here.
        let e = open_chosen(&fifo, false).expect_err("opened a FIFO");
        assert_eq!(e.to_string(), "it exists and is not a regular file");
        let dir = s.0.join("dir");
        std::fs::create_dir(&dir).unwrap();
        assert!(open_chosen(&dir, false).is_err());
        // A character device the user names is written as it is.
        let (mut null, existed) = open_chosen(Path::new("/dev/null"), false).unwrap();
        assert!(existed);
        null.write_all(b"discarded").unwrap();
    }

    #[test]
    fn new_files_are_created_with_mode_0600() {
        let s = Scratch::new("mode");
        let p = s.0.join("new.html");
        let (f, _) = open_chosen(&p, false).unwrap();
        drop(f);
        assert_eq!(mode(&p), 0o600);
        let q = s.0.join("new.log");
        drop(open_chosen(&q, true).unwrap());
        assert_eq!(mode(&q), 0o600);
        let r = s.0.join("reply");
        drop(open_new(&r).unwrap());
        assert_eq!(mode(&r), 0o600);
        assert!(open_new(&r).is_err(), "open_new reused an existing file");
    }

    #[test]
    fn fallbacks_land_in_a_private_0700_directory() {
        let s = Scratch::new("fallback");
        let (p, f) = open_fallback(&s.0, "oxprof-1-2-cpu", "collapsed").unwrap();
        write(f, "x 1\n");
        let dir = p.parent().unwrap().to_path_buf();
        assert_eq!(dir.parent(), Some(s.0.as_path()));
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let prefix = format!("oxprof-{}-", std::process::id());
        assert!(name.starts_with(&prefix) && name.len() == prefix.len() + 6, "{name}");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&p), 0o600);
        assert_eq!(p.file_name().unwrap(), "oxprof-1-2-cpu.collapsed");
        // The same directory is reused, and a taken name gets a suffix.
        let (q, _) = open_fallback(&s.0, "oxprof-1-2-cpu", "collapsed").unwrap();
        assert_eq!(q, dir.join("oxprof-1-2-cpu-2.collapsed"));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x 1\n");
        // Discarding the last file removes the directory, and the next
        // fallback makes a new one.
        discard_fallback(&q);
        discard_fallback(&p);
        assert!(!dir.exists());
        let (r, _) = open_fallback(&s.0, "a", "txt").unwrap();
        assert_eq!(mode(r.parent().unwrap()), 0o700);
    }

    #[test]
    fn replace_never_writes_through_a_planted_file_or_link() {
        let s = Scratch::new("replace");
        let victim = s.0.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let status = s.0.join("status");
        // The old fixed temporary name, planted as a link to the victim.
        symlink(&victim, s.0.join("status.tmp")).unwrap();
        symlink(&victim, &status).unwrap();
        replace(&status, b"samples=1 elapsed_ms=2\n").unwrap();
        replace(&status, b"samples=3 elapsed_ms=4\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(!std::fs::symlink_metadata(&status).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&status).unwrap(), "samples=3 elapsed_ms=4\n");
        assert_eq!(mode(&status), 0o600);
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&s.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 3, "{left:?}");
    }

    #[test]
    #[ignore = "needs root; scripts/test.sh runs it when run as root"]
    fn a_file_of_another_user_in_a_sticky_shared_directory_is_refused() {
        // SAFETY: geteuid() cannot fail.
        assert_eq!(unsafe { libc::geteuid() }, 0, "needs root (to make a file of another user)");
        let s = Scratch::new("sticky");
        std::fs::set_permissions(&s.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let p = s.0.join("planted.html");
        std::fs::write(&p, "planted\n").unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        let e = open_chosen(&p, false).expect_err("reused a file another user planted in a shared directory");
        assert_eq!(e.to_string(), "it belongs to another user in a shared directory");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "planted\n");
    }
}
