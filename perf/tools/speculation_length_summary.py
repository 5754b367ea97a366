#!/usr/bin/env python3
"""Summarises `ssd bench --out-json` files of perf/speculation_length.sh.

For every (placement, mode, drafter, k) it prints the median over the jobs of the decode speed
relative to AR in the same job, with the range (min..max), the median mean acceptance length and
the chosen-k histogram summed over the jobs (k auto). Usage: speculation_length_summary.py FILE...
"""
import json
import os
import statistics
import sys
from collections import defaultdict


def drafter_name(d):
    return "domino" if d.startswith("domino") else d


def main(paths):
    ratios = defaultdict(list)
    mal = defaultdict(list)
    tps = defaultdict(list)
    chosen = {}
    contexts = set()
    for p in paths:
        j = json.load(open(p))
        place = "2 ranks" if os.path.basename(p).startswith("two_") else "1 process"
        contexts.add(f"{place}: {j['context'].split(' | ')[0]}")
        rows = j["summary"]
        ar = next(r["decode_tokens_per_s"] for r in rows if r["mode"] == "ar")
        for r in rows:
            k = "auto" if r.get("k_auto") else str(r["k"])
            key = (place, r["mode"], drafter_name(r["drafter"]) if r["mode"] != "ar" else "-",
                   "-" if r["mode"] == "ar" else k)
            ratios[key].append(r["decode_tokens_per_s"] / ar)
            tps[key].append(r["decode_tokens_per_s"])
            mal[key].append(r["mean_acceptance_length"])
            if r.get("k_auto") and r["mode"] != "ar":
                h = r.get("chosen_k_histogram", [])
                acc = chosen.setdefault(key, [0] * len(h))
                for i, c in enumerate(h):
                    acc[i] += c
    print("| placement | mode | drafter | k | vs AR, median (min..max) | decode tok/s, median | "
          "mean acceptance length | jobs | chosen k = 0..K (rounds) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(ratios):
        r = ratios[key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {statistics.median(r):.2f}x "
              f"({min(r):.2f}..{max(r):.2f}) | {statistics.median(tps[key]):.1f} | "
              f"{statistics.median(mal[key]):.2f} | {len(r)} | "
              f"{' '.join(map(str, chosen.get(key, []))) or '-'} |")
    print()
    for c in sorted(contexts):
        print(f"- {c}")


if __name__ == "__main__":
    main(sys.argv[1:])
