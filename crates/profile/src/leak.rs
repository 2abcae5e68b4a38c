//! The format-independent leak model: live objects grouped by allocation
//! site (stack + class), each with its estimated live bytes, age, GCs
//! survived and a growth series; the leak-likeness ranking; the text leak
//! report; and the live flame graph (a [`Profile`] of live bytes).
//!
//! The agent fills a [`LeakReport`]; the CLI's converter can read the same
//! model back and write it again. Nothing here knows about the JVM.

use std::io::{self, Write};

use crate::model::{Frame, Meta, Profile};

/// Most points kept in a growth series; beyond, every other point is
/// dropped so the series still spans the whole run (bounded memory).
pub const MAX_SERIES_POINTS: usize = 128;

/// One point of a site's growth series: seconds since the recording
/// started, and the site's estimated live bytes after a GC.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub secs: f64,
    pub bytes: f64,
}

/// Appends a point, halving the series' resolution when it is full.
pub fn push_point(series: &mut Vec<Point>, p: Point) {
    if series.len() >= MAX_SERIES_POINTS {
        let mut i = 0;
        series.retain(|_| {
            i += 1;
            i % 2 == 1
        });
    }
    series.push(p);
}

/// A growth series as text, `secs:bytes;secs:bytes` (how JFR's
/// `oxprof.LiveSite` carries it). Numbers are written in the shortest form
/// that reads back to the same value, so [`parse_series`] restores the
/// series exactly and the score computed from it is the same.
pub fn encode_series(series: &[Point]) -> String {
    series.iter().map(|p| format!("{}:{}", p.secs, p.bytes)).collect::<Vec<_>>().join(";")
}

/// Reads [`encode_series`]'s text back; malformed points are skipped.
pub fn parse_series(text: &str) -> Vec<Point> {
    text.split(';')
        .filter_map(|p| {
            let (s, b) = p.split_once(':')?;
            Some(Point { secs: s.trim().parse().ok()?, bytes: b.trim().parse().ok()? })
        })
        .collect()
}

/// One allocation site with its live objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Site {
    /// Root first; the last frame is the allocated class.
    pub frames: Vec<Frame>,
    /// Estimated live bytes and objects (sum of the tracked samples' weights).
    pub live_bytes: f64,
    pub live_objects: f64,
    /// Tracked (sampled) live objects behind the estimate.
    pub tracked: u64,
    /// Mean age of the tracked live objects, in seconds.
    pub mean_age_secs: f64,
    /// Mean number of GCs the tracked live objects survived.
    pub mean_gcs_survived: f64,
    /// Share of tracked live objects that survived at least [`OLD_GCS`] GCs.
    pub old_share: f64,
    /// Live bytes after each GC, oldest first.
    pub series: Vec<Point>,
    /// The reference chain from a GC root to one tracked instance, root
    /// first, when it was searched for and found.
    pub path_to_root: Option<Vec<String>>,
}

/// An object that survived this many GCs counts as old.
pub const OLD_GCS: f64 = 2.0;

/// A least-squares line through a series.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trend {
    /// Bytes per second.
    pub slope: f64,
    /// How well the line explains the points (0..1); 0 with fewer than 3 points.
    pub r2: f64,
}

/// Fits a line to the series.
pub fn trend(series: &[Point]) -> Trend {
    let n = series.len() as f64;
    if series.len() < 3 {
        return Trend::default();
    }
    let mx = series.iter().map(|p| p.secs).sum::<f64>() / n;
    let my = series.iter().map(|p| p.bytes).sum::<f64>() / n;
    let sxx: f64 = series.iter().map(|p| (p.secs - mx).powi(2)).sum();
    let sxy: f64 = series.iter().map(|p| (p.secs - mx) * (p.bytes - my)).sum();
    let syy: f64 = series.iter().map(|p| (p.bytes - my).powi(2)).sum();
    if sxx <= 0.0 {
        return Trend::default();
    }
    let slope = sxy / sxx;
    let r2 = if syy <= 0.0 { 0.0 } else { (sxy * sxy / (sxx * syy)).clamp(0.0, 1.0) };
    Trend { slope, r2 }
}

