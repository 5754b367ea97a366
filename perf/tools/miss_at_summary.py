#!/usr/bin/env python3
"""--miss-at leader against --miss-at drafter from `perf/workload_table.sh 2` jobs run alternately
(perf/README.md, "Two ranks"): per category, the median (min..max) over the jobs of SSD/SD inside
each job under each setting, and over all prompts SSD's target wait, the rounds that waited for
the drafter's answer and the misses the leader drafted.

  perf/tools/miss_at_summary.py ngram perf/out/miss_at_leader1 perf/out/miss_at_leader2 -- \
      perf/out/miss_at_drafter1 perf/out/miss_at_drafter2
"""
import statistics
import sys

from two_rank_jobs import categories, cell


def load(dirs, drafter):
    """Per category (and **all**): SSD/SD of each job; and each job's SSD figures over all."""
    ratios, figs = {}, []
    for d in dirs:
        cats = categories(d, drafter)
        for cat, by in cats.items():
            ratios.setdefault(cat, []).append(
                by["ssd"]["decode_tokens_per_s"] / by["sd"]["decode_tokens_per_s"])
        figs.append((cats["**all**"]["ssd"], cats["**all**"]["sd"]))
    return ratios, figs


def main():
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args:
        sys.exit(__doc__)
    drafter, rest = args[0], args[1:]
    cut = rest.index("--")
    lead, draf = load(rest[:cut], drafter), load(rest[cut + 1:], drafter)
    print("| category | SSD/SD, --miss-at leader | SSD/SD, --miss-at drafter |")
    print("|---|---|---|")
    ahead = {"leader": 0, "drafter": 0}
    for cat in sorted(lead[0], key=lambda c: (c == "**all**", c)):
        a, b = lead[0][cat], draf[0][cat]
        if cat != "**all**":
            ahead["leader"] += statistics.median(a) >= 1.0
            ahead["drafter"] += statistics.median(b) >= 1.0
        print(f"| {cat} | {cell(a)} | {cell(b)} |")
    n = len(lead[0]) - 1
    print(f"\nSSD/SD median >= 1.00 in {ahead['leader']} of {n} categories (leader), "
          f"{ahead['drafter']} of {n} (drafter)\n")
    for name, (_, figs) in (("leader", lead), ("drafter", draf)):
        for ssd, sd in figs:
            print(f"- {name}: SSD target wait {ssd.get('target_wait_s', 0):.2f} s (SD "
                  f"{sd.get('target_wait_s', 0):.2f} s), rounds {ssd.get('rounds', 0)}, waited "
                  f"{ssd.get('rounds_waited', '-')}, pushed hits {ssd.get('pushed_hits', 0)}, "
                  f"leader-drafted {ssd.get('leader_drafted', '-')}, hit rate "
                  f"{ssd.get('cache_hit_rate', 0):.2f}, greedy == AR "
                  f"{ssd.get('greedy_exact')}/{ssd.get('greedy_compared')}")


if __name__ == "__main__":
    main()
