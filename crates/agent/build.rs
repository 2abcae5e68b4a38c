//! Builds `oxprof.jar` (the Java API, `java/src/main/java`) beside
//! `liboxprof.so` in the target directory, with the JDK's `javac --release
//! 11` and `jar`, so `cargo build --release` gives both. Without a JDK the
//! library is still built, and cargo prints a warning saying the jar is not.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let sources = manifest.join("../../java/src/main/java");
    println!("cargo:rerun-if-changed={}", sources.display());
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    println!("cargo:rerun-if-env-changed=OXPROF_SKIP_JAR");
    if std::env::var_os("OXPROF_SKIP_JAR").is_some() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // OUT_DIR is <target>/<profile>/build/<crate>-<hash>/out: the jar goes
    // to <target>/<profile>, beside liboxprof.so and oxprof.
    let Some(profile_dir) = out.ancestors().nth(3) else {
        println!("cargo:warning=oxprof.jar not built: unexpected OUT_DIR {}", out.display());
        return;
    };
    let (Some(javac), Some(jar)) = (jdk_tool("javac"), jdk_tool("jar")) else {
        println!("cargo:warning=oxprof.jar (the Java API) not built: no `javac` and `jar` found (install a JDK 11+, e.g. apt-get install openjdk-17-jdk-headless, or set JAVA_HOME)");
        return;
    };
    if let Err(e) = build_jar(&javac, &jar, &sources, &out, &profile_dir.join("oxprof.jar")) {
        println!("cargo:warning=oxprof.jar not built: {e}");
    }
}

/// `$JAVA_HOME/bin/NAME`, else NAME on the PATH.
fn jdk_tool(name: &str) -> Option<PathBuf> {
    let home = std::env::var_os("JAVA_HOME").map(|h| PathBuf::from(h).join("bin").join(name));
    let path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|d| d.join(name)).collect::<Vec<_>>();
    home.into_iter().chain(path).find(|p| p.is_file())
}

fn java_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            java_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "java") {
            out.push(p);
        }
    }
    Ok(())
}

fn build_jar(javac: &Path, jar: &Path, sources: &Path, out: &Path, dest: &Path) -> Result<(), String> {
    let mut files = Vec::new();
    java_files(sources, &mut files).map_err(|e| format!("cannot list {}: {e}", sources.display()))?;
    files.sort();
    let classes = out.join("classes");
    let _ = std::fs::remove_dir_all(&classes);
    std::fs::create_dir_all(&classes).map_err(|e| format!("{}: {e}", classes.display()))?;
    let o = Command::new(javac)
        .args(["--release", "11", "-encoding", "UTF-8", "-d"])
        .arg(&classes)
        .args(&files)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", javac.display()))?;
    if !o.status.success() {
        return Err(format!("javac failed: {}", String::from_utf8_lossy(&o.stderr).replace('\n', " | ")));
    }
    // Written beside the destination, then renamed: a build never leaves
    // half a jar where the library looks for it.
    let tmp = dest.with_extension("jar.tmp");
    let _ = std::fs::remove_file(&tmp);
    let manifest = out.join("MANIFEST.MF");
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    std::fs::write(&manifest, format!("Automatic-Module-Name: one.oxprof\nImplementation-Title: oxprof\nImplementation-Version: {version}\n"))
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    let o = Command::new(jar)
        .arg("--create")
        .arg("--file")
        .arg(&tmp)
        .arg("--manifest")
        .arg(&manifest)
        .arg("-C")
        .arg(&classes)
        .arg(".")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", jar.display()))?;
    if !o.status.success() {
        return Err(format!("jar failed: {}", String::from_utf8_lossy(&o.stderr).replace('\n', " | ")));
    }
    std::fs::rename(&tmp, dest).map_err(|e| format!("cannot write {}: {e}", dest.display()))
}
