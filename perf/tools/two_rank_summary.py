#!/usr/bin/env python3
"""The two-rank table of perf/README.md from `perf/workload_table.sh 2` jobs: per category and
drafter, the median (min..max) over the jobs of SD/AR, SSD/AR and SSD/SD inside each job, and
SSD's median hit rate. The drafters are those whose job (two_ranks_<drafter>.json) is in every
directory given, in the order n-gram, suffix, Domino, then any other.

  perf/tools/two_rank_summary.py perf/out/final1 perf/out/final2 perf/out/final3
"""
import pathlib
import statistics
import sys

from two_rank_jobs import categories, cell

NAMES = {"ngram": "n-gram", "suffix": "suffix", "domino": "Domino"}


def drafters_in(dirs):
    """The drafters with a job in every directory, known ones first."""
    sets = [{p.name[len("two_ranks_"):-len(".json")] for p in pathlib.Path(d).glob("two_ranks_*.json")}
            for d in dirs]
    common = set.intersection(*sets) if sets else set()
    return [d for d in NAMES if d in common] + sorted(common - set(NAMES))


def main():
    dirs = sys.argv[1:]
    if not dirs:
        sys.exit(__doc__)
    drafters = drafters_in(dirs)
    if not drafters:
        sys.exit(f"two_rank_summary: no two_ranks_<drafter>.json is in every one of {dirs}")
    table = {}
    for drafter in drafters:
        for d in dirs:
            for cat, by in categories(d, drafter).items():
                ar, sd, ssd = (by[m]["decode_tokens_per_s"] for m in ("ar", "sd", "ssd"))
                t = table.setdefault(cat, {}).setdefault(drafter, {"sd": [], "ssd": [], "r": [], "h": []})
                t["sd"].append(sd / ar)
                t["ssd"].append(ssd / ar)
                t["r"].append(ssd / sd)
                t["h"].append(by["ssd"].get("cache_hit_rate", 0.0))
    head = ["category"]
    for d in drafters:
        n = NAMES.get(d, d)
        head += [f"SD/AR {n}", f"SSD/AR {n}", f"SSD/SD {n}", f"hit rate {n}"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    ahead = dict.fromkeys(drafters, 0)
    for cat in sorted(table, key=lambda c: (c == "**all**", c)):
        row = [cat]
        for d in drafters:
            t = table[cat][d]
            ahead[d] += cat != "**all**" and statistics.median(t["r"]) >= 1.0
            row += [cell(t["sd"]), cell(t["ssd"]), cell(t["r"]), f"{statistics.median(t['h']):.2f}"]
        print("| " + " | ".join(row) + " |")
    n_cats = len(table) - 1
    print("\nSSD/SD median >= 1.00 in " +
          ", ".join(f"{ahead[d]} of {n_cats} categories ({NAMES.get(d, d)})" for d in drafters))


if __name__ == "__main__":
    main()
