//! Context labels: key/value pairs an application puts on its threads
//! (`OxProfiler.context("endpoint", "GET /orders")`, see `docs/labels.md`)
//! that every sample taken meanwhile carries. This module owns their
//! limits (the agent enforces them; the Java side repeats them), how they
//! appear in a profile (one root frame `[key=value]` of kind
//! [`FrameKind::Label`] per label, outermost first, before any thread-state
//! or thread frame), and the selections `convert`, `report` and `diff` make
//! with them (`--label key=value`, `--by key`).

use std::collections::HashMap;

use crate::model::{Frame, FrameKind, Profile, Sample};

/// Distinct label sets the agent names in one JVM (set 0 is "no labels").
/// A set first seen when this many exist is recorded as the over-limit set
/// ([`OVER_LIMIT`]): memory stays bounded whatever the application does.
pub const MAX_SETS: usize = 4096;
/// Labels in one set (a context's own and those it inherits); beyond, the
/// innermost ones are dropped and the set carries [`TOO_MANY`].
pub const MAX_LABELS: usize = 8;
/// Longest key, in characters; keys are 1 to 64 of `A-Z a-z 0-9 _ . : / -`.
pub const MAX_KEY_CHARS: usize = 64;
/// Longest value, in characters (Unicode code points); a longer one keeps
/// its first 256 followed by [`TRUNCATED`].
pub const MAX_VALUE_CHARS: usize = 256;
/// Ends a value that was cut at [`MAX_VALUE_CHARS`].
pub const TRUNCATED: char = '…';
/// The key of the labels oxprof adds itself (not accepted from applications).
pub const RESERVED_KEY: &str = "oxprof";
/// `oxprof=labels over limit`: the set of samples whose label set came
/// after [`MAX_SETS`] others.
pub const OVER_LIMIT: &str = "labels over limit";
/// `oxprof=too many labels`: added to a set that had more than [`MAX_LABELS`].
pub const TOO_MANY: &str = "too many labels";
/// The value `--by KEY` shows for samples without that key.
pub const NO_VALUE: &str = "(none)";

/// One label.
pub type Label = (String, String);

/// Whether `key` is a valid label key (1 to 64 of `A-Z a-z 0-9 _ . : / -`).
pub fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_CHARS && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:/-".contains(&b))
}

/// `value` cut to [`MAX_VALUE_CHARS`] characters, visibly ([`TRUNCATED`]).
pub fn bounded_value(value: &str) -> String {
    match value.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => {
            let mut v = value[..at].to_string();
            v.push(TRUNCATED);
            v
        }
        None => value.to_string(),
    }
}

/// The set of labels `inner` makes inside a context labelled `outer`:
/// `outer`'s, with the values of keys `inner` names again replaced in
/// place, then `inner`'s new keys; at most [`MAX_LABELS`] (the innermost
/// dropped, and [`TOO_MANY`] said).
pub fn merge(outer: &[Label], inner: &[Label]) -> Vec<Label> {
    let mut out: Vec<Label> = outer.to_vec();
    let mut dropped = false;
    for (k, v) in inner {
        if let Some(slot) = out.iter_mut().find(|(ok, _)| ok == k) {
            slot.1 = v.clone();
        } else if out.len() < MAX_LABELS {
            out.push((k.clone(), v.clone()));
        } else {
            dropped = true;
        }
    }
    if dropped {
        out.truncate(MAX_LABELS - 1);
        out.push((RESERVED_KEY.into(), TOO_MANY.into()));
    }
    out
}

/// A label set as one text, as JFR recordings carry it: `key=value`
/// pairs joined by `, `, with `\\` and `,` in values written `\\\\` and
/// `\\,` (keys hold neither).
pub fn encode_set(set: &[Label]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in set.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(k);
        out.push('=');
        for c in v.chars() {
            if c == '\\' || c == ',' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

/// The label set [`encode_set`] wrote.
pub fn decode_set(text: &str) -> Vec<Label> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while !chars.as_str().is_empty() {
        let rest = chars.as_str();
        let Some((key, _)) = rest.split_once('=') else { break };
        chars = rest[key.len() + 1..].chars();
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => value.extend(chars.next()),
                ',' => {
                    chars.next(); // the space after it
                    break;
                }
                c => value.push(c),
            }
        }
        out.push((key.to_string(), value));
    }
    out
}

