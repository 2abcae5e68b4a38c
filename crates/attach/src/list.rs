//! Discovering running JVMs from `/proc` (like `jps`, but without relying on
//! hsperfdata files), and reading a JVM's options from its command line.

use std::path::{Path, PathBuf};

use crate::process::{self, Target};
use crate::target_files::{printable, read_target_file};

/// More than a JDK's `release` file holds (about 1.5 KiB).
const RELEASE_CAP: usize = 64 * 1024;

/// A running HotSpot JVM. Its texts come from the JVM's user (its command
/// line, its runtime's files) and are [`crate::printable`], on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmInfo {
    pub pid: u32,
    /// The main class, `-jar` file or `-m` module/class ("" if unknown).
    pub main: String,
    /// `JAVA_VERSION` from the runtime's `release` file, e.g. "17.0.15".
    pub java_version: Option<String>,
    /// Effective uid.
    pub user: u32,
    /// Path (in the JVM's mount namespace) of a loaded `liboxprof` library.
    pub oxprof: Option<PathBuf>,
}

/// Every process that has `libjvm.so` mapped and whose maps we may read,
/// by increasing pid. Processes we may not inspect are skipped quietly.
pub fn list_jvms() -> Vec<JvmInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids: Vec<u32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    pids.sort_unstable();
    pids.into_iter().filter_map(jvm_info).collect()
}

fn jvm_info(pid: u32) -> Option<JvmInfo> {
    let maps = process::mapped_files(pid).ok()?;
    let libjvm = maps.iter().find(|p| p.file_name().is_some_and(|n| n == "libjvm.so"))?;
    let status = process::read_status(pid).ok()?;
    let args = process::cmdline(pid).unwrap_or_default();
    let target = Target::seen_in_proc(pid, &status);
    Some(JvmInfo {
        pid,
        main: one_printable_line(&parse_java_args(&args).main.unwrap_or_default()),
        java_version: java_version(&target, libjvm),
        user: status.uid,
        oxprof: maps.iter().find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().contains("liboxprof"))).cloned(),
    })
}

/// `text` without control characters, on one line.
pub(crate) fn one_printable_line(text: &str) -> String {
    printable(text).replace(['\n', '\t'], " ")
}

/// `JAVA_VERSION` from the `release` file of the runtime that `libjvm`
/// (a path in the JVM's namespace) belongs to: `<home>/lib/server/libjvm.so`
/// on JDK 9+, `<home>/jre/lib/<arch>/server/libjvm.so` on 8. The file is the
/// JVM's user's to choose (a JDK in a container): read as that user, a
/// regular file only, so much, in bounded time.
fn java_version(target: &Target, libjvm: &Path) -> Option<String> {
    libjvm.ancestors().skip(3).take(3).find_map(|dir| {
        if !dir.is_absolute() {
            return None;
        }
        let bytes = read_target_file(target, &dir.join("release"), RELEASE_CAP).ok()?;
        parse_release(&String::from_utf8_lossy(&bytes))
    })
}

pub(crate) fn parse_release(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("JAVA_VERSION=")).map(|v| one_printable_line(v.trim().trim_matches('"')))
}

/// A `java` command line split into the JVM's options and its main.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct JavaArgs {
    /// Options before the main class (launcher and JVM options).
    pub options: Vec<String>,
    /// The main class, `-jar` file, `-m` module[/class] or source file.
    pub main: Option<String>,
}

/// Launcher options whose value is the next argument (java.c's
/// `IsWhiteSpaceOption`).
const WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--enable-native-access",
    "--limit-modules",
    "--add-exports",
    "--add-opens",
    "--add-reads",
    "--patch-module",
    "--describe-module",
    "-d",
    "--source",
];

/// Splits `argv` (argv[0] is the launcher) like the `java` launcher does.
pub(crate) fn parse_java_args(argv: &[String]) -> JavaArgs {
    let mut out = JavaArgs::default();
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-jar" | "-m" | "--module" => {
                out.main = it.next().cloned();
                break;
            }
            s if s.starts_with("--module=") => {
                out.main = Some(s["--module=".len()..].to_string());
                break;
            }
            s if WITH_VALUE.contains(&s) => {
                out.options.push(a.clone());
                if let Some(v) = it.next() {
                    out.options.push(v.clone());
                }
            }
            // @argfiles hold more options; we cannot see them.
            s if s.starts_with('-') || s.starts_with('@') => out.options.push(a.clone()),
            _ => {
                out.main = Some(a.clone());
                break;
            }
        }
    }
    out
}

/// The JVM's options in the order HotSpot applies them: JAVA_TOOL_OPTIONS,
/// then JDK_JAVA_OPTIONS (the launcher prepends it), the command line, and
/// _JAVA_OPTIONS last. Unreadable parts are left out.
fn jvm_options(pid: u32) -> Vec<String> {
    let mut opts = Vec::new();
    for var in ["JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS"] {
        if let Some(v) = process::environ_var(pid, var) {
            opts.extend(v.split_whitespace().map(str::to_string));
        }
    }
    opts.extend(parse_java_args(&process::cmdline(pid).unwrap_or_default()).options);
    if let Some(v) = process::environ_var(pid, "_JAVA_OPTIONS") {
        opts.extend(v.split_whitespace().map(str::to_string));
    }
    opts
}

/// The value of boolean `-XX:±name` as far as we can see it.
pub(crate) fn jvm_flag(pid: u32, name: &str) -> Option<bool> {
    flag_in(&jvm_options(pid), name)
}

