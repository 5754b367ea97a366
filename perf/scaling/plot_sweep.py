#!/usr/bin/env python3
"""Turns a sweep's JSONL (perf/scaling/sweep.py) into PNGs, one per figure that its axes allow:
  tok_s_vs_<axis>.png      decode tok/s (median over prompts and repeats, bars = min..max) per mode;
                           against batch, the whole batch's tok/s (every request's tokens)
  speedup_vs_<axis>.png    SSD/SD: per prompt and repeat, the SSD run's tok/s over the SD run
                           that differs only in mode; median and range, one line per k
  hit_rate_vs_fan_out.png  cache hit rate and planned rate against the fan-out budget, with the
                           power law miss = c F^-r fitted to the planned medians (r in the legend)
  target_wait_vs_latency.png  the target's wait share (target_wait_s / decode_s) against the
                           emulated link latency, one line per mode and k
Every axis with more than one value gets the first two. Usage:
  python3 perf/scaling/plot_sweep.py RUNS.jsonl OUT_DIR [--title TEXT]
Needs matplotlib; without it, says so and exits 0.
"""
import argparse
import json
import math
import os
import statistics
import sys
from collections import defaultdict

AXES = ["drafter_ranks", "fan_out_budget", "k", "prespec_chunk", "link_latency_us", "batch"]


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def summary(xs):
    return statistics.median(xs), min(xs), max(xs)


def pair_key(r, drop):
    """A run's identity without the axes in `drop`: its other axes, prompt and repeat."""
    return tuple((x, str(r["axes"].get(x))) for x in AXES + ["mode"] if x not in drop) + (
        ("prompt", r["prompt"]), ("repeat", r["repeat"]))


def tok_s_points(runs, axis):
    """{line label: {axis value: [decode tok/s of each run]}}, one line per mode (and k when k
    is not the axis)."""
    lines = defaultdict(lambda: defaultdict(list))
    for r in runs:
        label = r["axes"]["mode"] + ("" if axis == "k" else f" k={r['axes']['k']}")
        lines[label][num(r["axes"][axis])].append(r["stats"]["decode_tokens_per_s"])
    return lines


