#!/usr/bin/env python3
"""Predicted vs measured tok/s for the cells of perf/sim_measure.sh (docs/simulator.md).

Each measured run (one prompt of one mode) becomes an outcome trace: on 2 ranks the leader's own
per-round record (`ssd bench --outcome-trace`), else its rounds with their accepted counts (from the run's accepted-length histogram; an n-gram drafter offers a draft only
when its lookup matches, so its offered rounds are estimated from the position-1 acceptance rate;
SSD rounds get the job's cache hit rate spread evenly). `ssd simulate --outcome-trace` replays it
on the calibrated CPU profiles, so the counts are the measured ones and only the time is
predicted. Per cell: tok/s = all tokens / all decode seconds of the rep's prompts; the median over
reps is compared.

  perf/sim_validate.py [MEASURED_DIR]
    MEASURED_DIR  default perf/out/sim_validate (perf/sim_measure.sh's output): bench JSON and,
                  the CPU profile calibrated just before each job: cpu_2t_repN.json (the 1-rank
                  job, 2 threads) and cpu_1t_<drafter>_k<k>_repN.json (each 2-rank job, 1 thread
                  on one core)
Env: SSD_BIN (default build/bin/ssd).
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("SSD_BIN", os.path.join(ROOT, "build/bin/ssd"))
MEAS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "perf/out/sim_validate")


def trace_of(run, hit_rate=None, recorded=None):
    if recorded and os.path.exists(recorded):  # the leader's own per-round record
        return [json.loads(line) for line in open(recorded) if line.strip()]
    hist = run["accepted_length_histogram"]
    k = run["k"]
    if run["mode"] == "ar":
        return [{"round": i, "seq": 0, "k": 0, "accepted": 0} for i in range(run["tokens_generated"])]
    rounds = sum(hist)
    accepted_any = sum(hist[1:])
    rate0 = (run["acceptance_rate_per_position"] or [0])[0]
    if "ngram" in (run["drafter"] or ""):
        offered = min(rounds, round(accepted_any / rate0)) if rate0 > 0 else 0
    else:
        offered = rounds
    recs = []
    for a, n in enumerate(hist):
        recs += [a] * n
    recs.sort(reverse=True)  # rounds that accepted something were offered a draft
    out = []
    for i, a in enumerate(recs):
        r = {"round": i, "seq": 0, "k": k if i < offered else 0, "accepted": a, "bonus_rank": -1}
        if hit_rate is not None:
            r["hit"] = int((i + 1) * hit_rate) > int(i * hit_rate)
        out.append(r)
    return out


def predict(trace, mode, args):
    with tempfile.TemporaryDirectory() as d:
        tp = os.path.join(d, "t.jsonl")
        with open(tp, "w") as f:
            f.write("\n".join(json.dumps(r) for r in trace) + "\n")
        jp = os.path.join(d, "r.json")
        cmd = [BIN, "simulate", "--mode", mode, "--outcome-trace", tp, "--json", jp] + args
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(jp))["results"][0]["seconds"]


def cells():
    """(cell name, rep, mode, list of runs, simulate flags)"""
    for path in sorted(glob.glob(os.path.join(MEAS, "rank*.json"))):
        name = os.path.basename(path)
        rep = int(re.search(r"rep(\d+)", name).group(1))
        j = json.load(open(path))
        ranks = 1 if name.startswith("rank1") else 2
        prof = os.path.join(MEAS, f"cpu_2t_rep{rep}.json")
        if ranks == 2:  # the profile calibrated just before this job
            prof = os.path.join(MEAS, name.replace("rank2_", "cpu_1t_"))
        summ = {(s["mode"], s["drafter"] or "", s["k"]): s for s in j["summary"]}
        groups = {}
        for r in j["runs"]:
            groups.setdefault((r["mode"], r["drafter"] or "", r["k"]), []).append(r)
        for (mode, drafter, k), runs in groups.items():
            dname = "ngram" if "ngram" in drafter else ("domino" if drafter else "-")
            flags = ["--target", "smollm2-135m", "--device-profile", prof, "--tp", "1"]
            flags += ["--drafter", "smollm2-domino" if dname == "domino" else "ngram"]
            flags += ["--k", str(max(k, 1))]
            if ranks == 1:
                flags += ["--colocated"]
            else:
                flags += ["--drafter-link", "shm", "--prespec-chunk", "2"]
            hit = None
            if mode == "ssd":
                s = summ[(mode, drafter, k)]
                hit = s.get("cache_hit_rate", 0)
                flags += ["--critical-batch", str(s.get("critical_batch", 0)),
                          "--mal", str(max(1.0, s["mean_acceptance_length"]))]
            cell = f"{ranks} rank{'s' if ranks > 1 else ''} {mode} {dname}" + (f" k{k}" if k else "")
            tdir = None
            if ranks == 2 and mode != "ar":
                tdir = os.path.join(MEAS, f"traces_{dname}_k{k}_rep{rep}")
            yield cell, rep, mode, runs, flags, hit, tdir


def main():
    if not glob.glob(os.path.join(MEAS, "rank*.json")):
        sys.exit(f"sim_validate: no measurements in {MEAS} (run perf/sim_measure.sh)")
    res = {}
    for cell, rep, mode, runs, flags, hit, tdir in cells():
        tokens = sum(r["tokens_generated"] for r in runs)
        meas_s = sum(r["decode_s"] for r in runs)
        pred_s = 0
        for r in runs:
            rec = os.path.join(tdir, f"{mode}_p{r['prompt_index']}.jsonl") if tdir else None
            pred_s += predict(trace_of(r, hit, rec), mode, flags + ["--prompt", str(r["prompt_tokens"])])
        res.setdefault(cell, []).append((tokens / meas_s, tokens / pred_s))
    print("| cell | measured tok/s, median (min..max) | predicted tok/s | error |")
    print("|---|---|---|---|")
    errs = []
    for cell in sorted(res):
        m = [x[0] for x in res[cell]]
        p = statistics.median(x[1] for x in res[cell])
        mm = statistics.median(m)
        e = (p - mm) / mm
        errs.append(abs(e))
        print(f"| {cell} | {mm:.1f} ({min(m):.1f}..{max(m):.1f}) | {p:.1f} | {100 * e:+.1f}% |")
    print(f"\n{len(errs)} cells: median |error| {100 * statistics.median(errs):.1f}%, "
          f"worst {100 * max(errs):.1f}%")


if __name__ == "__main__":
    main()
