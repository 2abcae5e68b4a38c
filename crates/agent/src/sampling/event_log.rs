//! signal-safe: A preallocated, lock-free log of timed sample events, for JFR output.
//!
//! The sample stores aggregate identical stacks; JFR wants one event per
//! sample with its time and thread. When a JFR recording runs, each store
//! appends `(time, thread, stack slot, weight)` here for every sample it
//! records, and the JFR streaming thread drains the log a few times a second.
//!
//! Appending is async-signal-safe (it runs inside the SIGPROF handler): the
//! cells are allocated before the log is attached, a writer claims a cell
//! with a compare-and-swap on the enqueue counter and publishes it with a
//! release store of the cell's sequence number (a bounded multi-producer
//! queue in Dmitry Vyukov's style), the time comes from
//! `clock_gettime(CLOCK_MONOTONIC)` and the thread id from `gettid`, both
//! async-signal-safe. A full log drops the event and counts it; nothing
//! blocks. There is one reader at a time (the caller guarantees it).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sampling::cputime::monotonic_ns;

/// One logged sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// CLOCK_MONOTONIC nanoseconds.
    pub ticks: u64,
    pub tid: u32,
    /// The stack's slot in its store.
    pub slot: u32,
    /// The sample's weight (ns of CPU, estimated bytes).
    pub weight: u64,
    /// Another thread the event names (a lock wait: the lock's owner), by
    /// kernel id; 0 for none.
    pub other: u32,
}

struct Cell {
    seq: AtomicU64,
    ticks: AtomicU64,
    slot_tid: AtomicU64,
    weight: AtomicU64,
    other: AtomicU32,
}

/// How many times a writer retries a contended claim before dropping.
const MAX_CLAIM_TRIES: u32 = 64;

pub struct EventLog {
    cells: Box<[Cell]>,
    mask: u64,
    enqueue: AtomicU64,
    dequeue: AtomicU64,
    dropped: AtomicU64,
}

impl EventLog {
    // signal-safe: off (allocated before the handler is armed)
    /// A log of `capacity` events (rounded up to a power of two), allocated now.
    pub fn new(capacity: usize) -> EventLog {
        let n = capacity.max(2).next_power_of_two();
        let cells = (0..n)
            .map(|i| Cell {
                seq: AtomicU64::new(i as u64),
                ticks: AtomicU64::new(0),
                slot_tid: AtomicU64::new(0),
                weight: AtomicU64::new(0),
                other: AtomicU32::new(0),
            })
            .collect();
        EventLog { cells, mask: n as u64 - 1, enqueue: AtomicU64::new(0), dequeue: AtomicU64::new(0), dropped: AtomicU64::new(0) }
    }
    // signal-safe: on

    /// Appends an event for the calling thread, now. Async-signal-safe.
    pub fn push(&self, slot: u32, weight: u64, other: u32) {
        // SAFETY: gettid is a plain, always-successful syscall.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        self.push_event(Event { ticks: monotonic_ns(), tid, slot, weight, other });
    }

    /// Appends `e`; returns false (and counts a drop) when the log is full.
    pub fn push_event(&self, e: Event) -> bool {
        let mut pos = self.enqueue.load(Ordering::Relaxed);
        for _ in 0..MAX_CLAIM_TRIES {
            let Some(cell) = self.cells.get((pos & self.mask) as usize) else { break };
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as i64;
            if diff == 0 {
                match self.enqueue.compare_exchange_weak(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        cell.ticks.store(e.ticks, Ordering::Relaxed);
                        cell.slot_tid.store((e.slot as u64) << 32 | e.tid as u64, Ordering::Relaxed);
                        cell.weight.store(e.weight, Ordering::Relaxed);
                        cell.other.store(e.other, Ordering::Relaxed);
                        cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if diff < 0 {
                break; // full: the reader has not freed this cell yet
            } else {
                pos = self.enqueue.load(Ordering::Relaxed);
            }
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Takes the oldest published event. One reader at a time.
    pub fn pop(&self) -> Option<Event> {
        let pos = self.dequeue.load(Ordering::Relaxed);
        let cell = self.cells.get((pos & self.mask) as usize)?;
        if cell.seq.load(Ordering::Acquire) != pos.wrapping_add(1) {
            return None; // empty, or the next event is still being written
        }
        let slot_tid = cell.slot_tid.load(Ordering::Relaxed);
        let e = Event {
            ticks: cell.ticks.load(Ordering::Relaxed),
            tid: slot_tid as u32,
            slot: (slot_tid >> 32) as u32,
            weight: cell.weight.load(Ordering::Relaxed),
            other: cell.other.load(Ordering::Relaxed),
        };
        cell.seq.store(pos.wrapping_add(self.mask + 1), Ordering::Release);
        self.dequeue.store(pos.wrapping_add(1), Ordering::Relaxed);
        Some(e)
    }

    /// Events dropped because the log was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Empties the log. The caller guarantees no writer or reader is active.
    pub fn reset(&self) {
        for (i, c) in self.cells.iter().enumerate() {
            c.seq.store(i as u64, Ordering::Relaxed);
        }
        self.enqueue.store(0, Ordering::Relaxed);
        self.dequeue.store(0, Ordering::Relaxed);
        self.dropped.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ev(i: u64) -> Event {
        Event { ticks: i, tid: i as u32, slot: (i * 7) as u32, weight: i * 3, other: (i * 5) as u32 }
    }

    #[test]
    fn fifo_and_full_drops() {
        let log = EventLog::new(4);
        for i in 0..4 {
            assert!(log.push_event(ev(i)));
        }
        assert!(!log.push_event(ev(9)));
        assert_eq!(log.dropped(), 1);
        assert_eq!(log.pop(), Some(ev(0)));
        assert!(log.push_event(ev(4)));
        let rest: Vec<_> = std::iter::from_fn(|| log.pop()).collect();
        assert_eq!(rest, vec![ev(1), ev(2), ev(3), ev(4)]);
        log.reset();
        assert_eq!((log.pop(), log.dropped()), (None, 0));
    }

    #[test]
    fn concurrent_writers_and_a_reader_lose_nothing_they_did_not_count() {
        let log = Arc::new(EventLog::new(1 << 10));
        let writers: Vec<_> = (0..4u64)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for i in 0..50_000u64 {
                        log.push_event(Event { ticks: i, tid: t as u32, slot: i as u32, weight: 1, other: 0 });
                    }
                })
            })
            .collect();
        let mut got = 0u64;
        let mut last = [None::<u64>; 4];
        while writers.iter().any(|w| !w.is_finished()) || got + log.dropped() < 200_000 {
            while let Some(e) = log.pop() {
                // Each writer's events come out in its order.
                let l = &mut last[e.tid as usize];
                assert!(l.is_none_or(|p| p < e.ticks));
                *l = Some(e.ticks);
                got += 1;
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(got + log.dropped(), 200_000);
        assert!(got > 0);
    }

    #[test]
    fn push_stamps_time_and_thread() {
        let log = EventLog::new(8);
        let before = monotonic_ns();
        log.push(5, 10, 77);
        let e = log.pop().unwrap();
        assert!(e.ticks >= before);
        assert_eq!((e.slot, e.weight, e.other), (5, 10, 77));
        // SAFETY: plain syscall.
        assert_eq!(e.tid, unsafe { libc::syscall(libc::SYS_gettid) } as u32);
    }
}
