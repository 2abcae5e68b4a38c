//! Finding `liboxprof.so` and the JDK's tools.

use std::path::{Path, PathBuf};

const AGENT_NAME: &str = "liboxprof.so";

/// The agent library: `$OXPROF_AGENT`, else next to this binary (also
/// `../lib/` and, for test binaries, the parent directory).
pub fn find_agent() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("OXPROF_AGENT") {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(absolute(&p)) } else { Err(format!("OXPROF_AGENT={} does not name a file", p.display())) };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the oxprof binary: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join(AGENT_NAME), dir.join("../lib").join(AGENT_NAME), dir.join("..").join(AGENT_NAME)];
    candidates
        .iter()
        .find(|p| p.is_file())
        .map(|p| absolute(p))
        .ok_or_else(|| format!("cannot find {AGENT_NAME} next to {}; build it with `cargo build --release` or set OXPROF_AGENT", exe.display()))
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// A JDK tool (`java`, `javac`): `$JAVA_HOME/bin/NAME`, else on PATH.
pub fn jdk_tool(name: &str) -> Result<PathBuf, String> {
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let p = PathBuf::from(home).join("bin").join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("`{name}` not found on PATH or in $JAVA_HOME/bin; install a JDK 11 or later (e.g. `apt-get install openjdk-17-jdk-headless`)"))
}
