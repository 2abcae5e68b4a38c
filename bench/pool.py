#!/usr/bin/env python3
"""Pools the rounds of several rotate.py batches that ran the same arms.

Each batch's rotate.json holds every run's wall and CPU time by round. This
takes the rounds of all batches given, and for each arm prints its median
ratio, with a 90% bootstrap interval, to the mean of the null arms of the
same round (the first arm and any arm with the same options, such as
plain-again=). --versus A:B adds the ratio of arm A to arm B within each
round, for example how much a full handler costs over an empty one:

  bench/pool.py bench/work/results/s11-rot1 bench/work/results/s11-rot3 \\
      --versus cpu+alloc:cpu-noop+alloc
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rotate import bootstrap_median  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("batches", nargs="+", help="results directories (or rotate.json files) of rotate.py")
    ap.add_argument("--versus", action="append", default=[], metavar="A:B", help="also the ratio of arm A to arm B per round")
    args = ap.parse_args()
    batches = []
    for b in args.batches:
        path = os.path.join(b, "rotate.json") if os.path.isdir(b) else b
        try:
            with open(path) as f:
                batches.append(json.load(f))
        except (OSError, ValueError) as e:
            sys.exit("pool.py: cannot read %s: %s" % (path, e))
    arms = batches[0]["arms"]
    for path, d in zip(args.batches, batches):
        if d["arms"] != arms:
            sys.exit("pool.py: %s ran other arms than %s; pool only batches with the same arms" % (path, args.batches[0]))
        if d.get("side_by_side"):
            sys.exit("pool.py: %s is a --side-by-side batch; pool one-after-another batches only" % path)
    names = list(arms)
    ref_opts = arms[names[0]]
    nulls = [n for n in names if arms[n] == ref_opts]
    for a, b in (v.split(":", 1) if ":" in v else (v, "") for v in args.versus):
        if a not in arms or b not in arms:
            sys.exit("pool.py: --versus %s:%s: arms are %s" % (a, b, ", ".join(names)))
    rounds = sum(d["rounds"] for d in batches)
    print("%d batches, %d rounds; reference: mean of %s" % (len(batches), rounds, ", ".join(nulls)))
    for kind in ("wall", "cpu"):
        per = {n: [x for d in batches for x in d[kind][n]] for n in names}
        ref = [statistics.mean(per[n][i] for n in nulls) for i in range(rounds)]
        rows = [(n, [x / r for x, r in zip(per[n], ref)]) for n in names if n not in nulls]
        for v in args.versus:
            a, b = v.split(":", 1)
            rows.append(("%s/%s" % (a, b), [x / y for x, y in zip(per[a], per[b])]))
        for name, ratios in rows:
            lo, hi = bootstrap_median(ratios)
            print("%-34s %-4s median %.3f  90%% interval %.3f-%.3f" % (name, kind, statistics.median(ratios), lo, hi))


if __name__ == "__main__":
    main()
