//! Turns stored stacks into JFR frames: class, method and descriptor from
//! [`Symbols`], line numbers from the JVM's line number tables (cached per
//! method), frame types from the [`RawFrame`] encoding, and names for the
//! synthetic one-frame stacks (failed walks, threads without Java frames).
//!
//! Runs off the signal path, on a thread attached to the JVM.

use std::collections::HashMap;

use jvmti_sys::asgct::BCI_NATIVE_FRAME;
use jvmti_sys::jmethodID;
use oxprof_profile::jfr::{FrameType, JfrFrame};
use oxprof_profile::FrameKind;

use crate::jvmti::{Jni, Jvmti};
use crate::sampling::cpu::{failure_name, split_cpu_stack, thread_category, virtual_thread_gap, VirtualGap, FROZEN_FRAMES};
use crate::sampling::signal::{MARK_NON_JAVA_THREAD, MARK_NO_JAVA_FRAME, MARK_TRUNCATED};
use crate::sampling::store::{JavaFrameType, RawFrame};
use crate::sampling::threads::Threads;
use crate::symbols::Symbols;

/// Line tables of the methods seen so far.
#[derive(Default)]
pub struct Lines {
    tables: HashMap<usize, Vec<(i64, i32)>>,
}

impl Lines {
    /// The source line of `bci` in `method`, or -1. Methods of classes that
    /// may unload are asked about only while their class is held loaded
    /// (see `Symbols::unloadable_lines`): no line once it has unloaded.
    ///
    /// # Safety
    /// `method` must be a jmethodID the JVM gave out (of a class that has
    /// not unloaded, unless `symbols` knows it may unload).
    unsafe fn line(&mut self, (jvmti, jni): (Jvmti, Jni), symbols: &Symbols, method: usize, bci: i32) -> i32 {
        if bci < 0 {
            return -1;
        }
        let table = self.tables.entry(method).or_insert_with(|| {
            if symbols.may_unload(method) {
                symbols.unloadable_lines(jvmti, jni, method)
            } else {
                // SAFETY: `method`'s class cannot unload (may_unload is
                // false), so the jmethodID is still valid.
                unsafe { jvmti.line_number_table(method as jmethodID) }.unwrap_or_default()
            }
        });
        // The entry with the greatest start not above bci.
        table.iter().filter(|(start, _)| *start <= bci as i64).max_by_key(|(start, _)| *start).map_or(-1, |&(_, line)| line)
    }
}

/// What the converter needs from the agent.
pub struct Context<'a> {
    pub jvmti: Jvmti,
    pub jni: Jni,
    pub symbols: &'a Symbols,
    pub threads: &'a Threads,
}

/// A frame that is no Java method: a native function or a marker.
pub fn synthetic(name: String) -> JfrFrame {
    JfrFrame { class: String::new(), method: name, descriptor: String::new(), line: -1, bci: -1, kind: FrameType::Native }
}

/// # Safety
/// As [`Symbols::resolve`]'s `method`.
unsafe fn java(cx: &Context<'_>, lines: &mut Lines, method: usize, bci: i32, kind: FrameType) -> JfrFrame {
    // SAFETY: as this function's contract.
    let name = unsafe { cx.symbols.resolve(cx.jvmti, cx.jni, method as jmethodID) };
    // SAFETY: as above.
    let line = if kind == FrameType::Native { -1 } else { unsafe { lines.line((cx.jvmti, cx.jni), cx.symbols, method, bci) } };
    JfrFrame { class: name.class.to_string(), method: name.method.clone(), descriptor: name.descriptor.clone(), line, bci: bci.max(-1), kind }
}

