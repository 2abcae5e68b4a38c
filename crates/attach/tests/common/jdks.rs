//! The other supported runtimes the tests also run on; shared by the attach
//! and CLI crates' tests (the CLI's `tests/common` includes this file).

use std::path::PathBuf;

/// The homes of the JDK 11, 21 and 25 runtimes that `scripts/test.sh`
/// installs and lists in OXPROF_EXTRA_JDKS, each checked to hold `bin/java`.
#[allow(dead_code)]
pub fn extra_jdks() -> Vec<PathBuf> {
    let v = std::env::var("OXPROF_EXTRA_JDKS").expect("OXPROF_EXTRA_JDKS is not set: run ./scripts/test.sh, which installs the JDK 11, 21 and 25 runtimes");
    let homes: Vec<PathBuf> = std::env::split_paths(&v).collect();
    assert!(!homes.is_empty(), "OXPROF_EXTRA_JDKS lists no runtime");
    for h in &homes {
        assert!(h.join("bin/java").is_file(), "{} has no bin/java", h.display());
    }
    homes
}
