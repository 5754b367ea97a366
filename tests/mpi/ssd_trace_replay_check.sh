#!/usr/bin/env bash
# A real run's outcome trace replays to the same counts: a 2-rank `ssd bench` (SD and SSD, batch
# 2, the committed Domino drafter; pre-speculation in one call and primary fallbacks, so the
# outcomes do not depend on timing) records its rounds with --outcome-trace; each recorded trace
# must carry exactly the run's sequence-rounds, mean acceptance length and cache hit rate (with
# both hits and misses), and `ssd simulate --outcome-trace` replaying it must report exactly those
# again. Run by ctest:
#   ssd_trace_replay_check.sh SSD_BIN
# A third run, SSD with the n-gram drafter under --miss-at leader, checks the misses the leader
# drafted the same way (below).
# Skips (exit 77) without the default model (SSD_MODEL).
set -euo pipefail
BIN=$1
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
timeout 300 "${MPIEXEC:-mpirun}" "${ROOT[@]}" --oversubscribe --bind-to none -n 2 "$BIN" \
  bench -m "$SSD_MODEL" --prompt-file "$SRC/perf/prompts/mixed.txt" --max-prompts 4 -n 24 \
  --modes sd,ssd --drafters "domino:$SRC/models/smollm2-domino/domino.safetensors" --k 3 \
  --prespec-chunk 0 --miss-policy primary --batch 2 --threads 1 --watchdog-s 60 \
  --out-json "$DIR/bench.json" --outcome-trace "$DIR/traces" >"$DIR/bench.log" 2>&1 ||
  { cat "$DIR/bench.log"; exit 1; }
python3 - "$BIN" "$DIR" <<'PY'
import glob, json, os, subprocess, sys
binary, d = sys.argv[1], sys.argv[2]
bench = json.load(open(os.path.join(d, "bench.json")))
summary = {r["mode"]: r for r in bench["summary"]}
for mode in ("sd", "ssd"):
    files = sorted(glob.glob(os.path.join(d, "traces", f"{mode}_p*.jsonl")))
    assert len(files) == 2, f"{mode}: expected one trace per batch of 2, got {files}"
    seq_rounds = tokens = hits = misses = 0
    for f in files:
        recs = [json.loads(l) for l in open(f) if l.strip()]
        n, t = len(recs), sum(r["accepted"] + 1 for r in recs)
        h = sum(1 for r in recs if r.get("hit") is True)
        m = sum(1 for r in recs if r.get("hit") is False)
        out = os.path.join(d, "sim.json")
        subprocess.run([binary, "simulate", "--mode", mode, "--outcome-trace", f, "--target",
                        "smollm2-135m", "--target-device", "cpu", "--drafter", "smollm2-domino",
                        "--drafter-link", "shm", "--k", "3", "--json", out], check=True,
                       stdout=subprocess.DEVNULL)
        s = json.load(open(out))["results"][0]
        assert s["seq_rounds"] == n and s["tokens"] == t, (mode, f, s, n, t)
        assert s["hits"] == h and s["misses"] == m, (mode, f, s, h, m)
        seq_rounds, tokens, hits, misses = seq_rounds + n, tokens + t, hits + h, misses + m
    runs = [r for r in bench["runs"] if r["mode"] == mode]
    assert seq_rounds == sum(r["rounds"] for r in runs), (mode, seq_rounds)
    mal = tokens / seq_rounds
    assert abs(mal - summary[mode]["mean_acceptance_length"]) < 1e-9, (mode, mal, summary[mode])
    if mode == "ssd":
        assert hits > 0 and misses > 0, ("the check needs both hits and misses", hits, misses)
        rate = hits / (hits + misses)
        assert abs(rate - summary[mode]["cache_hit_rate"]) < 1e-9, (rate, summary[mode])
    print(f"{mode}: {seq_rounds} sequence-rounds, MAL {mal:.3f}, hits {hits} misses {misses}: "
          "trace, replay and run agree")
PY

# One rank (the drafter in the target's process): AR and SD with --k auto record traces too, each
# carrying its batch's sequence-rounds and tokens (SD: as the run counted them, its chosen k per
# round), and the replay reports the same counts.
"$BIN" bench -m "$SSD_MODEL" --prompt-file "$SRC/perf/prompts/mixed.txt" --max-prompts 4 -n 16 \
  --modes ar,sd --drafters ngram --k 2,auto --batch 2 --threads 1 \
  --out-json "$DIR/bench1.json" --outcome-trace "$DIR/traces1" >"$DIR/bench1.log" 2>&1 ||
  { cat "$DIR/bench1.log"; exit 1; }
