#!/usr/bin/env python3
"""Plots of the simulator's GPU predictions (perf/sim_gpu.py's JSON) as PNGs for docs/simulator.md.

  perf/plot_sim.py [GPU_JSON] [OUT_DIR]   (defaults perf/out/sim/gpu.json, perf/out/sim)

Skips with a message (exit 0) when matplotlib is not installed: `pip install matplotlib`.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "perf/out/sim/gpu.json")
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "perf/out/sim")
NOTE = "simulated (ssd simulate, H100-SXM presets), not measured"


def main():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_sim: matplotlib is not installed; skipping the plots (pip install matplotlib)")
        return
    data = json.load(open(SRC))
    os.makedirs(OUT, exist_ok=True)

    # (a) tok/s vs batch per mode, one panel per target, at the implied acceptance.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, target in zip(axes, ["llama-3.1-70b", "qwen3-32b"]):
        for a, style in [(0.7, ":"), (0.8, "-")]:
            rows = [r for r in data["a"] if r["target"] == target and r["a"] == a]
            b = [r["batch"] for r in rows]
            for mode, color in [("ar", "gray"), ("sd", "tab:blue"), ("ssd", "tab:red")]:
                ax.plot(b, [r[mode] for r in rows], style, color=color, marker="o",
                        label=f"{mode.upper()} a={a}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch B")
        ax.set_ylabel("tok/s (all sequences)")
        ax.set_title(f"{target} TP4 + drafter on a 5th H100")
        ax.legend(fontsize=7)
    fig.suptitle(NOTE, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sim_a_modes.png"), dpi=110)

    # (b) draft compute scaling.
    fig, ax = plt.subplots(figsize=(6, 4))
    for b, color in [(1, "tab:red"), (16, "tab:purple")]:
        rows = [r for r in data["b"] if r["batch"] == b and r["budget"] == 8 * r["drafters"]]
        d = [r["drafters"] for r in rows]
        ax.plot(d, [r["ssd"] / r["sd"] for r in rows], "-o", color=color, label=f"SSD/SD, B={b}")
        ax2 = ax.twinx() if b == 1 else ax2
        ax2.plot(d, [r["hit"] for r in rows], "--s", color=color, alpha=0.6, label=f"hit rate, B={b}")
    ax.set_xlabel("drafter H100s (budget 8 branches per sequence per GPU)")
    ax.set_ylabel("SSD / SD")
    ax2.set_ylabel("cache hit rate (dashed)")
    ax.legend(loc="upper left", fontsize=8)
    ax2.legend(loc="lower right", fontsize=8)
    ax.set_title("Draft compute scaling, Llama-3.1-70B TP4 + 3.2-1B", fontsize=9)
    fig.suptitle(NOTE, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sim_b_drafters.png"), dpi=110)

    # (c) links.
    fig, ax = plt.subplots(figsize=(7, 4))
    links = list(dict.fromkeys(r["link"] for r in data["c"]))
    width = 0.2
    for i, (feat, b) in enumerate([(0, 1), (24576, 1), (0, 16), (24576, 16)]):
        rows = {r["link"]: r for r in data["c"] if r["features"] == feat and r["batch"] == b}
        ax.bar([x + i * width for x in range(len(links))],
               [rows[l]["ssd"] / rows[l]["sd"] for l in links], width,
               label=f"B={b}, {'features' if feat else 'tokens only'}")
    ax.set_xticks([x + 1.5 * width for x in range(len(links))], links)
    ax.set_ylabel("SSD / SD")
    ax.axhline(1, color="black", lw=0.5)
    ax.legend(fontsize=8)
    ax.set_title("Drafter link, Llama-3.1-70B TP4 + 3.2-1B, a = 0.8", fontsize=9)
    fig.suptitle(NOTE, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sim_c_links.png"), dpi=110)

    # (d) critical batch.
    fig, ax = plt.subplots(figsize=(6, 4))
    for a, color in [(0.7, "tab:blue"), (0.8, "tab:red")]:
        rows = [r for r in data["d"] if r["a"] == a]
        b = [r["batch"] for r in rows]
        ax.plot(b, [r["ssd"] / r["sd"] for r in rows], "-o", color=color, label=f"simulated, a={a}")
        ax.plot(b, [r["theory"] for r in rows], "--", color=color, label=f"closed form, a={a}")
        if "ssd_miss_at_drafter" in rows[0]:
            ax.plot(b, [r["ssd_miss_at_drafter"] / r["sd"] for r in rows], ":", color=color,
                    label=f"simulated, --miss-at drafter, a={a}")
    ax.axhline(1, color="black", lw=0.5)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch B")
    ax.set_ylabel("SSD / SD")
    ax.legend(fontsize=8)
    ax.set_title("Where SSD's advantage over SD vanishes", fontsize=9)
    fig.suptitle(NOTE, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "sim_d_critical_batch.png"), dpi=110)
    print(f"plot_sim: wrote 4 PNGs to {OUT}")


if __name__ == "__main__":
    main()
