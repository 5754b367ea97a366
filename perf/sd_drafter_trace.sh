#!/usr/bin/env bash
# sd_drafter_trace.sh OUT: 2-rank SD jobs with the model drafter (the default GGUF drafting for
# itself), each with its Chrome trace (--trace-json) and outcome trace, bracketed by two 1-thread
# speed probes pinned as a rank is; the cells of perf/sim_measure.sh's matrix, SD alone. Beside
# each, the same SD in one process at 1 thread pinned to the drafter rank's core (its bench JSON's
# draft_time_s: the draft calls alone, the drafter's lazy start on the prompt included). Read
# them with perf/tools/sd_draft_spans.py OUT. KS and BATCHES (env) limit the grid (2,4,7; 1,4).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:?usage: sd_drafter_trace.sh OUT}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-$ROOT/perf/prompts/distill-heldout.txt}
mkdir -p "$OUT"
for k in ${KS:-2 4 7}; do
  for b in ${BATCHES:-1 4}; do
    name=sd_model_k${k}_b$b
    taskset -c 0 "$BIN" simulate --probe --calibrate-model "$MODEL" --calibrate-batch 1,4 \
      --threads 1 --out "$OUT/probe_${name}_pre.json" >>"$OUT/probes.log" 2>&1
    echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load.txt"
    env SSD_BIN="$BIN" "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench \
      -m "$MODEL" --prompt-file "$PROMPTS" -n 48 --max-prompts 4 --drafters "model:$MODEL" \
      --k "$k" --modes sd --batch "$b" --trace-json "$OUT/$name.trace.json" \
      --outcome-trace "$OUT/${name}_traces" --out-json "$OUT/$name.json" >"$OUT/$name.log" 2>&1
    taskset -c 1 "$BIN" bench -m "$MODEL" --prompt-file "$PROMPTS" -n 48 --max-prompts 4 \
      --drafters "model:$MODEL" --k "$k" --modes sd --batch "$b" --threads 1 \
      --out-json "$OUT/${name}_1rank.json" >"$OUT/${name}_1rank.log" 2>&1
    taskset -c 0 "$BIN" simulate --probe --calibrate-model "$MODEL" --calibrate-batch 1,4 \
      --threads 1 --out "$OUT/probe_${name}_post.json" >>"$OUT/probes.log" 2>&1
  done
done
echo "sd_drafter_trace: done, $(cut -d' ' -f1-3 /proc/loadavg)"
