//! Collapsed stacks (Brendan Gregg's "folded" format): one line per distinct
//! stack, frames root first separated by `;`, then a space and the count.
//! Frame names lose the format's separators (`;` becomes `:`, line breaks
//! and tabs spaces) and other control characters (escaped as `\xNN`, so
//! that the file stays text); context labels are the leading
//! `[key=value]` frames, then the thread state, then the thread
//! (`[name tid=N]`, async-profiler's `[tid=N]` too). Reading skips `#`
//! comment lines and a byte-order mark, and gives Java names as
//! [`crate::names`] does.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::model::{Counter, Frame, FrameKind, Meta, Profile};

/// Options for the collapsed writer.
#[derive(Clone, Copy, Debug, Default)]
pub struct CollapsedOptions {
    pub counter: Counter,
    /// Append async-profiler's frame-type suffixes (`_[j]`, `_[i]`, ...).
    /// Kernel frames always carry `_[k]`, as in async-profiler's output.
    pub annotate: bool,
}

/// Writes the profile as collapsed stacks. Stacks with a zero count are
/// skipped. Stacks that print the same (frames that differ only in their
/// kind, without annotations) are merged into one line, in first-seen order.
pub fn write<W: Write>(profile: &Profile, opts: CollapsedOptions, mut out: W) -> io::Result<()> {
    // Each frame's printed form, once: stacks are then merged by the ids of
    // their printed frames, and each distinct line is built once, at the end
    // (on a deep-stacked profile this is several times faster than building
    // and hashing every line as text).
    let mut names: Vec<String> = Vec::new();
    let mut name_ids: HashMap<String, u32> = HashMap::new();
    let printed: Vec<u32> = profile
        .frames()
        .iter()
        .map(|frame| {
            let mut name = String::with_capacity(frame.name.len() + 4);
            push_sanitized(&mut name, &frame.name);
            if opts.annotate || frame.kind == FrameKind::Kernel {
                name.push_str(frame.kind.annotation());
            }
            *name_ids.entry(name).or_insert_with_key(|name| {
                names.push(name.clone());
                (names.len() - 1) as u32
            })
        })
        .collect();
    let mut lines: Vec<(Vec<u32>, u64)> = Vec::new();
    let mut index: HashMap<Vec<u32>, usize> = HashMap::new();
    let mut key: Vec<u32> = Vec::new();
    for sample in profile.samples() {
        let value = Profile::value(sample, opts.counter);
        if value == 0 {
            continue;
        }
        key.clear();
        key.extend(sample.stack.iter().map(|&id| printed.get(id as usize).copied().unwrap_or(0)));
        match index.get(&key) {
            Some(&i) => lines[i].1 = lines[i].1.saturating_add(value),
            None => {
                index.insert(key.clone(), lines.len());
                lines.push((key.clone(), value));
            }
        }
    }
    let mut line = String::new();
    for (ids, value) in &lines {
        line.clear();
        for (i, &id) in ids.iter().enumerate() {
            if i > 0 {
                line.push(';');
            }
            line.push_str(names.get(id as usize).map_or("", String::as_str));
        }
        writeln!(out, "{line} {value}")?;
    }
    out.flush()
}

/// Reads collapsed stacks (`a;b;c 12` lines; async-profiler's frame-type
/// suffixes become frame kinds). Counts become both counters.
pub fn read(text: &str, meta: Meta) -> Result<Profile, String> {
    let mut p = Profile::new(meta);
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // A tab before the count, as some tools write it, reads as a space.
        let (stack, count) = line.rsplit_once([' ', '\t']).ok_or_else(|| format!("line {}: expected 'frame;frame count'", i + 1))?;
        let count: u64 = count.parse().map_err(|_| {
            // Quoted and cut short: the line may hold anything, control characters too.
            let shown: String = count.chars().take(40).collect();
            format!("line {}: {shown:?} is not a count", i + 1)
        })?;
        // Context labels (`[endpoint=GET /orders]`) lead the stack, then
        // the thread state, then the thread: the roots the agent writes
        // (async-profiler's thread roots lead its stacks).
        let mut roots = Roots::Labels;
        let frames = stack.split(';').map(|name| {
            if roots == Roots::Labels {
                if is_thread_root(name) {
                    roots = Roots::Done;
                    return Frame::new(name, FrameKind::Thread);
                }
                if crate::labels::parse_frame(name).is_some() {
                    return Frame::new(name, FrameKind::Label);
                }
                roots = Roots::State;
            }
            // A root `[sleeping]` is a thread-state frame (agent option `state`).
            if roots == Roots::State {
                roots = Roots::Thread;
                if crate::state::ThreadState::from_frame_name(name).is_some() {
                    return Frame::new(name, FrameKind::State);
                }
            }
            if std::mem::replace(&mut roots, Roots::Done) == Roots::Thread && is_thread_root(name) {
                return Frame::new(name, FrameKind::Thread);
            }
            for kind in [FrameKind::Interpreted, FrameKind::Jit, FrameKind::Inlined, FrameKind::Kernel, FrameKind::Alloc] {
                if let Some(base) = name.strip_suffix(kind.annotation()) {
                    return match kind {
                        FrameKind::Kernel => Frame::new(base, kind),
                        FrameKind::Alloc => Frame::new(crate::names::class(base), kind),
                        _ => Frame::new(crate::names::method(base), kind),
                    };
                }
            }
            Frame::new(crate::names::method(name), FrameKind::Java)
        });
        p.add_frames(frames, count, count);
    }
    Ok(p)
}

