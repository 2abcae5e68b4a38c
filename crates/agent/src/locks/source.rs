//! The lock event source: starts the monitor events and the park hook,
//! stops and undoes them, and builds the lock profile (the waiting stacks
//! under the lock's class, weighed in nanoseconds waited).

use oxprof_profile::jfr::writer::event_type;
use oxprof_profile::{Frame, FrameKind, Profile};

use crate::jvmti::{Jni, Jvmti};
use crate::locks::park;
use crate::locks::sampler::{LockSampler, MARK_LOCK_CLASS, MARK_PARK_CLASS};
use crate::log;
use crate::output::Built;
use crate::sampling::store::RawFrame;
use crate::source::{fmt_interval, BuildContext, EventSource, FrameMemo, StartContext, Started};

use jvmti_sys::{JVMTI_EVENT_MONITOR_CONTENDED_ENTER, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED};

/// A running lock recording.
pub struct LockSource {
    sampler: &'static LockSampler,
    interval_ns: u64,
    /// Why `java.util.concurrent` locks are not profiled, if they are not.
    no_park: Option<String>,
}

/// Starts lock profiling when the options ask for it (`event=lock`, `lock=`).
pub fn start(cx: &StartContext) -> Result<Started, String> {
    let Some(interval_ns) = cx.config.lock else { return Ok(None) };
    let (jvmti, jni) = cx.env;
    cx.locks.start(interval_ns, cx.config.threads, cx.config.jstackdepth)?;
    let monitors = [JVMTI_EVENT_MONITOR_CONTENDED_ENTER, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED].iter().all(|&e| jvmti.set_event(true, e).is_ok());
    if !monitors {
        for e in [JVMTI_EVENT_MONITOR_CONTENDED_ENTER, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED] {
            let _ = jvmti.set_event(false, e);
        }
        cx.locks.stop();
        return Err("this JVM cannot report contended monitors (JVMTI can_generate_monitor_events); lock profiling is unavailable".into());
    }
    let no_park = park::install(cx.locks, jvmti, jni, cx.vm_structs).err();
    if let Some(why) = &no_park {
        log::warn(&format!("java.util.concurrent locks are not profiled: {why}; Java monitors are"));
    }
    let line = format!(
        "started lock profiling: mean interval {} of waiting, {}",
        fmt_interval(interval_ns),
        if no_park.is_none() { "monitors and java.util.concurrent locks" } else { "monitors only" }
    );
    Ok(Some((Box::new(LockSource { sampler: cx.locks, interval_ns, no_park }), line)))
}

impl EventSource for LockSource {
    fn key(&self) -> &'static str {
        "lock"
    }

    fn status(&self) -> String {
        let n = self.sampler.stored().map(|s| s.stats().recorded).unwrap_or(0);
        format!("lock (mean interval {}): {}", fmt_interval(self.interval_ns), crate::source::fmt_samples(n))
    }

    fn jfr_settings(&self) -> Vec<(u64, &'static str, String)> {
        let interval = fmt_interval(self.interval_ns);
        let mut out = Vec::new();
        for id in [event_type::JAVA_MONITOR_ENTER, event_type::THREAD_PARK] {
            out.push((id, "enabled", "true".to_string()));
            // Not a threshold: waits are sampled by duration, and an event's
            // duration is the waiting time it stands for (docs/locks.md).
            out.push((id, "oxprof.interval", interval.clone()));
        }
        out
    }

    fn stop(&mut self, env: Option<(Jvmti, Jni)>) {
        self.sampler.stop();
        if let Some((jvmti, jni)) = env {
            for e in [JVMTI_EVENT_MONITOR_CONTENDED_ENTER, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED] {
                let _ = jvmti.set_event(false, e);
            }
            park::uninstall(jni);
        }
    }

    fn build(&self, cx: &BuildContext) -> Built {
        let st = self.sampler.stats();
        let mut profile = Profile::new(cx.rec.meta("Lock profile", "lock", "JVMTI monitor events + Unsafe.park", self.interval_ns, "ns"));
        let mut memo = FrameMemo::new(cx);
        let mut ids = Vec::new();
        let (mut samples, mut total) = (0, 0);
        if let Some(store) = self.sampler.stored() {
            for t in crate::sampling::interval::read(store, cx.close_interval) {
                samples += t.samples;
                total += t.total;
                ids.clear();
                cx.label_roots(&mut profile, t.labels, &mut ids);
                if cx.rec.config.threads && t.tid != 0 {
                    ids.push(profile.intern(cx.thread_root(t.tid)));
                }
                let (class, stack) = match t.frames.split_first() {
                    Some((c, rest)) if c.bci == MARK_LOCK_CLASS || c.bci == MARK_PARK_CLASS => (Some(c.method), rest),
                    _ => (None, &t.frames[..]),
                };
                for f in stack.iter().rev() {
                    ids.push(memo.id(&mut profile, cx, f));
                }
                if let Some(id) = class {
                    let class_frame = RawFrame { bci: MARK_LOCK_CLASS, method: id };
                    ids.push(memo.id_with(&mut profile, &class_frame, || Frame::new(self.sampler.class_name(id), FrameKind::Lock)));
                }
                // Sample counts read as waiting time in units of the
                // interval (1 ms at lock=0), as wall samples count ticks: a
                // recorded wait stands for more waits the shorter it was.
                let unit = if self.interval_ns > 0 { self.interval_ns } else { 1_000_000 };
                let n = ((t.total + unit / 2) / unit).max(u64::from(t.total > 0));
                profile.add(ids.clone(), n, t.total);
            }
        }
        let m = &mut profile.meta;
        m.extra.push(("samples".into(), samples.to_string()));
        m.extra.push(("mean interval".into(), fmt_interval(self.interval_ns)));
        m.extra.push(("contended monitor entries".into(), format!("{} seen, {} ms waited", st.seen[0], st.waited_ns[0] / 1_000_000)));
        if let Some(why) = &self.no_park {
            m.extra.push(("java.util.concurrent locks".into(), format!("not profiled: {why}")));
        }
        let summary_line = format!(
            "lock summary: samples={samples} estimated_ns={total} monitor_waits={} monitor_waited_ns={} monitor_recorded={} parks={} park_recorded={} record_ns={} park_lookup_ns={} park_hook={}",
            st.seen[0],
            st.waited_ns[0],
            st.recorded[0],
            st.seen[1],
            st.recorded[1],
            st.record_ns,
            st.park_lookup_ns,
            match (&self.no_park, park::hooked()) {
                (Some(_), _) => "unavailable",
                (None, true) => "bound",
                // Stopped: Unsafe.park is the JVM's own function again.
                (None, false) => "unbound",
            },
        );
        Built { label: "Locks".into(), key: "lock", profile, summary_line, leak: None }
    }
}
