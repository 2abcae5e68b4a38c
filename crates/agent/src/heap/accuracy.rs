//! How far allocation estimates can be trusted, measured while sampling.
//!
//! On JDK 11–24 HotSpot's sampler charges the bytes a thread allocated in a
//! TLAB since its last sampling point to whichever object next takes the
//! TLAB's slow path, nearly always the one that refills the TLAB (fixed in
//! JDK 25 by JDK-8356372; see docs/allocation-sampling-bias.md). A sample
//! taken on a refill therefore stands for bytes other allocations made, and
//! per-site figures are only as good as the share of the estimate that did
//! not come from refills. The callback runs on the allocating thread, so it
//! can read that thread's TLAB and exact byte counter (`hotspot::tlab`) and
//! tell each sample's path:
//! - **in TLAB**: the object lies inside the current TLAB past its start
//!   (it crossed an armed sampling point; honest on every JDK);
//! - **refill**: the object is the first in a fresh TLAB;
//! - **outside**: the object is not in the TLAB (allocated in shared space).
//!
//! It also compares the sampler's byte clock with the truth: the exact bytes
//! each thread allocated between two of its samples against the weights of
//! the samples closing those windows (JDK 17–24 count some TLAB bytes twice).
//! And it counts the samples the sample store could not take (full, or
//! paused): their bytes are in the profile under a `[dropped]` frame, so
//! totals stay right, but no site has them; a recording that dropped a
//! significant share cannot be called good.
//! The result is a level (`exact`, `good`, `fair`, `poor`), a one-line
//! verdict and the sites most affected, for the summary line, the profile's
//! header and `oxprof report`. Nothing is corrected behind the user's back:
//! per-site estimates stay the sampler's; the figures say how far to trust
//! them.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use jvmti_sys::jobject;

use oxprof_profile::flamegraph::format_quantity;

use crate::hotspot::tlab;

/// How a sampled object was allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    InTlab = 0,
    Refill = 1,
    Outside = 2,
    Unknown = 3,
}

/// First feature release whose sampler counts bytes exactly (JDK-8356372).
pub const FIRST_EXACT_JDK: u32 = 25;

const TLAB_BUCKETS: usize = 48;

/// The accumulated figures of one recording.
pub struct Accuracy {
    jdk: AtomicU32,
    /// Bumped at each start, so each thread's window restarts.
    generation: AtomicU64,
    samples: [AtomicU64; 4],
    weight: [AtomicU64; 4],
    /// Exact bytes allocated between consecutive samples of one thread, and
    /// the sample weights that stand for them.
    exact: AtomicU64,
    sampled: AtomicU64,
    /// Desired TLAB size at each sample, by power of two of bytes.
    tlab_sizes: [AtomicU64; TLAB_BUCKETS],
    /// Samples the store did not take, and their weight.
    dropped: AtomicU64,
    dropped_weight: AtomicU64,
}

impl Default for Accuracy {
    fn default() -> Self {
        Accuracy {
            jdk: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            samples: Default::default(),
            weight: Default::default(),
            exact: AtomicU64::new(0),
            sampled: AtomicU64::new(0),
            tlab_sizes: [const { AtomicU64::new(0) }; TLAB_BUCKETS],
            dropped: AtomicU64::new(0),
            dropped_weight: AtomicU64::new(0),
        }
    }
}