/// The label's frame: `[key=value]`, kind [`FrameKind::Label`].
pub fn frame(key: &str, value: &str) -> Frame {
    Frame::new(format!("[{key}={value}]"), FrameKind::Label)
}

/// The frames of a label set, outermost first.
pub fn frames(set: &[Label]) -> impl Iterator<Item = Frame> + '_ {
    set.iter().map(|(k, v)| frame(k, v))
}

/// The key and value a label frame's name (`[key=value]`) stands for; `None`
/// when it is none (the key must be valid).
pub fn parse_frame(name: &str) -> Option<(&str, &str)> {
    let (k, v) = name.strip_prefix('[')?.strip_suffix(']')?.split_once('=')?;
    valid_key(k).then_some((k, v))
}

/// The labels of a sample (its label frames), outermost first.
pub fn of_sample<'p, 's>(p: &'p Profile, s: &'s Sample) -> impl Iterator<Item = (&'p str, &'p str)> + use<'p, 's> {
    s.stack.iter().map(|&f| p.frame(f)).filter(|f| f.kind == FrameKind::Label).filter_map(|f| parse_frame(&f.name))
}

/// The value of `key` in a sample's labels.
pub fn value_of<'p>(p: &'p Profile, s: &Sample, key: &str) -> Option<&'p str> {
    of_sample(p, s).find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// Whether the profile has any label frame.
pub fn any(p: &Profile) -> bool {
    p.frames().iter().any(|f| f.kind == FrameKind::Label)
}