/// Where reading a stack is among its root frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Roots {
    Labels,
    State,
    Thread,
    Done,
}

/// A thread root: the agent's and async-profiler's `[name tid=N]`, or
/// async-profiler's `[tid=N]` for a thread without a name.
fn is_thread_root(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.strip_prefix("[tid=").and_then(|t| t.strip_suffix(']')).is_some_and(digits)
        || (name.starts_with('[') && name.ends_with(']') && crate::model::thread_of_root(name).1.is_some())
}

/// Frame names must not contain the separators of the format (`;`, line
/// breaks) nor control characters, which make tools take the file for
/// binary: tabs become spaces, the others `\xNN` (`\u{NN}` above ASCII).
fn push_sanitized(line: &mut String, name: &str) {
    if !name.contains(|c: char| c == ';' || c.is_control()) {
        line.push_str(name);
        return;
    }
    for c in name.chars() {
        match c {
            ';' => line.push(':'),
            '\n' | '\r' | '\t' => line.push(' '),
            c if c.is_ascii_control() => line.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => line.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => line.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, Meta};

    #[test]
    fn writes_root_first_with_counts() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([Frame::new("Main.main", FrameKind::Interpreted), Frame::new("Main.hot", FrameKind::Jit)], 7, 70);
        p.add_frames([Frame::new("odd;name", FrameKind::Error)], 1, 0);
        let mut out = Vec::new();
        write(&p, CollapsedOptions::default(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "Main.main;Main.hot 7\nodd:name 1\n");

        let mut out = Vec::new();
        write(&p, CollapsedOptions { counter: Counter::Total, annotate: true }, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "Main.main_[0];Main.hot_[j] 70\n");

        let back = read("Main.main_[0];Main.hot_[j] 70\nMain.main_[0] 5\n", Meta::default()).unwrap();
        assert_eq!(back.sum(Counter::Samples), 75);
        assert_eq!(back.frames()[1], Frame::new("Main.hot", FrameKind::Jit));
        assert!(read("no count here", Meta::default()).unwrap_err().contains("line 1"));
    }

    /// Review finding (collapsed_read, pprof_read, jfr_read): counts from a
    /// file were summed unchecked when stacks merge (reading, writing
    /// collapsed stacks, pprof, flame graphs): a panic with overflow checks,
    /// wrapped totals (negative in pprof) otherwise. They saturate.
    #[test]
    fn counts_saturate() {
        let p = read("a;b 18446744073709551615\na;b 5\na;b_[j] 7\n", Meta::default()).unwrap();
        assert_eq!(p.samples()[0].samples, u64::MAX);
        assert_eq!((p.sum(Counter::Samples), p.sum(Counter::Total), p.samples_with_kind(FrameKind::Java)), (u64::MAX, u64::MAX, u64::MAX));
        let mut out = Vec::new();
        write(&p, CollapsedOptions::default(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a;b 18446744073709551615\n");
        // Counts only: one pprof value, the count.
        let m = crate::pprof::encode(&p);
        assert_eq!(m.sample[0].value, [i64::MAX]);
    }

    /// Fuzzing finding (collapsed_read): a carriage return in the count
    /// made the error two lines on a terminal; a long line made it as long.
    #[test]
    fn errors_quote_what_is_not_a_count() {
        let e = read("Tiny.loc\r\r;Main.main 1\r2\n", Meta::default()).unwrap_err();
        assert_eq!(e, r#"line 1: "1\r2" is not a count"#);
        let e = read(&format!("a {}\n", "x".repeat(10_000)), Meta::default()).unwrap_err();
        assert_eq!(e, format!("line 1: {:?} is not a count", "x".repeat(40)));
    }

    #[test]
    fn label_frames_lead_and_read_back() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([crate::labels::frame("endpoint", "GET /a;b"), Frame::new("[sleeping]", FrameKind::State), Frame::new("Main.nap", FrameKind::Jit)], 2, 0);
        let mut out = Vec::new();
        write(&p, CollapsedOptions::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "[endpoint=GET /a:b];[sleeping];Main.nap 2\n");
        let back = read(&text, Meta::default()).unwrap();
        let kinds: Vec<FrameKind> = back.frames().iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FrameKind::Label, FrameKind::State, FrameKind::Java]);
        // Not at the root, a bracketed name is no label.
        let back = read("Main.run;[k=v] 1\n", Meta::default()).unwrap();
        assert_eq!(back.frames()[1].kind, FrameKind::Java);
    }

    /// Tester's findings: a `# comment` line was refused, a byte-order
    /// mark stayed in the first frame's name, async-profiler's thread roots
    /// (`[tid=125]`) were read as context labels (and the agent's
    /// `[main tid=123]` as a Java frame), and Java names kept
    /// async-profiler's slashes and per-run class suffixes.
    #[test]
    fn comments_bom_thread_roots_and_java_names() {
        let text = "\u{feff}# async-profiler 4.1, cpu\n\
            [main tid=123];Main.main;Main.work 5\n\
            [tid=125];java/lang/Thread.run_[j];Truth$$Lambda$14.0x00007f41bc000a08.run;clock_gettime@@GLIBC_2.17;do_syscall_64_[k] 2\n\
            [endpoint=GET /x];[running];[worker-1 tid=124];A.b 1\n\
            [tid=x];java/lang/String_[a] 1\n";
        let p = read(text, Meta::default()).unwrap();
        assert_eq!(read("main;x\t7\n", Meta::default()).unwrap().sum(Counter::Samples), 7);
        let lines: Vec<String> =
            p.samples().iter().map(|s| s.stack.iter().map(|&f| format!("{}:{:?}", p.frame(f).name, p.frame(f).kind)).collect::<Vec<_>>().join(";")).collect();
        assert_eq!(
            lines,
            [
                "[main tid=123]:Thread;Main.main:Java;Main.work:Java",
                "[tid=125]:Thread;java.lang.Thread.run:Jit;Truth$$Lambda.run:Java;clock_gettime@@GLIBC_2.17:Java;do_syscall_64:Kernel",
                "[endpoint=GET /x]:Label;[running]:State;[worker-1 tid=124]:Thread;A.b:Java",
                "[tid=x]:Label;java.lang.String:Alloc",
            ]
        );
        assert!(!crate::labels::of_sample(&p, &p.samples()[1]).any(|(k, _)| k == "tid"));
    }

    /// Tester's finding: tabs and NULs in label values and frame names were
    /// written raw (`[v=tab^Ihere^@nul]`), so grep took the file for binary.
    #[test]
    fn control_characters_are_not_written_raw() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([crate::labels::frame("v", "tab\there\0nul\u{1b}[0m"), Frame::new("odd\u{85}name\u{7f}", FrameKind::Jit)], 1, 0);
        let mut out = Vec::new();
        write(&p, CollapsedOptions::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "[v=tab here\\x00nul\\x1b[0m];odd\\u{85}name\\x7f 1\n");
        assert!(!text.trim_end().contains(|c: char| c.is_control()));
    }

    #[test]
    fn kernel_frames_are_always_marked() {
        let mut p = Profile::new(Meta::default());
        p.add_frames(
            [Frame::new("FileDispatcherImpl.force0", FrameKind::Native), Frame::new("fsync", FrameKind::Native), Frame::new("do_fsync", FrameKind::Kernel)],
            2,
            0,
        );
        let mut out = Vec::new();
        write(&p, CollapsedOptions::default(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "FileDispatcherImpl.force0;fsync;do_fsync_[k] 2\n");
    }

    #[test]
    fn stacks_differing_only_in_kind_merge_without_annotations() {
        let mut p = Profile::new(Meta::default());
        p.add_frames([Frame::new("Main.main", FrameKind::Interpreted), Frame::new("Main.hot", FrameKind::Jit)], 3, 30);
        p.add_frames([Frame::new("Main.main", FrameKind::Interpreted), Frame::new("Main.hot", FrameKind::Java)], 2, 20);
        let mut plain = Vec::new();
        write(&p, CollapsedOptions { counter: Counter::Samples, annotate: false }, &mut plain).unwrap();
        assert_eq!(String::from_utf8(plain).unwrap(), "Main.main;Main.hot 5\n");
        let mut annotated = Vec::new();
        write(&p, CollapsedOptions { counter: Counter::Samples, annotate: true }, &mut annotated).unwrap();
        assert_eq!(String::from_utf8(annotated).unwrap(), "Main.main_[0];Main.hot_[j] 3\nMain.main_[0];Main.hot 2\n");
    }
}
