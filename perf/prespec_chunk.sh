#!/usr/bin/env bash
# SSD with pre-speculation drafted in one call against pre-speculation cut short at the outcome's
# arrival (--prespec-chunk N), on 2 ranks (target on core 0, drafter on core 1). Each job runs
# AR, SD and SSD with the same placement, so every ratio below is taken inside one job; the jobs
# alternate between the chunk values for REPS rounds, so drift on a noisy machine hits each alike.
#
#   perf/prespec_chunk.sh [DRAFTER] [K] [CHUNKS] [REPS]
#     DRAFTER  default domino:models/smollm2-domino/domino.safetensors
#     K        default 2
#     CHUNKS   comma list of --prespec-chunk values, default 0,1,2 (0 = one call, never cut)
#     REPS     default 2
# Env: SSD_BIN, SSD_MODEL, PROMPTS (default the held-out set), N (tokens, 64), MAXP (prompts, 24),
#      EXTRA (more ssd bench flags), OUT (default perf/out/prespec_chunk).
# Prints one line per job and a summary per chunk value: the median of each ratio over the jobs,
# with its min..max.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DRAFTER=${1:-domino:$ROOT/models/smollm2-domino/domino.safetensors}
K=${2:-2}
CHUNKS=${3:-0,1,2}
REPS=${4:-2}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-$ROOT/perf/prompts/distill-heldout.txt}
OUT=${OUT:-$ROOT/perf/out/prespec_chunk}
for f in "$BIN" "$MODEL" "$PROMPTS"; do
  [[ -e $f ]] || { echo "prespec_chunk: missing $f" >&2; exit 1; }
done
mkdir -p "$OUT"
read -r -a extra <<<"${EXTRA:-}"
jsons=()
for rep in $(seq 1 "$REPS"); do
  for c in ${CHUNKS//,/ }; do
    j="$OUT/rep${rep}_chunk${c}.json"
    SSD_BIN=$BIN "$ROOT/launch/ssd-launch" --target-ranks 1 --drafter-ranks 1 -- bench \
      -m "$MODEL" --prompt-file "$PROMPTS" -n "${N:-64}" --max-prompts "${MAXP:-24}" \
      --modes ar,sd,ssd --drafters "$DRAFTER" --k "$K" --prespec-chunk "$c" "${extra[@]}" \
      --out-json "$j" >"$OUT/rep${rep}_chunk${c}.log" 2>&1 ||
      { cat "$OUT/rep${rep}_chunk${c}.log"; exit 1; }
    jsons+=("$j")
  done
done
python3 - "${jsons[@]}" <<'PY'
import json, re, sys
from collections import defaultdict
acc = defaultdict(list)
print("| job | chunk | AR tok/s | SD / AR | SSD / AR | SSD / SD | SSD MAL | hit rate | planned | target wait s (SD, SSD) | cut |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    j = json.load(open(path))
    chunk = int(re.search(r"chunk(\d+)", path).group(1))
    rows = {r["mode"]: r for r in j["summary"]}
    ar, sd, ssd = rows["ar"], rows["sd"], rows["ssd"]
    cut = ssd.get("prespeculations_cut")
    r = (sd["decode_tokens_per_s"] / ar["decode_tokens_per_s"],
         ssd["decode_tokens_per_s"] / ar["decode_tokens_per_s"],
         ssd["decode_tokens_per_s"] / sd["decode_tokens_per_s"])
    acc[chunk].append(r + (ssd["cache_hit_rate"], ssd["mean_acceptance_length"]))
    pr = ssd.get("outcome_predicted_rate")
    print(f"| {path.split('/')[-1]} | {chunk} | {ar['decode_tokens_per_s']:.1f} | {r[0]:.2f}x | {r[1]:.2f}x "
          f"| {r[2]:.2f}x | {ssd['mean_acceptance_length']:.2f} | {ssd['cache_hit_rate']:.2f} "
          f"| {f'{pr:.2f}' if pr is not None else '-'} | {sd.get('target_wait_s', 0):.2f}, {ssd.get('target_wait_s', 0):.2f} "
          f"| {cut if cut is not None else '-'} |")
print()
print("| chunk | jobs | SD / AR | SSD / AR | SSD / SD | hit rate | SSD MAL |")
print("|---|---|---|---|---|---|---|")
def med(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
for c in sorted(acc):
    v = acc[c]
    col = [[x[i] for x in v] for i in range(5)]
    ratio = [f"{med(x):.2f}x ({min(x):.2f}..{max(x):.2f})" for x in col[:3]]
    print(f"| {c} | {len(v)} | {' | '.join(ratio)} | {med(col[3]):.2f} | {med(col[4]):.2f} |")
PY