thread_local! {
    /// (generation, the thread's allocated bytes at its last sample).
    static LAST: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

impl Accuracy {
    /// Starts a recording on feature release `jdk` (0 when unknown).
    pub fn start(&self, jdk: u32) {
        self.jdk.store(jdk, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::SeqCst);
        for a in self.samples.iter().chain(&self.weight).chain(&self.tlab_sizes).chain([&self.exact, &self.sampled, &self.dropped, &self.dropped_weight]) {
            a.store(0, Ordering::Relaxed);
        }
    }

    /// Classifies one sample and updates the thread's exact-bytes window.
    /// Runs in the SampledObjectAlloc callback, on the allocating thread.
    ///
    /// # Safety
    /// `object` must be the callback's live local reference to the sampled
    /// object, and `env` the callback's `JNIEnv`.
    pub unsafe fn observe(&self, env: usize, object: jobject, weight: u64) -> Path {
        let Some(t) = tlab::current(env) else {
            self.count(Path::Unknown, weight);
            return Path::Unknown;
        };
        // SAFETY: a local reference is the address of a slot holding the
        // object's address (untagged on JDK 11–25), valid during the callback.
        let addr = if object.is_null() { 0 } else { (unsafe { (object as *const usize).read() }) & !7 };
        let path = match addr {
            0 => Path::Unknown,
            a if t.start != 0 && a == t.start => Path::Refill,
            a if t.start != 0 && a > t.start && a < t.top => Path::InTlab,
            _ => Path::Outside,
        };
        self.count(path, weight);
        if let Some(b) = self.tlab_sizes.get(bucket(t.desired_bytes)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let generation = self.generation.load(Ordering::Relaxed);
        let _ = LAST.try_with(|last| {
            let (g, before) = last.get();
            if g == generation && t.allocated_bytes >= before {
                self.exact.fetch_add(t.allocated_bytes - before, Ordering::Relaxed);
                self.sampled.fetch_add(weight, Ordering::Relaxed);
            }
            last.set((generation, t.allocated_bytes));
        });
        path
    }

    /// Counts a sample the store did not take (full or paused), of `weight`
    /// bytes: the profile shows it under `[dropped]`.
    pub fn drop_sample(&self, weight: u64) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_weight.fetch_add(weight, Ordering::Relaxed);
    }

    /// Samples dropped so far in this recording, and their weight.
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped.load(Ordering::Relaxed), self.dropped_weight.load(Ordering::Relaxed))
    }

    fn count(&self, path: Path, weight: u64) {
        let i = path as usize;
        if let (Some(n), Some(w)) = (self.samples.get(i), self.weight.get(i)) {
            n.fetch_add(1, Ordering::Relaxed);
            w.fetch_add(weight, Ordering::Relaxed);
        }
    }

    pub fn summary(&self) -> Summary {
        let load = |a: &[AtomicU64; 4]| [0, 1, 2, 3].map(|i| a[i].load(Ordering::Relaxed));
        let sizes: Vec<u64> = self.tlab_sizes.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        Summary {
            jdk: self.jdk.load(Ordering::Relaxed),
            samples: load(&self.samples),
            weight: load(&self.weight),
            exact: self.exact.load(Ordering::Relaxed),
            sampled: self.sampled.load(Ordering::Relaxed),
            tlab_quantiles: [0.1, 0.5, 0.9].map(|q| quantile(&sizes, q)),
            dropped: self.dropped.load(Ordering::Relaxed),
            dropped_weight: self.dropped_weight.load(Ordering::Relaxed),
        }
    }
}

/// Bucket `i` holds sizes in `[2^i, 2^(i+1))`; 0 holds 0 and 1.
fn bucket(bytes: u64) -> usize {
    (63 - bytes.max(1).leading_zeros() as usize).min(TLAB_BUCKETS - 1)
}

/// The `q` quantile of a power-of-two histogram, as the lower bound of its
/// bucket (0 when empty).
fn quantile(counts: &[u64], q: f64) -> u64 {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return 0;
    }
    let want = ((total as f64 * q).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= want {
            return 1 << i;
        }
    }
    0
}

/// What a recording measured, and what it means.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Feature release (0: unknown).
    pub jdk: u32,
    /// Per [`Path`]: samples and their weight.
    pub samples: [u64; 4],
    pub weight: [u64; 4],
    /// Exact bytes between consecutive samples of a thread, and the weights
    /// standing for them.
    pub exact: u64,
    pub sampled: u64,
    /// Desired TLAB size at the samples: 10th, 50th, 90th percentile (lower
    /// bound of a power-of-two bucket), bytes.
    pub tlab_quantiles: [u64; 3],
    /// Samples the store did not take (their bytes are under `[dropped]`),
    /// and their weight; both are included in `samples` and `weight`.
    pub dropped: u64,
    pub dropped_weight: u64,
}

