//! Spans (`OxProfiler.span(tag)`): intervals an application times and
//! names, kept here between two drains of the JFR stream, which writes each
//! as an `oxprof.Span` event with the thread's context labels. Recorded only
//! while a JFR recording streams (other outputs have no place for them);
//! the queue is bounded, and spans past it are counted as dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Spans queued between two drains (100 ms apart) at most.
const MAX_QUEUED: usize = 1 << 16;

/// One closed span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// CLOCK_MONOTONIC ns (Java's `System.nanoTime`, the JFR ticks).
    pub start_ticks: u64,
    pub end_ticks: u64,
    pub tid: u32,
    pub tag: String,
    /// The thread's context-label set when it closed the span.
    pub labels: u32,
}

static QUEUE: Mutex<Vec<Span>> = Mutex::new(Vec::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Queues a span for the JFR stream (the caller checks that one streams);
/// false (and not kept) when the queue is full.
pub fn record(span: Span) -> bool {
    let mut q = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
    if q.len() >= MAX_QUEUED {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    q.push(span);
    true
}

/// The spans queued since the last call.
pub fn take() -> Vec<Span> {
    std::mem::take(&mut *QUEUE.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Spans lost to a full queue so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}