pub(crate) fn flag_in(opts: &[String], name: &str) -> Option<bool> {
    opts.iter().rev().find_map(|o| match o.strip_prefix("-XX:")?.split_at_checked(1)? {
        ("+", n) if n == name => Some(true),
        ("-", n) if n == name => Some(false),
        _ => None,
    })
}

/// Whether the JVM was started with `-Xrs` or `-XX:+ReduceSignalUsage`.
pub(crate) fn reduces_signal_usage(pid: u32) -> bool {
    let opts = jvm_options(pid);
    opts.iter().any(|o| o == "-Xrs") || flag_in(&opts, "ReduceSignalUsage") == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> JavaArgs {
        parse_java_args(&s.split(' ').map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn main_class() {
        assert_eq!(parse("java -Xmx1g -cp a.jar:b.jar com.x.Main arg1").main.as_deref(), Some("com.x.Main"));
        assert_eq!(parse("java -classpath /x Main").main.as_deref(), Some("Main"));
        assert_eq!(parse("java --class-path /x -Dfoo=bar Main -cp").main.as_deref(), Some("Main"));
        assert_eq!(parse("/usr/bin/java -jar app.jar --server.port=1").main.as_deref(), Some("app.jar"));
        assert_eq!(parse("java -p mods -m my.mod/my.pkg.Main").main.as_deref(), Some("my.mod/my.pkg.Main"));
        assert_eq!(parse("java --module-path mods --module my.mod").main.as_deref(), Some("my.mod"));
        assert_eq!(parse("java --module=my.mod/a.B").main.as_deref(), Some("my.mod/a.B"));
        assert_eq!(parse("java --add-opens java.base/java.lang=ALL-UNNAMED -XX:+UseG1GC Main").main.as_deref(), Some("Main"));
        assert_eq!(parse("java --source 11 Script.java").main.as_deref(), Some("Script.java"));
        assert_eq!(parse("java @opts.txt Main").main.as_deref(), Some("Main"));
        assert_eq!(parse("java -version").main, None);
        assert_eq!(parse("java -cp").main, None);
        assert_eq!(parse_java_args(&[]).main, None);
        assert_eq!(parse("java -Xrs -cp x Main -Xfoo").options, vec!["-Xrs", "-cp", "x"]);
    }

    #[test]
    fn flags() {
        let opts = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(flag_in(&opts("-XX:+DisableAttachMechanism"), "DisableAttachMechanism"), Some(true));
        assert_eq!(flag_in(&opts("-XX:+DisableAttachMechanism -XX:-DisableAttachMechanism"), "DisableAttachMechanism"), Some(false));
        assert_eq!(flag_in(&opts("-XX:+DisableAttachMechanismX -Xmx1g"), "DisableAttachMechanism"), None);
        assert_eq!(flag_in(&opts("-XX: -XX:+"), "DisableAttachMechanism"), None);
    }

    #[test]
    fn release_file() {
        let text = "IMPLEMENTOR=\"Debian\"\nJAVA_RUNTIME_VERSION=\"17.0.15+6-Debian-1deb12u1\"\nJAVA_VERSION=\"17.0.15\"\nJAVA_VERSION_DATE=\"2025-04-15\"\n";
        assert_eq!(parse_release(text).as_deref(), Some("17.0.15"));
        assert_eq!(parse_release("JAVA_VERSION_DATE=\"x\"\n"), None);
    }

    #[test]
    fn release_next_to_libjvm() {
        let dir = std::env::temp_dir().join(format!("oxprof-attach-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("jdk8/jre/lib/amd64/server")).unwrap();
        std::fs::create_dir_all(dir.join("jdk17/lib/server")).unwrap();
        std::fs::write(dir.join("jdk8/release"), "JAVA_VERSION=\"1.8.0_412\"\n").unwrap();
        std::fs::write(dir.join("jdk17/release"), "JAVA_VERSION=\"17.0.15\"\n").unwrap();
        let root = ourselves();
        assert_eq!(java_version(&root, &dir.join("jdk17/lib/server/libjvm.so")).as_deref(), Some("17.0.15"));
        assert_eq!(java_version(&root, &dir.join("jdk8/jre/lib/amd64/server/libjvm.so")).as_deref(), Some("1.8.0_412"));
        assert_eq!(java_version(&root, Path::new("libjvm.so")), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn ourselves() -> Target {
        let pid = std::process::id();
        Target { pid, ns_pid: pid, uid: crate::creds::our_euid(), gid: crate::creds::our_egid(), root: "/proc/self/root".into(), cwd: "/proc/self/cwd".into() }
    }

    /// The `release` file is the JVM's user's: a FIFO there is refused
    /// rather than waited on, a symlink is not followed, control
    /// characters do not reach the terminal.
    #[test]
    fn planted_release_files() {
        let dir = std::env::temp_dir().join(format!("oxprof-attach-planted-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("fifo/lib/server")).unwrap();
        std::fs::create_dir_all(dir.join("link/lib/server")).unwrap();
        std::fs::create_dir_all(dir.join("escape/lib/server")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo/release").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(dir.join("secret"), "JAVA_VERSION=\"secret\"\n").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), dir.join("link/release")).unwrap();
        std::fs::write(dir.join("escape/release"), "JAVA_VERSION=\"17\x1b]0;owned\x07\x1b[2J\r.0.1\"\n").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.clone();
        std::thread::spawn(move || {
            let root = ourselves();
            let _ = tx.send(["fifo", "link", "escape"].map(|j| java_version(&root, &d.join(j).join("lib/server/libjvm.so"))));
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("reading a FIFO as the release file hung");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got, [None, None, Some("17]0;owned[2J.0.1".to_string())]);
    }
}
