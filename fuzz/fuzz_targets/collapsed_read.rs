//! A collapsed-stacks file given to `convert`/`diff`/`report`, decoded as
//! the CLI does (lossy UTF-8); what it reads is written back as collapsed
//! stacks and pprof. No panic, one-line errors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oxprof_profile::collapsed::{self, CollapsedOptions};
use oxprof_profile::model::Meta;
use oxprof_profile::pprof;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let meta = Meta { title: "fuzz".into(), event: "cpu".into(), ..Meta::default() };
    match collapsed::read(&text, meta) {
        Ok(p) => {
            collapsed::write(&p, CollapsedOptions::default(), std::io::sink()).unwrap();
            pprof::write(&p, std::io::sink()).unwrap();
        }
        Err(e) => assert!(!e.contains(['\n', '\r']), "error is not one line: {e:?}"),
    }
});
