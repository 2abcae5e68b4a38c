#!/usr/bin/env python3
"""Writes two minimal JFR chunks for the jfr_read fuzz target's seeds
(fuzz/seeds/jfr_read/minimal-*.jfr): a metadata event with only the types
oxprof's reader looks at, one constant-pool event and a few events of each
kind it extracts, with compressed (varint) and with fixed-width integers.

The JDK's own recordings carry about 80-100 KB of metadata, which makes
every fuzzing input that large and slow; these are a few hundred bytes, so
the fuzzer mutates the structure (counts, sizes, type ids, pools) rather
than metadata strings. Usage: fuzz/make_jfr_seed.py fuzz/seeds/jfr_read
"""
import struct
import sys


class Enc:
    def __init__(self, compressed):
        self.compressed = compressed
        self.b = bytearray()

    def varint(self, v):
        v &= (1 << 64) - 1
        for _ in range(8):
            if v < 0x80:
                self.b.append(v)
                return self
            self.b.append((v & 0x7F) | 0x80)
            v >>= 7
        self.b.append(v & 0xFF)
        return self

    def long(self, v):
        return self.varint(v) if self.compressed else self.raw(struct.pack(">q", v))

    def int(self, v):
        return self.varint(v) if self.compressed else self.raw(struct.pack(">i", v))

    def byte(self, v):
        self.b.append(v & 0xFF)
        return self

    def raw(self, data):
        self.b += data
        return self

    def string(self, s):
        data = s.encode()
        self.byte(3)
        self.int(len(data))
        return self.raw(data)

    def pooled_string(self, key):
        return self.byte(2).long(key)


# Type ids, names and fields: (name, type id, pooled, array).
LONG, INT, BOOL, STRING = 1, 2, 3, 4
THREAD, CLASS, SYMBOL, METHOD, FRAME_TYPE, FRAME, STACK, STATE = 20, 21, 22, 23, 24, 25, 26, 27
EXEC, ALLOC, SETTING, SAFEPOINT, MONITOR, WALL = 100, 101, 102, 103, 104, 105
TYPES = [
    (LONG, "long", []),
    (INT, "int", []),
    (BOOL, "boolean", []),
    (STRING, "java.lang.String", []),
    (THREAD, "java.lang.Thread", [("osName", STRING, False, False), ("javaName", STRING, False, False)]),
    (SYMBOL, "jdk.types.Symbol", [("string", STRING, False, False)]),
    (CLASS, "java.lang.Class", [("name", SYMBOL, True, False)]),
    (METHOD, "jdk.types.Method", [("type", CLASS, True, False), ("name", SYMBOL, True, False)]),
    (FRAME_TYPE, "jdk.types.FrameType", [("description", STRING, False, False)]),
    (FRAME, "jdk.types.StackFrame", [("method", METHOD, True, False), ("lineNumber", INT, False, False), ("type", FRAME_TYPE, True, False)]),
    (STACK, "jdk.types.StackTrace", [("truncated", BOOL, False, False), ("frames", FRAME, False, True)]),
    (STATE, "jdk.types.ThreadState", [("name", STRING, False, False)]),
    (EXEC, "jdk.ExecutionSample", [("startTime", LONG, False, False), ("sampledThread", THREAD, True, False), ("stackTrace", STACK, True, False), ("state", STATE, True, False)]),
    (ALLOC, "jdk.ObjectAllocationSample", [("startTime", LONG, False, False), ("eventThread", THREAD, True, False), ("stackTrace", STACK, True, False), ("objectClass", CLASS, True, False), ("weight", LONG, False, False)]),
    (SETTING, "jdk.ActiveSetting", [("startTime", LONG, False, False), ("id", LONG, False, False), ("name", STRING, False, False), ("value", STRING, False, False)]),
    (SAFEPOINT, "jdk.SafepointBegin", [("startTime", LONG, False, False), ("duration", LONG, False, False), ("safepointId", LONG, False, False), ("totalThreadCount", INT, False, False)]),
    (MONITOR, "jdk.JavaMonitorEnter", [("startTime", LONG, False, False), ("duration", LONG, False, False), ("eventThread", THREAD, True, False), ("stackTrace", STACK, True, False), ("monitorClass", CLASS, True, False)]),
    (WALL, "oxprof.WallClockSample", [("startTime", LONG, False, False), ("sampledThread", THREAD, True, False), ("stackTrace", STACK, True, False), ("state", STATE, True, False), ("weight", LONG, False, False)]),
]


