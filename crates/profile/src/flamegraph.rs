//! The self-contained interactive HTML flame graph (placeholder until the viewer lands).

use std::io::{self, Write};

use crate::model::{Counter, Profile};

#[derive(Clone, Debug, Default)]
pub struct HtmlOptions {
    pub title: String,
    pub counter: Counter,
}

pub fn write_html<W: Write>(_profile: &Profile, _opts: &HtmlOptions, _out: W) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "HTML flame graph not implemented yet"))
}
