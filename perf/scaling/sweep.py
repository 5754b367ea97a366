#!/usr/bin/env python3
"""Runs a grid of `ssd generate` jobs under mpirun and writes one JSON line per run: every axis
value, the exact command, and the figures of its --stats-json (tok/s, acceptance, cache hit rate,
target wait, fan-out, the start-up link probe). Axes take comma lists; every combination runs,
for every prompt, `--repeats` times, alternating the combinations (not one block per setting) so
a change in machine load hits them alike.

  python3 perf/scaling/sweep.py --out perf/out/latency.jsonl --modes ssd,sd --k 2,7 \\
      --link-latency-us 0,500,1000,2000 -n 32

Axes: --modes (ssd, sd), --drafter-ranks, --fan-out-budget, --k, --prespec-chunk (or auto),
--link-latency-us (--link-emulate; 0 = none). A run with more ranks than cores is marked
"oversubscribed". SSD/SD is computed by plot_sweep.py from pairs of runs that differ only in mode.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_PROMPTS = ["Name three primary colors and one fact about each.",
                   "Write a short poem about the sea."]


def csv(kind):
    return lambda s: [kind(x) for x in s.split(",") if x != ""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSONL file to append to")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "ssd"))
    ap.add_argument("--model", default=os.environ.get("SSD_MODEL"))
    ap.add_argument("--drafter", default="domino:" + os.path.join(
        ROOT, "models", "smollm2-domino", "domino.safetensors"))
    ap.add_argument("--modes", type=csv(str), default=["ssd", "sd"])
    ap.add_argument("--drafter-ranks", type=csv(int), default=[1])
    ap.add_argument("--fan-out-budget", type=csv(int), default=[8])
    ap.add_argument("--k", type=csv(str), default=["4"])
    ap.add_argument("--prespec-chunk", type=csv(str), default=["auto"])
    ap.add_argument("--link-latency-us", type=csv(float), default=[0.0])
    ap.add_argument("-n", type=int, default=32, help="tokens per prompt")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", help="file with one prompt a line (default: two built in)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompt-index-offset", type=int, default=0,
                    help="added to the stored prompt index (to complete a grid cut short)")
    ap.add_argument("--label", default="", help="free text stored with every line")
    a = ap.parse_args()
    if not a.model or not os.path.exists(a.model):
        sys.exit("sweep: set --model or SSD_MODEL to the model file")
    prompts = DEFAULT_PROMPTS
    if a.prompts:
        prompts = [l.strip() for l in open(a.prompts) if l.strip()]
    cores = os.cpu_count() or 1
    grid = list(itertools.product(a.drafter_ranks, a.fan_out_budget, a.k, a.prespec_chunk,
                                  a.link_latency_us, a.modes))
    mpirun = os.environ.get("MPIEXEC", "mpirun")
    root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done = 0
    with open(a.out, "a") as out, tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeats):
            for pi, prompt in enumerate(prompts):
                for dr, budget, k, chunk, lat, mode in grid:
                    ranks = 1 + dr
                    stats = os.path.join(tmp, "stats.json")
                    cmd = [mpirun, *root_flag, "--oversubscribe", "--bind-to", "none", "-n",
                           str(ranks), a.bin, "generate", "-m", a.model, "--chat", "-p", prompt,
                           "-n", str(a.n), "--ignore-eos", "--quiet", "--threads", str(a.threads),
                           "--mode", mode, "--drafter", a.drafter, "--k", k,
                           "--fan-out-budget", str(budget), "--prespec-chunk", chunk,
                           "--stats-json", stats]
                    if lat > 0:
                        cmd += ["--link-emulate", f"{lat:g}"]
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                    if r.returncode != 0:
                        sys.exit(f"sweep: run failed ({' '.join(cmd)}):\n{r.stderr[-2000:]}")
                    s = json.load(open(stats))
                    for key in ("output_token_ids", "output_text", "prompt_token_ids"):
                        s.pop(key, None)
                    line = {"axes": {"mode": mode, "drafter_ranks": dr, "fan_out_budget": budget,
                                     "k": k, "prespec_chunk": chunk, "link_latency_us": lat,
                                     "batch": 1},
                            "prompt": pi + a.prompt_index_offset, "repeat": rep, "ranks": ranks,
                            "oversubscribed": ranks > cores, "cores": cores,
                            "load_avg": os.getloadavg()[0], "label": a.label,
                            "command": " ".join(cmd[cmd.index(a.bin):]), "stats": s}
                    out.write(json.dumps(line) + "\n")
                    out.flush()
                    done += 1
                    print(f"sweep: {done}/{len(grid) * len(prompts) * a.repeats} {mode} k={k} "
                          f"F={budget} lat={lat:g}us: {s['decode_tokens_per_s']:.1f} tok/s",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
