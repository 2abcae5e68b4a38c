//! Line numbers in JFR output for methods of classes that can unload (a
//! class loader of the application's own, as web applications and plugins
//! have): asked of the JVM while the class is held loaded.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Lines of `LoaderLinesWork.spin`'s body in the source.
fn spin_lines() -> std::ops::RangeInclusive<i64> {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/LoaderLinesWork.java")).unwrap();
    let at = |needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() as i64 + 1;
    at("static double spin")..=at("return x;")
}

#[test]
fn methods_of_classes_from_other_loaders_keep_their_lines() {
    let s = Scratch::new("jfr-loader-lines");
    let classes = s.path("classes");
    compile(&classes, &["LoaderLines.java", "LoaderLinesWork.java"]);
    // Out of the application class path: only LoaderLines' own loader finds it.
    let plugin = s.path("plugin");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::rename(classes.join("LoaderLinesWork.class"), plugin.join("LoaderLinesWork.class")).unwrap();
    let rec = s.path("rec.jfr");
    let o = run_java(&s.0, &format!("start,event=cpu,interval=2ms,file={}", rec.display()), &[], &classes, &["LoaderLines", plugin.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let p = Command::new(tool("jfr")).args(["print", "--events", "jdk.ExecutionSample", "--stack-depth", "2"]).arg(&rec).output().unwrap();
    assert!(p.status.success(), "{}", text(&p.stderr));
    let out = text(&p.stdout);
    let (mut with_line, mut without) = (0, 0);
    for l in out.lines().filter(|l| l.contains("LoaderLinesWork.spin(")) {
        match l.split("line: ").nth(1).and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse::<i64>().ok()) {
            Some(n) => {
                assert!(spin_lines().contains(&n), "line {n} is not in spin's body {:?}: {l}", spin_lines());
                with_line += 1;
            }
            None => without += 1,
        }
    }
    assert!(with_line >= 50, "only {with_line} samples of spin with a line ({without} without):\n{}", &out[..out.len().min(3000)]);
    assert_eq!(without, 0, "frames of spin without a line");
}
