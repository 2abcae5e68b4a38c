//! What a JVM (or whoever runs it) controls on the attach side: the reply on
//! the attach socket and the `load` reply text, /proc/<pid>/status, maps and
//! cmdline, the JDK's `release` file, the printable filter, and the request
//! built from arguments. All of them on every input: no panic, one-line
//! errors, and the invariants each promises.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxprof_attach::fuzzing;
use oxprof_attach::{parse_load_reply, printable};

fuzz_target!(|data: &[u8]| {
    match fuzzing::reply(data) {
        Ok(reply) => {
            let _ = parse_load_reply(&reply);
        }
        Err(e) => {
            let line = e.to_string();
            assert!(!line.contains(['\n', '\r']), "error is not one line: {line:?}");
        }
    }
    let text = String::from_utf8_lossy(data);
    let _ = fuzzing::status(&text);
    for p in fuzzing::maps(&text) {
        assert!(p.is_absolute(), "{p:?}");
    }
    let (options, main, _) = fuzzing::cmdline(data);
    if let Some(main) = main {
        let shown = fuzzing::one_printable_line(&main);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
    }
    drop(options);
    if let Some(v) = fuzzing::release(&text) {
        assert!(!v.chars().any(char::is_control), "{v:?}");
    }
    let shown = printable(&text);
    assert!(shown.chars().all(|c| c == '\n' || c == '\t' || !c.is_control()), "{shown:?}");
    // A request from NUL-separated parts: never a part more or less than sent.
    let parts: Vec<&str> = text.split('\u{1}').collect();
    if let Some((command, args)) = parts.split_first() {
        if let Ok(req) = fuzzing::request(command, args) {
            let fields: Vec<&[u8]> = req.split(|&b| b == 0).collect();
            assert_eq!(fields.len(), 6, "{req:?}");
            assert_eq!(fields[0], b"1");
            assert_eq!(fields[1], command.as_bytes());
        }
    }
});
