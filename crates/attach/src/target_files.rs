//! Files in a target's file system, handled as the target's user.
//!
//! Everything under `/proc/<pid>/root` belongs to whoever controls the
//! target: a JVM's user may swap any file we expect there for a symlink to
//! one of root's files, a FIFO (an `open` or `read` that never returns) or a
//! huge sparse file, and a user who runs a container controls its whole tree.
//! So these helpers take the target's identity on the calling thread
//! ([`creds`]) before touching anything there, resolve names inside the
//! target's root directory (`openat2` with `RESOLVE_IN_ROOT`: an absolute
//! symlink there means the target's file, not ours), and read only regular
//! files, only so much, within a time limit. Text from the target is made
//! [`printable`] before it reaches a terminal.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::creds::{self, AsTarget};
use crate::error::AttachError;
use crate::process::{self, Target};

/// How long [`read_target_file`] waits: a file on a FUSE file system the
/// target's user runs can make any read wait forever.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens `path`, a path as the target names it, relative to the target's
/// root directory and resolved inside it. The caller holds the target's
/// identity (`_as`). `flags` are `open(2)` flags (`O_CLOEXEC` is added).
pub(crate) fn open_in_target(_as: &AsTarget, target: &Target, path: &Path, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    let root = open_path(&target.root, libc::O_PATH | libc::O_DIRECTORY)?;
    let rel = path.strip_prefix("/").unwrap_or(path);
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let name = c_path(rel)?;
    let flags = flags | libc::O_CLOEXEC;
    // SAFETY: open_how is plain data; all zeroes is a valid value (it is
    // non_exhaustive, so it cannot be written as a literal).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.mode = if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 { mode as u64 } else { 0 };
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid directory descriptor, a NUL-terminated path and an
    // open_how with its size, all outliving the call; the kernel returns a
    // new descriptor or -1.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, root.as_raw_fd() as libc::c_long, name.as_ptr(), &how as *const libc::open_how, std::mem::size_of::<libc::open_how>())
    };
    if fd >= 0 {
        // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    }
    let e = io::Error::last_os_error();
    // Before Linux 5.6 (or under a seccomp filter that does not know
    // openat2): resolve relative to the root as the target's user, which
    // at worst reaches that user's own files elsewhere.
    if !matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) {
        return Err(e);
    }
    // SAFETY: as above, with openat's arguments.
    let fd = unsafe { libc::openat(root.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(2)` of a path of ours.
fn open_path(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let name = c_path(path)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    let fd = unsafe { libc::open(name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{} contains a NUL byte", path.display())))
}

/// `openat(2)` of `name` (one path component) in directory `dir`.
pub(crate) fn open_at(dir: &OwnedFd, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    let c = c_path(Path::new(name))?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name that
    // outlive the call.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this descriptor; nobody else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// `unlinkat(2)` of `name` (one path component, never followed) in `dir`.
pub(crate) fn unlink_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = c_path(Path::new(name))?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name that
    // outlive the call.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `path`'s directory and file name, for the `*at` calls.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} does not name a file", path.display()))),
    }
}

/// Reads at most `cap` bytes of the regular file `path` (as the target
/// names it) in the target's file system, as the target's user: a symlink
/// (in the last component), a FIFO, a device or a directory is refused, a
/// longer file is cut at `cap`, and after [`READ_TIMEOUT`] we stop waiting.
/// When we are not root, we read as ourselves.
///
/// For the files a target's agent or runtime leaves for us to read (a
/// reply, a status, a JDK's `release` file); print what it holds only
/// through [`printable`].
pub fn read_target_file(target: &Target, path: &Path, cap: usize) -> Result<Vec<u8>, AttachError> {
    let (t, p) = (target.clone(), path.to_path_buf());
    let (tx, rx) = mpsc::channel();
    // On its own thread: only that thread switches identity, and if the
    // read hangs we leave it behind.
    std::thread::Builder::new()
        .name("oxprof-read".into())
        .spawn(move || {
            let _ = tx.send(read_as_target(&t, &p, cap));
        })
        .map_err(|e| AttachError::io("starting a thread to read a file of the JVM", e))?;
    match rx.recv_timeout(READ_TIMEOUT) {
        Ok(result) => result,
        Err(_) => Err(AttachError::Timeout {
            what: format!("reading {} in JVM {}'s file system (a FUSE file system that does not answer?)", path.display(), target.pid),
            after: READ_TIMEOUT,
        }),
    }
}

fn read_as_target(target: &Target, path: &Path, cap: usize) -> Result<Vec<u8>, AttachError> {
    let fail = |e: io::Error| target_error(target, &format!("reading {}", path.display()), e);
    let as_target = creds::assume_for_files(target)?;
    let fd = open_in_target(&as_target, target, path, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY, 0).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ELOOP) => {
                AttachError::io(format!("reading {}", path.display()), io::Error::new(e.kind(), "it is a symbolic link; refusing to follow it"))
            }
            _ => fail(e),
        }
    })?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(AttachError::io(format!("reading {}", path.display()), io::Error::new(io::ErrorKind::InvalidData, "not a regular file")));
    }
    let mut bytes = Vec::new();
    file.take(cap as u64).read_to_end(&mut bytes).map_err(fail)?;
    Ok(bytes)
}

/// Removes the file `path` (as the target names it; a symlink itself, never
/// what it points to) from the target's file system, as the target's user.
/// When we are not root, as ourselves.
pub fn remove_target_file(target: &Target, path: &Path) -> Result<(), AttachError> {
    let as_target = creds::assume_for_files(target)?;
    remove_as_target(&as_target, target, path).map_err(|e| target_error(target, &format!("removing {}", path.display()), e))
}

pub(crate) fn remove_as_target(as_target: &AsTarget, target: &Target, path: &Path) -> io::Result<()> {
    let (dir, name) = split(path)?;
    let dir = open_in_target(as_target, target, dir, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    unlink_at(&dir, name)
}

/// Metadata of `path` in the target's file system (symlinks followed inside
/// it), as the target's user; the caller holds its identity.
pub(crate) fn metadata_in_target(as_target: &AsTarget, target: &Target, path: &Path) -> io::Result<std::fs::Metadata> {
    File::from(open_in_target(as_target, target, path, libc::O_PATH, 0)?).metadata()
}

fn target_error(target: &Target, what: &str, e: io::Error) -> AttachError {
    if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH)) && !process::exists(target.pid) {
        return AttachError::NoSuchProcess(target.pid);
    }
    AttachError::io(format!("{what} in JVM {}'s file system", target.pid), e)
}

/// `text` without the characters a terminal acts on: C0 controls but
/// newline and tab, DEL, C1 controls (ESC sequences, CSI, OSC: colours,
/// cursor moves, window titles, clipboard writes), and the bidirectional
/// overrides that reorder what is shown. For text from a target (its
/// command line, a reply, a file) before it is printed.
pub fn printable(text: &str) -> String {
    text.chars().filter(|&c| c == '\n' || c == '\t' || !(c.is_control() || is_bidi_control(c))).collect()
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    use crate::test_support::FakeRoot;

    fn mkfifo(path: &Path) {
        let c = c_path(path).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}: {}", path.display(), io::Error::last_os_error());
    }

    fn message(r: Result<Vec<u8>, AttachError>) -> String {
        match r {
            Ok(b) => panic!("read {} bytes", b.len()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn reads_regular_files_only() {
        let fake = FakeRoot::new("kinds");
        let target = fake.target();
        let tmp = target.root.join("tmp");
        std::fs::write(tmp.join("reply"), "running: cpu\n").unwrap();
        assert_eq!(read_target_file(&target, Path::new("/tmp/reply"), 1024).unwrap(), b"running: cpu\n");
        // A FIFO nobody writes to: refused at once, not waited on.
        mkfifo(&tmp.join("fifo"));
        let started = Instant::now();
        let e = message(read_target_file(&target, Path::new("/tmp/fifo"), 1024));
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
        assert!(e.contains("not a regular file"), "{e}");
        // A symlink to a file only root may read (here: outside the root).
        let secret = fake.0.join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&secret, tmp.join("link")).unwrap();
        let e = message(read_target_file(&target, Path::new("/tmp/link"), 1024));
        assert!(e.contains("symbolic link"), "{e}");
        // A directory, a missing file.
        assert!(message(read_target_file(&target, Path::new("/tmp"), 1024)).contains("not a regular file"));
        assert!(message(read_target_file(&target, Path::new("/tmp/none"), 1024)).contains("No such file"));
    }

    #[test]
    fn long_files_are_cut() {
        let fake = FakeRoot::new("cap");
        let target = fake.target();
        // A sparse file of 64 GiB.
        let f = File::create(target.root.join("tmp/huge")).unwrap();
        f.set_len(64 << 30).unwrap();
        let started = Instant::now();
        let bytes = read_target_file(&target, Path::new("/tmp/huge"), 64 * 1024).unwrap();
        assert_eq!(bytes.len(), 64 * 1024);
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    /// Names are the target's: an absolute symlink in a directory of the
    /// target leads to the target's file, never to ours.
    #[test]
    fn symlinks_resolve_inside_the_root() {
        let fake = FakeRoot::new("in-root");
        let target = fake.target();
        std::fs::create_dir_all(target.root.join("real")).unwrap();
        std::fs::write(target.root.join("real/release"), "JAVA_VERSION=\"17\"\n").unwrap();
        // /jdk -> /real inside the root; on our side /real does not exist.
        std::os::unix::fs::symlink("/real", target.root.join("jdk")).unwrap();
        assert_eq!(read_target_file(&target, Path::new("/jdk/release"), 1024).unwrap(), b"JAVA_VERSION=\"17\"\n");
        // Out of the root by `..` or by an absolute link: still inside.
        std::os::unix::fs::symlink(fake.0.join("outside"), target.root.join("escape")).unwrap();
        std::fs::create_dir_all(fake.0.join("outside")).unwrap();
        std::fs::write(fake.0.join("outside/release"), "outside").unwrap();
        assert!(read_target_file(&target, Path::new("/escape/release"), 1024).is_err());
        assert!(read_target_file(&target, Path::new("/../outside/release"), 1024).is_err());
    }

    #[test]
    fn removal_never_follows() {
        let fake = FakeRoot::new("remove");
        let target = fake.target();
        let keep = fake.0.join("keep");
        std::fs::write(&keep, "keep").unwrap();
        std::os::unix::fs::symlink(&keep, target.root.join("tmp/link")).unwrap();
        remove_target_file(&target, Path::new("/tmp/link")).unwrap();
        assert!(std::fs::symlink_metadata(target.root.join("tmp/link")).is_err());
        assert_eq!(std::fs::read_to_string(&keep).unwrap(), "keep");
    }

    #[test]
    fn printable_text() {
        assert_eq!(printable("running: \x1b[31mcpu\x1b[0m\tok\r\n"), "running: [31mcpu[0m\tok\n");
        assert_eq!(printable("a\x1b]0;title\x07b\u{9b}2Jc\u{7f}d\u{202e}e\0f"), "a]0;titleb2Jcdef");
        assert_eq!(printable("Größe ✓"), "Größe ✓");
    }
}
