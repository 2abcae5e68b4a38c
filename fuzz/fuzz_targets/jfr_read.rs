//! `oxprof convert`/`report` on a JFR file: the reader on any bytes, then
//! every kind of profile (written as collapsed stacks and pprof), the
//! safepoints with their figures, and the leak report (sites and facts) of what it read.
//! Errors and warnings are one line; no panic, no unbounded allocation (run
//! with -malloc_limit_mb), no hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::convert::{self, Options};
use oxprof_profile::safepoint::{self, SafepointStats};
use oxprof_profile::{jfr_read, pprof};

fuzz_target!(|data: &[u8]| {
    let rec = match jfr_read::read_from(&mut &data[..], data.len() as u64, &mut |_, _| {}) {
        Ok(rec) => rec,
        Err(e) => {
            assert!(!e.contains(['\n', '\r']), "error is not one line: {e:?}");
            return;
        }
    };
    for w in &rec.warnings {
        assert!(!w.contains(['\n', '\r']), "warning is not one line: {w:?}");
    }
    let opts = Options { cpu: true, wall: true, jdk_native: true, alloc: true, live: true, lock: true, threads: true, show_state: true, ..Options::default() };
    for (_, p) in convert::profiles(&rec, &opts) {
        collapsed::write(&p, CollapsedOptions::default(), std::io::sink()).unwrap();
        pprof::write(&p, std::io::sink()).unwrap();
    }
    let range = Options { cpu: true, from_ns: Some(rec.start_ns.saturating_add(1)), to_ns: Some(rec.end_ns), ..Options::default() };
    let _ = convert::profiles(&rec, &range);
    // What `oxprof report` adds: safepoint figures and the leak report's sites.
    let safepoints = convert::safepoints(&rec, &opts);
    let _ = SafepointStats::of(&safepoints);
    let _ = safepoint::slowest(&safepoints, 10);
    let _ = rec.leak_report(None);
});