impl Site {
    /// The points the trend is fitted to: the later half of the series (by
    /// time), so growth must be sustained, not just a cache filling up at
    /// start; at least the last 3 points when that half has fewer.
    pub fn recent(&self) -> &[Point] {
        let (Some(a), Some(b)) = (self.series.first(), self.series.last()) else { return &[] };
        let mid = a.secs + (b.secs - a.secs) / 2.0;
        let from = self.series.iter().position(|p| p.secs >= mid).unwrap_or(0);
        &self.series[from.min(self.series.len().saturating_sub(3))..]
    }

    pub fn trend(&self) -> Trend {
        trend(self.recent())
    }

    /// Bytes the site grew by over the points of its trend, as the fitted
    /// line says.
    pub fn growth_bytes(&self) -> f64 {
        let r = self.recent();
        let span = match (r.first(), r.last()) {
            (Some(a), Some(b)) => b.secs - a.secs,
            _ => 0.0,
        };
        (self.trend().slope * span).max(0.0)
    }

    /// How leak-like the site is: the bytes it grew by, times how steady
    /// that growth was (R² of the line), times the share of its live
    /// objects that are old. A site that does not grow scores 0, however
    /// large: a full but stable cache is not a leak.
    pub fn leak_score(&self) -> f64 {
        let t = self.trend();
        if t.slope <= 0.0 {
            return 0.0;
        }
        self.growth_bytes() * t.r2 * self.old_share
    }

    /// The allocated class (the leaf frame).
    pub fn class(&self) -> &str {
        self.frames.last().map(|f| f.name.as_str()).unwrap_or("?")
    }

    /// The frame that allocated the class (the one under the leaf), or
    /// `[no stack]`.
    pub fn allocated_in(&self) -> &str {
        self.frames.iter().rev().nth(1).map_or("[no stack]", |f| f.name.as_str())
    }
}

/// The report's order of two sites: by leak score, then by live bytes,
/// larger first.
pub fn rank_order(a: &Site, b: &Site) -> std::cmp::Ordering {
    b.leak_score().total_cmp(&a.leak_score()).then(b.live_bytes.total_cmp(&a.live_bytes))
}

/// Everything a live report says.
#[derive(Clone, Debug, Default)]
pub struct LeakReport {
    pub meta: Meta,
    /// Seconds the recording ran.
    pub duration_secs: f64,
    /// GCs seen during the recording.
    pub gcs: u64,
    /// Whether a full GC was forced right before the report.
    pub forced_gc: bool,
    /// The JVM's mean sampling interval, and the effective one after thinning.
    pub interval: u64,
    pub effective_interval: u64,
    /// How many times the tracked set was thinned to fit the budget.
    pub thinnings: u32,
    /// Memory budget for tracked samples, and what they used.
    pub budget_bytes: u64,
    pub used_bytes: u64,
    /// Live objects tracked right now.
    pub tracked: u64,
    /// Tracked objects allocated since the last GC, which no collector has
    /// judged yet: left out of the sites (most are garbage in a program that
    /// churns; a report after a forced GC has none). Estimated bytes, and
    /// tracked samples.
    pub unjudged_bytes: f64,
    pub unjudged_tracked: u64,
    /// Why paths to GC roots are missing, when they were asked for.
    pub gc_roots_note: Option<String>,
    /// Why no GC was forced although one was asked for.
    pub no_gc_reason: Option<String>,
    pub sites: Vec<Site>,
}

impl LeakReport {
    /// Sorts sites by leak score, then by live bytes (the ranking the
    /// report explains).
    pub fn rank(&mut self) {
        self.sites.sort_by(rank_order);
    }

    pub fn live_bytes(&self) -> f64 {
        self.sites.iter().map(|s| s.live_bytes).sum()
    }

