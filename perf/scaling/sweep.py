#!/usr/bin/env python3
"""Runs a grid of SSD/SD jobs under mpirun and writes one JSON line per run: every axis value, the
exact command, and the run's figures (tok/s, acceptance, cache hit rate, target wait, fan-out).
Axes take comma lists; every combination runs, for every prompt, `--repeats` times, alternating
the combinations (not one block per setting) so that a change in machine load hits them alike.

  python3 perf/scaling/sweep.py --out perf/out/latency.jsonl --modes ssd,sd --k 2,7 \\
      --link-latency-us 0,500,1000,2000 -n 32
  python3 perf/scaling/sweep.py --out perf/out/batch.jsonl --modes ssd,sd --batch 1,2,4,8 -n 64

Axes: --modes (ssd, sd), --drafter-ranks, --fan-out-budget, --k (or auto), --prespec-chunk (or
auto), --link-latency-us (--link-emulate; 0 = none), --batch (requests decoded together).
Runner: `ssd generate --stats-json` (one request) when every --batch is 1, else `ssd bench
--batch B --out-json` for every run of the grid, batch 1 included, so that all points of the
batch axis are measured the same way (--runner forces one). A bench run decodes B requests
together: prompts i, i+1, .. i+B-1 of the list (cycling when B exceeds it), and its figures are
the batch's (tok/s = tokens after each request's first, summed, over the batch's decode time).
Every run passes --ignore-eos, so every request decodes exactly -n tokens. A run with more ranks
than cores is marked "oversubscribed". SSD/SD is computed by plot_sweep.py from pairs of runs
that differ only in mode (--plot DIR draws them at the end). --dry-run prints each command (one
JSON line each) without running.
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


def csv(kind, low=None):
    def parse(s):
        out = [kind(x) for x in s.split(",") if x != ""]
        if not out:
            raise argparse.ArgumentTypeError("give at least one value")
        if low is not None and any(x < low for x in out):
            raise argparse.ArgumentTypeError(f"every value must be >= {low}: {s}")
        return out
    return parse


def batch_prompts(n_prompts, first, batch):
    """The prompt indices of a batch run that starts at prompt `first` (cycling the list)."""
    return [(first + j) % n_prompts for j in range(batch)]


def command(a, runner, point, prompt_arg, out_path):
    """The command line of one run. point: the axes; prompt_arg: the prompt (generate) or the
    prompt file (bench); out_path: where the run writes its figures."""
    base = ["--threads", str(a.threads), "-n", str(a.n), "--chat", "--ignore-eos",
            "--k", point["k"], "--fan-out-budget", str(point["fan_out_budget"]),
            "--prespec-chunk", point["prespec_chunk"]]
    if point["link_latency_us"] > 0:
        base += ["--link-emulate", f"{point['link_latency_us']:g}"]
    if runner == "generate":
        cmd = [a.bin, "generate", "-m", a.model, "-p", prompt_arg, "--quiet", "--mode",
               point["mode"], "--drafter", a.drafter, *base, "--stats-json", out_path]
    else:
        cmd = [a.bin, "bench", "-m", a.model, "--prompt-file", prompt_arg, "--batch",
               str(point["batch"]), "--modes", point["mode"], "--drafters", a.drafter, *base,
               "--out-json", out_path]
    return cmd


def stats_from_bench(j, mode):
    """The figures of a bench run of one mode: its summary row (the batch's decode tok/s, decode
    time, acceptance, hit rate, target wait, ...), each request's own figures, the commit."""
    rows = [r for r in j["summary"] if r["mode"] == mode]
    if len(rows) != 1:
        raise ValueError(f"bench output has {len(rows)} summary rows of mode {mode}")
    s = dict(rows[0])
    s["requests"] = [{"prompt_index": r["prompt_index"],
                      "tokens_generated": r["tokens_generated"],
                      "decode_tokens_per_s": r["decode_tokens_per_s"]}
                     for r in j["runs"] if r["mode"] == mode]
    s["commit"] = j.get("commit")
    s["context"] = j.get("context")
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSONL file to append to")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "ssd"))
    ap.add_argument("--model", default=os.environ.get("SSD_MODEL"))
    ap.add_argument("--drafter", default="domino:" + os.path.join(
        ROOT, "models", "smollm2-domino", "domino.safetensors"))
    ap.add_argument("--modes", type=csv(str), default=["ssd", "sd"])
    ap.add_argument("--drafter-ranks", type=csv(int, 1), default=[1])
    ap.add_argument("--fan-out-budget", type=csv(int, 1), default=[8])
    ap.add_argument("--k", type=csv(str), default=["4"])
    ap.add_argument("--prespec-chunk", type=csv(str), default=["auto"])
    ap.add_argument("--link-latency-us", type=csv(float, 0), default=[0.0])
    ap.add_argument("--batch", type=csv(int, 1), default=[1],
                    help="requests decoded together (ssd bench --batch)")
    ap.add_argument("--runner", choices=["auto", "generate", "bench"], default="auto",
                    help="auto: generate when every --batch is 1, else bench")
    ap.add_argument("-n", type=int, default=32, help="tokens per request")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", help="file with one prompt a line (default: two built in)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--prompt-index-offset", type=int, default=0,
                    help="added to the stored prompt index (to complete a grid cut short)")
    ap.add_argument("--label", default="", help="free text stored with every line")
    ap.add_argument("--plot", metavar="DIR",
                    help="at the end, draw --out's runs into DIR (plot_sweep.py): give a fresh "
                         "--out, or the plots mix in its earlier runs")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args(argv)
    for m in a.modes:
        if m not in ("ssd", "sd"):
            ap.error(f"--modes: '{m}' is not ssd or sd")
    runner = a.runner if a.runner != "auto" else (
        "generate" if a.batch == [1] else "bench")
    if runner == "generate" and a.batch != [1]:
        ap.error("--runner generate decodes one request: --batch must be 1")
    if not a.dry_run and (not a.model or not os.path.exists(a.model)):
        sys.exit("sweep: set --model or SSD_MODEL to the model file")
    prompts = DEFAULT_PROMPTS
    if a.prompts:  # one a line, '#' comments, "\n" a newline (as ssd bench reads them)
        prompts = [l.strip().replace("\\n", "\n") for l in open(a.prompts)
                   if l.strip() and not l.startswith("#")]
        if not prompts:
            ap.error(f"--prompts: {a.prompts} has no prompts")
    cores = os.cpu_count() or 1
    grid = list(itertools.product(a.drafter_ranks, a.fan_out_budget, a.k, a.prespec_chunk,
                                  a.link_latency_us, a.batch, a.modes))
    mpirun = os.environ.get("MPIEXEC", "mpirun")
    root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done, total = 0, len(grid) * len(prompts) * a.repeats
    with open(os.devnull if a.dry_run else a.out, "a") as out, \
            tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repeats):
            for pi in range(len(prompts)):
                for dr, budget, k, chunk, lat, batch, mode in grid:
                    point = {"mode": mode, "drafter_ranks": dr, "fan_out_budget": budget, "k": k,
                             "prespec_chunk": chunk, "link_latency_us": lat, "batch": batch}
                    ranks = 1 + dr
                    stats_path = os.path.join(tmp, "stats.json")
                    indices = batch_prompts(len(prompts), pi, batch)
                    if runner == "generate":
                        prompt_arg = prompts[pi]
                    else:
                        prompt_arg = os.path.join(tmp, "prompts.txt")
                        with open(prompt_arg, "w") as f:
                            f.write("".join(prompts[i].replace("\n", "\\n") + "\n"
                                            for i in indices))
                    cmd = command(a, runner, point, prompt_arg, stats_path)
                    launch = [mpirun, *root_flag, "--oversubscribe", "--bind-to", "none", "-n",
                              str(ranks)]
                    if a.dry_run:
                        print(json.dumps({"runner": runner, "axes": point, "prompts": indices,
                                          "prompt_lines": [prompts[i] for i in indices],
                                          "command": launch + cmd}))
                        continue
                    r = subprocess.run(launch + cmd, capture_output=True, text=True, timeout=1800)
                    if r.returncode != 0:
                        sys.exit(f"sweep: run failed ({' '.join(launch + cmd)}):\n"
                                 f"{r.stderr[-2000:]}")
                    j = json.load(open(stats_path))
                    if runner == "generate":
                        s = j
                        for key in ("output_token_ids", "output_text", "prompt_token_ids"):
                            s.pop(key, None)
                    else:
                        s = stats_from_bench(j, mode)
                    line = {"axes": point, "runner": runner,
                            "prompt": pi + a.prompt_index_offset,
                            "prompts": [i + a.prompt_index_offset for i in indices],
                            "repeat": rep, "ranks": ranks, "oversubscribed": ranks > cores,
                            "cores": cores, "load_avg": os.getloadavg()[0], "label": a.label,
                            "command": " ".join(cmd), "stats": s}
                    out.write(json.dumps(line) + "\n")
                    out.flush()
                    done += 1
                    print(f"sweep: {done}/{total} {mode} k={k} F={budget} lat={lat:g}us "
                          f"batch={batch}: {s['decode_tokens_per_s']:.1f} tok/s", flush=True)
    if a.plot and not a.dry_run:
        return subprocess.run([sys.executable, os.path.join(HERE, "plot_sweep.py"), a.out,
                               a.plot]).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
