//! An OpenTelemetry profiles request given to `convert`/`diff`/`report`
//! (an agent's `.otlp.pb` file, or a spooled interval, gzipped): the reader
//! on raw bytes, or (first byte odd) on the rest gzipped; what it reads is
//! written back as OTLP, pprof and collapsed stacks. No panic, one-line
//! errors, no unbounded allocation.
#![no_main]

mod gzip_mode;

use libfuzzer_sys::fuzz_target;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::{otlp, pprof};

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = gzip_mode::file_bytes(data) else { return };
    match otlp::read(&bytes) {
        Ok(d) => {
            let all: Vec<&oxprof_profile::Profile> = d.profiles.iter().collect();
            otlp::write(&all, &d.resource, std::io::sink()).unwrap();
            for p in &d.profiles {
                pprof::write(p, std::io::sink()).unwrap();
                collapsed::write(p, CollapsedOptions::default(), std::io::sink()).unwrap();
            }
        }
        Err(e) => assert!(!e.contains(['\n', '\r']), "error is not one line: {e:?}"),
    }
});
