#!/usr/bin/env bash
# --k auto against fixed speculation lengths, and the SD/AR ratio it gives (docs/speculation-length.md).
#
#   perf/speculation_length.sh [REPS]      (default 3)
#
# Part 1, one process: each job runs every prompt in AR and in SD with the n-gram and the
# committed Domino drafter at k = 2, 4 and auto, prompt by prompt (so the variants alternate and
# drift on a shared machine hits each alike); ratios are taken inside a job.
# Part 2, two ranks (launch/ssd-launch --target-ranks 1 --drafter-ranks 1): each job runs AR, SD
# and SSD with k auto for one drafter; the drafters alternate between jobs.
# REPS jobs of each; the summary gives, per variant, the median ratio over the jobs with its
# range (min..max).
# Env: SSD_BIN, SSD_MODEL, PROMPTS (default perf/prompts/mixed.txt), N (tokens, 64),
#      THREADS (part 1, 2), PARTS ("1 2"), OUT (default perf/out/speculation_length).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${1:-3}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-$ROOT/perf/prompts/mixed.txt}
DOMINO=domino:$ROOT/models/smollm2-domino/domino.safetensors
OUT=${OUT:-$ROOT/perf/out/speculation_length}
for f in "$BIN" "$MODEL" "$PROMPTS"; do
  [[ -e $f ]] || { echo "speculation_length: missing $f" >&2; exit 1; }
done
mkdir -p "$OUT"
common=(-m "$MODEL" --prompt-file "$PROMPTS" -n "${N:-64}")
for rep in $(seq 1 "$REPS"); do
  for part in ${PARTS:-1 2}; do
    if [[ $part == 1 ]]; then
      j="$OUT/one_rep$rep.json"
      "$BIN" bench "${common[@]}" --threads "${THREADS:-2}" --modes ar,sd \
        --drafters "ngram,$DOMINO" --k 2,4,auto --out-json "$j" >"${j%.json}.log" 2>&1 ||
        { cat "${j%.json}.log"; exit 1; }
      echo "one process, job $rep: $j"
    else
      for d in ngram "$DOMINO"; do
        name=$([[ $d == ngram ]] && echo ngram || echo domino)
        j="$OUT/two_${name}_rep$rep.json"
        SSD_BIN=$BIN "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench \
          "${common[@]}" --modes ar,sd,ssd --drafters "$d" --k auto --out-json "$j" \
          >"${j%.json}.log" 2>&1 || { cat "${j%.json}.log"; exit 1; }
        echo "two ranks, $name, job $rep: $j"
      done
    fi
  done
done
python3 "$ROOT/perf/tools/speculation_length_summary.py" "$OUT"/*.json
