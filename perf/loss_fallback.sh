#!/usr/bin/env bash
# What a lost drafter rank costs after the loss: `ssd generate --mode ssd` with the target model
# drafting for itself (DRAFTER, default model:$SSD_MODEL) on 2 ranks under Open MPI's recovery mode, the drafter rank SIGKILLing itself at round 3
# (SSD_FAULT=drafter:kill:round:round=3), so nearly every token is decoded after the loss.
# Variants, alternated REPS times: --miss-at leader (the leader goes on with the copy of the
# n-gram backup speculator it held from the start, docs/faults.md "Recovery"), --miss-at drafter
# (no copy while the drafter lives: the leader builds it at the loss), and with BASE_BIN set,
# --miss-at drafter on that binary ("base": e.g. a build from before the leader built copies at the
# loss, which finished with plain decoding).
# (A model drafter, not ngram: with an n-gram drafter the leader drafts its misses itself before
# the loss too, so it waits for no answer and notices the loss only by the missing heartbeats.) Each run's
# output must equal AR's (checked); prints per run the decode tok/s, the rounds and the fallback,
# and per variant the median decode tok/s with min..max.
#
#   perf/loss_fallback.sh [REPS]      (default 3)
# Env: SSD_BIN, SSD_MODEL, DRAFTER, N (tokens, default 256), PROMPT, OUT (default
#      perf/out/loss_fallback), BASE_BIN (adds the "base" variant).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${1:-3}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
DRAFTER=${DRAFTER:-model:$MODEL}
N=${N:-256}
PROMPT=${PROMPT:-Count from one to one thousand in words:}
OUT=${OUT:-$ROOT/perf/out/loss_fallback}
for f in "$BIN" "$MODEL"; do
  [[ -e $f ]] || { echo "loss_fallback: missing $f" >&2; exit 1; }
done
mkdir -p "$OUT"
ROOTFLAG=()
[[ $(id -u) -eq 0 ]] && ROOTFLAG=(--allow-run-as-root)
COMMON=(-m "$MODEL" -p "$PROMPT" -n "$N" --ignore-eos -q --threads 1)
SSD_FAULT="" "$BIN" generate "${COMMON[@]}" --mode ar --stats-json "$OUT/ar.json" \
  2>"$OUT/ar.log" || { cat "$OUT/ar.log"; exit 1; }
export SSD_FAULT=drafter:kill:round:round=3
VARIANTS=(leader drafter)
[[ -n ${BASE_BIN:-} ]] && VARIANTS+=(base)
for rep in $(seq 1 "$REPS"); do
  for v in "${VARIANTS[@]}"; do
    bin=$BIN at=$v
    [[ $v == base ]] && bin=$BASE_BIN at=drafter
    j="$OUT/rep${rep}_${v}.json"
    "${MPIEXEC:-mpirun}" "${ROOTFLAG[@]}" --oversubscribe --bind-to none \
      --mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0 -x SSD_FAULT -n 2 \
      "$bin" generate "${COMMON[@]}" --mode ssd --drafter "$DRAFTER" --k 4 --miss-at "$at" \
      --watchdog-s 60 --stats-json "$j" >"$OUT/rep${rep}_${v}.out" 2>"$OUT/rep${rep}_${v}.log" ||
      { cat "$OUT/rep${rep}_${v}.log"; exit 1; }
  done
done
python3 - "$OUT" "$REPS" "${VARIANTS[@]}" <<'PY'
import json, statistics, sys
out, reps, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
label = {"leader": "--miss-at leader", "drafter": "--miss-at drafter",
         "base": "--miss-at drafter, BASE_BIN"}
ar = json.load(open(f"{out}/ar.json"))
print(f"AR alone (1 rank): {ar['decode_tokens_per_s']:.1f} tok/s decode")
for v in variants:
    tps = []
    for rep in range(1, reps + 1):
        r = json.load(open(f"{out}/rep{rep}_{v}.json"))
        assert r["output_token_ids"] == ar["output_token_ids"], f"rep {rep} {v}: output != AR"
        loss = r["drafter_loss"]
        assert loss, f"rep {rep} {v}: no loss recorded"
        tps.append(r["decode_tokens_per_s"])
        print(f"  rep {rep} {label[v]}: {r['decode_tokens_per_s']:.1f} tok/s, "
              f"{r['rounds']} rounds, lost in round {loss['round']}, fallback: {loss['fallback']}")
    print(f"{label[v]}: median {statistics.median(tps):.1f} tok/s "
          f"({min(tps):.1f}..{max(tps):.1f}) over {reps} runs; output = AR's")
PY
