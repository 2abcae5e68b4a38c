//! Safepoints: what the time-to-safepoint recording (`ttsp`) and the JDK's
//! own safepoint events say about each stop of the world, in a form every
//! output shares (the report's *Safepoints* section, the HTML page's table,
//! JFR events).

/// One safepoint: the VM thread asked every Java thread to stop at
/// `start_ns`, the last one stopped `ttsp_ns` later, and the threads were
/// let go again `total_ns` after the start (when known).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Safepoint {
    /// HotSpot's safepoint counter when known, else a sequence number.
    pub id: u64,
    /// When the safepoint was requested, ns since the Unix epoch.
    pub start_ns: u64,
    /// Time to safepoint: from the request until every thread had stopped.
    pub ttsp_ns: u64,
    /// From the request until the threads were released (`None` when
    /// not recorded).
    pub total_ns: Option<u64>,
    /// The VM operation that asked for it (`G1CollectForAllocation`,
    /// `ThreadDump`, ...), when known.
    pub operation: Option<String>,
    /// Java threads at the time, when known.
    pub threads: Option<u32>,
    /// Samples taken while threads were being brought to the safepoint.
    pub samples: u64,
}

impl Safepoint {
    /// When every thread had stopped (ns since the epoch): the end of the
    /// window, from `start_ns`, in which samples show what kept threads from
    /// stopping.
    pub fn synced_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.ttsp_ns)
    }

    /// Whether `t` (ns since the epoch) falls inside the time to safepoint,
    /// both ends included.
    pub fn in_window(&self, t: u64) -> bool {
        self.start_ns <= t && t <= self.synced_ns()
    }
}

/// The index of the safepoint whose time to safepoint holds `t`, in
/// safepoints sorted by `start_ns` (HotSpot runs one safepoint at a time, so
/// their windows do not overlap).
pub fn window_of(safepoints: &[Safepoint], t: u64) -> Option<usize> {
    let after = safepoints.partition_point(|s| s.start_ns <= t);
    let i = after.checked_sub(1)?;
    safepoints[i].in_window(t).then_some(i)
}

/// Adds each sample time (ns since the epoch) that falls inside a
/// safepoint's window to that safepoint's `samples`; `safepoints` sorted by
/// `start_ns`.
pub fn count_samples(safepoints: &mut [Safepoint], times: impl IntoIterator<Item = u64>) {
    debug_assert!(safepoints.windows(2).all(|w| w[0].start_ns <= w[1].start_ns), "safepoints must be in time order");
    if safepoints.is_empty() {
        return;
    }
    for t in times {
        if let Some(i) = window_of(safepoints, t) {
            safepoints[i].samples += 1;
        }
    }
}

/// Summary figures over a set of safepoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SafepointStats {
    pub count: usize,
    pub ttsp_p50_ns: u64,
    pub ttsp_p99_ns: u64,
    pub ttsp_max_ns: u64,
    pub ttsp_sum_ns: u64,
}

impl SafepointStats {
    /// Count, nearest-rank p50 and p99, max and sum of the times to safepoint.
    pub fn of(safepoints: &[Safepoint]) -> SafepointStats {
        let mut t: Vec<u64> = safepoints.iter().map(|s| s.ttsp_ns).collect();
        t.sort_unstable();
        let rank = |p: usize| -> u64 {
            if t.is_empty() {
                return 0;
            }
            let i = (t.len() * p).div_ceil(100).clamp(1, t.len()) - 1;
            t[i]
        };
        SafepointStats {
            count: t.len(),
            ttsp_p50_ns: rank(50),
            ttsp_p99_ns: rank(99),
            ttsp_max_ns: t.last().copied().unwrap_or(0),
            // Saturating: the times come from files, which may say anything.
            ttsp_sum_ns: t.iter().fold(0, |sum: u64, &v| sum.saturating_add(v)),
        }
    }
}

/// The `n` safepoints with the longest time to safepoint, longest first.
pub fn slowest(safepoints: &[Safepoint], n: usize) -> Vec<&Safepoint> {
    let mut v: Vec<&Safepoint> = safepoints.iter().collect();
    v.sort_by(|a, b| b.ttsp_ns.cmp(&a.ttsp_ns).then(a.start_ns.cmp(&b.start_ns)));
    v.truncate(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(id: u64, ttsp: u64) -> Safepoint {
        Safepoint { id, start_ns: id * 1000, ttsp_ns: ttsp, ..Safepoint::default() }
    }

    #[test]
    fn stats_use_nearest_rank() {
        let v: Vec<Safepoint> = (1..=100).map(|i| sp(i, i * 10)).collect();
        let s = SafepointStats::of(&v);
        assert_eq!((s.count, s.ttsp_p50_ns, s.ttsp_p99_ns, s.ttsp_max_ns), (100, 500, 990, 1000));
        assert_eq!(SafepointStats::of(&[]), SafepointStats::default());
        let top: Vec<u64> = slowest(&v, 3).iter().map(|s| s.id).collect();
        assert_eq!(top, vec![100, 99, 98]);
        let one = SafepointStats::of(&[sp(1, 7)]);
        assert_eq!((one.count, one.ttsp_p50_ns, one.ttsp_p99_ns, one.ttsp_max_ns, one.ttsp_sum_ns), (1, 7, 7, 7, 7));
        let four: Vec<Safepoint> = [40, 10, 30, 20].iter().enumerate().map(|(i, &t)| sp(i as u64 + 1, t)).collect();
        let s = SafepointStats::of(&four);
        assert_eq!((s.ttsp_p50_ns, s.ttsp_p99_ns, s.ttsp_max_ns, s.ttsp_sum_ns), (20, 40, 40, 100));
    }

    /// Review finding (jfr_read, `oxprof report`): three safepoints of a
    /// file each claiming 2^63 ns to safepoint overflowed the sum.
    #[test]
    fn the_sum_saturates() {
        let v: Vec<Safepoint> = (1..=3).map(|i| sp(i, i64::MAX as u64)).collect();
        assert_eq!(SafepointStats::of(&v).ttsp_sum_ns, u64::MAX);
    }

    #[test]
    fn samples_fall_in_the_window_of_their_safepoint() {
        // Windows [1000, 1100], [2000, 2000], [3000, 3500].
        let mut v = vec![sp(1, 100), sp(2, 0), sp(3, 500)];
        let at = |t: u64| window_of(&v, t);
        assert_eq!(
            [at(999), at(1000), at(1100), at(1101), at(2000), at(2001), at(3499), at(9000)],
            [None, Some(0), Some(0), None, Some(1), None, Some(2), None]
        );
        assert_eq!(window_of(&[], 5), None);
        count_samples(&mut v, [0, 1000, 1050, 1050, 1200, 2000, 3000, 3500, 3501]);
        assert_eq!(v.iter().map(|s| s.samples).collect::<Vec<_>>(), [3, 1, 2]);
        assert_eq!(v[2].synced_ns(), 3500);
    }
}
