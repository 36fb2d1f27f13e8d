#!/usr/bin/env python3
"""Compare two TestXLASuggestionDump files (before, after): how many fallbacks changed
suggestions, lost or gained them, the geomean of after's XLA chain time over before's
(where both have one), how many got slower or faster, and how many suggestions name a
sub-axis (a PartitionSpec cannot say those).

    python3 scripts/compare_suggestions.py /tmp/before.txt /tmp/after.txt
"""
import math
import sys


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            i, t, n, texts, _note = line.rstrip("\n").split("\t")
            rows.append((float(t), int(n), texts))
    return rows


def sub_axis(texts):
    return sum(1 for s in texts.split(" | ") if ":(" in s) if texts else 0


def main(before_path, after_path):
    a, b = load(before_path), load(after_path)
    changed = sum(1 for x, y in zip(a, b) if x[2] != y[2])
    lost = sum(1 for x, y in zip(a, b) if x[1] > 0 and y[1] == 0)
    gained = sum(1 for x, y in zip(a, b) if x[1] == 0 and y[1] > 0)
    ratios = [y[0] / x[0] for x, y in zip(a, b) if x[0] > 0 and y[0] > 0]
    slower = [r for r in ratios if r > 1 + 1e-9]
    faster = [r for r in ratios if r < 1 - 1e-9]
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else 1
    print(f"fallbacks {len(a)}: {changed} changed, {lost} lost suggestions, {gained} gained; "
          f"chain time geomean {geo:.4f}, slower {len(slower)} (worst {max(slower, default=1):.3f}x), "
          f"faster {len(faster)} (best {min(faster, default=1):.3f}x)")
    print(f"with suggestions {sum(1 for x in a if x[1])} -> {sum(1 for y in b if y[1])}; "
          f"sub-axis suggestions {sum(sub_axis(x[2]) for x in a)} -> {sum(sub_axis(y[2]) for y in b)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
