#!/usr/bin/env bash
# One cell of the distributed exactness matrix, run by ctest:
#   ssd_run_check.sh SSD_BIN RANKS TP MODE DRAFTER K [extra ssd generate flags...]
# Runs the same request twice: single-process --mode ar (or, with --temp, single-process --mode sd
# with the same drafter: sampled SD and SSD draw from the same Philox uniforms with the same q, so
# their tokens agree too), then under mpirun with RANKS ranks, TP target ranks and MODE, and fails
# unless the output token ids are identical. Skips (exit 77) without the default model (SSD_MODEL).
set -euo pipefail
BIN=$1 RANKS=$2 TP=$3 MODE=$4 DRAFTER=$5 K=$6
shift 6
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to the default model (launch/fetch-model.sh) to run this check"
  exit 77
fi
[[ $DRAFTER == self ]] && DRAFTER="model:$SSD_MODEL"  # the target drafting for itself
MPIRUN=${MPIEXEC:-mpirun}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
COMMON=(generate -m "$SSD_MODEL" --chat -p "Name three primary colors and one fact about each." \
        -n "${SSD_CHECK_TOKENS:-40}" --ignore-eos --quiet --threads 1 "$@")
REF_MODE=ar
for a in "$@"; do [[ $a == --temp ]] && REF_MODE=sd; done
"$BIN" "${COMMON[@]}" --mode "$REF_MODE" --drafter "$DRAFTER" --k "$K" \
  --stats-json "$OUT/ref.json" 2>"$OUT/ref.err" || { cat "$OUT/ref.err"; exit 1; }
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
timeout "${SSD_CHECK_TIMEOUT:-240}" "$MPIRUN" "${ROOT[@]}" --oversubscribe --bind-to none \
  -n "$RANKS" "$BIN" "${COMMON[@]}" --mode "$MODE" --drafter "$DRAFTER" --k "$K" --tp "$TP" \
  --watchdog-s 60 --stats-json "$OUT/run.json" 2>"$OUT/run.err" || {
  echo "mpirun failed:"; cat "$OUT/run.err"; exit 1; }
python3 - "$OUT/ref.json" "$OUT/run.json" "$MODE" <<'PY'
import json, sys
ref, run, mode = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
a, b = ref["output_token_ids"], run["output_token_ids"]
print(f"reference ({ref['mode']}): {len(a)} tokens; {mode} on {run.get('ranks')}: {len(b)} tokens,"
      f" mean acceptance length {run['mean_acceptance_length']:.2f},"
      f" cache hit rate {run.get('cache_hit_rate', 'n/a')}, target waited {run.get('target_wait_s', 'n/a')} s,"
      f" pre-speculations cut {run.get('prespeculations_cut', 'n/a')}")
if a != b:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print(f"MISMATCH at token {i}: reference {a[i:i+5]} vs run {b[i:i+5]}")
    sys.exit(1)
if mode == "ssd":
    for key in ("cache_hit_rate", "mean_acceptance_length_hit", "mean_acceptance_length_miss",
                "target_wait_s", "drafter_busy_s", "bytes_exchanged", "fan_out"):
        assert key in run, f"--stats-json lacks {key}"
    assert run["bytes_exchanged"] > 0
PY
