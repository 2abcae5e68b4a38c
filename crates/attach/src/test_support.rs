//! Test helpers shared by the crate's unit tests.

use std::path::PathBuf;

use crate::creds;
use crate::process::Target;

/// A scratch directory standing for another process's root (our own
/// process, our identity): the path logic of a JVM in another mount
/// namespace, without the namespace. Removed when dropped.
pub(crate) struct FakeRoot(pub PathBuf);

impl FakeRoot {
    pub fn new(name: &str) -> FakeRoot {
        let dir = std::env::temp_dir().join(format!("oxprof-attach-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/tmp")).unwrap();
        FakeRoot(dir)
    }

    pub fn target(&self) -> Target {
        let pid = std::process::id();
        Target { pid, ns_pid: 1, uid: creds::our_euid(), gid: creds::our_egid(), root: self.0.join("root"), cwd: self.0.join("root/tmp") }
    }
}

impl Drop for FakeRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