def metadata(compressed):
    strings = []

    def idx(s):
        if s not in strings:
            strings.append(s)
        return strings.index(s)

    tree = Enc(compressed)

    def element(name, attrs, children):
        tree.int(idx(name)).int(len(attrs))
        for k, v in attrs:
            tree.int(idx(k)).int(idx(v))
        tree.int(len(children))
        for child in children:
            child()

    def field(name, type_id, pooled, array):
        attrs = [("name", name), ("class", str(type_id))]
        if pooled:
            attrs.append(("constantPool", "true"))
        if array:
            attrs.append(("dimension", "1"))
        return lambda: element("field", attrs, [])

    def cls(type_id, name, fields):
        return lambda: element("class", [("id", str(type_id)), ("name", name)], [field(*f) for f in fields])

    element("root", [], [lambda: element("metadata", [], [cls(*t) for t in TYPES])])
    body = Enc(compressed).long(0).long(0).long(1).int(len(strings))
    for s in strings:
        body.string(s)
    body.raw(tree.b)
    return event(compressed, 0, body.b)


def event(compressed, type_id, payload):
    """size, type id, payload; the size counts itself."""
    head = Enc(compressed).long(type_id).b
    if compressed:
        # A 4-byte varint size, as the JDK writes it, so the size never changes length.
        size = 4 + len(head) + len(payload)
        sb = bytes([(size & 0x7F) | 0x80, ((size >> 7) & 0x7F) | 0x80, ((size >> 14) & 0x7F) | 0x80, (size >> 21) & 0x7F])
    else:
        sb = struct.pack(">i", 4 + len(head) + len(payload))
    return bytes(sb) + bytes(head) + bytes(payload)


def pools(compressed):
    e = Enc(compressed)
    e.long(0).long(0).long(0).byte(0)
    entries = [
        (STRING, [(1, lambda e: e.string("main"))]),
        (THREAD, [(1, lambda e: e.string("main").pooled_string(1)), (2, lambda e: e.string("worker").string("worker-1"))]),
        (SYMBOL, [(1, lambda e: e.string("com/example/Tiny")), (2, lambda e: e.string("spin")), (3, lambda e: e.string("main")), (4, lambda e: e.string("[B"))]),
        (CLASS, [(1, lambda e: e.long(1)), (2, lambda e: e.long(4))]),
        (METHOD, [(1, lambda e: e.long(1).long(2)), (2, lambda e: e.long(1).long(3))]),
        (FRAME_TYPE, [(1, lambda e: e.string("JIT compiled")), (2, lambda e: e.string("Interpreted"))]),
        (STACK, [(1, lambda e: e.byte(0).int(2).long(1).int(5).long(1).long(2).int(10).long(2)),
                 (2, lambda e: e.byte(1).int(1).long(2).int(12).long(2))]),
        (STATE, [(1, lambda e: e.string("STATE_RUNNABLE")), (2, lambda e: e.string("STATE_SLEEPING"))]),
    ]
    e.int(len(entries))
    for type_id, values in entries:
        e.long(type_id).int(len(values))
        for key, write in values:
            e.long(key)
            write(e)
    return event(compressed, 1, e.b)


def chunk(compressed):
    t0 = 1_000_000
    events = []
    for type_id, write in [
        (SETTING, lambda e: e.long(t0).long(EXEC).string("period").string("10 ms")),
        (EXEC, lambda e: e.long(t0 + 10_000).long(1).long(1).long(1)),
        (EXEC, lambda e: e.long(t0 + 20_000).long(1).long(1).long(1)),
        (EXEC, lambda e: e.long(t0 + 30_000).long(2).long(2).long(1)),
        (ALLOC, lambda e: e.long(t0 + 40_000).long(1).long(2).long(2).long(4096)),
        (SAFEPOINT, lambda e: e.long(t0 + 50_000).long(3_000).long(7).int(12)),
        (MONITOR, lambda e: e.long(t0 + 60_000).long(2_000_000).long(2).long(1).long(1)),
        (WALL, lambda e: e.long(t0 + 70_000).long(2).long(2).long(2).long(50_000_000)),
    ]:
        e = Enc(compressed)
        write(e)
        events.append(event(compressed, type_id, e.b))
    body = b"".join(events) + pools(compressed)
    meta = metadata(compressed)
    cp_offset = 68 + len(b"".join(events))
    meta_offset = 68 + len(body)
    size = meta_offset + len(meta)
    header = b"FLR\0" + struct.pack(">HH", 2, 0)
    header += struct.pack(">qqqqqqq", size, cp_offset, meta_offset, 1_700_000_000_000_000_000, 100_000_000, t0, 1_000_000_000)
    header += struct.pack(">i", 1 if compressed else 0)
    assert len(header) == 68
    return header + body + meta


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    for compressed, name in [(True, "minimal-varint.jfr"), (False, "minimal-fixed.jfr")]:
        with open(f"{out}/{name}", "wb") as f:
            f.write(chunk(compressed))
