//! Stacks deeper than `jstackdepth`: cut, and marked so at their root (they
//! must never pass for whole stacks rooted mid-recursion).

mod common;

use common::*;

/// Samples of `DeepStack.down` (in the leaf-first frames of `stacks`) by
/// their root frame.
fn roots(stacks: &[(Vec<String>, u64)]) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for (frames, n) in stacks {
        if frames.iter().any(|f| f.starts_with("DeepStack.down")) {
            *m.entry(frames.first().cloned().unwrap_or_default()).or_default() += n;
        }
    }
    m
}

#[test]
fn stacks_cut_at_the_depth_limit_are_marked_truncated() {
    let s = Scratch::new("deep-stacks");
    compile(&s.0, &["DeepStack.java"]);
    let out = s.path("deep.collapsed");
    let o = run_java(&s.0, &format!("start,event=cpu,interval=5ms,jstackdepth=64,file={}", out.display()), &[], &s.0, &["DeepStack", "300"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stacks = read_collapsed(&out);
    let r = roots(&stacks);
    let all: u64 = r.values().sum();
    assert!(all >= 100, "too few samples of down: {r:?}");
    // A sample taken while the recursion was still shallow (going down or
    // coming back) fits in 64 frames and is whole; every other is marked.
    for (frames, _) in stacks.iter().filter(|(f, _)| f.iter().any(|x| x.starts_with("DeepStack.down")) && f[0] != "[truncated]") {
        assert!(frames.len() < 64, "a stack of {} frames not marked cut: {:?}", frames.len(), &frames[..3]);
    }
    assert!(r.get("[truncated]").copied().unwrap_or(0) * 100 >= all * 95, "stacks of a 300-deep recursion cut at 64 frames are marked: {r:?}");
    let f = summary(&text(&o.stderr));
    assert!(f["failed"].parse::<u64>().unwrap() >= all * 9 / 10, "cut stacks count as failed walks: {f:?}");

    // Within the limit: whole, rooted at main.
    let o = run_java(&s.0, &format!("start,event=cpu,interval=5ms,jstackdepth=400,file={}", out.display()), &[], &s.0, &["DeepStack", "300"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let r = roots(&read_collapsed(&out));
    let all: u64 = r.values().sum();
    assert!(all >= 100, "too few samples of down: {r:?}");
    assert!(r.get("DeepStack.main").copied().unwrap_or(0) * 100 >= all * 99, "stacks within the limit are whole: {r:?}");
}

#[test]
fn cut_stacks_are_flagged_truncated_in_jfr() {
    let s = Scratch::new("deep-stacks-jfr");
    compile(&s.0, &["DeepStack.java"]);
    let rec = s.path("deep.jfr");
    let o = run_java(&s.0, &format!("start,event=cpu,interval=5ms,jstackdepth=64,file={}", rec.display()), &[], &s.0, &["DeepStack", "300"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p =
        std::process::Command::new(tool("jfr")).args(["print", "--json", "--events", "jdk.ExecutionSample", "--stack-depth", "1"]).arg(&rec).output().unwrap();
    assert!(p.status.success(), "{}", text(&p.stderr));
    let out = text(&p.stdout);
    let cut = out.matches("\"truncated\": true").count();
    let whole = out.matches("\"truncated\": false").count();
    assert!(cut >= 100, "samples of the 300-deep recursion flagged truncated: {cut} (not flagged: {whole})");
    assert!(whole * 10 <= cut, "most samples are in the recursion: {cut} flagged, {whole} not");
}