    /// The live flame graph: one stack per site, samples = tracked live
    /// objects, total = estimated live bytes.
    pub fn to_profile(&self) -> Profile {
        let mut meta = self.meta.clone();
        meta.event = "live".into();
        meta.total_unit = "bytes".into();
        let mut p = Profile::new(meta);
        for s in &self.sites {
            p.add_frames(s.frames.iter().cloned(), s.tracked, s.live_bytes.round() as u64);
        }
        p
    }

    /// The report's facts, two lines: how long it recorded, GCs, whether a
    /// GC was forced, live bytes and samples; sampling interval, thinning
    /// and tracking memory.
    pub fn write_facts<W: Write>(&self, mut out: W) -> io::Result<()> {
        let total = self.live_bytes();
        writeln!(
            out,
            "recorded {:.1} s, {} GCs; {} before this report; live now: {} in {} tracked samples",
            self.duration_secs,
            self.gcs,
            if self.forced_gc {
                "full GC forced".to_string()
            } else {
                format!("no GC forced (live may include garbage{})", self.no_gc_reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())
            },
            fmt_bytes(total),
            self.tracked
        )?;
        write!(out, "sampling: mean interval {}", fmt_bytes(self.interval as f64))?;
        if self.thinnings > 0 {
            write!(
                out,
                "; thinned {} time(s) to fit the {} budget: effective interval {}, survivors re-weighted",
                self.thinnings,
                fmt_bytes(self.budget_bytes as f64),
                fmt_bytes(self.effective_interval as f64)
            )?;
        } else {
            write!(out, "; no thinning (budget {})", fmt_bytes(self.budget_bytes as f64))?;
        }
        writeln!(out, "; tracking memory {}", fmt_bytes(self.used_bytes as f64))?;
        if self.unjudged_tracked > 0 {
            writeln!(
                out,
                "left out: {} in {} tracked samples allocated since the last GC, which has not judged them yet",
                fmt_bytes(self.unjudged_bytes),
                self.unjudged_tracked
            )?;
        }
        Ok(())
    }

    /// Writes the ranked text report (call [`LeakReport::rank`] first).
    pub fn write_text<W: Write>(&self, top: usize, mut out: W) -> io::Result<()> {
        let total = self.live_bytes();
        writeln!(out, "oxprof live objects and leak suspects")?;
        self.write_facts(&mut out)?;
        writeln!(out)?;
        writeln!(out, "Ranking: sites are ordered by leak score = growth x steadiness x age, where growth is how much the site's live bytes")?;
        writeln!(out, "grew over the later half of the run (least-squares slope of live bytes sampled after each GC, times the time covered),")?;
        writeln!(out, "steadiness is the R^2 of that line (1 = grew steadily), and age is the share of its live objects that survived >= {OLD_GCS:.0} GCs.")?;
        writeln!(out, "A site whose live bytes did not grow scores 0 however large it is (a full, stable cache is not a leak); such sites")?;
        writeln!(out, "follow, ordered by live bytes.")?;
        if let Some(note) = &self.gc_roots_note {
            writeln!(out, "paths to GC roots: {note}")?;
        }
        for (i, s) in self.sites.iter().take(top).enumerate() {
            let t = s.trend();
            let share = if total > 0.0 { 100.0 * s.live_bytes / total } else { 0.0 };
            writeln!(out)?;
            writeln!(
                out,
                "#{} {}  live {} ({share:.1}%), {:.0} objects ({} samples)  score {}",
                i + 1,
                s.class(),
                fmt_bytes(s.live_bytes),
                s.live_objects,
                s.tracked,
                fmt_bytes(s.leak_score())
            )?;
            writeln!(
                out,
                "   mean age {:.1} s, mean GCs survived {:.1}, old {:.0}%; recent growth {}/s (R^2 {:.2}); {}: {}",
                s.mean_age_secs,
                s.mean_gcs_survived,
                100.0 * s.old_share,
                fmt_signed_bytes(t.slope),
                t.r2,
                match s.series.len() {
                    n if n > 8 => format!("{n} points, 8 shown from first to last"),
                    n => format!("{n} points"),
                },
                series_summary(&s.series)
            )?;
            writeln!(out, "   allocated at:")?;
            for f in s.frames.iter().rev().skip(1).take(12) {
                writeln!(out, "     {}", f.name)?;
            }
            if s.frames.len() > 13 {
                writeln!(out, "     ... {} more frames", s.frames.len() - 13)?;
            }
            if let Some(path) = &s.path_to_root {
                writeln!(out, "   path from a GC root to one instance:")?;
                for (d, step) in path.iter().enumerate() {
                    writeln!(out, "     {}{}", if d == 0 { "" } else { "  " }, step)?;
                }
            }
        }
        if self.sites.len() > top {
            let rest: f64 = self.sites.iter().skip(top).map(|s| s.live_bytes).sum();
            writeln!(out, "\n... {} more sites holding {}", self.sites.len() - top, fmt_bytes(rest))?;
        }
        Ok(())
    }
}

