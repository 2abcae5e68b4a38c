//! The format-independent profile model shared by the oxprof agent and CLI,
//! with one module per output format.
//!
//! The agent turns what it sampled into a [`Profile`]; every writer (collapsed
//! stacks, HTML flame graph, JFR, pprof, OTLP) reads only this model.

pub mod collapsed;
pub mod convert;
pub mod flamegraph;
pub mod format;
pub mod hash;
pub mod jfr;
pub mod jfr_read;
pub mod labels;
pub mod leak;
pub mod model;
pub mod names;
pub mod otlp;
mod otlp_proto;
pub mod pprof;
mod pprof_proto;
pub mod safepoint;
pub mod state;
pub mod units;

pub use format::OutputFormat;
pub use model::{Counter, Frame, FrameKind, Meta, Profile, Sample};
pub use state::ThreadState;