python3 - "$BIN" "$DIR" <<'PY'
import json, os, subprocess, sys
binary, d = sys.argv[1], sys.argv[2]
bench = json.load(open(os.path.join(d, "bench1.json")))
for stem, mode, k, auto in (("ar", "ar", 0, False), ("sd_ngram_k2", "sd", 2, False),
                            ("sd_ngram_kauto", "sd", None, True)):
    runs = [r for r in bench["runs"] if r["mode"] == mode and r["k_auto"] == auto and
            (k is None or mode == "ar" or r["k"] == k)]
    assert len(runs) == 4, (stem, len(runs))
    for first in (0, 2):
        f = os.path.join(d, "traces1", f"{stem}_p{first}.jsonl")
        recs = [json.loads(l) for l in open(f) if l.strip()]
        batch = [r for r in runs if first <= r["prompt_index"] < first + 2]
        tokens = sum(r["tokens_generated"] - 1 for r in batch)
        assert sum(x["accepted"] + 1 for x in recs) == tokens, (f, tokens)
        if mode == "sd":
            assert len(recs) == sum(r["rounds"] for r in batch), (f, len(recs))
            chosen = [0] * len(batch[0]["chosen_k_histogram"])
            for r in batch:
                chosen = [a + b for a, b in zip(chosen, r["chosen_k_histogram"])]
            assert sum(chosen) == len(recs), (f, chosen)
        out = os.path.join(d, "sim1.json")
        flags = ["--drafter", "ngram", "--colocated"] if mode == "sd" else []
        subprocess.run([binary, "simulate", "--mode", mode, "--outcome-trace", f, "--target",
                        "smollm2-135m", "--target-device", "cpu", "--k", "8", "--json", out]
                       + flags, check=True, stdout=subprocess.DEVNULL)
        s = json.load(open(out))["results"][0]
        assert s["tokens"] == tokens and s["seq_rounds"] == len(recs), (f, s, tokens)
    print(f"one rank {stem}: traces, runs and replays agree")
PY

# --miss-at leader (the default): with the n-gram drafter every miss past round 0 is drafted by the
# target leader. Each SSD record says whether it was ("leader"); the traces' count equals the
# run's leader_drafted and its hits and misses the run's, and the replay reports both again.
timeout 300 "${MPIEXEC:-mpirun}" "${ROOT[@]}" --oversubscribe --bind-to none -n 2 "$BIN" \
  bench -m "$SSD_MODEL" --prompt-file "$SRC/perf/prompts/mixed.txt" --max-prompts 4 -n 24 \
  --modes ssd --drafters ngram --k 3 --batch 2 --threads 1 --watchdog-s 60 \
  --out-json "$DIR/bench2.json" --outcome-trace "$DIR/traces2" >"$DIR/bench2.log" 2>&1 ||
  { cat "$DIR/bench2.log"; exit 1; }
python3 - "$BIN" "$DIR" <<'PY'
import glob, json, os, subprocess, sys
binary, d = sys.argv[1], sys.argv[2]
bench = json.load(open(os.path.join(d, "bench2.json")))
row = [r for r in bench["summary"] if r["mode"] == "ssd"][0]
files = sorted(glob.glob(os.path.join(d, "traces2", "ssd_p*.jsonl")))
assert len(files) == 2, files
leader = hits = misses = 0
for f in files:
    recs = [json.loads(l) for l in open(f) if l.strip()]
    assert all(isinstance(r.get("leader"), bool) for r in recs), (f, "every ssd record says leader")
    n_leader = sum(1 for r in recs if r["leader"])
    assert not any(r["leader"] and r.get("hit") for r in recs), (f, "a leader-drafted hit")
    h = sum(1 for r in recs if r.get("hit") is True)
    m = sum(1 for r in recs if r.get("hit") is False)
    out = os.path.join(d, "sim2.json")
    subprocess.run([binary, "simulate", "--mode", "ssd", "--outcome-trace", f, "--target",
                    "smollm2-135m", "--target-device", "cpu", "--drafter", "ngram",
                    "--drafter-link", "shm", "--k", "3", "--json", out], check=True,
                   stdout=subprocess.DEVNULL)
    s = json.load(open(out))["results"][0]
    assert (s["leader_drafted"], s["hits"], s["misses"]) == (n_leader, h, m), (f, s, n_leader, h, m)
    leader, hits, misses = leader + n_leader, hits + h, misses + m
assert leader > 0, "the check needs misses the leader drafted"
assert leader == row["leader_drafted"], (leader, row["leader_drafted"])
assert abs(hits / (hits + misses) - row["cache_hit_rate"]) < 1e-9, (hits, misses, row)
print(f"ssd ngram --miss-at leader: {leader} leader-drafted misses, hits {hits} misses {misses}: "
      "trace, replay and run agree")
PY
