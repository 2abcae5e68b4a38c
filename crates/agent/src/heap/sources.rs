//! The heap's event sources: allocation samples (JEP 331's
//! SampledObjectAlloc, through [`AllocSampler`]) and live objects (weak
//! references swept after each GC, with the leak report), in the shape of
//! [`EventSource`]. Allocation profiles weigh each sample by its unbiased
//! byte estimate (samples the store could not take under a one-frame
//! `[dropped]` stack); the live profile by the estimated live bytes of a
//! site.

use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::{Frame, FrameKind, Profile};

use crate::heap::accuracy::accuracy_facts;
use crate::heap::alloc::{AllocSampler, AllocStats, MARK_ALLOC_CLASS};
use crate::heap::live_report;
use crate::jvmti::{Jni, Jvmti};
use crate::output::Built;
use crate::sampling::store::RawFrame;
use crate::source::{BuildContext, EventSource, FrameMemo, StartContext, Started};

/// A running allocation recording.
pub struct AllocSource {
    sampler: &'static AllocSampler,
    /// Mean sampling interval in bytes.
    interval: u64,
    /// Dropped samples and weight already shown in an earlier interval's
    /// profile (`loop=`).
    dropped_shown: std::sync::Mutex<(u64, u64)>,
}

/// Starts allocation sampling when the options ask for it (`alloc`).
pub fn start_alloc(cx: &StartContext) -> Result<Started, String> {
    let Some(interval) = cx.config.alloc else { return Ok(None) };
    let c = cx.config;
    let line = cx.alloc.start(cx.env, interval, c.jstackdepth, c.threads, c.alloc_threads.as_deref(), cx.can_tag)?;
    Ok(Some((Box::new(AllocSource { sampler: cx.alloc, interval, dropped_shown: Default::default() }), line)))
}

impl EventSource for AllocSource {
    fn key(&self) -> &'static str {
        "alloc"
    }

    fn status(&self) -> String {
        let n = self.sampler.stored().map(|s| s.stats().recorded).unwrap_or(0);
        format!("alloc (mean interval {} bytes): {}", self.interval, crate::source::fmt_samples(n))
    }

    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        let id = event_type::OBJECT_ALLOCATION_SAMPLE;
        vec![
            (id, "enabled", "true".to_string()),
            (id, "interval", format!("{} bytes", self.interval)),
            (id, "engine", "JVMTI SampledObjectAlloc (JEP 331)".to_string()),
        ]
    }

    fn stop(&mut self, env: Option<(Jvmti, Jni)>) {
        if let Some((jvmti, jni)) = env {
            self.sampler.stop(jvmti, jni);
        }
    }

    fn build(&self, cx: &BuildContext) -> Built {
        let (profile, st) = self.profile(cx);
        let interval = self.interval;
        let mut summary_line = format!(
            "alloc summary: samples={} estimated_bytes={} dropped={} interval={interval} callback_ns={} callback_median_ns={} own_walks={} jvmti_walks={}",
            st.samples, st.estimated_bytes, st.dropped, st.callback_ns, st.callback_median_ns, st.own_walks, st.jvmti_walks
        );
        if st.checked > 0 {
            summary_line.push_str(&format!(" walk_checked={} walk_mismatched={}", st.checked, st.mismatched));
        }
        summary_line.push(' ');
        summary_line.push_str(&self.sampler.accuracy.summary().fields());
        Built { label: "Allocations".into(), key: "alloc", profile, summary_line, leak: None }
    }
}