/// A `--label` argument: `key=value` (the value may be empty, and may hold
/// `=`); the error names what is accepted.
pub fn parse_selector(s: &str) -> Result<Label, String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("'{s}' is not KEY=VALUE (for example endpoint=\"GET /orders\")"))?;
    if !valid_key(k) {
        return Err(format!("'{k}' is not a label key: 1 to {MAX_KEY_CHARS} of A-Z a-z 0-9 _ . : / -"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Keeps the samples whose labels match every key given; a key given more
/// than once matches any of its values.
pub fn retain(p: &mut Profile, wanted: &[Label]) {
    if wanted.is_empty() {
        return;
    }
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for (k, v) in wanted {
        by_key.entry(k).or_default().push(v);
    }
    p.retain(|p, s| by_key.iter().all(|(k, values)| value_of(p, s, k).is_some_and(|v| values.contains(&v))));
}

/// The profile without its label frames.
pub fn without(p: &Profile) -> Profile {
    if !any(p) {
        return p.clone();
    }
    rebuild(p, |_, _, stack| stack.retain(|f| f.kind != FrameKind::Label))
}

/// The profile grouped by `key`: each stack starts with the frame of its
/// value of `key` (`[key=(none)]` without one), and its other label frames
/// are dropped.
pub fn grouped_by(p: &Profile, key: &str) -> Profile {
    rebuild(p, |p, s, stack| {
        stack.retain(|f| f.kind != FrameKind::Label);
        stack.insert(0, frame(key, value_of(p, s, key).unwrap_or(NO_VALUE)));
    })
}

fn rebuild(p: &Profile, edit: impl Fn(&Profile, &Sample, &mut Vec<Frame>)) -> Profile {
    let mut out = Profile::new(p.meta.clone());
    out.safepoints = p.safepoints.clone();
    for s in p.samples() {
        let mut stack: Vec<Frame> = s.stack.iter().map(|&f| p.frame(f).clone()).collect();
        edit(p, s, &mut stack);
        out.add_frames(stack, s.samples, s.total);
    }
    out
}

/// Per value of `key` (`None`: samples without it): samples and total,
/// largest total first.
pub fn by_value(p: &Profile, key: &str) -> Vec<(Option<String>, u64, u64)> {
    let mut sums: HashMap<Option<&str>, (u64, u64)> = HashMap::new();
    for s in p.samples() {
        let e = sums.entry(value_of(p, s, key)).or_default();
        e.0 += s.samples;
        e.1 += s.total;
    }
    let mut rows: Vec<(Option<String>, u64, u64)> = sums.into_iter().map(|(v, (n, t))| (v.map(str::to_string), n, t)).collect();
    rows.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Counter, Meta};

    fn l(k: &str, v: &str) -> Label {
        (k.into(), v.into())
    }

    #[test]
    fn keys_values_and_frames() {
        assert!(valid_key("endpoint") && valid_key("http.route") && valid_key("a:b/c-d_e"));
        assert!(!valid_key("") && !valid_key("a b") && !valid_key("a=b") && !valid_key(&"k".repeat(65)) && !valid_key("é"));
        let f = frame("endpoint", "GET /orders=x;y");
        assert_eq!((f.name.as_str(), f.kind), ("[endpoint=GET /orders=x;y]", FrameKind::Label));
        assert_eq!(parse_frame(&f.name), Some(("endpoint", "GET /orders=x;y")));
        assert_eq!(parse_frame("[main tid=12]"), None);
        assert_eq!(parse_frame("[sleeping]"), None);
        assert_eq!(parse_frame("[k=]"), Some(("k", "")));
        let long: String = "é".repeat(300);
        let b = bounded_value(&long);
        assert_eq!(b.chars().count(), MAX_VALUE_CHARS + 1);
        assert!(b.ends_with(TRUNCATED));
        assert_eq!(bounded_value(&b), b, "bounding twice changes nothing");
        assert_eq!(bounded_value("short"), "short");
    }

    #[test]
    fn sets_encode_as_text_and_back() {
        let sets = [vec![], vec![l("endpoint", "GET /a, b=c\\d\\,"), l("k", "")], vec![l("a", ","), l("b", "\u{1F600} \n")]];
        for set in sets {
            assert_eq!(decode_set(&encode_set(&set)), set);
        }
        assert_eq!(encode_set(&[l("endpoint", "GET /a"), l("tenant", "t1")]), "endpoint=GET /a, tenant=t1");
    }

    #[test]
    fn merging_keeps_order_overrides_and_bounds() {
        let outer = [l("endpoint", "GET /a"), l("tenant", "t1")];
        assert_eq!(merge(&outer, &[l("tenant", "t2"), l("step", "db")]), [l("endpoint", "GET /a"), l("tenant", "t2"), l("step", "db")]);
        let many: Vec<Label> = (0..10).map(|i| l(&format!("k{i}"), "v")).collect();
        let m = merge(&[], &many);
        assert_eq!(m.len(), MAX_LABELS);
        assert_eq!(m.last(), Some(&l(RESERVED_KEY, TOO_MANY)));
        assert_eq!(m[0], l("k0", "v"));
    }

    #[test]
    fn selections() {
        let mut p = Profile::new(Meta::default());
        let main = Frame::new("Main.run", FrameKind::Jit);
        p.add_frames([frame("endpoint", "GET /a"), frame("tenant", "t1"), main.clone()], 3, 30);
        p.add_frames([frame("endpoint", "GET /b"), main.clone()], 2, 50);
        p.add_frames([main.clone()], 1, 10);
        assert_eq!(by_value(&p, "endpoint"), vec![(Some("GET /b".into()), 2, 50), (Some("GET /a".into()), 3, 30), (None, 1, 10)]);
        let g = grouped_by(&p, "tenant");
        assert_eq!(g.frame(g.samples()[0].stack[0]).name, "[tenant=t1]");
        assert_eq!(g.frame(g.samples()[1].stack[0]).name, "[tenant=(none)]");
        assert_eq!(g.samples()[1].samples, 3, "the unlabelled and GET /b samples merge under (none)");
        assert_eq!(without(&p).samples().len(), 1);
        let mut q = p.clone();
        retain(&mut q, &[l("endpoint", "GET /a")]);
        assert_eq!(q.sum(Counter::Samples), 3);
        let mut q = p.clone();
        retain(&mut q, &[l("endpoint", "GET /a"), l("endpoint", "GET /b")]);
        assert_eq!(q.sum(Counter::Samples), 5);
        let mut q = p.clone();
        retain(&mut q, &[l("endpoint", "GET /b"), l("tenant", "t1")]);
        assert_eq!(q.sum(Counter::Samples), 0);
        assert_eq!(parse_selector("endpoint=GET /a=b"), Ok(l("endpoint", "GET /a=b")));
        assert!(parse_selector("nokey").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_selector("a b=c").unwrap_err().contains("not a label key"));
    }
}
