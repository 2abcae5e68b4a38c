//! The input of the protobuf readers' targets (pprof, OTLP): the first byte
//! picks the form, the rest is the file: raw (even), or gzipped here (odd),
//! as such files usually are, so that the fuzzer mutates the protobuf
//! inside the gzip stream rather than the stream.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;

/// The file's bytes for `data` (`None` when empty).
pub fn file_bytes(data: &[u8]) -> Option<Vec<u8>> {
    let (&mode, rest) = data.split_first()?;
    if mode & 1 == 1 {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(rest).unwrap();
        Some(gz.finish().unwrap())
    } else {
        Some(rest.to_vec())
    }
}