impl AllocSource {
    fn profile(&self, cx: &BuildContext) -> (Profile, AllocStats) {
        let interval = self.interval;
        let Some(store) = self.sampler.stored() else { return (Profile::default(), AllocStats::default()) };
        let meta = cx.rec.meta("Allocation profile", "alloc", "JVMTI SampledObjectAlloc (JEP 331)", interval, "bytes");
        let (own_walks, jvmti_walks, checked, mismatched) = self.sampler.walk_counts();
        let mut st = AllocStats {
            dropped: store.stats().dropped,
            callback_ns: self.sampler.callback_ns_mean(),
            callback_median_ns: self.sampler.callback_ns_median(),
            own_walks,
            jvmti_walks,
            checked,
            mismatched,
            ..AllocStats::default()
        };
        let traces = crate::sampling::interval::read(store, cx.close_interval);
        for t in &traces {
            st.samples += t.samples;
            st.estimated_bytes += t.total;
        }
        // Samples the store did not take since the last interval: their
        // bytes stay in the totals, under `[dropped]`.
        let (lost, lost_weight) = {
            let mut shown = self.dropped_shown.lock().unwrap_or_else(|e| e.into_inner());
            let now = self.sampler.accuracy.dropped();
            let since = (now.0.saturating_sub(shown.0), now.1.saturating_sub(shown.1));
            if cx.close_interval {
                *shown = now;
            }
            since
        };
        st.samples += lost;
        st.estimated_bytes += lost_weight;
        let build = |memo: &mut FrameMemo| {
            let mut profile = Profile::new(meta.clone());
            let mut ids = Vec::new();
            for t in &traces {
                ids.clear();
                cx.label_roots(&mut profile, t.labels, &mut ids);
                if cx.rec.config.threads && t.tid != 0 {
                    ids.push(memo.thread(&mut profile, t.tid, true, || cx.thread_root(t.tid)));
                }
                let (class, stack) = match t.frames.split_first() {
                    Some((c, rest)) if c.bci == MARK_ALLOC_CLASS => (Some(c.method), rest),
                    _ => (None, &t.frames[..]),
                };
                for f in stack.iter().rev() {
                    ids.push(memo.id(&mut profile, cx, f));
                }
                if let Some(id) = class {
                    let class_frame = RawFrame { bci: MARK_ALLOC_CLASS, method: id };
                    ids.push(memo.id_with(&mut profile, &class_frame, || Frame::new(self.sampler.class_name(id), FrameKind::Alloc)));
                }
                profile.add(ids.clone(), t.samples, t.total);
            }
            if lost > 0 {
                // As an allocated class: what was allocated is unknown, and
                // the stack is not a failed walk.
                let dropped = profile.intern(Frame::new(crate::heap::alloc::DROPPED_FRAME, FrameKind::Alloc));
                profile.add(vec![dropped], lost, lost_weight);
            }
            profile
        };
        let mut profile = build(&mut FrameMemo::new(cx));
        if crate::source::checks_kept_names() && cx.close_interval {
            crate::source::check_kept_names("alloc", &profile, &build(&mut FrameMemo::fresh()));
        }
        let acc = self.sampler.accuracy.summary();
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), st.samples.to_string()));
        m.extra.push(("mean interval".into(), format!("{interval} bytes")));
        m.extra.push(("dropped".into(), st.dropped.to_string()));
        for (k, v) in accuracy_facts(&acc) {
            m.extra.push((k.into(), v));
        }
        (profile, st)
    }
}

/// A running live-object recording (it rides on allocation sampling).
pub struct LiveSource {
    sampler: &'static AllocSampler,
    interval: u64,
}

/// Starts live-object tracking when the options ask for it (`live`, which
/// needs allocation sampling, started before it).
pub fn start_live(cx: &StartContext) -> Result<Started, String> {
    let (true, Some(interval)) = (cx.config.live.enabled, cx.config.alloc) else { return Ok(None) };
    let line = live_report::start(&cx.alloc.live, cx.vm, cx.env, interval, &cx.config.live)?;
    Ok(Some((Box::new(LiveSource { sampler: cx.alloc, interval }), line)))
}

impl EventSource for LiveSource {
    fn key(&self) -> &'static str {
        "live"
    }

    fn status(&self) -> String {
        let l = self.sampler.live.stats();
        format!("live ({} tracked in {} sites, memory {} of {} budget, thinned {} times, {} GCs)", l.tracked, l.sites, l.used, l.budget, l.thinnings, l.gcs)
    }

    fn stop(&mut self, _env: Option<(Jvmti, Jni)>) {
        self.sampler.live.stop();
    }

    fn build(&self, cx: &BuildContext) -> Built {
        let opts = live_report::effective(&cx.rec.config.live, cx.command);
        let meta = cx.rec.meta("Live objects", "live", "JVMTI SampledObjectAlloc + weak references", self.interval, "bytes");
        let frame = |f: &RawFrame| cx.frame(f);
        live_report::build(self.sampler, meta, &frame, &opts, cx.vm_structs, cx.jvmti, cx.jni)
    }
}
