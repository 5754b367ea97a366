#!/usr/bin/env bash
# perf/gpu_smoke.sh --dry-run --gpus N prints the plan a GPU node would run, without a GPU.
# Checks the two layouts a first run will meet: ONE GPU (every multi-rank section on GPU 0 with
# --share-devices over MPI; the NCCL-only section reported not run, with its reason) and five GPUs
# (one GPU per rank over NCCL, every section run); --quick's plan and bad usage (exit 2); and a
# whole run against stand-ins for the GPU node's commands (see below).
# Usage: gpu_smoke_plan_test.sh REPO_ROOT
set -uo pipefail
cd "$1" || exit 1
SMOKE=perf/gpu_smoke.sh
fails=0
expect() {  # expect LABEL TEXT PATTERN: PATTERN (fixed string) occurs in TEXT
  if ! grep -qF -- "$3" <<<"$2"; then
    echo "FAIL $1: expected '$3' in:"; echo "$2"; fails=$((fails + 1))
  fi
}
absent() {
  if grep -qF -- "$3" <<<"$2"; then echo "FAIL $1: unexpected '$3'"; fails=$((fails + 1)); fi
}

one=$(bash $SMOKE --dry-run --gpus 1) || { echo "FAIL: --gpus 1 exited $?"; exit 1; }
expect gpus1 "$one" "5 ranks on 1 GPU(s): --devices 0,0,0,0,0 --share-devices --transport mpi"
for s in tests graphs exactness domino cpu-info bench; do
  expect gpus1 "$one" "- section $s: run:"
done
expect gpus1 "$one" "- section tp-graphs: not run (needs NCCL, which refuses two ranks of one communicator on one GPU: 5 ranks, 1 GPU(s))"

five=$(bash $SMOKE --dry-run --gpus 5) || { echo "FAIL: --gpus 5 exited $?"; exit 1; }
expect gpus5 "$five" "one GPU per rank: --devices 0,1,2,3,4 --transport nccl"
for s in tests graphs exactness domino tp-graphs cpu-info bench; do
  expect gpus5 "$five" "- section $s: run:"
done
absent gpus5 "$five" "not run"

two=$(bash $SMOKE --dry-run --gpus 2 --tp 2 --drafters 2) || { echo "FAIL: --gpus 2 exited $?"; exit 1; }
expect gpus2 "$two" "4 ranks on 2 GPU(s): --devices 0,1,0,1 --share-devices --transport mpi"

quick=$(bash $SMOKE --dry-run --gpus 1 --quick) || { echo "FAIL: --quick exited $?"; exit 1; }
expect quick "$quick" "- prompts: 1 from perf/prompts/mixed.txt, 32 tokens each; each step capped at 150 s"
expect quick "$quick" "- section cpu-info: not run (skipped by --quick: information only)"
expect quick "$quick" "- --quick: no section starts after 540 s"

for bad in "--dry-run" "--gpus 2" "--dry-run --gpus x" "--tp 0 --dry-run --gpus 1" "--frobnicate"; do
  # shellcheck disable=SC2086
  bash $SMOKE $bad >/dev/null 2>&1
  rc=$?
  [[ $rc == 2 ]] || { echo "FAIL: '$bad' exited $rc, expected 2"; fails=$((fails + 1)); }
done

# A whole run on a stand-in one-GPU node: stub nvidia-smi (one H100), mpirun (runs the command
# once), ctest and ssd (writes the same tokens for every run, records its prompts). The script
# must run every section the plan runs, write the report, read no '#' comment line as a prompt,
# and exit 0; a skipped GPU test in ctest's summary must fail the run.
STUB=$(mktemp -d)
trap 'rm -rf "$STUB"' EXIT
mkdir -p "$STUB/bin" "$STUB/build/bin"
cat >"$STUB/bin/nvidia-smi" <<'SH'
#!/bin/bash
case "$*" in -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;; *driver*) echo 0 ;; *) echo "NVIDIA H100" ;; esac
SH
cat >"$STUB/bin/mpirun" <<'SH'
#!/bin/bash
while [[ $1 == -* ]]; do case "$1" in -n|-x|--bind-to) shift 2 ;; *) shift ;; esac; done
exec "$@"
SH
cat >"$STUB/bin/ctest" <<'SH'
#!/bin/bash
echo "100% tests passed, 0 tests failed out of 40"
if [[ -n ${STUB_SKIP:-} ]]; then
  echo "The following tests did not run:"; printf '\t636 - cuda.CudaOps.RowOps (Skipped)\n'
fi
SH
cat >"$STUB/build/bin/ssd" <<'SH'
#!/bin/bash
while [[ $# -gt 0 ]]; do
  case "$1" in
    --stats-json) echo '{"output_token_ids":[5,6,7]}' >"$2"; shift 2 ;;
    --out-md) echo "| mode | tok/s |" >"$2"; shift 2 ;;
    -p) printf '%s\n' "$2" >>"$STUB_PROMPTS"; shift 2 ;;
    *) shift ;;
  esac
done
SH
chmod +x "$STUB"/bin/* "$STUB/build/bin/ssd"
export STUB_PROMPTS=$STUB/prompts.log
PATH=$STUB/bin:$PATH bash $SMOKE --build "$STUB/build" --out "$STUB/report.md" --model perf/README.md --max-prompts 2 \
  >/dev/null 2>&1
rc=$?
[[ $rc == 0 ]] || { echo "FAIL: stub run exited $rc"; cat "$STUB/report.md"; fails=$((fails + 1)); }
report=$(cat "$STUB/report.md")
expect stub "$report" "- prompt 1: graphs == eager, equal (3 tokens): **pass**"
expect stub "$report" "- prompt 2: SSD == AR, equal (3 tokens): **pass**"
expect stub "$report" "- prompt 2: Domino SD == AR on GPU 0, equal (3 tokens): **pass**"
expect stub "$report" "- not run: needs NCCL"
expect stub "$report" "- ssd bench --modes ar,sd,ssd: **pass**"
expect stub "$report" "**Result: pass**"
if grep -q '^#' "$STUB_PROMPTS"; then echo "FAIL: a '#' comment line was used as a prompt"; fails=$((fails + 1)); fi
expect stub "$(cat "$STUB_PROMPTS")" "What is the capital of France, and what is it famous for?"
STUB_SKIP=1 PATH=$STUB/bin:$PATH bash $SMOKE --build "$STUB/build" --out "$STUB/skip.md" \
  --model perf/README.md --quick >/dev/null 2>&1
rc=$?
[[ $rc == 1 ]] || { echo "FAIL: a skipped GPU test gave exit $rc, expected 1"; fails=$((fails + 1)); }
expect skip "$(cat "$STUB/skip.md")" "- 1 GPU test(s) skipped although nvidia-smi sees 1 GPU(s): **FAIL**"

if (( fails > 0 )); then echo "$fails check(s) failed"; exit 1; fi
echo "gpu_smoke plans: all checks passed"