/// One stored frame (see [`RawFrame`]'s encoding).
fn frame(cx: &Context<'_>, lines: &mut Lines, f: &RawFrame) -> JfrFrame {
    match f.bci {
        RawFrame::NATIVE_PC | RawFrame::KERNEL_PC => {
            let kernel = f.bci == RawFrame::KERNEL_PC;
            let named = crate::native::symbols::resolver().frame(f.method, kernel);
            let kind = match named.kind {
                FrameKind::Kernel => FrameType::Kernel,
                FrameKind::Cpp => FrameType::Cpp,
                _ => FrameType::Native,
            };
            JfrFrame { kind, ..synthetic(named.name) }
        }
        // SAFETY: a stored Java frame's `method` is a jmethodID the sampler
        // recorded; Symbols keeps the names of those whose class may unload,
        // so the JVM is asked only about the others.
        BCI_NATIVE_FRAME => unsafe { java(cx, lines, f.method, -1, FrameType::Native) },
        _ => {
            let kind = match f.java_type() {
                JavaFrameType::Unknown => FrameType::Unknown,
                JavaFrameType::Interpreted => FrameType::Interpreted,
                JavaFrameType::Compiled => FrameType::Jit,
                JavaFrameType::Inlined => FrameType::Inlined,
            };
            // SAFETY: as above.
            unsafe { java(cx, lines, f.method, f.java_bci(), kind) }
        }
    }
}

/// A CPU stack (leaf first, as stored and as JFR wants it). A marker
/// becomes one synthetic root frame named as in the other outputs, under
/// the frames stored above it: native and kernel frames, as in the profile
/// (a GC thread's stack is its native frames under `[GC Thread]`), and the
/// Java frames of a walk that stopped short (under `[unknown_Java]`, say).
/// A virtual thread's stack is marked as in the profile (see
/// [`virtual_thread_gap`]): the frozen frames' marker above
/// `Continuation.enterSpecial`, or `[truncated]` at the root of a stack
/// that lost frames; the gap found is returned with the frames.
pub fn cpu_stack(cx: &Context<'_>, lines: &mut Lines, tid: u32, frames: &[RawFrame]) -> (Vec<JfrFrame>, VirtualGap) {
    let (above, marker) = split_cpu_stack(frames, tid, cx.threads);
    let root = match marker {
        Some(MARK_NO_JAVA_FRAME | MARK_NON_JAVA_THREAD) => {
            let name = cx.threads.name(tid).unwrap_or_else(|| "thread".into());
            synthetic(format!("[{}]", thread_category(&name)))
        }
        Some(code) => synthetic(failure_name(code).to_string()),
        None => {
            let mut out: Vec<JfrFrame> = frames.iter().map(|f| frame(cx, lines, f)).collect();
            let gap = mark_virtual_thread(&mut out, false);
            return (out, gap);
        }
    };
    let failed = !matches!(marker, Some(MARK_NO_JAVA_FRAME | MARK_NON_JAVA_THREAD));
    let mut out: Vec<JfrFrame> = above.iter().map(|f| frame(cx, lines, f)).chain(std::iter::once(root)).collect();
    let gap = mark_virtual_thread(&mut out, failed);
    (out, gap)
}

/// Marks a virtual thread's stack (`frames` leaf first) as the profile
/// does (see `cpu::trace_frames`); a stack that is a failed walk's
/// already (`failed`) gets no second failure marker.
fn mark_virtual_thread(frames: &mut Vec<JfrFrame>, failed: bool) -> VirtualGap {
    let names: Vec<String> = frames.iter().rev().map(|f| if f.class.is_empty() { f.method.clone() } else { format!("{}.{}", f.class, f.method) }).collect();
    let root_first: Vec<(&str, bool)> =
        names.iter().zip(frames.iter().rev()).map(|(n, f)| (n.as_str(), !f.class.is_empty() && f.kind != FrameType::Native)).collect();
    let gap = virtual_thread_gap(&root_first);
    // A position root first (the frame the marker goes before) as one leaf first.
    let leaf_first = |root_at: usize| frames.len() - root_at;
    match gap {
        VirtualGap::None => {}
        VirtualGap::Broken(_) if failed => return VirtualGap::None,
        VirtualGap::Frozen(i) => frames.insert(leaf_first(i + 1), synthetic(FROZEN_FRAMES.to_string())),
        VirtualGap::Broken(i) => frames.insert(leaf_first(i), synthetic(failure_name(MARK_TRUNCATED).to_string())),
    }
    gap
}

/// An allocation stack (from GetStackTrace: no frame types).
pub fn alloc_stack(cx: &Context<'_>, lines: &mut Lines, frames: &[RawFrame]) -> Vec<JfrFrame> {
    frames.iter().map(|f| frame(cx, lines, f)).collect()
}
