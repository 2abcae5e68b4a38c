//! The flame graph page's data functions (`<script id="fg-lib">`), run in
//! Node on a page this crate wrote: one box per method by default, split by
//! frame type on request.

use std::process::Command;

use oxprof_profile::flamegraph::{write_html, HtmlOptions};
use oxprof_profile::{Frame, FrameKind, Meta, Profile};

/// Node script: reads the page on stdin, decodes its tree, merges it, and
/// prints each merged node (preorder) as `depth name value kinds`.
const DRIVER: &str = r#"
const fs = require('fs');
const vm = require('vm');
const page = fs.readFileSync(0, 'utf8');
const block = (id) => page.match(new RegExp('<script[^>]*id="' + id + '"[^>]*>([\\s\\S]*?)</script>'))[1];
const FG = vm.runInNewContext(block('fg-lib') + '; FG', {});
const cfg = JSON.parse(block('fg-config'));
const names = JSON.parse(block('fg-names'));
const kindOf = (f) => cfg.kinds.charCodeAt(f) - 97;
const split = FG.decodeTree(block('fg-tree').split('\n')[0], false);
const merged = FG.mergeByName(split, (f) => names[f], kindOf);
const out = [];
for (const [name, tr] of [['split', split], ['merged', merged]]) {
  out.push('# ' + name);
  for (let i = 0; i < tr.count; i++) {
    const kind = cfg.palette[kindOf(tr.frame[i])] ? cfg.palette[kindOf(tr.frame[i])].label : 'root';
    const mix = tr.mix && tr.mix[i]
      ? ' ' + Array.from(tr.mix[i]).sort((a, b) => b[1] - a[1]).map(([k, v]) => cfg.palette[k].label + '=' + v).join(',')
      : '';
    out.push(tr.depth[i] + ' ' + names[tr.frame[i]] + ' ' + tr.value[i] + ' ' + kind + mix);
  }
}
console.log(out.join('\n'));
"#;

fn frame(name: &str, kind: FrameKind) -> Frame {
    Frame::new(name.to_string(), kind)
}

#[test]
fn one_box_per_method_coloured_by_its_main_type() {
    let mut p = Profile::new(Meta { title: "CPU profile".into(), event: "cpu".into(), total_unit: "ns".into(), ..Meta::default() });
    let main = frame("Main.main", FrameKind::Interpreted);
    // Main.work: 60 samples JIT-compiled, 30 interpreted, 10 inlined, each
    // calling Main.hash in its own type; one other method beside.
    p.add_frames([main.clone(), frame("Main.work", FrameKind::Jit), frame("Main.hash", FrameKind::Jit)], 60, 60);
    p.add_frames([main.clone(), frame("Main.work", FrameKind::Interpreted), frame("Main.hash", FrameKind::Interpreted)], 30, 30);
    p.add_frames([main.clone(), frame("Main.work", FrameKind::Inlined)], 10, 10);
    p.add_frames([main.clone(), frame("Main.other", FrameKind::Jit)], 5, 5);
    let mut page = Vec::new();
    write_html(&p, &HtmlOptions::default(), &mut page).unwrap();
    let stdout = node(DRIVER, &[], &page);
    let section = |name: &str| -> Vec<String> {
        stdout.split(&format!("# {name}\n")).nth(1).unwrap().lines().take_while(|l| !l.starts_with('#')).map(str::to_string).collect()
    };
    let merged = section("merged");
    let (jit, interpreted, inlined) = ("JIT-compiled", "interpreted", "inlined");
    assert_eq!(
        merged,
        vec![
            "0 all 105 root".to_string(),
            format!("1 Main.main 105 {interpreted}"),
            format!("2 Main.other 5 {jit}"),
            format!("2 Main.work 100 {jit} {jit}=60,{interpreted}=30,{inlined}=10"),
            format!("3 Main.hash 90 {jit} {jit}=60,{interpreted}=30"),
        ],
        "{stdout}"
    );
    // Split: Main.work is three boxes, Main.hash two.
    let split = section("split");
    assert_eq!(split.iter().filter(|l| l.contains(" Main.work ")).count(), 3, "{stdout}");
    assert_eq!(split.iter().filter(|l| l.contains(" Main.hash ")).count(), 2, "{stdout}");
}

/// Node script: reads the page on stdin and prints, per line of
/// `name|room|java`, the label `FG.fitLabel` gives a box `room` characters
/// wide (one unit per character), and the Java kinds' letters of the page.
const FIT_DRIVER: &str = r#"
const fs = require('fs');
const vm = require('vm');
const page = fs.readFileSync(0, 'utf8');
const block = (id) => page.match(new RegExp('<script[^>]*id="' + id + '"[^>]*>([\\s\\S]*?)</script>'))[1];
const FG = vm.runInNewContext(block('fg-lib') + '; FG', {});
const cfg = JSON.parse(block('fg-config'));
const names = JSON.parse(block('fg-names'));
const cases = JSON.parse(process.argv[1]);
const out = cases.map(([name, room, java]) => FG.fitLabel(name, room, (s) => s.length, java));
const java = names.map((n, f) => n + '=' + (cfg.javaKinds || '').includes(cfg.kinds[f]));
console.log(JSON.stringify({ out, java }));
"#;

