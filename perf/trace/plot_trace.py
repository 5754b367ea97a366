#!/usr/bin/env python3
"""Renders a --trace-json timeline (Chrome trace events) to a PNG: one row per rank and track,
a bar per span (coloured by kind: target forwards, drafter work, waits, messages), a tick per
cache hit / miss / cut, a line per message from its send to its receipt. A stand-in for a
Perfetto screenshot where no browser is at hand.

  python3 perf/trace/plot_trace.py TRACE.json OUT.png [--from-ms A] [--to-ms B] [--title T]

Needs matplotlib (pip install matplotlib); without it, says so and exits 0.
"""
import argparse
import json
import sys

COLOURS = {"prefill": "#4c72b0", "verify": "#4c72b0", "target forward (shard)": "#4c72b0",
           "pre-speculate chunk": "#55a868", "answer outcome": "#8172b3",
           "draft (first speculations)": "#8172b3", "fallback draft": "#c44e52",
           "wait for speculation": "#dddddd", "wait for outcome": "#dddddd",
           "wait for work": "#dddddd"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("out")
    ap.add_argument("--from-ms", type=float, default=None)
    ap.add_argument("--to-ms", type=float, default=None)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("plot_trace: matplotlib is not installed (pip install matplotlib); no plot")
        return 0
    doc = json.load(open(a.trace))
    ev = doc["traceEvents"]
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    pname = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    rows = sorted(tname)
    row_of = {k: i for i, k in enumerate(rows)}
    lo = a.from_ms * 1e3 if a.from_ms is not None else -1e18
    hi = a.to_ms * 1e3 if a.to_ms is not None else 1e18

    def visible(e):
        end = e["ts"] + e.get("dur", 0)
        return end >= lo and e["ts"] <= hi

    fig, ax = plt.subplots(figsize=(14, 1.0 + 0.7 * len(rows)))
    for e in ev:
        if e["ph"] != "X" or not visible(e):
            continue
        y = row_of[(e["pid"], e["tid"])]
        link = e.get("cat") == "link"
        colour = "#222222" if link else COLOURS.get(e["name"], "#937860")
        h = 0.25 if link else 0.7
        ax.broken_barh([(e["ts"] / 1e3, max(e["dur"] / 1e3, 0.02))], (y - h / 2, h),
                       facecolors=colour, edgecolor="none")
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    for e in ev:
        if e["ph"] == "f" and e["id"] in starts and visible(e):
            s = starts[e["id"]]
            ax.annotate("", xy=(e["ts"] / 1e3, row_of[(e["pid"], e["tid"])]),
                        xytext=(s["ts"] / 1e3, row_of[(s["pid"], s["tid"])]),
                        arrowprops=dict(arrowstyle="->", color="#444444", lw=0.6))
    marks = {"cache hit": ("#2ca02c", "^"), "cache miss": ("#d62728", "v"),
             "pre-speculation cut": ("#ff7f0e", "x")}
    for e in ev:
        if e["ph"] == "i" and visible(e) and e["name"] in marks:
            c, m = marks[e["name"]]
            ax.plot(e["ts"] / 1e3, row_of[(e["pid"], e["tid"])] + 0.45, marker=m, color=c,
                    markersize=6, linestyle="none")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{pname.get(p, p)}\n{tname[(p, t)]}" for p, t in rows], fontsize=8)
    ax.invert_yaxis()
    if a.from_ms is not None or a.to_ms is not None:
        ax.set_xlim(a.from_ms, a.to_ms)
    ax.set_xlabel("ms (rank 0's clock)")
    ax.set_title(a.title, fontsize=9)
    legend = [Patch(color=c, label=n) for n, c in
              (("target forward", "#4c72b0"), ("pre-speculation", "#55a868"),
               ("drafter answer / first draft", "#8172b3"), ("fallback draft", "#c44e52"),
               ("wait", "#dddddd"), ("send / recv", "#222222"))]
    legend += [plt.Line2D([], [], color=c, marker=m, linestyle="none", label=n)
               for n, (c, m) in marks.items()]
    ax.legend(handles=legend, fontsize=7, ncol=5, loc="upper center",
              bbox_to_anchor=(0.5, -0.28 if len(rows) < 5 else -0.12))
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"plot_trace: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
