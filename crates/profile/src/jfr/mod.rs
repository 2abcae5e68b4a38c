//! JFR (JDK Flight Recorder) output, written by hand from the file format the
//! JDK defines (chunk format 2.0, read by JDK 11 and later): `encoding` has
//! the integer and string encodings, `metadata` the type definitions every
//! chunk carries, `writer` the streaming chunk writer, `from_profiles` a
//! recording made from built profiles (a dump of a recording that was not
//! streaming JFR).

pub mod encoding;
pub mod from_profiles;
pub mod metadata;
pub mod writer;

pub use writer::{FrameType, JfrFrame, JfrWriter, OldObject, SafepointEvent, ThreadState, WriterStats, TICKS_PER_SECOND};
