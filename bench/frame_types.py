#!/usr/bin/env python3
"""Frame-type shares of an annotated collapsed profile (agent option `ann`).

Usage: bench/frame_types.py PROFILE.collapsed

Counts every frame of every sample except synthetic `[...]` frames: `_[0]`
interpreted, `_[j]` JIT-compiled, `_[i]` inlined; frames without a suffix
(type unknown, and Java native methods) count as untyped. Also prints the
failed-walk frames.
"""

import re
import sys
from collections import Counter

SUFFIX = re.compile(r"_\[([0ji])\]$")
NAMES = {"0": "interpreted", "j": "compiled", "i": "inlined"}


def main(path):
    kinds = Counter()
    failed = Counter()
    with open(path) as f:
        for line in f:
            stack, count = line.rstrip("\n").rsplit(" ", 1)
            n = int(count)
            frames = stack.split(";")
            for fr in frames:
                if fr.startswith("["):
                    if len(frames) == 1 and fr[1:2].islower():
                        failed[fr] += n
                    continue
                m = SUFFIX.search(fr)
                kinds[NAMES[m.group(1)] if m else "untyped"] += n
    total = sum(kinds.values()) or 1
    typed = total - kinds["untyped"]
    print("frames: %d, typed %.1f%%" % (total, 100.0 * typed / total))
    for k in ("interpreted", "compiled", "inlined", "untyped"):
        print("  %-12s %6.1f%%" % (k, 100.0 * kinds[k] / total))
    for name, n in failed.most_common():
        print("failed %s %d" % (name, n))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    main(sys.argv[1])
