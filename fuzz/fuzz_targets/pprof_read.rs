//! A pprof file given to `convert`/`diff`/`report`: the reader on raw bytes,
//! or (first byte odd) on the rest gzipped, as pprof files usually are; what
//! it reads is written back as pprof and collapsed stacks. No panic, one-line
//! errors, no unbounded allocation.
#![no_main]

mod gzip_mode;

use libfuzzer_sys::fuzz_target;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::pprof;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = gzip_mode::file_bytes(data) else { return };
    match pprof::read_all(&bytes) {
        Ok(all) => {
            for p in &all {
                pprof::write(p, std::io::sink()).unwrap();
                collapsed::write(p, CollapsedOptions::default(), std::io::sink()).unwrap();
            }
        }
        Err(e) => assert!(!e.contains(['\n', '\r']), "error is not one line: {e:?}"),
    }
});