/// How far per-site allocation figures can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// JDK 25 or later: the sampler counts bytes exactly.
    Exact,
    Good,
    Fair,
    Poor,
    /// The TLAB could not be read (JVM not tested, structure table missing).
    Unknown,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Exact => "exact",
            Level::Good => "good",
            Level::Fair => "fair",
            Level::Poor => "poor",
            Level::Unknown => "unknown",
        }
    }
}

/// Bounds on [`Summary::misattributed`] for the levels (calibrated against
/// exact per-site truth in docs/allocation-sampling-bias.md, "What oxprof
/// reports").
pub const GOOD_BELOW: f64 = 0.05;
pub const POOR_ABOVE: f64 = 0.15;
/// A dropped share below this does not take an `exact` recording down.
const DROPPED_NEGLIGIBLE: f64 = 0.005;

impl Summary {
    fn total_weight(&self) -> u64 {
        self.weight.iter().sum()
    }

    fn known_samples(&self) -> u64 {
        self.samples.iter().take(3).sum()
    }

    /// Share of the estimate carried by samples of each path.
    pub fn share(&self, path: Path) -> f64 {
        let total = self.total_weight();
        if total == 0 {
            0.0
        } else {
            self.weight[path as usize] as f64 / total as f64
        }
    }

    /// The sampler's byte count against the exact bytes (1.0 is right),
    /// when enough windows were seen.
    pub fn clock_ratio(&self) -> Option<f64> {
        (self.exact > 0 && self.samples.iter().sum::<u64>() >= 100).then(|| self.sampled as f64 / self.exact as f64)
    }

    /// On JDK 11–24, the share of the estimate that may sit on the wrong
    /// site: what refills carried (bytes allocated earlier in the TLAB) plus
    /// how far the sampler's byte count is off (bytes it counted twice or
    /// missed). A site holding a share `f` of the bytes can be off by up to
    /// about this over `f`. 0 on JDK 25 and later.
    pub fn misattributed(&self) -> f64 {
        if self.jdk >= FIRST_EXACT_JDK {
            return 0.0;
        }
        self.share(Path::Refill) + self.clock_ratio().map_or(0.0, |r| (r - 1.0).abs())
    }

    /// Share of the estimate carried by samples the store did not take
    /// (they sit under `[dropped]`, on no site).
    pub fn dropped_share(&self) -> f64 {
        let total = self.total_weight().max(self.dropped_weight);
        if total == 0 {
            if self.dropped > 0 {
                1.0
            } else {
                0.0
            }
        } else {
            self.dropped_weight as f64 / total as f64
        }
    }

    pub fn level(&self) -> Level {
        if self.known_samples() == 0 {
            return Level::Unknown;
        }
        let dropped = self.dropped_share();
        if self.jdk >= FIRST_EXACT_JDK && dropped < DROPPED_NEGLIGIBLE {
            return Level::Exact;
        }
        // Dropped bytes are on no site: per-site figures miss them as
        // surely as they miss what sits on the wrong site.
        match self.misattributed() + dropped {
            m if m < GOOD_BELOW => Level::Good,
            m if m <= POOR_ABOVE => Level::Fair,
            _ => Level::Poor,
        }
    }