def speedup_points(runs, axis):
    """{line label: {axis value: [SSD tok/s / SD tok/s]}}: each SSD run over the SD run that
    differs from it only in mode (same other axes, prompt and repeat); runs without a partner
    are left out."""
    sd = {pair_key(r, {"mode"}): r for r in runs if r["axes"]["mode"] == "sd"}
    ratio = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r["axes"]["mode"] != "ssd":
            continue
        b = sd.get(pair_key(r, {"mode"}))
        if b and b["stats"]["decode_tokens_per_s"] > 0:
            label = "SSD/SD" + ("" if axis == "k" else f" k={r['axes']['k']}")
            ratio[label][num(r["axes"][axis])].append(
                r["stats"]["decode_tokens_per_s"] / b["stats"]["decode_tokens_per_s"])
    return ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs")
    ap.add_argument("out_dir")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("plot_sweep: matplotlib is not installed (pip install matplotlib); no plots")
        return 0
    runs = [json.loads(l) for l in open(a.runs) if l.strip()]
    if not runs:
        sys.exit(f"plot_sweep: {a.runs} has no runs")
    os.makedirs(a.out_dir, exist_ok=True)
    varied = [x for x in AXES if len({str(r["axes"].get(x)) for r in runs}) > 1]
    note = (f"{len(runs)} runs; shared 2-core VM under load (load avg {min(r['load_avg'] for r in runs):.0f}"
            f"-{max(r['load_avg'] for r in runs):.0f})"
            + ("; some runs oversubscribed" if any(r["oversubscribed"] for r in runs) else ""))
    title = (a.title + "\n" if a.title else "") + note
    written = []

    def batch_axis(ax):  # powers of two, labelled 1, 2, 4, ...
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())

    def save(fig, name):
        path = os.path.join(a.out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    for axis in varied:
        # tok/s per mode (and k when k is not the axis)
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for label, pts in sorted(tok_s_points(runs, axis).items()):
            xs = sorted(pts)
            m = [summary(pts[x]) for x in xs]
            ax.errorbar(xs, [s[0] for s in m], yerr=[[s[0] - s[1] for s in m], [s[2] - s[0] for s in m]],
                        marker="o", capsize=3, label=label)
        ax.set_xlabel(axis + (" (requests decoded together)" if axis == "batch" else ""))
        ax.set_ylabel("decode tok/s" + (" of the whole batch" if axis == "batch" else "")
                      + " (median, min..max)")
        if axis == "batch":
            batch_axis(ax)
        ax.set_title(title, fontsize=7)
        ax.legend(fontsize=7)
        save(fig, f"tok_s_vs_{axis}.png")
        ratio = speedup_points(runs, axis)
        if ratio:
            fig, ax = plt.subplots(figsize=(6.5, 4))
            for label, pts in sorted(ratio.items()):
                xs = sorted(pts)
                m = [summary(pts[x]) for x in xs]
                ax.errorbar(xs, [s[0] for s in m],
                            yerr=[[s[0] - s[1] for s in m], [s[2] - s[0] for s in m]],
                            marker="o", capsize=3, label=label)
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xlabel(axis + (" (requests decoded together)" if axis == "batch" else ""))
            if axis == "batch":
                batch_axis(ax)
            ax.set_ylabel("SSD tok/s / SD tok/s (median, min..max)")
            ax.set_title(title, fontsize=7)
            ax.legend(fontsize=7)
            save(fig, f"speedup_vs_{axis}.png")

    ssd = [r for r in runs if r["axes"]["mode"] == "ssd" and "cache_hit_rate" in r["stats"]]
    if "fan_out_budget" in varied and ssd:
        # The hit rate, and the planned rate (the outcome was among the planned branches: the hit
        # rate had no pre-speculation been cut short); the power law is fitted to the latter.
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for key, label in (("cache_hit_rate", "cache hit rate"),
                           ("outcome_predicted_rate", "planned (hit if drafted in time)")):
            pts = defaultdict(list)
            for r in ssd:
                if key in r["stats"]:
                    pts[r["axes"]["fan_out_budget"]].append(r["stats"][key])
            xs = sorted(pts)
            med = [statistics.median(pts[x]) for x in xs]
            ax.errorbar(xs, med, yerr=[[m - min(pts[x]) for x, m in zip(xs, med)],
                                       [max(pts[x]) - m for x, m in zip(xs, med)]],
                        marker="o", capsize=3, label=label + " (median, min..max)")
        fit = [(math.log(x), math.log(1 - m)) for x, m in zip(xs, med) if 0 < 1 - m and x > 0]
        if len(fit) >= 2:
            n = len(fit)
            mx = sum(p[0] for p in fit) / n
            my = sum(p[1] for p in fit) / n
            sxx = sum((p[0] - mx) ** 2 for p in fit)
            slope = sum((p[0] - mx) * (p[1] - my) for p in fit) / sxx if sxx > 0 else 0
            c = math.exp(my - slope * mx)
            grid = [xs[0] + (xs[-1] - xs[0]) * i / 50 for i in range(51)]
            ax.plot(grid, [1 - c * g ** slope for g in grid], ls="--",
                    label=f"planned: 1 - c F^-r fit, r = {-slope:.2f}, c = {c:.2f}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("fan-out budget F (branches per sequence)")
        ax.set_ylabel("cache hit rate")
        ax.set_title(title, fontsize=7)
        ax.legend(fontsize=7)
        save(fig, "hit_rate_vs_fan_out.png")

    if "link_latency_us" in varied:
        lines = defaultdict(lambda: defaultdict(list))
        for r in runs:
            s = r["stats"]
            if "target_wait_s" in s and s["decode_s"] > 0:
                label = f"{r['axes']['mode']} k={r['axes']['k']}"
                lines[label][r["axes"]["link_latency_us"]].append(s["target_wait_s"] / s["decode_s"])
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for label, pts in sorted(lines.items()):
            xs = sorted(pts)
            m = [summary(pts[x]) for x in xs]
            ax.errorbar([x / 1000 for x in xs], [s[0] for s in m],
                        yerr=[[s[0] - s[1] for s in m], [s[2] - s[0] for s in m]],
                        marker="o", capsize=3, label=label)
        ax.set_xlabel("emulated one-way link latency (ms)")
        ax.set_ylabel("target wait / decode time (median, min..max)")
        ax.set_title(title, fontsize=7)
        ax.legend(fontsize=7)
        save(fig, "target_wait_vs_latency.png")
    for p in written:
        print(f"plot_sweep: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
