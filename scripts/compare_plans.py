#!/usr/bin/env python3
"""Compare two TestRandomSetDump files (before, after): plan time geomean of after over
before, how many plans got slower or faster (and the extreme ratios), how many exact
passes stopped at their budget, and the total expansions.

    python3 scripts/compare_plans.py /tmp/before.txt /tmp/after.txt
"""
import math
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            i, t, e, x = line.split()
            rows[int(i)] = (float(t), int(e), x == "true")
    return rows


def main(before_path, after_path):
    a, b = load(before_path), load(after_path)
    keys = [i for i in a if i in b and a[i][0] > 0]
    ratios = [b[i][0] / a[i][0] for i in keys]
    slower = [r for r in ratios if r > 1 + 1e-9]
    faster = [r for r in ratios if r < 1 - 1e-9]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"plans {len(keys)}: time geomean {geo:.4f}; "
          f"slower {len(slower)} (worst {max(slower, default=1):.3f}x), "
          f"faster {len(faster)} (best {min(faster, default=1):.3f}x)")
    print(f"stopped at the budget: {sum(not a[i][2] for i in keys)} -> {sum(not b[i][2] for i in keys)}; "
          f"expansions {sum(a[i][1] for i in keys)} -> {sum(b[i][1] for i in keys)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
