#!/usr/bin/env python3
"""GPU-cluster predictions of `ssd simulate` for docs/simulator.md: every table there is printed by
this script (markdown on stdout) and saved as JSON for perf/plot_sim.py.

  perf/sim_gpu.py [OUT_JSON]      (default perf/out/sim/gpu.json)
Env: SSD_BIN (default build/bin/ssd).

Assumptions shared by every table (each is a flag of `ssd simulate`, listed in BASE): H100-SXM
presets (3.35 TB/s HBM3, 989 TFLOP/s dense BF16, 80% of bandwidth and 60% of peak achieved,
100 us + 5 us per layer of fixed cost per forward), target TP 4 over NVLink 4, one drafter H100
over NVLink 4, BF16 weights and KV, 512-token prompts, 256 generated tokens per sequence, K = 4,
greedy-style acceptance a per position, bonus-rank power law miss(F) = 0.3 F^-0.6, geometric
fan-out with 8 branches per sequence (the default --fan-out-budget) drafted in one call (the GPU default), the miss policy's own
b* (primary drafter at small batch, an n-gram backup with a = 0.2 above), --miss-at leader (the
runtime's default: a miss the backup answers, past b*, is drafted by the target leader at once,
with no wait for an answer; misses the 1B primary answers, at or below b*, wait for it), seed 1.
Table (d) also prints SSD/SD under --miss-at drafter (the drafter rank answers every miss).
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SSD_BIN", os.path.join(ROOT, "build/bin/ssd"))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "perf/out/sim/gpu.json")
BASE = ["--target-device", "h100-sxm", "--tp", "4", "--tp-link", "nvlink4", "--drafter-link",
        "nvlink4", "--prompt", "512", "--tokens", "256", "--k", "4", "--miss-at-1", "0.3",
        "--power-r", "0.6", "--prespec-chunk", "0", "--backup-accept",
        "0.2", "--miss-at", "leader", "--seed", "1"]
PAIRS = [("llama-3.1-70b", "llama-3.2-1b"), ("qwen3-32b", "qwen3-0.6b")]
BATCHES = [1, 2, 4, 8, 16]


def sim(flags):
    given = set(flags[::2])
    base = [x for i in range(0, len(BASE), 2) if BASE[i] not in given for x in BASE[i:i + 2]]
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "r.json")
        subprocess.run([BIN, "simulate", "--json", p] + base + flags, check=True,
                       stdout=subprocess.DEVNULL)
        return json.load(open(p))["results"]


def by_mode(results):
    out = {}
    for r in results:
        out.setdefault(r["batch"], {})[r["mode"]] = r
    return out


def table_a(data):
    for target, drafter in PAIRS:
        print(f"\n### (a) {target} TP4 + {drafter} on a fifth H100\n")
        print("| a | B | AR tok/s | SD tok/s | SSD tok/s | SD/AR | SSD/AR | SSD/SD | hit rate | "
              "SSD theory tok/s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for a in [0.6, 0.7, 0.8, 0.9]:
            res = by_mode(sim(["--target", target, "--drafter", drafter, "--accept", str(a),
                               "--batch", ",".join(map(str, BATCHES))]))
            for b in BATCHES:
                ar, sd, ssd = res[b]["ar"], res[b]["sd"], res[b]["ssd"]
                data.setdefault("a", []).append({"target": target, "a": a, "batch": b,
                                                 "ar": ar["tokens_per_s"],
                                                 "sd": sd["tokens_per_s"],
                                                 "ssd": ssd["tokens_per_s"],
                                                 "hit": ssd["hit_rate"]})
                print(f"| {a} | {b} | {ar['tokens_per_s']:.0f} | {sd['tokens_per_s']:.0f} | "
                      f"{ssd['tokens_per_s']:.0f} | {sd['tokens_per_s'] / ar['tokens_per_s']:.2f}x | "
                      f"{ssd['tokens_per_s'] / ar['tokens_per_s']:.2f}x | "
                      f"{ssd['tokens_per_s'] / sd['tokens_per_s']:.2f}x | {ssd['hit_rate']:.2f} | "
                      f"{ssd['theory']['tokens_per_s']:.0f} |")


def table_b(data):
    print("\n### (b) draft compute: 1..4 drafter H100s (Llama-3.1-70B TP4 + Llama-3.2-1B, a = 0.8)\n")
    print("| drafters | budget / seq | B | SSD tok/s | SSD/SD | hit rate | branches drafted | "
          "drafter busy |")
    print("|---|---|---|---|---|---|---|---|")
    for d in [1, 2, 3, 4]:
        for budget in sorted({8, 8 * d}):
            res = by_mode(sim(["--target", "llama-3.1-70b", "--drafter", "llama-3.2-1b",
                               "--accept", "0.8", "--drafters", str(d), "--fan-out-budget",
                               str(budget), "--batch", "1,16", "--mode", "sd,ssd"]))
            for b in [1, 16]:
                sd, ssd = res[b]["sd"], res[b]["ssd"]
                data.setdefault("b", []).append({"drafters": d, "budget": budget, "batch": b,
                                                 "ssd": ssd["tokens_per_s"],
                                                 "sd": sd["tokens_per_s"], "hit": ssd["hit_rate"]})
                print(f"| {d} | {budget} | {b} | {ssd['tokens_per_s']:.0f} | "
                      f"{ssd['tokens_per_s'] / sd['tokens_per_s']:.2f}x | {ssd['hit_rate']:.2f} | "
                      f"{ssd['branches_drafted']} | "
                      f"{100 * ssd['drafter_busy_s'] / ssd['seconds']:.0f}% |")


def table_c(data):
    print("\n### (c) the drafter's link (Llama-3.1-70B TP4 + Llama-3.2-1B, a = 0.8; TP stays on NVLink)\n")
    print("Features: 0 = a plain small LM drafter (the outcome is a few tokens); 24576 = a drafter "
          "conditioned on 3 target layers' hidden states (EAGLE-3 / Domino style, 3 x 8192 fp32 "
          "per accepted token).\n")
    print("| drafter link | features / token | B | SD tok/s | SSD tok/s | SSD/SD | comm share (SSD) |")
    print("|---|---|---|---|---|---|---|")
    for feat in [0, 24576]:
        for link in ["nvlink4", "pcie5", "pcie4", "ib400", "eth25"]:
            res = by_mode(sim(["--target", "llama-3.1-70b", "--drafter", "llama-3.2-1b", "--accept",
                               "0.8", "--drafter-link", link, "--drafter-feature-dim", str(feat),
                               "--batch", "1,16", "--mode", "sd,ssd"]))
            for b in [1, 16]:
                sd, ssd = res[b]["sd"], res[b]["ssd"]
                data.setdefault("c", []).append({"link": link, "features": feat, "batch": b,
                                                 "sd": sd["tokens_per_s"],
                                                 "ssd": ssd["tokens_per_s"]})
                print(f"| {link} | {feat} | {b} | {sd['tokens_per_s']:.0f} | "
                      f"{ssd['tokens_per_s']:.0f} | {ssd['tokens_per_s'] / sd['tokens_per_s']:.2f}x | "
                      f"{100 * ssd['comm_s'] / ssd['seconds']:.0f}% |")


def table_d(data):
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    print("\n### (d) the critical batch (Llama-3.1-70B TP4 + Llama-3.2-1B)\n")
    print("| a | B | SD tok/s | SSD tok/s | SSD/SD (simulated) | SSD/SD (theory) | hit rate | "
          "P(some miss) = 1 - h^B | b* (miss policy) | misses drafted by the leader | "
          "SSD/SD, --miss-at drafter |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for a in [0.7, 0.8]:
        flags = ["--target", "llama-3.1-70b", "--drafter", "llama-3.2-1b", "--accept", str(a),
                 "--batch", ",".join(map(str, batches)), "--mode", "sd,ssd"]
        res = by_mode(sim(flags))
        drafter = by_mode(sim(flags + ["--miss-at", "drafter"]))
        for b in batches:
            sd, ssd, ssd_d = res[b]["sd"], res[b]["ssd"], drafter[b]["ssd"]
            th = ssd["theory"]["tokens_per_s"] / sd["theory"]["tokens_per_s"]
            h = ssd["theory"]["hit_rate"]
            lead = ssd["leader_drafted"] / max(1, ssd["misses"])
            data.setdefault("d", []).append({"a": a, "batch": b, "sd": sd["tokens_per_s"],
                                             "ssd": ssd["tokens_per_s"], "theory": th,
                                             "ssd_miss_at_drafter": ssd_d["tokens_per_s"]})
            print(f"| {a} | {b} | {sd['tokens_per_s']:.0f} | {ssd['tokens_per_s']:.0f} | "
                  f"{ssd['tokens_per_s'] / sd['tokens_per_s']:.2f}x | {th:.2f}x | "
                  f"{ssd['hit_rate']:.2f} | {1 - h ** b:.2f} | {ssd['critical_batch']} | "
                  f"{lead:.0%} | {ssd_d['tokens_per_s'] / sd['tokens_per_s']:.2f}x |")


def main():
    data = {"base_flags": BASE}
    table_a(data)
    table_b(data)
    table_c(data)
    table_d(data)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    json.dump(data, open(OUT, "w"), indent=1)
    print(f"\n(simulated with {' '.join(BASE)}; JSON in {OUT})")


if __name__ == "__main__":
    main()
