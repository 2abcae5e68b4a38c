//! Java class and method names as every reader (JFR, OTLP, collapsed
//! stacks) gives them, so that profiles of two runs, or of two profilers,
//! name the same code alike: a hidden or VM-anonymous class loses its
//! per-run suffix as the agent drops it (`Foo$$Lambda$14+0x…`, `/0x…`,
//! `.0x…`, JDK 11's `/1525262377` identity hash, and the identity hash the
//! JDK's JFR appends after the address), and async-profiler's slashed
//! class names (`java/lang/Thread.run`) become dotted. Names that do not
//! look like Java (native and C++ functions, kernel symbols, file paths)
//! are left as they are.

use std::borrow::Cow;

/// One per-run suffix at the end of a class name: an address (`+0x…`,
/// `/0x…`, `.0x…`) or an identity hash (`/123`, `.123`). No part of a Java
/// name is all digits or starts with `0x` after a separator.
fn strip_once(name: &str) -> Option<&str> {
    if let Some(pos) = name.rfind("0x") {
        let hex = &name[pos + 2..];
        if pos > 0 && matches!(name.as_bytes()[pos - 1], b'.' | b'+' | b'/') && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(&name[..pos - 1]);
        }
    }
    let at = name.rfind(['.', '/'])?;
    let (head, tail) = (&name[..at], &name[at + 1..]);
    (!head.is_empty() && !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit())).then_some(head)
}

/// `Foo$$Lambda$14` → `Foo$$Lambda`: the counter before JDK 21 numbers
/// lambda classes in the order the JVM spun them, which changes from run to
/// run of the same code (JDK 21 dropped it). The lambda's body, the next
/// frame (`Foo.lambda$main$0`), tells lambdas apart.
pub fn without_lambda_counter(name: &str) -> &str {
    match name.rsplit_once("$$Lambda$") {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => &name[..head.len() + "$$Lambda".len()],
        _ => name,
    }
}

/// A class name (dotted or slashed, `[]` array suffixes allowed) without
/// its hidden-class suffixes and lambda counter, dotted: `Foo$$Lambda$97+0x00007f2e04007a08.510854293`
/// → `Foo$$Lambda`, `java/lang/String` → `java.lang.String`. Anything
/// that is not a class name comes back unchanged.
pub fn class(name: &str) -> Cow<'_, str> {
    if !is_class_name(name) {
        return Cow::Borrowed(name);
    }
    let dims = name.len() - name.trim_end_matches("[]").len();
    let (base, arrays) = name.split_at(name.len() - dims);
    let mut base = base;
    while let Some(shorter) = strip_once(base) {
        base = shorter;
    }
    base = without_lambda_counter(base);
    if base.len() + dims == name.len() && !name.contains('/') {
        return Cow::Borrowed(name);
    }
    Cow::Owned(format!("{}{arrays}", base.replace('/', ".")))
}

/// A Java frame's name, `Class.method`, with its class as [`class`] gives
/// it: `java/lang/Thread.run` → `java.lang.Thread.run`,
/// `Truth$$Lambda$14/0x0000000800c03000.run` → `Truth$$Lambda$14.run`.
/// Names that do not look like a Java method come back unchanged.
pub fn method(name: &str) -> Cow<'_, str> {
    let Some((cls, m)) = name.rsplit_once('.') else { return Cow::Borrowed(name) };
    if !looks_like_method(cls, m) {
        return Cow::Borrowed(name);
    }
    match class(cls) {
        Cow::Borrowed(_) => Cow::Borrowed(name),
        Cow::Owned(c) => Cow::Owned(format!("{c}.{m}")),
    }
}

/// A character of a Java identifier (as far as names in profiles go:
/// `$`, and the `<` `>` of `<init>`).
fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '$' | '<' | '>')
}

/// Whether a name is a class name: identifier parts joined by `.` or `/`
/// (a hidden class's `+` too), none empty, the first not starting with a
/// digit, optionally followed by `[]`s.
fn is_class_name(name: &str) -> bool {
    let base = name.trim_end_matches("[]");
    let parts_ok = base.split(['.', '/', '+']).all(|part| !part.is_empty() && part.chars().all(ident_char));
    let library = base.contains('/') && is_library(base);
    parts_ok && !library && !base.starts_with(|c: char| c.is_ascii_digit())
}

/// `libc.so.6`, `lib/libjvm.so`: a shared object's name, not a class.
fn is_library(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

fn looks_like_method(cls: &str, m: &str) -> bool {
    !m.is_empty()
        && !m.starts_with(|c: char| c.is_ascii_digit())
        && m.chars().all(ident_char)
        && !cls.ends_with("[]")
        && is_class_name(cls)
        && !is_library(&format!("{cls}.{m}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_and_anonymous_class_suffixes_are_dropped() {
        // JDK 17's JFR: the address, then an identity hash.
        assert_eq!(method("Truth$$Lambda$97+0x00007f2e04007a08.510854293.run"), "Truth$$Lambda.run");
        // JDK 11's JFR: a VM-anonymous class's identity hash.
        assert_eq!(method("Truth$$Lambda$89.1402433372.run"), "Truth$$Lambda.run");
        assert_eq!(class("Truth$$Lambda$89.1402433372"), "Truth$$Lambda");
        // async-profiler: `.0x…` and `/0x…`; JDK 21's lambdas have no counter.
        assert_eq!(method("Truth$$Lambda$14.0x00007f41bc000a08.run"), "Truth$$Lambda.run");
        assert_eq!(method("Truth$$Lambda/0x0000000800c03000.run"), "Truth$$Lambda.run");
        assert_eq!(method("java/lang/invoke/LambdaForm$MH/0x0000000800c04000.invoke"), "java.lang.invoke.LambdaForm$MH.invoke");
        assert_eq!(class("LambdaForm$MH/1725154839[]"), "LambdaForm$MH[]");
        // The lambda counter of JDKs before 21 goes too (it numbers lambdas
        // in the order they were spun, different from run to run).
        assert_eq!(method("Truth$$Lambda$14.run"), "Truth$$Lambda.run");
        assert_eq!(class("a.b.C$$Lambda$3[]"), "a.b.C$$Lambda[]");
        assert_eq!(class("a.b.C$$Lambda$x3"), "a.b.C$$Lambda$x3");
        // Names without suffixes stay as they are.
        assert!(matches!(method("Truth$$Lambda.run"), Cow::Borrowed(_)));
        assert_eq!(class("com.x0.Bar0x"), "com.x0.Bar0x");
    }

    #[test]
    fn slashes_become_dots_in_java_names_only() {
        assert_eq!(method("java/lang/Thread.run"), "java.lang.Thread.run");
        assert_eq!(method("sun/management/ThreadImpl.getThreadTotalCpuTime0"), "sun.management.ThreadImpl.getThreadTotalCpuTime0");
        assert_eq!(method("java/lang/Object.<init>"), "java.lang.Object.<init>");
        assert_eq!(class("java/lang/String[][]"), "java.lang.String[][]");
        for native in [
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "lib/libjvm.so",
            "clock_gettime@@GLIBC_2.17",
            "os::PlatformEvent::park",
            "JavaThread::thread_main_inner()",
            "[unknown]",
            "__vdso_clock_gettime",
            "libc.so.6",
            "a/b c.d",
            "Main.main()",
        ] {
            assert!(matches!(method(native), Cow::Borrowed(_)), "{native}");
        }
    }
}
