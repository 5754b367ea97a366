#!/usr/bin/env bash
# `ssd serve` as rank 0 of a distributed SSD job, run by ctest:
#   ssd_serve_check.sh SSD_BIN RANKS MODE DRAFTER K      (K: a length, or auto)
# Writes the reference tokens of three prompts with single-process `ssd generate --mode ar`, then
# starts `mpirun -n RANKS ssd serve --mode MODE` on loopback (ephemeral port) and sends the three
# greedy requests at once, then a fourth while they run (it joins the running batch: JoinSeqs),
# requiring every response's tokens to equal the reference; checks the spec-decode counters of
# /metrics (in --mode ssd with the n-gram drafter: misses drafted by the leader, --miss-at leader
# being the default); then SIGTERM to rank 0, and every rank must exit 0 (mpirun's status). Skips (exit 77)
# without the default model (SSD_MODEL). Every wait is bounded.
set -euo pipefail
BIN=$1 RANKS=$2 MODE=$3 DRAFTER=$4 K=$5
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to the default model (launch/fetch-model.sh) to run this check"
  exit 77
fi
[[ $DRAFTER == self ]] && DRAFTER="model:$SSD_MODEL"
MPIRUN=${MPIEXEC:-mpirun}
N=${SSD_CHECK_TOKENS:-32}
OUT=$(mktemp -d)
PROMPTS=("The capital of France is" "Once upon a time" "def fibonacci(n):" "1, 2, 3, 4,")
cleanup() {
  [[ -n ${MPI_PID:-} ]] && kill -9 "$MPI_PID" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
for i in "${!PROMPTS[@]}"; do
  "$BIN" generate -m "$SSD_MODEL" -p "${PROMPTS[$i]}" -n "$N" --ignore-eos --quiet --threads 1 \
    --stats-json "$OUT/ref$i.json" 2>"$OUT/ref.err" || { cat "$OUT/ref.err"; exit 1; }
done
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
start_server "$OUT/port" "$OUT/serve.err" "$MPIRUN" "${ROOT[@]}" --oversubscribe --bind-to none \
  -n "$RANKS" "$BIN" serve -m "$SSD_MODEL" --mode "$MODE" --drafter "$DRAFTER" --k "$K" \
  --threads 1 --max-batch 4 --watchdog-s 60 --port 0 --port-file "$OUT/port" ||
  { cat "$OUT/serve.err"; exit 1; }
python3 - "$PORT" "$OUT" "$N" "$MODE" "$DRAFTER" "${PROMPTS[@]}" <<'PY' || { cat "$OUT/serve.err"; exit 1; }
import json, sys, threading, time, urllib.request
port, out, n, mode, drafter = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
prompts = sys.argv[6:]
def call(prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
                       "return_token_ids": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=240) as r:
        return json.load(r)["choices"][0]["token_ids"]
got = [None] * len(prompts)
def run(i): got[i] = call(prompts[i])
threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts) - 1)]
for t in threads: t.start()
time.sleep(0.5)  # the last one joins the running batch
threads.append(threading.Thread(target=run, args=(len(prompts) - 1,)))
threads[-1].start()
for t in threads: t.join(300)
bad = 0
for i, p in enumerate(prompts):
    ref = json.load(open(f"{out}/ref{i}.json"))["output_token_ids"]
    if got[i] != ref:
        print(f"MISMATCH for {p!r}: served {got[i]} vs generate {ref}")
        bad += 1
metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
values = {l.split("{")[0]: float(l.split()[-1]) for l in metrics.splitlines()
          if l and not l.startswith("#") and "_bucket" not in l}
print(f"{mode}: {len(prompts)} requests, tokens equal generate's: {bad == 0}; drafts "
      f"{values['ssd:spec_decode_num_drafts_total']:.0f}, accepted "
      f"{values['ssd:spec_decode_num_accepted_tokens_total']:.0f} of "
      f"{values['ssd:spec_decode_num_draft_tokens_total']:.0f}, cache hit rate "
      f"{values['ssd:spec_decode_cache_hit_rate']:.2f}")
assert values["ssd:spec_decode_num_draft_tokens_total"] > 0, "no draft was verified"
# One chosen speculation length per sequence-round (--k auto: the leader's length policy).
print(f"chosen lengths: {values['ssd:spec_length_chosen_count']:.0f} sequence-rounds, mean "
      f"{values['ssd:spec_length_chosen_sum'] / values['ssd:spec_length_chosen_count']:.2f}")
assert values["ssd:spec_length_chosen_count"] >= values["ssd:spec_decode_num_drafts_total"]
if mode == "ssd":
    assert values["ssd:spec_decode_cache_hits_total"] + values["ssd:spec_decode_cache_misses_total"] > 0
    # Next speculations the leader had without waiting for the drafter's answer: hits from its
    # pushed pre-speculation, misses it drafted itself (--miss-at leader, a lookup drafter).
    pushed = values["ssd:spec_decode_pushed_hits_total"]
    drafted = values["ssd:spec_decode_leader_drafted_misses_total"]
    print(f"pushed hits {pushed:.0f}, misses drafted by the leader {drafted:.0f}")
    if drafter == "ngram":
        assert drafted > 0, "an n-gram drafter's misses were not drafted on the leader"
sys.exit(1 if bad else 0)
PY
stop_server
RC=$SERVER_STATUS
grep -q "drained, exiting" "$OUT/serve.err" || { echo "no drain:"; cat "$OUT/serve.err"; exit 1; }
[[ $RC -eq 0 ]] || { echo "mpirun exited $RC:"; cat "$OUT/serve.err"; exit 1; }
echo "drained; every rank exited 0"
