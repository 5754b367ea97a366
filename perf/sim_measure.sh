#!/usr/bin/env bash
# The measured side of the simulator's validation (docs/simulator.md): AR and SD tok/s for a few
# cells on this machine, to be predicted by `ssd simulate`. Cells: 1 rank (drafter in the target's
# process, --threads 2) and 2 ranks (target on one core, drafter on the other; AR, SD and SSD in
# the same job), n-gram and Domino drafters, k 2 and 4, batch 1. The 1-rank and 2-rank jobs
# alternate for REPS rounds, so drift on a shared machine hits both alike. Every job is preceded
# by the calibration of the CPU profile it is predicted with (`ssd simulate --calibrate`: 2
# threads for the 1-rank job; 1 thread pinned to one core, as a rank of the 2-rank jobs is, for
# each 2-rank job), so profile and run see about the same machine state. The 2-rank jobs also
# record their outcome traces (--outcome-trace), which perf/sim_validate.py replays.
#
#   perf/sim_measure.sh [REPS]        (default 2)
# Env: SSD_BIN, SSD_MODEL, PROMPTS (default the held-out set), N (tokens, 64), MAXP (prompts, 6),
#      OUT (default perf/out/sim_validate).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${1:-2}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-$ROOT/perf/prompts/distill-heldout.txt}
OUT=${OUT:-$ROOT/perf/out/sim_validate}
DOMINO=domino:$ROOT/models/smollm2-domino/domino.safetensors
for f in "$BIN" "$MODEL" "$PROMPTS"; do
  [[ -e $f ]] || { echo "sim_measure: missing $f" >&2; exit 1; }
done
mkdir -p "$OUT"
common=(-m "$MODEL" --prompt-file "$PROMPTS" -n "${N:-64}" --max-prompts "${MAXP:-6}")
for rep in $(seq 1 "$REPS"); do
  "$BIN" simulate --calibrate --calibrate-model "$MODEL" --threads 2 \
    --out "$OUT/cpu_2t_rep$rep.json" >"$OUT/cpu_2t_rep$rep.log" 2>&1 ||
    { cat "$OUT/cpu_2t_rep$rep.log"; exit 1; }
  "$BIN" bench "${common[@]}" --drafters "ngram,$DOMINO" --k 2,4 --modes ar,sd --threads 2 \
    --out-json "$OUT/rank1_rep$rep.json" >"$OUT/rank1_rep$rep.log" 2>&1 ||
    { cat "$OUT/rank1_rep$rep.log"; exit 1; }
  # Drafter ranks load one drafter and one k per job.
  for d in ngram domino; do
    for k in 2 4; do
      spec=ngram
      [[ $d == domino ]] && spec=$DOMINO
      cal="$OUT/cpu_1t_${d}_k${k}_rep$rep"
      taskset -c 0 "$BIN" simulate --calibrate --calibrate-model "$MODEL" --threads 1 \
        --out "$cal.json" >"$cal.log" 2>&1 || { cat "$cal.log"; exit 1; }
      SSD_BIN=$BIN "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench \
        "${common[@]}" --drafters "$spec" --k "$k" --modes ar,sd,ssd \
        --outcome-trace "$OUT/traces_${d}_k${k}_rep$rep" \
        --out-json "$OUT/rank2_${d}_k${k}_rep$rep.json" >"$OUT/rank2_${d}_k${k}_rep$rep.log" 2>&1 ||
        { cat "$OUT/rank2_${d}_k${k}_rep$rep.log"; exit 1; }
    done
  done
  echo "rep $rep done"
done
