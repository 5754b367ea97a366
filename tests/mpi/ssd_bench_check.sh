#!/usr/bin/env bash
# Batched SSD under mpirun: `ssd bench` runs 4 prompts as one batch in AR, SD (drafter rank) and
# SSD and fails (non-zero) if any greedy output differs from AR. Run by ctest:
#   ssd_bench_check.sh SSD_BIN RANKS TP DRAFTER K BATCH
# Skips (exit 77) without the default model (SSD_MODEL).
set -euo pipefail
BIN=$1 RANKS=$2 TP=$3 DRAFTER=$4 K=$5 BATCH=$6
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
[[ $DRAFTER == self ]] && DRAFTER="model:$SSD_MODEL"
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
timeout 300 "${MPIEXEC:-mpirun}" "${ROOT[@]}" --oversubscribe --bind-to none -n "$RANKS" "$BIN" \
  bench -m "$SSD_MODEL" --prompt-file "$SRC/perf/prompts/mixed.txt" --max-prompts 4 -n 24 \
  --modes ar,sd,ssd --drafters "$DRAFTER" --k "$K" --batch "$BATCH" --tp "$TP" --threads 1 \
  --watchdog-s 60 --out-json "$OUT"
python3 - "$OUT" "$BATCH" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = {r["mode"]: r for r in j["summary"]}
assert set(rows) == {"ar", "sd", "ssd"}, rows.keys()
for m in ("sd", "ssd"):
    assert rows[m]["greedy_compared"] == 4 and rows[m]["greedy_exact"] == 4, rows[m]
assert all(r["batch"] == int(sys.argv[2]) for r in j["runs"]), "runs not batched as asked"
print("ssd hit rate", rows["ssd"]["cache_hit_rate"], "| mean acceptance length",
      rows["ssd"]["mean_acceptance_length"])
PY