impl LeakReport {
    /// The ranked sites as a table, one row each (call [`LeakReport::rank`]
    /// first): rank, leak score, estimated live bytes and their share,
    /// estimated objects, tracked samples, the recent growth rate and its
    /// R^2, the old share, the mean age, then the class and the frame that
    /// allocated it. The same figures as [`LeakReport::write_text`], in
    /// the same order.
    pub fn write_table<W: Write>(&self, top: usize, mut out: W) -> io::Result<()> {
        let total = self.live_bytes();
        writeln!(
            out,
            "  {:>3} {:>10} {:>10} {:>7} {:>9} {:>8} {:>12} {:>5} {:>4} {:>7}  class  <-  allocated in",
            "#", "score", "live", "share", "objects", "samples", "growth/s", "R^2", "old", "age"
        )?;
        for (i, s) in self.sites.iter().take(top).enumerate() {
            let t = s.trend();
            let share = if total > 0.0 { 100.0 * s.live_bytes / total } else { 0.0 };
            let site = s.allocated_in();
            writeln!(
                out,
                "  {:>3} {:>10} {:>10} {share:>6.2}% {:>9.0} {:>8} {:>12} {:>5.2} {:>3.0}% {:>6.1}s  {}  <-  {site}",
                i + 1,
                fmt_bytes(s.leak_score()),
                fmt_bytes(s.live_bytes),
                s.live_objects,
                s.tracked,
                fmt_signed_bytes(t.slope),
                t.r2,
                100.0 * s.old_share,
                s.mean_age_secs,
                s.class()
            )?;
        }
        if self.sites.len() > top {
            let rest: f64 = self.sites.iter().skip(top).map(|s| s.live_bytes).sum();
            writeln!(out, "  ... {} more sites holding {}", self.sites.len() - top, fmt_bytes(rest))?;
        }
        Ok(())
    }
}

impl LeakReport {
    /// The paths from a GC root to one instance of the first `top` ranked
    /// sites that have one (`gcroots`), as the text report shows them under
    /// each site: a blank line and a heading, then per site its rank, class
    /// and allocating frame, and the path root first, one step a line (a
    /// path of more than 12 steps shortened to its first 3 and last 8).
    /// Nothing when no site has a path.
    pub fn write_paths<W: Write>(&self, top: usize, mut out: W) -> io::Result<()> {
        let with_path: Vec<(usize, &Site, &Vec<String>)> =
            self.sites.iter().take(top).enumerate().filter_map(|(i, s)| s.path_to_root.as_ref().filter(|p| !p.is_empty()).map(|p| (i, s, p))).collect();
        if with_path.is_empty() {
            return Ok(());
        }
        writeln!(out, "\nPaths from a GC root to one instance")?;
        for (i, s, path) in with_path {
            writeln!(out, "  #{} {}  <-  {}", i + 1, s.class(), s.allocated_in())?;
            let (head, tail) = if path.len() > 12 { (3, 8) } else { (path.len(), 0) };
            for (d, step) in path.iter().enumerate().take(head) {
                writeln!(out, "     {}{}", if d == 0 { "" } else { "  " }, step)?;
            }
            if tail > 0 {
                writeln!(out, "       ... {} more steps ...", path.len() - head - tail)?;
                for step in &path[path.len() - tail..] {
                    writeln!(out, "       {step}")?;
                }
            }
        }
        Ok(())
    }
}

