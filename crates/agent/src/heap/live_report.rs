//! Glue between live-object tracking (`live.rs`) and a recording: starting
//! it with its GC event, and turning a tracker snapshot into a
//! [`LeakReport`] (ranked sites with resolved frames, and paths to GC roots
//! for the top suspects) plus the live flame graph; whether a full GC can be
//! forced before a report (not under Epsilon, not at exit under ZGC or
//! Shenandoah), and the warning when it cannot.

use std::time::Duration;

use jvmti_sys::*;
use oxprof_profile::leak::{LeakReport, Point, Site};
use oxprof_profile::{Frame, FrameKind, Meta};

use crate::heap::alloc::AllocSampler;
use crate::heap::alloc::MARK_ALLOC_CLASS;
use crate::heap::gcroots;
use crate::heap::live::LiveTracker;
use crate::hotspot::vmstructs::VmStructs;
use crate::jvmti::{Jni, Jvmti};
use crate::log;
use crate::options::{Config, LiveOptions};
use crate::output::Built;
use crate::sampling::store::RawFrame;

/// Suspects whose path to a GC root is searched for.
const ROOT_SUSPECTS: usize = 5;

/// Set at VMDeath, before the final report.
static VM_DYING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Called at VMDeath, before the final report is built.
pub fn vm_dying() {
    VM_DYING.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Why a report under Epsilon forces no GC (and keeps every object).
const EPSILON: &str = "Epsilon never collects (UseEpsilonGC): every sampled object counts as live";

/// Whether the JVM runs the Epsilon collector, which never collects:
/// from its flag, or, when HotSpot's structures cannot be read, from the
/// JVM's command line and option variables (the last `UseEpsilonGC` wins).
fn uses_epsilon(vm_structs: Option<&VmStructs>) -> bool {
    if let Some(p) = vm_structs.and_then(|vs| vs.bool_flag("UseEpsilonGC")) {
        // SAFETY: the flag's storage is a plain bool global of libjvm, read only.
        return unsafe { p.read_volatile() };
    }
    let mut words = Vec::new();
    for var in ["JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"] {
        if let Ok(v) = std::env::var(var) {
            words.extend(v.split_whitespace().map(str::to_string));
        }
    }
    if let Ok(cmdline) = std::fs::read("/proc/self/cmdline") {
        words.extend(cmdline.split(|&b| b == 0).map(|w| String::from_utf8_lossy(w).into_owned()));
    }
    epsilon_in_options(&words)
}

/// Whether the last `-XX:±UseEpsilonGC` among `words` turns it on.
fn epsilon_in_options(words: &[String]) -> bool {
    words.iter().rev().find_map(|w| match w.as_str() {
        "-XX:+UseEpsilonGC" => Some(true),
        "-XX:-UseEpsilonGC" => Some(false),
        _ => None,
    }) == Some(true)
}

/// Why no full GC is forced before a report, if none is. Epsilon never
/// collects: a forced GC does nothing, and every sampled object stays
/// live. At VMDeath HotSpot has already stopped the concurrent GC threads
/// (`before_exit` stops them before it posts VMDeath), and with ZGC or
/// Shenandoah a forced GC waits for those threads forever: measured, the
/// JVM hung at exit. So at exit a GC is forced only when the flags say the
/// collector is a stop-the-world one.
fn may_force_gc(vm_structs: Option<&VmStructs>) -> Result<(), String> {
    if uses_epsilon(vm_structs) {
        return Err(EPSILON.into());
    }
    if !VM_DYING.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(());
    }
    let Some(vs) = vm_structs else { return Err("the JVM is exiting and its collector is unknown".into()) };
    for flag in ["UseZGC", "UseShenandoahGC"] {
        // SAFETY: the flag's storage is a plain bool global of libjvm, read only.
        if vs.bool_flag(flag).is_some_and(|p| unsafe { p.read_volatile() }) {
            return Err(format!("the JVM is exiting and its concurrent collector ({flag}) has stopped; dump while it runs for a collected view"));
        }
    }
    Ok(())
}

