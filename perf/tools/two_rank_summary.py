#!/usr/bin/env python3
"""The two-rank table of perf/README.md from `perf/workload_table.sh 2` jobs: per category, the
median (min..max) over the jobs of SD/AR, SSD/AR and SSD/SD inside each job, and SSD's hit rate,
for the n-gram and Domino drafters.

  perf/tools/two_rank_summary.py perf/out/final1 perf/out/final2 perf/out/final3
"""
import statistics
import sys

from two_rank_jobs import categories, cell


def main():
    dirs = sys.argv[1:]
    if not dirs:
        sys.exit(__doc__)
    table = {}
    for drafter in ("ngram", "domino"):
        for d in dirs:
            for cat, by in categories(d, drafter).items():
                ar, sd, ssd = (by[m]["decode_tokens_per_s"] for m in ("ar", "sd", "ssd"))
                t = table.setdefault(cat, {}).setdefault(drafter, {"sd": [], "ssd": [], "r": [], "h": []})
                t["sd"].append(sd / ar)
                t["ssd"].append(ssd / ar)
                t["r"].append(ssd / sd)
                t["h"].append(by["ssd"].get("cache_hit_rate", 0.0))
    print("| category | SD/AR n-gram | SSD/AR n-gram | SSD/SD n-gram | hit rate | SD/AR Domino | "
          "SSD/AR Domino | SSD/SD Domino |")
    print("|---|---|---|---|---|---|---|---|")
    ahead = {"ngram": 0, "domino": 0}
    for cat in sorted(table, key=lambda c: (c == "**all**", c)):
        n, m = table[cat]["ngram"], table[cat]["domino"]
        for k, t in (("ngram", n), ("domino", m)):
            ahead[k] += cat != "**all**" and statistics.median(t["r"]) >= 1.0
        print(f"| {cat} | {cell(n['sd'])} | {cell(n['ssd'])} | {cell(n['r'])} | "
              f"{statistics.median(n['h']):.2f} | {cell(m['sd'])} | {cell(m['ssd'])} | {cell(m['r'])} |")
    print(f"\nSSD/SD median >= 1.00 in {ahead['ngram']} of {len(table) - 1} categories (n-gram), "
          f"{ahead['domino']} of {len(table) - 1} (Domino)")


if __name__ == "__main__":
    main()