/// Up to eight evenly spread points of a series, e.g. `1.0 MiB@0.5s ...`.
fn series_summary(series: &[Point]) -> String {
    if series.is_empty() {
        return "-".into();
    }
    let n = series.len();
    let picks: Vec<usize> = if n <= 8 { (0..n).collect() } else { (0..8).map(|i| i * (n - 1) / 7).collect() };
    picks.iter().map(|&i| format!("{}@{:.1}s", fmt_bytes(series[i].bytes), series[i].secs)).collect::<Vec<_>>().join(" ")
}

/// Bytes with a binary unit, e.g. `12.3 MiB`.
pub fn fmt_bytes(b: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b.abs();
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    let sign = if b < 0.0 { "-" } else { "" };
    if u == 0 {
        format!("{sign}{v:.0} B")
    } else {
        format!("{sign}{v:.1} {}", units[u])
    }
}

/// [`fmt_bytes`] with a `+` before a positive or zero amount (a growth).
pub fn fmt_signed_bytes(b: f64) -> String {
    if b >= 0.0 {
        format!("+{}", fmt_bytes(b))
    } else {
        fmt_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FrameKind;

    fn site(name: &str, live: f64, old: f64, series: &[(f64, f64)]) -> Site {
        Site {
            frames: vec![Frame::new(format!("{name}.run"), FrameKind::Java), Frame::new("byte[]", FrameKind::Alloc)],
            live_bytes: live,
            live_objects: live / 1024.0,
            tracked: 10,
            old_share: old,
            series: series.iter().map(|&(secs, bytes)| Point { secs, bytes }).collect(),
            ..Site::default()
        }
    }

    #[test]
    fn trend_fits_a_line() {
        let s: Vec<Point> = (0..10).map(|i| Point { secs: i as f64, bytes: 100.0 + 50.0 * i as f64 }).collect();
        let t = trend(&s);
        assert!((t.slope - 50.0).abs() < 1e-9 && (t.r2 - 1.0).abs() < 1e-9, "{t:?}");
        let flat: Vec<Point> = (0..10).map(|i| Point { secs: i as f64, bytes: 7.0 }).collect();
        assert_eq!(trend(&flat).slope, 0.0);
        assert_eq!(trend(&s[..2]), Trend::default());
    }

    #[test]
    fn growing_old_site_beats_large_stable_cache() {
        let mut r = LeakReport::default();
        let cache = site("Cache", 500e6, 1.0, &[(0.0, 500e6), (1.0, 501e6), (2.0, 499e6), (3.0, 500e6)]);
        let leak = site("Leak", 40e6, 0.9, &[(0.0, 10e6), (1.0, 20e6), (2.0, 30e6), (3.0, 40e6)]);
        let young = site("Young", 40e6, 0.0, &[(0.0, 10e6), (1.0, 20e6), (2.0, 30e6), (3.0, 40e6)]);
        r.sites = vec![cache, young, leak];
        r.rank();
        let order: Vec<&str> = r.sites.iter().map(|s| s.frames[0].name.as_str()).collect();
        assert_eq!(order, ["Leak.run", "Cache.run", "Young.run"]);
        let mut text = Vec::new();
        r.write_text(10, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("#1 byte[]") && text.contains("Leak.run") && text.contains("Ranking:"), "{text}");
        assert!(text.contains("objects (10 samples)"), "{text}");
        // The table: the same order and scores, objects and samples apart.
        let mut table = Vec::new();
        r.write_table(10, &mut table).unwrap();
        let table = String::from_utf8(table).unwrap();
        let rows: Vec<&str> = table.lines().skip(1).collect();
        assert!(rows[0].ends_with("byte[]  <-  Leak.run") && rows[1].ends_with("<-  Cache.run") && rows[2].ends_with("<-  Young.run"), "{table}");
        assert!(rows[0].contains(&fmt_bytes(r.sites[0].leak_score())) && rows[0].contains(" 39062       10 "), "{table}");
        let p = r.to_profile();
        assert_eq!(p.sum(crate::Counter::Total), 580_000_000);
    }

    #[test]
    fn a_cache_that_filled_at_start_is_not_growing() {
        let mut pts = vec![(0.0, 0.0), (0.1, 50e6), (0.2, 100e6)];
        pts.extend((3..20).map(|i| (i as f64 * 0.1, 100e6)));
        let cache = site("Cache", 100e6, 1.0, &pts);
        assert!(cache.leak_score() < 1.0, "{}", cache.leak_score());
        // Few GCs: the last three points still decide.
        let cache = site("Cache", 100e6, 1.0, &[(0.0, 20e6), (0.1, 96e6), (0.3, 98e6), (0.6, 98e6), (1.9, 98e6), (3.2, 98e6)]);
        assert!(cache.leak_score() < 1.0, "{}", cache.leak_score());
        let leak = site("Leak", 10e6, 1.0, &(0..20).map(|i| (i as f64 * 0.1, i as f64 * 0.5e6)).collect::<Vec<_>>());
        assert!(leak.leak_score() > 4e6, "{}", leak.leak_score());
    }

    #[test]
    fn series_stays_bounded_and_spans_the_run() {
        let mut s = Vec::new();
        for i in 0..10_000 {
            push_point(&mut s, Point { secs: i as f64, bytes: 0.0 });
        }
        assert!(s.len() <= MAX_SERIES_POINTS);
        assert_eq!(s[0].secs, 0.0);
        assert_eq!(s.last().unwrap().secs, 9999.0);
    }

    #[test]
    fn series_text_reads_back_exactly() {
        let s: Vec<Point> = (0..50).map(|i| Point { secs: 0.1 * i as f64 + 1.0 / 3.0, bytes: 1e6 * (i as f64).sqrt() + 0.123456789 }).collect();
        assert_eq!(parse_series(&encode_series(&s)), s);
        assert!(parse_series("").is_empty());
        assert_eq!(parse_series("1:2;bad;3:x;4:5"), [Point { secs: 1.0, bytes: 2.0 }, Point { secs: 4.0, bytes: 5.0 }]);
    }

    #[test]
    fn paths_show_under_their_rank_and_long_ones_are_shortened() {
        let mut none = LeakReport { sites: vec![site("A", 1e6, 1.0, &[])], ..LeakReport::default() };
        let mut out = Vec::new();
        none.write_paths(10, &mut out).unwrap();
        assert!(out.is_empty());
        let long: Vec<String> = (0..20).map(|i| format!("step {i}")).collect();
        none.sites.push(Site {
            path_to_root: Some(vec!["GC root: class A".into(), "static field A.LIST -> java.util.ArrayList".into()]),
            ..site("B", 1e5, 1.0, &[])
        });
        none.sites.push(Site { path_to_root: Some(long), ..site("C", 1e4, 1.0, &[]) });
        none.write_paths(10, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("\nPaths from a GC root to one instance\n  #2 byte[]  <-  B.run\n     GC root: class A\n       static field A.LIST"),
            "{text}"
        );
        assert!(text.contains("  #3 byte[]  <-  C.run\n     step 0\n       step 1\n       step 2\n       ... 9 more steps ...\n       step 12\n"), "{text}");
        assert!(text.ends_with("       step 19\n") && !text.contains("#1 "), "{text}");
        let mut top1 = Vec::new();
        none.write_paths(1, &mut top1).unwrap();
        assert!(top1.is_empty());
    }

    #[test]
    fn bytes_format() {
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(1536.0), "1.5 KiB");
        assert_eq!(fmt_bytes(-3.0 * 1048576.0), "-3.0 MiB");
    }
}
