#!/usr/bin/env bash
# The workload suite's table (perf/README.md, "Speculation by workload category"): SD/AR per
# category with --k auto against a fixed k, in one process; and AR, SD and SSD with the same
# placement on two ranks.
#
#   perf/workload_table.sh [PART ...]      (default: 1 2)
#
# Part 1, one process, THREADS (2) threads: every prompt of every category in AR, then SD with the
# n-gram and suffix drafters at k = auto and k = 4, prompt by prompt (the variants alternate, so
# drift hits each alike; ratios are taken inside the job).
# Part 2, two ranks (launch/ssd-launch --target-ranks 1 --drafter-ranks 1, one core each): one job
# per drafter in DRAFTERS (ngram suffix), each running AR, SD and SSD with k auto, prompt by prompt.
# Env: SSD_BIN, SSD_MODEL, N (tokens per prompt, 128), MAXP (prompts per category, 0 = all),
#      THREADS (part 1, 2), DRAFTERS (part 2), OUT (default perf/out/workloads),
#      SSD_FLAGS (part 2: more `ssd bench` flags, e.g. "--miss-policy not-worse", split on spaces).
# Measure on a quiet machine: any other process on the second core (a build, a test) changes the
# figures by more than the differences they show.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-$ROOT/perf/out/workloads}
for f in "$BIN" "$MODEL"; do
  [[ -e $f ]] || { echo "workload_table: missing $f" >&2; exit 1; }
done
mkdir -p "$OUT"
common=(-m "$MODEL" --workloads "$ROOT/perf/workloads" -n "${N:-128}" --max-prompts "${MAXP:-0}")
parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(1 2)
for part in "${parts[@]}"; do
  case $part in
    1)
      "$BIN" bench "${common[@]}" --threads "${THREADS:-2}" --drafters ngram,suffix --k auto,4 \
        --out-json "$OUT/one_process.json" --out-md "$OUT/one_process.md" \
        >"$OUT/one_process.log" 2>&1 || { tail -20 "$OUT/one_process.log"; exit 1; }
      echo "part 1: $OUT/one_process.md";;
    2)
      for d in ${DRAFTERS:-ngram suffix}; do
        name=${d%%:*}  # domino:PATH -> domino
        SSD_BIN=$BIN "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench \
          "${common[@]}" --drafters "$d" --k auto --modes ar,sd,ssd ${SSD_FLAGS:-} \
          --out-json "$OUT/two_ranks_$name.json" --out-md "$OUT/two_ranks_$name.md" \
          >"$OUT/two_ranks_$name.log" 2>&1 || { tail -20 "$OUT/two_ranks_$name.log"; exit 1; }
        echo "part 2, $d: $OUT/two_ranks_$name.md"
      done;;
    *) echo "workload_table: unknown part '$part' (1 or 2)" >&2; exit 1;;
  esac
done