    /// One sentence for the summary, the header and `report`.
    pub fn verdict(&self) -> String {
        // A share that rounds to 0% but is not nothing reads "under 1%".
        let pct = |x: f64| if x > 0.0 && x < 0.005 { "under 1%".to_string() } else { format!("{:.0}%", 100.0 * x) };
        let dropped = (self.dropped > 0).then(|| {
            format!(
                "{} of the estimate ({} samples) was dropped, the allocation sample store being full: those bytes are counted under [dropped], on no site",
                pct(self.dropped_share()),
                self.dropped
            )
        });
        let level = self.level();
        let body = match level {
            Level::Unknown => "not measured (this JVM's TLABs could not be read)".into(),
            Level::Exact => format!("exact: per-site estimates are unbiased on JDK {} (its sampler counts every byte; JDK-8356372)", self.jdk),
            _ if self.jdk >= FIRST_EXACT_JDK => format!("the sampler counts every byte on JDK {} (JDK-8356372)", self.jdk),
            _ => {
                let m = self.misattributed();
                let up_to = if m < 0.005 { "under 1%".to_string() } else { format!("up to {}", pct(m)) };
                let mut s = format!(
                    "{up_to} of the estimate may be credited to the wrong site ({} landed on objects that refilled a TLAB, standing for bytes \
                     allocated earlier in it",
                    pct(self.share(Path::Refill))
                );
                if let Some(r) = self.clock_ratio().filter(|r| (r - 1.0).abs() >= 0.01) {
                    s.push_str(&format!("; the sampler counted {r:.2}× the bytes the threads allocated"));
                }
                let which =
                    if 2.0 * m >= 1.0 { "any site".to_string() } else { format!("sites under {} of the total", pct(2.0 * m).trim_start_matches("under ")) };
                s.push_str(&format!(
                    "); {which} can be off by half or more, small objects over-estimated and large ones under-estimated \
                     (HotSpot's sampler on JDK 11–24, JDK-8356372)"
                ));
                s
            }
        };
        match (level, dropped) {
            (Level::Unknown | Level::Exact, None) => body,
            (Level::Unknown | Level::Exact, Some(d)) => format!("{body}; {d}"),
            (l, None) => format!("{}: {body}", l.name()),
            (l, Some(d)) => format!("{}: {d}; {body}", l.name()),
        }
    }

    /// The summary line's fields.
    pub fn fields(&self) -> String {
        let [p10, p50, p90] = self.tlab_quantiles;
        format!(
            "accuracy={} misattributed={:.3} dropped_share={:.3} refill_share={:.3} outside_share={:.3} sampler_vs_exact={} tlab_p10={p10} tlab_p50={p50} tlab_p90={p90}",
            self.level().name(),
            self.misattributed(),
            self.dropped_share(),
            self.share(Path::Refill),
            self.share(Path::Outside),
            self.clock_ratio().map_or("n/a".into(), |r| format!("{r:.3}")),
        )
    }
}

/// The header lines saying how far per-site figures can be trusted (keys
/// `oxprof report` and the flame graph show): the verdict, the share that
/// may sit on the wrong site, the allocation paths and TLAB sizes, and the
/// sampler's byte count against the threads' exact counters.
pub fn accuracy_facts(acc: &Summary) -> Vec<(&'static str, String)> {
    let mut out = vec![(ACCURACY_KEY, acc.verdict())];
    if acc.dropped > 0 {
        out.push((
            DROPPED_KEY,
            format!(
                "{} samples, {} ({:.1}% of the estimate), under [dropped]",
                acc.dropped,
                format_quantity(acc.dropped_weight, "bytes"),
                100.0 * acc.dropped_share()
            ),
        ));
    }
    if acc.level() == Level::Unknown {
        return out;
    }
    out.push((MISATTRIBUTED_KEY, format!("{:.3}", acc.misattributed())));
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let [p10, p50, p90] = acc.tlab_quantiles.map(|b| format_quantity(b, "bytes"));
    out.push((
        "allocation paths",
        format!(
            "{} of the estimate from objects inside a TLAB, {} from objects that refilled one, {} from objects allocated outside; TLAB sizes p10 {p10}, median {p50}, p90 {p90}",
            pct(acc.share(Path::InTlab)),
            pct(acc.share(Path::Refill)),
            pct(acc.share(Path::Outside))
        ),
    ));
    if let Some(r) = acc.clock_ratio() {
        out.push(("sampler byte count", format!("{r:.3}× the bytes the sampled threads allocated (their exact counters)")));
    }
    out
}

