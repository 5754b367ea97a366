#!/usr/bin/env python3
"""Role x fault grid of a `ctest -L fault_matrix -V --repeat until-fail:N` log (docs/faults.md):
per phase, seconds from the fault to the job's end, median (max) over the passes, and passes.

  perf/tools/fault_matrix_grid.py LOG
"""
import re, sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\d+: \| (leader|worker|drafter|secondary)\s*\| (\w+)\s*\| (\w+)\s*\|\s*(-?\d+) \|\s*(-?[\d.]+) \|", line)
    if m:
        rows[m.groups()[:3]].append(float(m.group(5)))
phases = ["startup", "prefill", "round", "prespec"]
print("| role | fault | " + " | ".join(phases) + " |")
print("|---|---|" + "---|" * len(phases))
for role in ["leader", "worker", "drafter", "secondary"]:
    for fault in ["kill", "stop", "error", "corrupt"]:
        cells = []
        for p in phases:
            v = rows.get((role, fault, p))
            cells.append(f"{statistics.median(v):.1f} ({max(v):.1f}), {len(v)}x" if v else "n/a")
        print(f"| {role} | {fault} | " + " | ".join(cells) + " |")
