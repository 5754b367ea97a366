#!/usr/bin/env bash
# --backend in a distributed job, on a machine without a GPU (the build machine); run by ctest:
#   ssd_backend_check.sh SSD_BIN
# Two ranks (the target and a drafter rank, --mode ssd), each rank's stderr tagged by mpirun:
#   --backend cuda  (generate and bench) every rank ends with exactly one error line naming why
#                   (no CUDA device, or a binary built without CUDA), the job exits non-zero
#                   within a bound, and no rank dies of a signal;
#   --backend auto  every rank runs on the CPU (the model line says why in a CUDA build), the
#                   transport is MPI, and the tokens equal --backend cpu's.
# Skips (exit 77) without the default model (SSD_MODEL) or when a GPU is visible (nvidia-smi):
# there --backend cuda would run, which gpu_smoke.sh checks instead.
set -uo pipefail
BIN=$1
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to the default model (launch/fetch-model.sh) to run this check"
  exit 77
fi
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: a GPU is visible; the no-GPU behaviour of --backend cannot be checked here"
  exit 77
fi
MPIRUN=${MPIEXEC:-mpirun}
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
FAIL=0
mpi2() {  # mpi2 LOG ssd-args...: two tagged ranks, bounded; returns mpirun's status
  local log=$1
  shift
  timeout 120 "$MPIRUN" "${ROOT[@]}" --oversubscribe --bind-to none --tag-output -n 2 \
    "$BIN" "$@" >"$log" 2>&1
}

# --backend cuda: one line per rank, non-zero, no signal.
PROMPTS=$OUT/prompts.txt
echo "Hello" >"$PROMPTS"
for cmd in generate bench; do
  if [[ $cmd == generate ]]; then
    ARGS=(generate -m "$SSD_MODEL" -p "Hello" -n 8 --quiet --mode ssd --drafter ngram)
  else
    ARGS=(bench -m "$SSD_MODEL" --prompt-file "$PROMPTS" -n 8 --modes ssd --drafters ngram)
  fi
  LOG=$OUT/cuda_$cmd.log
  START=$(date +%s)
  mpi2 "$LOG" "${ARGS[@]}" --threads 1 --backend cuda
  STATUS=$?
  echo "--backend cuda ($cmd): status $STATUS after $(($(date +%s) - START)) s"
  sed 's/^/  | /' "$LOG" | head -n 12
  if ((STATUS == 0 || STATUS == 124)); then
    echo "FAIL: expected a non-zero exit, not $STATUS (124: timed out)"; FAIL=1
  fi
  if grep -qiE 'segmentation|signal [0-9]|core dumped|terminate called' "$LOG"; then
    echo "FAIL: a rank crashed"; FAIL=1
  fi
  for r in 0 1; do
    n=$(grep -c "^\[1,$r\]<stderr>:ssd $cmd: error: --backend cuda: " "$LOG")
    # Anything else the rank wrote, apart from its core-binding note (topology/binding.h).
    other=$(grep "^\[1,$r\]<std" "$LOG" |
      grep -vc -e ": error: --backend cuda: " -e "bound to CPUs")
    if ((n != 1 || other != 0)); then
      echo "FAIL: rank $r wrote $n '--backend cuda' error line(s) and $other other line(s)"
      FAIL=1
    fi
  done
done

# --backend auto: the CPU on every rank, MPI between them, the same tokens as --backend cpu.
GEN=(generate -m "$SSD_MODEL" --chat -p "Name three primary colors." -n 16 --ignore-eos --quiet
     --threads 1 --mode ssd --drafter ngram --k 4 --watchdog-s 60)
for b in auto cpu; do
  mpi2 "$OUT/$b.log" "${GEN[@]}" --backend $b --stats-json "$OUT/$b.json" ||
    { echo "FAIL: --backend $b under mpirun:"; cat "$OUT/$b.log"; exit 1; }
done
grep "<stderr>:model:" "$OUT/auto.log"
if grep -q "no CUDA device" "$OUT/cuda_generate.log"; then  # a CUDA build
  grep -q "backend cpu (auto: no CUDA device found, running on the CPU)" "$OUT/auto.log" ||
    { echo "FAIL: --backend auto did not say it fell back to the CPU"; FAIL=1; }
fi
python3 - "$OUT/auto.json" "$OUT/cpu.json" <<'PY' || FAIL=1
import json, sys
auto, cpu = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print(f"auto: backend {auto['backend']}, transport {auto.get('transport')}, "
      f"{len(auto['output_token_ids'])} tokens on {auto['ranks']}")
ok = True
if auto["backend"] != "cpu" or auto.get("transport") != "mpi":
    print("FAIL: --backend auto without a GPU must run on the CPU over MPI"); ok = False
if auto["output_token_ids"] != cpu["output_token_ids"]:
    print("FAIL: --backend auto and --backend cpu produced different tokens"); ok = False
sys.exit(0 if ok else 1)
PY
((FAIL == 0)) && echo "OK"
exit $FAIL
