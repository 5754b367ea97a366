#!/usr/bin/env bash
# sim_kv_probe.sh THREADS OUT.json: the speed probe's shapes (1 row, a 12-row block, a decode batch
# of 4) timed at 32 and 256 cached tokens, alternated 3 times, at THREADS threads (1 thread:
# pinned to core 0, as a rank is; more: unpinned, as the 1-rank jobs run), into one kv_probe file
# that perf/sim_validate.py adds to a one-context calibration of that thread count before its
# refit (the cache's attention per cached position, cpu_calibration.h's fit_kv_slopes). Run it
# through the quiet runner.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
T=${1:?usage: sim_kv_probe.sh THREADS OUT.json}
OUT=${2:?usage: sim_kv_probe.sh THREADS OUT.json}
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pin=()
[[ $T == 1 ]] && pin=(taskset -c 0)
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for i in 1 2 3; do
  for c in 32 256; do
    "${pin[@]}" "$BIN" simulate --probe --calibrate-model "$MODEL" --calibrate-batch 4 \
      --calibrate-context "$c" --threads "$T" --out "$tmp/c${c}_$i.json" >/dev/null
  done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$tmp" "$OUT" "$T" "$load0" "$load1" "$(date -u '+%F %H:%M')" "$(basename "$MODEL")" <<'PY'
import glob, json, sys
tmp, out, t, l0, l1, when, model = sys.argv[1:]
samples = []
for p in sorted(glob.glob(f"{tmp}/c*_*.json")):
    samples += json.load(open(p))["samples"]
json.dump({"kind": "kv_probe", "threads": int(t),
           "what": "forwards of the speed probe's shapes at 32 and 256 cached tokens, alternated, "
                   "3 times: the attention's cost per cached position (cpu_calibration.h, "
                   "fit_kv_slopes) for calibrations that timed one context",
           "command": f"perf/tools/quiet_run.sh perf/sim_kv_probe.sh {t} {out}",
           "machine": f"the shared 2-core VM, {when} UTC, quiet runner (load average {l0} at the "
                      f"start, {l1} at the end)",
           "model": model, "samples": samples}, open(out, "w"), indent=1)
PY
echo "sim_kv_probe: $OUT ($load0 -> $load1)"