/// Starts tracking for a recording; returns the log line.
pub fn start(tracker: &'static LiveTracker, vm: *mut JavaVM, (jvmti, jni): (Jvmti, Jni), interval: u64, opts: &LiveOptions) -> Result<String, String> {
    if jvmti.set_event(true, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH).is_err() {
        // Loaded without the capability (an older attach): ask again.
        // SAFETY: all-zero capabilities are valid; we set the one we need.
        let mut caps: jvmtiCapabilities = unsafe { std::mem::zeroed() };
        caps.set_can_generate_garbage_collection_events(1);
        let ok = jvmti.add_capabilities(&caps).is_ok() && jvmti.set_event(true, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH).is_ok();
        if !ok {
            log::warn("live: this JVM does not report GCs to the agent; dead objects are dropped only at reports and growth series stay empty");
        }
    }
    tracker.start(vm, jni, interval, opts.budget)?;
    Ok(format!(
        "started live-object tracking: budget {}, full GC before reports {}, paths to GC roots {}",
        oxprof_profile::leak::fmt_bytes(opts.budget as f64),
        if opts.force_gc { "on" } else { "off" },
        opts.gc_roots_ns.map(|n| format!("within {:.1} s", n as f64 / 1e9)).unwrap_or_else(|| "off".into())
    ))
}

/// The live options for a report: those of the recording, with `nogc` and
/// `gcroots` given to a later command (`dump`, `stop`) taking precedence.
pub fn effective(recording: &LiveOptions, command: &Config) -> LiveOptions {
    let mut o = recording.clone();
    if !command.live.force_gc {
        o.force_gc = false;
    }
    if command.live.gc_roots_ns.is_some() {
        o.gc_roots_ns = command.live.gc_roots_ns;
    }
    o.report_format |= command.live.report_format;
    o
}

/// Builds the live profile and its leak report. `meta` describes the
/// recording (with the allocation sampling interval); `frame`
/// names a stored frame.
#[allow(clippy::too_many_arguments)]
pub fn build(
    alloc: &AllocSampler,
    meta: Meta,
    frame: &dyn Fn(&RawFrame) -> Frame,
    opts: &LiveOptions,
    vm_structs: Option<&VmStructs>,
    jvmti: Jvmti,
    jni: Jni,
) -> Built {
    let framed = jni.push_frame(64);
    let no_gc_why = if opts.force_gc {
        may_force_gc(vm_structs).err()
    } else {
        // Asked for no GC (nogc): only Epsilon's notice is worth giving.
        uses_epsilon(vm_structs).then(|| EPSILON.to_string())
    };
    if let Some(why) = &no_gc_why {
        log::warn(&format!("live: no GC forced before the report: {why}"));
    }
    let snap = alloc.live.snapshot(jvmti, jni, opts.force_gc && no_gc_why.is_none(), framed && opts.gc_roots_ns.is_some());
    let mut report = LeakReport {
        meta,
        duration_secs: snap.duration_secs,
        gcs: snap.gcs,
        forced_gc: snap.forced_gc,
        interval: snap.interval,
        effective_interval: snap.effective_interval,
        thinnings: snap.thinnings,
        budget_bytes: snap.budget,
        used_bytes: snap.used,
        tracked: snap.tracked,
        unjudged_bytes: snap.unjudged_bytes,
        unjudged_tracked: snap.unjudged_tracked,
        gc_roots_note: None,
        no_gc_reason: no_gc_why,
        sites: Vec::with_capacity(snap.sites.len()),
    };
    // Sites are stacks of (method, bci): merge those that read the same
    // (one method calling the allocating one from several lines).
    let mut instances: Vec<jobject> = Vec::with_capacity(snap.sites.len());
    let mut by_frames: std::collections::HashMap<Vec<Frame>, usize> = std::collections::HashMap::new();
    for s in &snap.sites {
        let (class, stack) = match s.frames.split_first() {
            Some((c, rest)) if c.bci == MARK_ALLOC_CLASS => (Some(c.method), rest),
            _ => (None, &s.frames[..]),
        };
        let mut frames: Vec<Frame> = stack.iter().rev().map(frame).collect();
        if let Some(id) = class {
            frames.push(Frame::new(alloc.class_name(id), FrameKind::Alloc));
        }
        let site = Site {
            frames: frames.clone(),
            live_bytes: s.live_bytes,
            live_objects: s.live_objects,
            tracked: s.tracked,
            mean_age_secs: s.mean_age_secs,
            mean_gcs_survived: s.mean_gcs_survived,
            old_share: s.old_share,
            series: s.series.clone(),
            path_to_root: None,
        };
        match by_frames.get(&frames) {
            Some(&i) => {
                merge(&mut report.sites[i], &site);
                // SAFETY: `s.instance` is null or the snapshot's local
                // reference (in the frame pushed above), used only here.
                unsafe { jni.delete_local(s.instance) };
            }
            None => {
                by_frames.insert(frames, report.sites.len());
                report.sites.push(site);
                instances.push(s.instance);
            }
        }
    }
    // Rank, keeping each site's instance beside it.
    let mut order: Vec<usize> = (0..report.sites.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&report.sites[a], &report.sites[b]);
        y.leak_score().total_cmp(&x.leak_score()).then(y.live_bytes.total_cmp(&x.live_bytes))
    });
    let mut sites: Vec<Option<Site>> = std::mem::take(&mut report.sites).into_iter().map(Some).collect();
    report.sites = order.iter().filter_map(|&i| sites[i].take()).collect();
    let instances: Vec<jobject> = order.iter().map(|&i| instances[i]).collect();
    if let Some(ns) = opts.gc_roots_ns {
        if framed {
            let n = ROOT_SUSPECTS.min(report.sites.len());
            for &other in &instances[n..] {
                // SAFETY: as above; the instances not searched for are not
                // used afterwards.
                unsafe { jni.delete_local(other) };
            }
            // SAFETY: these instances are null or the snapshot's local
            // references, in the current frame and not used afterwards.
            let found = unsafe { gcroots::find(jni, &instances[..n], Duration::from_nanos(ns)) };
            for (site, path) in report.sites.iter_mut().zip(found.paths) {
                site.path_to_root = path;
            }
            report.gc_roots_note = found.note;
        } else {
            report.gc_roots_note = Some("skipped: no room for JNI local references".into());
        }
    }
    if framed {
        jni.pop_frame();
    }
    let profile = report.to_profile();
    let summary_line = format!(
        "live summary: tracked={} sites={} live_bytes={:.0} gcs={} forced_gc={} thinnings={} effective_interval={} memory={} budget={} sweep_ns_per_object={:.1} unjudged_bytes={:.0}",
        report.tracked,
        report.sites.len(),
        report.live_bytes().max(0.0), // an estimate of nothing prints 0, not -0
        report.gcs,
        report.forced_gc,
        report.thinnings,
        report.effective_interval,
        report.used_bytes,
        report.budget_bytes,
        snap.sweep_ns_per_entry,
        report.unjudged_bytes
    );
    Built { label: "Live objects".into(), key: "live", profile, summary_line, leak: Some(Box::new(report)) }
}

