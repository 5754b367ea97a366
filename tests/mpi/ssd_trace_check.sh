#!/usr/bin/env bash
# --trace-json of a real SSD job, run by ctest:  ssd_trace_check.sh SSD_BIN RANKS TP
# Runs `ssd generate --mode ssd --trace-json` under mpirun with RANKS ranks (TP target ranks, the
# rest drafters; the default model drafting for itself, every planned branch drafted: with
# --prespec-fit window its branches, slower than a verification, would not be), then checks the file with
# tests/tools/check_trace.py (nesting, flows, the protocol's order per round, clock offsets on one
# node, pre-speculation overlapping verification) and its --stats-json (the start-up link probe,
# every rank's host, CPUs and device). Skips (exit 77) without the default model.
set -euo pipefail
BIN=$1 RANKS=$2 TP=$3
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to the default model (launch/fetch-model.sh) to run this check"
  exit 77
fi
HERE=$(cd "$(dirname "$0")" && pwd)
MPIRUN=${MPIEXEC:-mpirun}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
timeout 240 "$MPIRUN" "${ROOT[@]}" --oversubscribe --bind-to none -n "$RANKS" "$BIN" generate \
  -m "$SSD_MODEL" --chat -p "Name three primary colors and one fact about each." -n 32 \
  --ignore-eos --quiet --threads 1 --mode ssd --drafter "model:$SSD_MODEL" --k 3 --tp "$TP" \
  --prespec-fit all \
  --watchdog-s 60 --trace-json "$OUT/trace.json" --stats-json "$OUT/stats.json" 2>"$OUT/run.err" || {
  echo "mpirun failed:"; cat "$OUT/run.err"; exit 1; }
grep -q "^trace: " "$OUT/run.err" || { echo "no 'trace:' line on stderr"; cat "$OUT/run.err"; exit 1; }
python3 "$HERE/../tools/check_trace.py" "$OUT/trace.json" --one-node --expect-overlap
# --stats-json records the start-up link probe and where every rank ran.
python3 - "$OUT/stats.json" "$RANKS" "$TP" <<'PY'
import json, sys
s, ranks, tp = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
places = s["rank_places"]
assert [p["rank"] for p in places] == list(range(ranks)), places
assert all(p["host"] and p["cpus"] and p["device"] == -1 for p in places), places
assert [d["peer"] for d in s["links"]["drafters"]] == list(range(tp, ranks)), s["links"]
print("stats: links and rank places ok")
PY
