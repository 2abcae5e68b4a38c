#!/usr/bin/env python3
"""Checks the workspace's module structure; CI runs it before the tests.

1. No import cycles: within each crate, the modules that name each other
   through `crate::` (or `super::`) paths form no loop, so dependencies run
   one way. Test modules (`#[cfg(test)]` to the end of the file) are left out.
2. Signal-safe code is marked and stays apart: a module the signal handler
   can reach opens with the line `//! signal-safe: ...`. Such a module may
   only use other marked modules, and its code must not call an allocating,
   locking, formatting or panicking API (a short deny-list). Setup and
   teardown code in a marked module that never runs in the handler is
   fenced by `// signal-safe: off (why)` ... `// signal-safe: on` and may
   use anything through full `crate::` paths; the reviewer audits the
   fences too.

Exit status 1 with one line per finding; 0 and a one-line summary otherwise.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "//! signal-safe:"
OFF = re.compile(r"^\s*// signal-safe: off\b")
ON = re.compile(r"^\s*// signal-safe: on\b")

# What no signal-reachable code may call: allocation, locks, formatting,
# printing, logging, thread-locals and panicking shortcuts.
DENY = [
    (r"\bBox::(new|pin)\b", "allocates"),
    (r"\bVec::(new|with_capacity)\b|\bvec!", "allocates"),
    (r"\bString::|\.to_string\(\)|\.to_owned\(\)|\bformat!", "allocates and formats"),
    (r"\.collect\b", "allocates"),
    (r"\b(HashMap|HashSet|BTreeMap|BTreeSet)\b", "allocates"),
    (r"\b(Arc|Rc)::new\b", "allocates"),
    (r"\b(Mutex|RwLock|Condvar|LazyLock)\b|\.lock\(\)", "locks"),
    (r"\b(e?println|e?print|write|writeln)!", "formats"),
    (r"\bcrate::log\b|\blog::", "logs (allocates, locks)"),
    (r"\bthread_local!", "thread-local first touch may allocate"),
    (r"\.unwrap\(\)|\.expect\(|\bpanic!|\bunreachable!|\btodo!|\bunimplemented!", "can panic"),
    (r"\bstd::(fs|env|thread)::", "not async-signal-safe"),
]
DENY = [(re.compile(p), why) for p, why in DENY]

PATH = re.compile(r"\b(crate|super)::((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)")
GROUP = re.compile(r"\b(crate|super)::((?:[a-z_][a-z0-9_]*::)*)\{([^{}]*)\}")


def modules(src: Path):
    """Module path (tuple) -> file, for one crate's src/."""
    out = {}
    for f in sorted(src.rglob("*.rs")):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        out[tuple(parts)] = f
    return out


def code_lines(text: str):
    """(line number, code without // comments, in a fenced region?) for
    each line before the test module."""
    fenced = False
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip().startswith("#[cfg(test)]") and i + 1 < len(lines) and "mod " in lines[i + 1]:
            return
        if OFF.match(line):
            fenced = True
            continue
        if ON.match(line):
            fenced = False
            continue
        code = re.sub(r"//.*", "", line)
        code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)
        yield i + 1, code, fenced


def refs(code: str, here: tuple):
    """Module paths named on one line of code, relative to the crate."""
    found = []
    for m in GROUP.finditer(code):
        base = resolve_base(m.group(1), here) + tuple(p for p in m.group(2).split("::") if p)
        for item in m.group(3).split(","):
            item = item.strip().split(" as ")[0].strip()
            if item and item != "self" and item != "*":
                found.append(base + tuple(item.split("::")))
            elif item == "self":
                found.append(base)
    code = GROUP.sub("", code)
    for m in PATH.finditer(code):
        found.append(resolve_base(m.group(1), here) + tuple(m.group(2).split("::")))
    return found


def resolve_base(kind: str, here: tuple):
    return () if kind == "crate" else here[:-1]


def target(path: tuple, mods: dict):
    """The longest module prefix of `path` that is a module of the crate."""
    for n in range(len(path), 0, -1):
        if path[:n] in mods:
            return path[:n]
    return None


def module_of(f: Path, mods: dict):
    return next(m for m, p in mods.items() if p == f)


def cycles(graph: dict):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def name(crate: str, m: tuple):
    return f"{crate}::{'::'.join(m) or '(root)'}"


def main():
    problems = []
    checked = marked_total = 0
    for src in sorted(ROOT.glob("crates/*/src")):
        crate = src.parent.name
        mods = modules(src)
        marked = {m for m, f in mods.items() if f.read_text().startswith(MARK)}
        marked_total += len(marked)
        graph = {}
        for m, f in mods.items():
            checked += 1
            text = f.read_text()
            deps = graph.setdefault(m, set())
            for lineno, code, fenced in code_lines(text):
                for r in refs(code, m):
                    t = target(r, mods)
                    if t is None or t == m or t == ():
                        # Not a module of ours (a type of the crate root,
                        # say), or the module itself.
                        continue
                    deps.add(t)
                    if m in marked and not fenced and t not in marked:
                        problems.append(f"{f.relative_to(ROOT)}:{lineno}: signal-safe module uses {name(crate, t)}, which is not marked signal-safe")
                if m in marked and not fenced:
                    for pattern, why in DENY:
                        hit = pattern.search(code)
                        if hit:
                            problems.append(f"{f.relative_to(ROOT)}:{lineno}: signal-safe code calls `{hit.group(0)}` ({why}); fence setup code with `// signal-safe: off`")
                            break
        for comp in cycles(graph):
            problems.append(f"import cycle in {crate}: " + " -> ".join(name(crate, m) for m in comp))
    if problems:
        for p in problems:
            print(p)
        print(f"check-layout: {len(problems)} problem(s)")
        return 1
    print(f"check-layout: {checked} modules, no import cycles; {marked_total} signal-safe modules use only signal-safe modules and no denied API")
    return 0


if __name__ == "__main__":
    sys.exit(main())
