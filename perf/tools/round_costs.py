#!/usr/bin/env python3
"""What an SD round really cost, from `ssd bench --round-times FILE` (one JSONL line per round).

    perf/tools/round_costs.py FILE [FILE ...]      (one file per bench job)

For each job it prints
  1. per configuration (drafter, k) and row count R: how many rounds verified R rows, and the
     median, mean and 90th percentile of their verify times; mean / median says whether the
     rounds a busy machine stalls cost more at more rows (what `--k auto`'s median curve would
     miss);
  2. the stalls: every round's excess over the job's median at its row count, in bands, with
     the share of all excess each band carries;
  3. per category and configuration: the measured verify time, the same rounds priced at the
     job's median per row count ("stall-free": what the choices of lengths cost without the
     stalls; every configuration emits the same tokens for greedy, so these compare the
     choices), and each against the configuration of the category that did best on it.
With --curve A,B it prints instead, per category and configuration, the rounds priced on the
fixed verify curve v(R) = A + B (R - 1) ms and the stall-free speedup over AR
    S = tokens x v(1) / sum over rounds of v(rows)
(tokens: the rounds' emitted tokens; AR would take one v(1) round for each). The curve takes no
times from the file, so S depends only on the lengths chosen and the tokens they accepted: at a
fixed k, not on the machine's load at all.
"""
import argparse
import collections
import json
import statistics as st


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def config(r):
    return f"{r['drafter']} k={r['k']}"


def p90(xs):
    xs = sorted(xs)
    return xs[int(0.9 * (len(xs) - 1))]


def per_row_count(rounds, min_n):
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rounds:
        by[config(r)][r["rows"]].append(1e3 * r["verify_s"])
    print("| configuration | rows | rounds | median ms | mean ms | p90 ms | mean / median |")
    print("|---|---|---|---|---|---|---|")
    for cfg in sorted(by):
        for rows in sorted(by[cfg]):
            v = by[cfg][rows]
            if len(v) < min_n:
                continue
            med, mean = st.median(v), st.mean(v)
            print(f"| {cfg} | {rows} | {len(v)} | {med:.2f} | {mean:.2f} | {p90(v):.2f} | "
                  f"{mean / med:.2f} |")


def stalls(rounds, med):
    excess = [1e3 * (r["verify_s"] - med[r["rows"]]) for r in rounds]
    total = sum(x for x in excess if x > 0)
    verify = sum(r["verify_s"] for r in rounds)
    print(f"\n{len(rounds)} rounds, {verify:.2f} s of verification, of which {total / 1e3:.2f} s "
          f"({100 * total / 1e3 / verify:.0f}%) above the job's median at the round's row count")
    print("\n| excess over the median | rounds | share of rounds | share of the excess |")
    print("|---|---|---|---|")
    for lo, hi in [(0, 1), (1, 2), (2, 5), (5, 10), (10, 20), (20, 50), (50, float("inf"))]:
        xs = [x for x in excess if lo <= x < hi]
        name = f"{lo}-{hi} ms" if hi != float("inf") else f">= {lo} ms"
        print(f"| {name} | {len(xs)} | {100 * len(xs) / len(excess):.1f}% | "
              f"{100 * sum(xs) / total:.0f}% |")


def by_category(rounds, med):
    agg = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])  # rounds, rows, verify, stall-free
    for r in rounds:
        a = agg[(r["category"], config(r))]
        a[0] += 1
        a[1] += r["rows"]
        a[2] += r["verify_s"]
        a[3] += med[r["rows"]]
    print("\n| category | configuration | rounds | rows | verify s | vs best | stall-free s "
          "| vs best |")
    print("|---|---|---|---|---|---|---|---|")
    for cat in sorted({c for c, _ in agg}):
        cfgs = sorted(cfg for c, cfg in agg if c == cat)
        best_v = min(agg[(cat, c)][2] for c in cfgs)
        best_f = min(agg[(cat, c)][3] for c in cfgs)
        for cfg in cfgs:
            n, rows, v, f = agg[(cat, cfg)]
            print(f"| {cat or '-'} | {cfg} | {n} | {rows} | {v:.2f} | {v / best_v:.3f} | {f:.2f} "
                  f"| {f / best_f:.3f} |")


def on_curve(rounds, a, b):
    agg = collections.defaultdict(lambda: [0, 0, 0, 0.0])  # rounds, rows, tokens, priced ms
    for r in rounds:
        if "emitted" not in r:
            raise SystemExit("round_costs: --curve needs the rounds' emitted tokens (a "
                             "--round-times file from an ssd that writes 'emitted')")
        x = agg[(r["category"], config(r))]
        x[0] += 1
        x[1] += r["rows"]
        x[2] += r["emitted"]
        x[3] += a + b * (r["rows"] - 1)
    print(f"| category | configuration | rounds | rows | tokens | v(rows) summed, ms "
          f"| S = tokens x {a:g} / that |")
    print("|---|---|---|---|---|---|---|")
    for (cat, cfg), (n, rows, tokens, ms) in sorted(agg.items()):
        print(f"| {cat or '-'} | {cfg} | {n} | {rows} | {tokens} | {ms:.1f} "
              f"| {tokens * a / ms:.3f} |")


def curve(text):
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--curve {text!r}: expected A,B (ms), e.g. 2.35,0.235")
    if a <= 0 or b < 0:
        raise argparse.ArgumentTypeError(f"--curve {text!r}: needs A > 0 and B >= 0")
    return a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="--round-times files, one per job")
    ap.add_argument("--min-rounds", type=int, default=20,
                    help="leave out row counts with fewer rounds (table 1)")
    ap.add_argument("--curve", type=curve, metavar="A,B",
                    help="price every round at A + B (rows - 1) ms and print the stall-free "
                         "speedup S per category and configuration instead")
    args = ap.parse_args()
    for path in args.files:
        rounds = load(path)
        if not rounds:
            raise SystemExit(f"round_costs: {path} holds no rounds")
        for r in rounds:
            r.setdefault("category", "")
        if args.curve:
            print(f"## {path}\n")
            on_curve(rounds, *args.curve)
            print()
            continue
        by_rows = collections.defaultdict(list)
        for r in rounds:
            by_rows[r["rows"]].append(r["verify_s"])
        med = {rows: st.median(v) for rows, v in by_rows.items()}
        print(f"## {path}\n")
        per_row_count(rounds, args.min_rounds)
        stalls(rounds, med)
        by_category(rounds, med)
        print()


if __name__ == "__main__":
    main()
