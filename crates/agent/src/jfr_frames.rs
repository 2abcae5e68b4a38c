//! Turns stored stacks into JFR frames: class, method and descriptor from
//! [`Symbols`], line numbers from the JVM's line number tables (cached per
//! method), frame types from the [`RawFrame`] encoding, and names for the
//! synthetic one-frame stacks (failed walks, threads without Java frames).
//!
//! Runs off the signal path, on a thread attached to the JVM.

use std::collections::HashMap;

use jvmti_sys::asgct::{ticks, BCI_NATIVE_FRAME};
use jvmti_sys::jmethodID;
use oxprof_profile::jfr::{FrameType, JfrFrame};

use crate::jvmti::{Jni, Jvmti};
use crate::profiler::{failure_name, thread_category};
use crate::signal::{MARK_NON_JAVA_THREAD, MARK_NO_JAVA_FRAME};
use crate::store::{JavaFrameType, RawFrame};
use crate::symbols::Symbols;
use crate::threads::Threads;

/// Line tables of the methods seen so far.
#[derive(Default)]
pub struct Lines {
    tables: HashMap<usize, Vec<(i64, i32)>>,
}

impl Lines {
    /// The source line of `bci` in `method`, or -1. Methods of classes that
    /// may unload are not asked about (the JVM may have freed them).
    fn line(&mut self, jvmti: Jvmti, symbols: &Symbols, method: usize, bci: i32) -> i32 {
        if bci < 0 {
            return -1;
        }
        let table = self.tables.entry(method).or_insert_with(|| {
            if symbols.may_unload(method) {
                Vec::new()
            } else {
                jvmti.line_number_table(method as jmethodID).unwrap_or_default()
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

fn synthetic(name: String) -> JfrFrame {
    JfrFrame { class: String::new(), method: name, descriptor: String::new(), line: -1, bci: -1, kind: FrameType::Native }
}

fn java(cx: &Context<'_>, lines: &mut Lines, method: usize, bci: i32, kind: FrameType) -> JfrFrame {
    let name = cx.symbols.resolve(cx.jvmti, cx.jni, method as jmethodID);
    let line = if kind == FrameType::Native { -1 } else { lines.line(cx.jvmti, cx.symbols, method, bci) };
    JfrFrame { class: name.class.to_string(), method: name.method.clone(), descriptor: name.descriptor.clone(), line, bci: bci.max(-1), kind }
}

/// One stored frame (see [`RawFrame`]'s encoding).
fn frame(cx: &Context<'_>, lines: &mut Lines, f: &RawFrame) -> JfrFrame {
    match f.bci {
        RawFrame::NATIVE_PC | RawFrame::KERNEL_PC => synthetic(format!("0x{:x}", f.method)),
        BCI_NATIVE_FRAME => java(cx, lines, f.method, -1, FrameType::Native),
        _ => {
            let kind = match f.java_type() {
                JavaFrameType::Unknown => FrameType::Unknown,
                JavaFrameType::Interpreted => FrameType::Interpreted,
                JavaFrameType::Compiled => FrameType::Jit,
                JavaFrameType::Inlined => FrameType::Inlined,
            };
            java(cx, lines, f.method, f.java_bci(), kind)
        }
    }
}

/// A CPU stack (leaf first, as stored and as JFR wants it). One-frame
/// marker stacks become one synthetic frame named as in the other outputs.
pub fn cpu_stack(cx: &Context<'_>, lines: &mut Lines, tid: u32, frames: &[RawFrame]) -> Vec<JfrFrame> {
    let marker = match frames {
        [f] if f.method == 0 => Some(f.bci),
        _ => None,
    };
    let marker = match marker {
        Some(ticks::UNKNOWN_NOT_JAVA) if !cx.threads.is_java_visible(tid) => Some(MARK_NON_JAVA_THREAD),
        m => m,
    };
    match marker {
        Some(MARK_NO_JAVA_FRAME | MARK_NON_JAVA_THREAD) => {
            let name = cx.threads.name(tid).unwrap_or_else(|| "thread".into());
            vec![synthetic(format!("[{}]", thread_category(&name)))]
        }
        Some(code) => vec![synthetic(failure_name(code).to_string())],
        None => frames.iter().map(|f| frame(cx, lines, f)).collect(),
    }
}

/// An allocation stack from GetStackTrace (no frame types; -1 = native).
pub fn alloc_stack(cx: &Context<'_>, lines: &mut Lines, frames: &[RawFrame]) -> Vec<JfrFrame> {
    frames
        .iter()
        .map(|f| if f.bci == -1 { java(cx, lines, f.method, -1, FrameType::Native) } else { java(cx, lines, f.method, f.bci, FrameType::Unknown) })
        .collect()
}
