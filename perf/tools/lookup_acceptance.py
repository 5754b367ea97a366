#!/usr/bin/env python3
"""Acceptance of lookup drafts by the length offered, from `ssd bench --outcome-trace DIR` files
of a fixed-length run (each record's k is then what the drafter offered, up to --k):

    ssd bench -m $M --workloads DIR --drafters ngram,suffix --k 8 --modes sd --outcome-trace OUT
    python3 perf/tools/lookup_acceptance.py OUT

Per category and drafter: the rounds at each offered length L, and P(accepted >= j | L) for
j = 1..L; then the conditional rate of each position over all offers (accepted at j given j - 1
accepted and j offered). This is what the length policy's classes and per-position rates model
(runtime/spec/spec_length.h).
"""
import argparse
import collections
import glob
import json
import os
import re


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the --outcome-trace directory")
    args = ap.parse_args()
    runs = collections.defaultdict(list)  # (category, drafter, k) -> records
    for path in glob.glob(os.path.join(args.dir, "*_sd_*_k*_p*.jsonl")):
        m = re.match(r"(.+)_sd_(.+)_k(\d+)_p\d+\.jsonl$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs[m.groups()].extend(json.loads(line) for line in f if line.strip())
    for (cat, drafter, k), recs in sorted(runs.items()):
        mal = sum(r["accepted"] + 1 for r in recs) / len(recs)
        print(f"{cat} {drafter} k={k}: {len(recs)} rounds, mean acceptance length {mal:.2f}")
        by_len = collections.defaultdict(list)
        for r in recs:
            by_len[r["k"]].append(r["accepted"])
        for n, acc in sorted(by_len.items()):
            p = [sum(a >= j for a in acc) / len(acc) for j in range(1, n + 1)]
            print(f"  offered {n}: {len(acc):4d} rounds, P(accepted >= j): "
                  + " ".join(f"{x:.2f}" for x in p))
        cond = []
        for j in range(1, int(k) + 1):
            tried = [r for r in recs if r["k"] >= j and r["accepted"] >= j - 1]
            cond.append(sum(r["accepted"] >= j for r in tried) / len(tried) if tried else 0.0)
        print("  position rates given the one before: " + " ".join(f"{x:.2f}" for x in cond))


if __name__ == "__main__":
    main()