/// Adds site `b` to `a`: sums, tracked-weighted means, series summed per
/// sweep (all sites get a point at the same instant of each sweep).
fn merge(a: &mut Site, b: &Site) {
    let (na, nb) = (a.tracked as f64, b.tracked as f64);
    let n = (na + nb).max(1.0);
    a.mean_age_secs = (a.mean_age_secs * na + b.mean_age_secs * nb) / n;
    a.mean_gcs_survived = (a.mean_gcs_survived * na + b.mean_gcs_survived * nb) / n;
    a.old_share = (a.old_share * na + b.old_share * nb) / n;
    a.live_bytes += b.live_bytes;
    a.live_objects += b.live_objects;
    a.tracked += b.tracked;
    let mut points: Vec<Point> = a.series.iter().chain(&b.series).copied().collect();
    points.sort_by(|x, y| x.secs.total_cmp(&y.secs));
    let mut merged: Vec<Point> = Vec::with_capacity(points.len());
    for p in points {
        match merged.last_mut() {
            Some(last) if last.secs == p.secs => last.bytes += p.bytes,
            _ => merged.push(p),
        }
    }
    a.series = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_epsilon_option_wins() {
        let w = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        assert!(epsilon_in_options(&w("java -XX:+UnlockExperimentalVMOptions -XX:+UseEpsilonGC -cp . Main")));
        assert!(!epsilon_in_options(&w("java -XX:+UseEpsilonGC -XX:-UseEpsilonGC Main")));
        assert!(!epsilon_in_options(&w("java -XX:+UseG1GC Main -XX:+UseEpsilonGCx")));
    }
}