/// The header key of the share of the estimate that may sit on the wrong
/// site (a number; `oxprof report` marks the sites it makes unreliable).
pub const MISATTRIBUTED_KEY: &str = "allocation misattributed share";

/// The header key of the samples the store did not take.
pub const DROPPED_KEY: &str = "allocation samples dropped";

/// The header key of the allocation-accuracy verdict.
pub const ACCURACY_KEY: &str = "allocation accuracy";

#[cfg(test)]
mod tests {
    use super::*;

    fn with(jdk: u32, weights: [u64; 4]) -> Summary {
        Summary { jdk, samples: weights.map(|w| w / 1000), weight: weights, ..Summary::default() }
    }

    #[test]
    fn levels_follow_the_misattributed_share_on_old_jdks_only() {
        assert_eq!(with(17, [970_000, 30_000, 0, 0]).level(), Level::Good);
        assert_eq!(with(17, [800_000, 150_000, 50_000, 0]).level(), Level::Fair);
        assert_eq!(with(11, [500_000, 400_000, 100_000, 0]).level(), Level::Poor);
        assert_eq!(with(25, [500_000, 400_000, 100_000, 0]).level(), Level::Exact);
        assert_eq!(with(25, [500_000, 400_000, 100_000, 0]).misattributed(), 0.0);
        assert_eq!(with(17, [0, 0, 0, 5_000]).level(), Level::Unknown);
    }

    #[test]
    fn a_fast_byte_clock_counts_as_misattributed() {
        let mut s = with(17, [970_000, 30_000, 0, 0]);
        s.exact = 1_000_000;
        s.sampled = 1_250_000;
        assert!((s.misattributed() - 0.28).abs() < 1e-9);
        assert_eq!(s.level(), Level::Poor);
        assert!(s.verdict().contains("1.25×"), "{}", s.verdict());
        assert!(s.verdict().contains("sites under 56%"), "{}", s.verdict());
    }

    #[test]
    fn dropped_samples_take_the_level_down_and_are_said() {
        let mut s = with(17, [970_000, 30_000, 0, 0]);
        assert_eq!(s.level(), Level::Good);
        assert!(s.verdict().starts_with("good: under 1%") || s.verdict().starts_with("good: up to 3%"), "{}", s.verdict());
        s.dropped = 700;
        s.dropped_weight = 700_000;
        assert!((s.dropped_share() - 0.7).abs() < 1e-9);
        assert_eq!(s.level(), Level::Poor);
        assert!(s.verdict().starts_with("poor: 70% of the estimate (700 samples) was dropped"), "{}", s.verdict());
        assert!(s.fields().contains("dropped_share=0.700"), "{}", s.fields());
        assert!(accuracy_facts(&s).iter().any(|(k, v)| *k == DROPPED_KEY && v.starts_with("700 samples")));
        // JDK 25: exact only while the drops are negligible.
        let mut e = with(25, [1_000_000, 0, 0, 0]);
        e.dropped = 1;
        e.dropped_weight = 100;
        assert_eq!(e.level(), Level::Exact);
        assert!(e.verdict().starts_with("exact: ") && e.verdict().contains("under 1% of the estimate (1 samples) was dropped"), "{}", e.verdict());
        e.dropped_weight = 300_000;
        assert_eq!(e.level(), Level::Poor);
        assert!(e.verdict().starts_with("poor: 30% of the estimate"), "{}", e.verdict());
    }

    #[test]
    fn tlab_quantiles_come_from_power_of_two_buckets() {
        let mut counts = vec![0u64; TLAB_BUCKETS];
        counts[14] = 10; // 16 KiB
        counts[17] = 80; // 128 KiB
        counts[20] = 10; // 1 MiB
        assert_eq!([0.1, 0.5, 0.9, 1.0].map(|q| quantile(&counts, q)), [1 << 14, 1 << 17, 1 << 17, 1 << 20]);
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(16 * 1024 + 5), 14);
        assert_eq!(quantile(&[0; 4], 0.5), 0);
    }
}
