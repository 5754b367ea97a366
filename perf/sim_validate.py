#!/usr/bin/env python3
"""Predicted vs measured tok/s for every cell of perf/sim_measure.sh (docs/simulator.md).

Every measured batch recorded its outcome trace (`ssd bench --outcome-trace`: AR steps, SD rounds
with the offered k, which --k auto chose per round, and SSD rounds with their cache hits);
`ssd simulate --outcome-trace` replays it on the CPU profile calibrated in the same rep (with its
drafter fits and verifier host cost), so the counts are the measured ones and only the time is
predicted. 2-rank jobs use the drafter link their own start-up probe measured (latency and 1 MiB
bandwidth, from the bench JSON). A cell's measured tok/s is the bench summary's decode tok/s of
that configuration; its predicted tok/s is the replayed tokens over the replayed seconds of the
same batches. Each rep's drafter fits are first refitted from the measurements its profile
stores (`ssd simulate --refit`), so older reps replay under the current fit models. A job
measured with speed probes around it (perf/sim_measure.sh's probe_<job>_pre/post.json) replays
on the profile scaled to the machine's speed at its time (`ssd simulate --speed-probe`,
topology/sim/speed_probe.h); reps without probes replay on the profile as calibrated. Each
cell is compared as the median over its measurements (reps, and for 2-rank AR
every job that ran it): the median measured tok/s against the median predicted (each rep's
prediction from its own profile). Beside it, every rep alone (its summary and its groups).

  perf/sim_validate.py [MEASURED_DIR] [--markdown PATH]
    MEASURED_DIR  default perf/out/sim_validate (perf/sim_measure.sh's output: rep*/)
    --markdown    also write the table, its summary line and the load averages to PATH
    --no-kv-probe replay without the attention's growth over the context (the model before it)
Env: SSD_BIN (default build/bin/ssd), SSD_MODEL (default the project's model cache).
"""
import argparse
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
MODEL = os.environ.get("SSD_MODEL",
                       os.path.join(ROOT, ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
SIM_DRAFTER = {"ngram": "ngram", "domino": "smollm2-domino", "model": MODEL}
KV_PROBE = True  # --no-kv-probe: replay without the measured attention growth (the model before)


def kind_of(drafter):
    """The bench's drafter text ("ngram:1-4", "domino", "model:/p", "domino:/p") -> its kind."""
    return re.split(r"[: ]", drafter or "-")[0]


def job_of(path):
    """(ranks, batch, chunk) of a bench JSON written by sim_measure.sh, or None."""
    name = os.path.basename(path)
    m = re.fullmatch(r"r1_b(\d+)\.json", name)
    if m:
        return 1, int(m.group(1)), None
    m = re.fullmatch(r"r2_\w+?_k\w+_b(\d+)_c(\d+)\.json", name)
    if m:
        return 2, int(m.group(1)), int(m.group(2))
    return None


def link_json(bench, tmp):
    """The drafter link the job's start-up probe measured, as a simulator link profile."""
    d = (bench.get("links") or {}).get("drafters") or []
    if not d or not d[0].get("gbps_1mib"):
        return "shm"
    path = os.path.join(tmp, f"link{abs(hash(json.dumps(d[0])))}.json")
    with open(path, "w") as f:
        json.dump({"name": "probed", "latency_s": d[0]["latency_us"] * 1e-6,
                   "bw_Bps": d[0]["gbps_1mib"] * 1e9}, f)
    return path


def with_kv_probe(prof, tmp):
    """The profile with the attention's growth over the context measured, when it timed one
    context only: the forwards of perf/sim_kv_probe_<threads>t.json (the speed probe's shapes at
    32 and 256 cached tokens) join its measurements, and the refit fits the attention per cached
    position from them (topology/sim/cpu_calibration.h, fit_kv_slopes). A profile of a thread
    count with no such file, or one that timed two contexts itself, is used as it is."""
    if not KV_PROBE:
        return prof
    j = json.load(open(prof))
    m = re.fullmatch(r"cpu-(\d+)t-calibrated", j.get("name", ""))
    kv = m and os.path.join(ROOT, f"perf/sim_kv_probe_{m.group(1)}t.json")
    meas = j.get("measurements") or []
    if not kv or not os.path.exists(kv) or len({x["context"] for x in meas}) > 1:
        return prof
    j["measurements"] = meas + json.load(open(kv))["samples"]
    out = os.path.join(tmp, "kv_" + os.path.basename(os.path.dirname(prof)) + "_" +
                       os.path.basename(prof))
    with open(out, "w") as f:
        json.dump(j, f)
    return out


def refit(prof, tmp):
    """The profile refitted (target and drafters) from the measurements it stores by the current
    fit models (`ssd simulate --refit`), so an older rep replays with today's models."""
    out = os.path.join(tmp, os.path.basename(os.path.dirname(prof)) + "_" + os.path.basename(prof))
    if not os.path.exists(out):
        subprocess.run([BIN, "simulate", "--refit", with_kv_probe(prof, tmp), "--calibrate-model",
                        MODEL, "--out", out], check=True, stdout=subprocess.DEVNULL)
    return out


def probe_flags(job_json):
    """--speed-probe with the speed probes measured around the job, when it has them."""
    job = os.path.basename(job_json)[:-len(".json")]
    probes = [os.path.join(os.path.dirname(job_json), f"probe_{job}_{when}.json")
              for when in ("pre", "post")]
    probes = [p for p in probes if os.path.exists(p)]
    return ["--speed-probe", ",".join(probes)] if probes else []


def simulate(mode, traces, prompts, flags):
    """(tokens, seconds) of a job's replayed batches, in the job's order (--job-traces: each batch
    starts with the miss policy, budget and switch the job's earlier batches left)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        subprocess.run([BIN, "simulate", "--mode", mode, "--job-traces", ",".join(traces),
                        "--job-prompts", ",".join(map(str, prompts)), "--json", out]
                       + flags, check=True, stdout=subprocess.DEVNULL)
        res = json.load(open(out))["results"]
        return sum(r["tokens"] for r in res), sum(r["seconds"] for r in res)


def cells(meas_dir, tmp):
    """Yields (rep, cell name, measured tok/s, predicted tok/s) for every configuration of every
    job."""
    for path in sorted(glob.glob(os.path.join(meas_dir, "rep*", "r*.json"))):
        job = job_of(path)
        if not job:
            continue
        ranks, batch, chunk = job
        rep_dir = os.path.dirname(path)
        bench = json.load(open(path))
        prof = refit(os.path.join(rep_dir, "cal_2t.json" if ranks == 1 else "cal_1t.json"), tmp)
        trace_dir = path[:-len(".json")] + "_traces"
        k_max = bench.get("config", {}).get("k-max", 8)
        link = link_json(bench, tmp) if ranks == 2 else None
        for row in bench["summary"]:
            mode, kind = row["mode"], kind_of(row["drafter"])
            ktext = "auto" if row.get("k_auto") else str(row["k"])
            runs = [r for r in bench["runs"] if r["mode"] == mode and
                    kind_of(r["drafter"]) == (kind if mode != "ar" else "-") and
                    (mode == "ar" or (r["k"] == row["k"] and r["k_auto"] == row.get("k_auto")))]
            firsts = sorted({r["prompt_index"] - r["prompt_index"] % batch for r in runs})
            flags = ["--target", MODEL, "--device-profile", prof, "--tp", "1"]
            if mode != "ar":
                flags += ["--drafter", SIM_DRAFTER[kind],
                          "--k", str(k_max if row.get("k_auto") else row["k"])]
            flags += ["--colocated"] if ranks == 1 else ["--drafter-link", link]
            flags += probe_flags(path)
            if mode == "ssd":
                switch = bench.get("config", {}).get("prespec-switch") or "auto"
                flags += ["--prespec-switch", "on" if switch == "on" else "auto"]
                # Who drafted lookup-answered misses: the job's --miss-at; a job of a runtime from
                # before the flag (no "miss-at" in its config) had the drafter rank answer all.
                flags += ["--miss-at", bench.get("config", {}).get("miss-at") or "drafter"]
                flags += ["--prespec-chunk", str(chunk),
                          "--mal", str(max(1.0, row["mean_acceptance_length"]))]
            traces, prompts = [], []
            for first in firsts:
                batch_runs = [r for r in runs if first <= r["prompt_index"] < first + batch]
                if ranks == 1:
                    stem = "ar" if mode == "ar" else f"sd_{kind}_k{ktext}"
                else:
                    stem = mode
                trace = os.path.join(trace_dir, f"{stem}_p{first}.jsonl")
                if not os.path.exists(trace):
                    sys.exit(f"sim_validate: missing trace {trace}")
                traces.append(trace)
                prompts.append(round(statistics.mean(r["prompt_tokens"] for r in batch_runs)))
            tokens, seconds = simulate(mode, traces, prompts, flags)
            if seconds <= 0 or row["decode_tokens_per_s"] <= 0:
                continue
            name = f"{ranks} rank{'s' if ranks > 1 else ''} {mode}"
            if mode != "ar":
                name += f" {kind} k{ktext}"
            name += f" b{batch}"
            if mode == "ssd":
                name += f" chunk{chunk}"
            yield os.path.basename(rep_dir), name, row["decode_tokens_per_s"], tokens / seconds


def group_of(name):
    """A cell's group: placement, mode and drafter (k, batch and chunk dropped)."""
    words = name.split()
    return " ".join(words[:4] if words[2] != "ar" else words[:3])


def groups_of(errs_by_cell):
    groups = {}
    for name, e in errs_by_cell.items():
        groups.setdefault(group_of(name), []).append(abs(e))
    return groups


def med_worst(v):
    return f"{100 * statistics.median(v):.1f}% / {100 * max(v):.1f}%"


def group_lines(errs_by_cell, per_rep):
    """Markdown rows: median / worst |error| per group of cells, over the per-cell medians of the
    reps and in each rep alone."""
    groups = groups_of(errs_by_cell)
    reps = sorted(per_rep, key=lambda r: (len(r), r))
    rep_groups = {r: groups_of(per_rep[r]) for r in reps}
    lines = ["| group | cells | median of reps: median / worst abs. error | " +
             " | ".join(f"{r} alone" for r in reps) + " |",
             "|---|---|---|" + "---|" * len(reps)]
    for g in sorted(groups):
        v = groups[g]
        cols = [med_worst(rep_groups[r][g]) if g in rep_groups[r] else "-" for r in reps]
        lines.append(f"| {g} | {len(v)} | {med_worst(v)} | " + " | ".join(cols) + " |")
    return lines


def load_range(meas_dir):
    vals = []
    for f in glob.glob(os.path.join(meas_dir, "rep*", "load.txt")):
        for line in open(f):
            parts = line.split()
            if len(parts) >= 2:
                vals.append(float(parts[1]))
    return (min(vals), max(vals)) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("meas_dir", nargs="?", default=os.path.join(ROOT, "perf/out/sim_validate"))
    ap.add_argument("--markdown")
    ap.add_argument("--no-kv-probe", action="store_true",
                    help="do not add perf/sim_kv_probe_*.json to profiles that timed one context")
    a = ap.parse_args()
    global KV_PROBE
    KV_PROBE = not a.no_kv_probe
    if not glob.glob(os.path.join(a.meas_dir, "rep*", "r*.json")):
        sys.exit(f"sim_validate: no measurements in {a.meas_dir} (run perf/sim_measure.sh)")
    res = {}
    per_rep = {}  # rep -> cell -> [(measured, predicted)]
    with tempfile.TemporaryDirectory() as tmp:
        for rep, name, meas, pred in cells(a.meas_dir, tmp):
            res.setdefault(name, []).append((meas, pred))
            per_rep.setdefault(rep, {}).setdefault(name, []).append((meas, pred))
    rep_errs = {}
    for rep, cs in per_rep.items():
        rep_errs[rep] = {}
        for name, v in cs.items():
            mm = statistics.median(x[0] for x in v)
            rep_errs[rep][name] = (statistics.median(x[1] for x in v) - mm) / mm
    lines = ["| cell | measured tok/s, median (min..max) | predicted tok/s | error |",
             "|---|---|---|---|"]
    errs = []
    by_cell = {}
    for name in sorted(res):
        m = [x[0] for x in res[name]]
        mm, p = statistics.median(m), statistics.median(x[1] for x in res[name])
        e = (p - mm) / mm
        errs.append(abs(e))
        by_cell[name] = e
        lines.append(f"| {name} | {mm:.1f} ({min(m):.1f}..{max(m):.1f}) | {p:.1f} | "
                     f"{100 * e:+.1f}% |")
    lines.append("")
    lines.append(f"{len(errs)} cells: median |error| {100 * statistics.median(errs):.1f}%, "
                 f"worst {100 * max(errs):.1f}% (targets: median <= 10%, worst <= 25%)")
    for rep in sorted(rep_errs, key=lambda r: (len(r), r)):
        e = [abs(x) for x in rep_errs[rep].values()]
        lines.append(f"{rep} alone: {len(e)} cells, median |error| "
                     f"{100 * statistics.median(e):.1f}%, worst {100 * max(e):.1f}%  ")
    lines.append("")
    lines += group_lines(by_cell, rep_errs)
    lines.append("")
    lr = load_range(a.meas_dir)
    if lr:
        lines.append(f"load average (1 min) at the jobs' starts: {lr[0]:.2f}..{lr[1]:.2f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