/// A Java method's box too narrow for its name drops the package first,
/// then the class, then cuts the method's name; other names are cut from
/// the right as before. The page marks which frames are Java methods.
#[test]
fn narrow_java_boxes_drop_the_package_before_the_method() {
    let mut p = Profile::new(Meta { event: "cpu".into(), total_unit: "ns".into(), ..Meta::default() });
    p.add_frames([frame("com.sun.tools.javac.comp.Attr.visitMethodDef", FrameKind::Jit), frame("JavaThread::run", FrameKind::Cpp)], 1, 1);
    let mut page = Vec::new();
    write_html(&p, &HtmlOptions::default(), &mut page).unwrap();
    let long = "com.sun.tools.javac.comp.Attr.visitMethodDef";
    let cases = serde_json_cases(&[
        (long, 44, true),
        (long, 43, true),
        (long, 19, true),
        (long, 18, true),
        (long, 15, true),
        (long, 14, true),
        (long, 8, true),
        (long, 2, true),
        ("a.b.C.m(Ljava/lang/String;)V", 6, true),
        ("libc.so.6", 5, true),
        (long, 20, false),
    ]);
    let stdout = node(FIT_DRIVER, &[&cases], &page);
    let expected = [
        long,
        "Attr.visitMethodDef",
        "Attr.visitMethodDef",
        "\u{2026}visitMethodDef",
        "\u{2026}visitMethodDef",
        "visitMethodDe\u{2026}",
        "visitMe\u{2026}",
        "",
        "C.m",
        "libc\u{2026}",
        "com.sun.tools.javac\u{2026}",
    ];
    let got = stdout.split("\"out\":[").nth(1).and_then(|r| r.split(']').next()).unwrap_or_default().to_string();
    let want = expected.iter().map(|e| format!("\"{e}\"")).collect::<Vec<_>>().join(",");
    assert_eq!(got, want, "{stdout}");
    assert!(stdout.contains("\"com.sun.tools.javac.comp.Attr.visitMethodDef=true\"") && stdout.contains("\"JavaThread::run=false\""), "{stdout}");
}

/// `[[name, room, java], ...]` as JSON (names without quotes or backslashes).
fn serde_json_cases(cases: &[(&str, u32, bool)]) -> String {
    let items: Vec<String> = cases.iter().map(|(n, r, j)| format!("[\"{n}\",{r},{j}]")).collect();
    format!("[{}]", items.join(","))
}

/// Runs `driver` in Node.js with `args`, the page on its standard input;
/// its standard output, once it has succeeded.
fn node(driver: &str, args: &[&str], page: &[u8]) -> String {
    use std::io::Write;
    let node = std::env::var_os("NODE").unwrap_or_else(|| "node".into());
    let mut child = Command::new(&node)
        .arg("-e")
        .arg(driver)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {node:?} (Node.js; scripts/test.sh installs it): {e}"));
    child.stdin.take().unwrap().write_all(page).unwrap();
    let o = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&o.stderr));
    stdout
}

/// Node script: the shading of a differential page's boxes, `name shade`
/// per node (preorder, merged by name as the page shows them).
const DIFF_DRIVER: &str = r#"
const fs = require('fs');
const vm = require('vm');
const page = fs.readFileSync(0, 'utf8');
const block = (id) => page.match(new RegExp('<script[^>]*id="' + id + '"[^>]*>([\\s\\S]*?)</script>'))[1];
const FG = vm.runInNewContext(block('fg-lib') + '; FG', {});
const cfg = JSON.parse(block('fg-config'));
const names = JSON.parse(block('fg-names'));
const kindOf = (f) => cfg.kinds.charCodeAt(f) - 97;
const tree = FG.mergeByName(FG.decodeTree(block('fg-tree').split('\n')[0], true), (f) => names[f], kindOf);
const shades = FG.diffShades(tree);
const out = [];
for (let i = 0; i < tree.count; i++) out.push(names[tree.frame[i]] + ' ' + shades[i]);
console.log(out.join('\n'));
"#;

/// A differential page shades a box by its change in share against the
/// largest change on the page: the method whose share doubled and the one
/// whose share fell are the darkest red and blue; a new stack of one sample
/// stays pale (shaded by its change relative to its own size, it was as red
/// as the regression).
#[test]
fn diff_shading_follows_the_change_in_share() {
    let profile = |stacks: &[(&[&str], u64)]| {
        let mut p = Profile::new(Meta::default());
        for (frames, n) in stacks {
            p.add_frames(frames.iter().map(|f| frame(f, FrameKind::Jit)), *n, *n);
        }
        p
    };
    let before = profile(&[(&["main", "stable"], 500), (&["main", "slow"], 100)]);
    let after = profile(&[(&["main", "stable"], 500), (&["main", "slow"], 300), (&["main", "noise"], 1)]);
    let mut page = Vec::new();
    oxprof_profile::flamegraph::write_html_diff(&before, &after, oxprof_profile::Counter::Samples, &HtmlOptions::default(), &mut page).unwrap();
    let out = node(DIFF_DRIVER, &[], &page);
    let shade =
        |name: &str| -> f64 { out.lines().find_map(|l| l.strip_prefix(&format!("{name} "))).unwrap_or_else(|| panic!("no {name} in\n{out}")).parse().unwrap() };
    assert!(shade("slow") > 0.9, "{out}");
    assert!(shade("stable") < -0.9, "{out}");
    assert!(shade("noise") > 0.0 && shade("noise") < 0.05, "{out}");
    assert!(shade("main").abs() < 1e-9, "{out}");
}
