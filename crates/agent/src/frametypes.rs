//! Frame types for a successful AsyncGetCallTrace walk. Signal-safe.
//!
//! AsyncGetCallTrace names the Java frames but not how each runs. The
//! physical frames (see `javastack`) say it: an interpreted physical frame is
//! one interpreted Java frame; a compiled physical frame is the compiled
//! method plus the methods inlined into it, which AsyncGetCallTrace lists
//! leaf first before it. So the two lists are aligned by `Method*` (a
//! `jmethodID` points at its method's `Method*` slot): an interpreted frame
//! must match the next Java frame; a compiled frame claims the next frames up
//! to and including the one of its own method, the earlier ones inlined.
//! Where the lists disagree, the remaining frames keep the unknown type.

use std::ffi::c_void;

use crate::hotspot::{self, Layout};
use crate::javastack::{self, JavaStack, PhysFrame, Start};
use crate::store::{JavaFrameType, RawFrame};

/// Inlining deeper than this is not believed (C2's MaxInlineLevel is 15).
const MAX_INLINE: usize = 64;

/// The `Method*` behind a walked frame's `jmethodID`, or 0.
fn method_of(f: &RawFrame) -> usize {
    if f.method == 0 {
        return 0;
    }
    // SAFETY: AsyncGetCallTrace only returns jmethodIDs the JVM created; they
    // point at slots in JNI method blocks that are never freed.
    unsafe { (f.method as *const usize).read_volatile() }
}

/// Sets the type of each frame of `frames` (AsyncGetCallTrace's, leaf
/// first) that the physical walk accounts for. Returns how many were typed.
pub fn annotate(l: &Layout, thread: usize, regs: (usize, usize, usize), frames: &mut [RawFrame]) -> usize {
    let (start, stack) = JavaStack::new(l, thread, regs);
    if start != Start::Frames {
        return 0;
    }
    let mut i = 0;
    for phys in stack {
        match phys {
            PhysFrame::Interpreted { method, .. } => {
                let Some(f) = frames.get_mut(i) else { break };
                if method_of(f) != method {
                    break;
                }
                f.set_type(JavaFrameType::Interpreted);
                i += 1;
            }
            PhysFrame::Compiled { method } => {
                let end = frames.len().min(i + MAX_INLINE);
                let Some(own) = frames.get(i..end).and_then(|w| w.iter().position(|f| method_of(f) == method)) else { break };
                for (k, f) in frames.iter_mut().enumerate().skip(i).take(own + 1) {
                    f.set_type(if k == i + own { JavaFrameType::Compiled } else { JavaFrameType::Inlined });
                }
                i += own + 1;
            }
        }
        if i >= frames.len() {
            break;
        }
    }
    i
}

/// After a successful AsyncGetCallTrace walk: types `frames` in place.
pub fn on_success(env: usize, ucontext: *mut c_void, frames: &mut [RawFrame]) {
    if let (Some(l), Some(regs)) = (hotspot::layout(), javastack::registers(ucontext)) {
        annotate(l, l.thread(env), regs, frames);
    }
}
