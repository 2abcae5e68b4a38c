//! An OpenTelemetry profiles request given to `convert`/`diff`/`report`
//! (an agent's `.otlp.pb` file, or a spooled interval, gzipped): the reader
//! on raw bytes, or (first byte odd) on the rest gzipped; what it reads is
//! written back as OTLP, pprof and collapsed stacks. No panic, one-line
//! errors, no unbounded allocation.
#![no_main]

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;
use libfuzzer_sys::fuzz_target;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::{otlp, pprof};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let bytes = if mode & 1 == 1 {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(rest).unwrap();
        gz.finish().unwrap()
    } else {
        rest.to_vec()
    };
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
