//! signal-safe: native (C/C++) and kernel code: unwinding native stacks in
//! the signal handler with frame pointers (`unwind`) or DWARF unwind tables
//! (`dwarf`), and naming native and kernel addresses at dump time
//! (`symbols`, not reachable from the handler). This file holds only the
//! unwinding mode the handler reads.

pub mod dwarf;
pub mod lookup;
pub mod symbols;
pub mod unwind;

/// How native (C/C++) frames are collected with CPU samples (`cstack=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CStack {
    /// Frame-pointer unwinding from the signal context, plus kernel frames
    /// from perf_events callchains when that engine runs.
    Fp,
    /// As `Fp`, but user frames unwound with the objects' DWARF unwind tables.
    Dwarf,
    /// Java frames only.
    No,
}
