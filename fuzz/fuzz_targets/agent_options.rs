//! The agent's option string (`-agentpath:liboxprof.so=...`, or an attach
//! `load` request): `Config::parse` on any UTF-8 text must return a config
//! or a one-line error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxprof::options::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse(text) {
        Ok(c) => {
            let _ = c.output_format();
        }
        Err(e) => {
            let line = e.to_string();
            assert!(!line.contains(['\n', '\r']), "error is not one line: {line:?}");
        }
    }
});
