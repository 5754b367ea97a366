#!/usr/bin/env bash
# GPU smoke test: on a machine with GPUs, checks the CUDA/NCCL path end to end and writes one
# markdown report, a line at a time, so a run cut short still leaves what it found. Not yet run on
# a GPU by this project (written on a machine without one). Sections, most valuable first:
#
#   tests       the CUDA op-comparison tests (ctest -R '^cuda\.') and the NCCL tests
#               (ctest -R '^nccl\.'); a GPU test that skipped although GPUs are visible fails
#               the run (counted from ctest's summary of tests that did not run)
#   graphs      AR in one process on GPU 0 (TP 1, the target's forwards replayed as CUDA
#               graphs) == the same run with SSD_CUDA_GRAPHS=off (every op eager), token for token
#   exactness   greedy losslessness on the job's ranks (target TP on ranks 0..T-1, drafter after
#               them): SSD and SD == AR on the same ranks and backend, token for token
#   domino      SD with the committed Domino drafter on GPU 0 == AR on GPU 0 (greedy); a
#               sampled Domino SD run (the device's sampled walk) completes
#   tp-graphs   AR on the TP ranks with the target's forwards graphed, their NCCL exchanges
#               inside, == the same with SSD_CUDA_GRAPHS=off. NCCL only
#   cpu-info    information, never a failure: AR on one CPU process vs AR on the GPU ranks. Not
#               expected to agree token for token: both decode the stored Q4_1 bytes the same
#               way (kernels/common/dequant.h), but the GPU's batch-invariant kernel multiplies
#               them by float activations in its own reduction order, while the CPU kernels round
#               activations to 8 bits; the report says where the streams first diverge
#   bench       ssd bench --modes ar,sd,ssd with the job's placement
#
# Placement. With at least T + drafters GPUs: one GPU per rank (--devices 0,1,..), NCCL
# transport. With fewer (one H100, say): every multi-rank section still runs, rank r on GPU
# r mod GPUs with --share-devices and the MPI transport (NCCL refuses two ranks of one
# communicator on one GPU); the NCCL-only sections are reported "not run" with that reason.
#
# Exit status: 0 every section that ran passed; 1 a mismatch or a failed step; 2 bad usage;
# 77 no GPU here (nothing run). Sections not run do not change it.
#
# Usage (from the repository root, after building with -DSSD_CUDA=ON into $BUILD):
#   perf/gpu_smoke.sh [--build build] [--model M.gguf] [--tp 4] [--drafters 1]
#                     [--prompts perf/prompts/mixed.txt] [--max-prompts 4] [-n 48]
#                     [--backend cuda] [--out perf/out/gpu_smoke.md] [--step-timeout S]
#                     [--quick] [--dry-run --gpus N]
#   --quick     under 10 minutes: one prompt, 32 tokens, each step capped at 150 s, no cpu-info,
#               no section started after 540 s, a one-prompt bench last (about 3-6 minutes is an
#               estimate for the 135M model on one H100: never measured)
#   --dry-run   print the plan (sections, rank layout, what is not run and why) and exit 0;
#               --gpus N stands for the node's GPU count (no GPU needed)
set -uo pipefail

BUILD=build
MODEL=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
TP=4
DRAFTERS=1
PROMPTS=perf/prompts/mixed.txt
MAX_PROMPTS=4
N=48
BACKEND=cuda
OUT=perf/out/gpu_smoke.md
STEP_TIMEOUT=600
QUICK=0
DRY_RUN=0
GPUS=
usage() { echo "gpu_smoke: $1 (see --help)" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --tp) TP=$2; shift 2 ;;
    --drafters) DRAFTERS=$2; shift 2 ;;
    --prompts) PROMPTS=$2; shift 2 ;;
    --max-prompts) MAX_PROMPTS=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    --backend) BACKEND=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --step-timeout) STEP_TIMEOUT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --gpus) GPUS=$2; shift 2 ;;
    -h|--help) sed -n 2,44p "$0"; exit 0 ;;
    *) usage "unknown argument $1" ;;
  esac
done
for v in TP DRAFTERS MAX_PROMPTS N STEP_TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || usage "${v,,} must be a whole number, got '${!v}'"
done
(( TP >= 1 && DRAFTERS >= 1 )) || usage "--tp and --drafters must be at least 1"
[[ -z $GPUS || ($DRY_RUN == 1 && $GPUS =~ ^[0-9]+$) ]] ||
  usage "--gpus takes a whole number and goes with --dry-run"
if (( QUICK )); then
  MAX_PROMPTS=1
  N=32
  STEP_TIMEOUT=150
fi

if (( DRY_RUN )); then
  [[ -n $GPUS ]] || usage "--dry-run needs --gpus N"
  NGPU=$GPUS
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_smoke: no GPU here (nvidia-smi finds none): nothing run" >&2
  exit 77
else
  NGPU=$(nvidia-smi -L | grep -c '^GPU')
fi
RANKS=$((TP + DRAFTERS))

# ---- the plan: placement and which sections run --------------------------------------------
DEVICE_OF=()  # rank r on GPU r mod NGPU
for ((r = 0; r < RANKS; ++r)); do DEVICE_OF+=($((NGPU > 0 ? r % NGPU : 0))); done
DEVICES=$(IFS=,; echo "${DEVICE_OF[*]}")
if (( NGPU >= RANKS )); then
  TRANSPORT=nccl
  PLACE=(--devices "$DEVICES" --transport nccl)
  LAYOUT="one GPU per rank: --devices $DEVICES --transport nccl"
  NCCL_REASON=
else
  TRANSPORT=mpi
  PLACE=(--devices "$DEVICES" --share-devices --transport mpi)
  LAYOUT="$RANKS ranks on $NGPU GPU(s): --devices $DEVICES --share-devices --transport mpi"
  NCCL_REASON="needs NCCL, which refuses two ranks of one communicator on one GPU: $RANKS ranks, $NGPU GPU(s)"
fi
SECTIONS=(tests graphs exactness domino tp-graphs cpu-info bench)
declare -A WHY_NOT=()
[[ -n $NCCL_REASON ]] && WHY_NOT[tp-graphs]=$NCCL_REASON
(( QUICK )) && WHY_NOT[cpu-info]="skipped by --quick: information only"
QUICK_BUDGET=540  # --quick: a section that would start past this many seconds is not run
declare -A WHAT=(
  [tests]="ctest -R '^(cuda|nccl)\\.' (single process)"
  [graphs]="AR on GPU 0, CUDA graphs vs eager (single process)"
  [exactness]="SSD and SD == AR, greedy, on $RANKS ranks (TP $TP + $DRAFTERS drafter)"
  [domino]="Domino SD == AR on GPU 0, and a sampled Domino SD run (single process)"
  [tp-graphs]="AR on the TP ranks, graphs with NCCL exchanges inside vs eager"
  [cpu-info]="AR on one CPU process vs AR on the GPU ranks (information)"
  [bench]="ssd bench --modes ar,sd,ssd on $RANKS ranks"
)

print_plan() {
  echo "- layout: target TP $TP on ranks 0..$((TP - 1)), $DRAFTERS drafter rank(s) after; $LAYOUT"
  echo "- prompts: $MAX_PROMPTS from $PROMPTS, $N tokens each; each step capped at $STEP_TIMEOUT s"
  (( QUICK )) && echo "- --quick: no section starts after $QUICK_BUDGET s"
  for s in "${SECTIONS[@]}"; do
    if [[ -n ${WHY_NOT[$s]:-} ]]; then
      echo "- section $s: not run (${WHY_NOT[$s]})"
    else
      echo "- section $s: run: ${WHAT[$s]}"
    fi
  done
}

if (( DRY_RUN )); then
  echo "gpu_smoke plan for $NGPU GPU(s)$( ((QUICK)) && echo ', --quick'):"
  print_plan
  exit 0
fi

SSD=$BUILD/bin/ssd
for f in "$SSD" "$MODEL" "$PROMPTS"; do
  [[ -e $f ]] || { echo "gpu_smoke: missing $f" >&2; exit 1; }
done
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
MPIRUN=(timeout "$STEP_TIMEOUT" mpirun -n "$RANKS" --bind-to none)
ONE=(timeout "$STEP_TIMEOUT")
[[ $(id -u) == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
FAILED=0

{
  echo "# GPU smoke report$( ((QUICK)) && echo ' (--quick)')"
  echo
  echo "Written as the run goes: a report without a **Result** line at its end was cut short."
  echo
  echo "- date: $(date -u +%FT%TZ)"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- host: $(hostname)"
  echo "- GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)"
  echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "- CUDA toolkit: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo unknown)"
  echo "- model: $MODEL; --backend $BACKEND"
  print_plan
  echo
} >"$OUT"

step() {  # step NAME RC: appends a result line (RC 124: the step hit --step-timeout)
  if [[ $2 == 0 ]]; then
    echo "- $1: **pass**" >>"$OUT"
  elif [[ $2 == 124 ]]; then
    echo "- $1: **FAIL** (timed out after $STEP_TIMEOUT s)" >>"$OUT"
    FAILED=1
  else
    echo "- $1: **FAIL** ($2)" >>"$OUT"
    FAILED=1
  fi
}
section() {  # section NAME TITLE: a heading, and false when the plan does not run NAME
  printf '\n## %s\n' "$2" >>"$OUT"
  if [[ -n ${WHY_NOT[$1]:-} ]]; then
    echo "- not run: ${WHY_NOT[$1]}" >>"$OUT"
    return 1
  fi
  if (( QUICK && SECONDS > QUICK_BUDGET )); then
    echo "- not run: --quick's budget of $QUICK_BUDGET s was spent (${SECONDS} s so far)" >>"$OUT"
    return 1
  fi
}

# first_divergence A.json B.json: "equal (N tokens)" or where the token streams first differ.
first_divergence() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["output_token_ids"]
b = json.load(open(sys.argv[2]))["output_token_ids"]
if a == b:
    print(f"equal ({len(a)} tokens)")
    sys.exit(0)
first = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
print(f"first differ at token {first} ({len(a)} vs {len(b)} tokens)")
sys.exit(1)
PY
}

# same_tokens LEFT RIGHT A.json B.json: a passed step "LEFT == RIGHT, equal (N tokens)", or a
# failed one "LEFT != RIGHT, first differ at ...".
same_tokens() {
  local verdict
  if verdict=$(first_divergence "$3" "$4"); then
    step "$1 == $2, $verdict" 0
  else
    step "$1 != $2, $verdict" 1
  fi
}
last_err() { tail -q -n1 "$@" 2>/dev/null | tail -1; }

# The prompts: one a line, '#' lines are comments, blank lines skipped, "\n" is a newline.
PROMPT_LIST=()
while IFS= read -r line && (( ${#PROMPT_LIST[@]} < MAX_PROMPTS )); do
  [[ -z ${line//[[:space:]]/} || $line =~ ^[[:space:]]*# ]] && continue
  PROMPT_LIST+=("${line//\\n/$'\n'}")
done <"$PROMPTS"
(( ${#PROMPT_LIST[@]} > 0 )) || { echo "gpu_smoke: no prompt in $PROMPTS" >&2; exit 1; }

# ---- tests ----------------------------------------------------------------------------------
section tests "Tests: ctest -R '^(cuda|nccl)\\.'"
(cd "$BUILD" && timeout "$STEP_TIMEOUT" ctest -R '^(cuda|nccl)\.' --output-on-failure) \
  >"$WORK/ctest.log" 2>&1
step "ctest -R '^(cuda|nccl)\\.'" $?
echo '```' >>"$OUT"; tail -5 "$WORK/ctest.log" >>"$OUT"; echo '```' >>"$OUT"
# ctest prints nothing of a skipped test's own output; its closing summary lists each one as
# "  636 - cuda.X (Skipped)" under "The following tests did not run:".
SKIPPED=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$WORK/ctest.log")
if (( SKIPPED > 0 )); then
  step "$SKIPPED GPU test(s) skipped although nvidia-smi sees $NGPU GPU(s)" 1
  grep -E '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$WORK/ctest.log" | head -5 |
    sed 's/^[[:space:]]*/  - /' >>"$OUT"
fi

# ---- graphs: single process on GPU 0 --------------------------------------------------------
section graphs "CUDA graphs vs eager: AR in one process on GPU 0 (TP 1)"
for ((i = 1; i <= ${#PROMPT_LIST[@]}; ++i)); do
  for graphs in on off; do
    SSD_CUDA_GRAPHS=$graphs "${ONE[@]}" "$SSD" generate -m "$MODEL" -p "${PROMPT_LIST[i - 1]}" \
        -n "$N" --mode ar --backend "$BACKEND" --devices 0 \
        --stats-json "$WORK/graphs_$graphs$i.json" >/dev/null 2>"$WORK/graphs_$graphs$i.err" ||
      { rc=$?; step "prompt $i: AR on GPU 0 (graphs $graphs) failed ($(last_err "$WORK/graphs_$graphs$i.err"))" $rc; break; }
  done
  [[ -s $WORK/graphs_off$i.json ]] &&
    same_tokens "prompt $i: graphs" "eager" "$WORK/graphs_on$i.json" "$WORK/graphs_off$i.json"
done

# ---- exactness: the job's ranks -------------------------------------------------------------
# gpu_run MODE I PROMPT: one generate on the job's ranks, stats in $WORK/MODE$I.json.
gpu_run() {
  "${MPIRUN[@]}" "$SSD" generate -m "$MODEL" -p "$3" -n "$N" --mode "$1" --tp "$TP" \
      --drafter "model:$MODEL" --k 4 "${PLACE[@]}" --backend "$BACKEND" \
      --stats-json "$WORK/$1$2.json" >/dev/null 2>"$WORK/$1$2.err"
}
declare -A GPU_AR_OK=()
if section exactness "Greedy exactness: SSD and SD vs AR on $RANKS ranks ($TRANSPORT transport)"; then
  for ((i = 1; i <= ${#PROMPT_LIST[@]}; ++i)); do
    prompt=${PROMPT_LIST[i - 1]}
    gpu_run ar "$i" "$prompt" ||
      { rc=$?; step "prompt $i: AR on the job's ranks failed ($(last_err "$WORK/ar$i.err"))" $rc; continue; }
    GPU_AR_OK[$i]=1
    for mode in ssd sd; do
      gpu_run "$mode" "$i" "$prompt" ||
        { rc=$?; step "prompt $i: ${mode^^} failed ($(last_err "$WORK/$mode$i.err"))" $rc; continue; }
      same_tokens "prompt $i: ${mode^^}" "AR" "$WORK/ar$i.json" "$WORK/$mode$i.json"
    done
  done
fi

# ---- domino: single process on GPU 0 --------------------------------------------------------
DOMINO=models/smollm2-domino/domino.safetensors
if section domino "Domino drafter on GPU 0: SD == AR (greedy), and a sampled SD run"; then
  for ((i = 1; i <= ${#PROMPT_LIST[@]}; ++i)); do
    [[ -s $WORK/graphs_on$i.json ]] || continue  # AR on GPU 0: the graphs section
    "${ONE[@]}" "$SSD" generate -m "$MODEL" -p "${PROMPT_LIST[i - 1]}" -n "$N" --mode sd \
        --drafter "domino:$DOMINO" --k 7 --backend "$BACKEND" --devices 0 \
        --stats-json "$WORK/domino$i.json" >/dev/null 2>"$WORK/domino$i.err" ||
      { rc=$?; step "prompt $i: Domino SD on GPU 0 failed ($(last_err "$WORK/domino$i.err"))" $rc; continue; }
    same_tokens "prompt $i: Domino SD" "AR on GPU 0" "$WORK/graphs_on$i.json" "$WORK/domino$i.json"
  done
  "${ONE[@]}" "$SSD" generate -m "$MODEL" -p "${PROMPT_LIST[0]}" -n "$N" --mode sd \
      --drafter "domino:$DOMINO" --k 7 --temp 0.8 --top-p 0.95 --seed 3 --backend "$BACKEND" \
      --devices 0 >/dev/null 2>"$WORK/domino_sampled.err"
  step "sampled Domino SD on GPU 0 (the device's sampled walk) completes" $?
fi

# ---- tp-graphs: NCCL only -------------------------------------------------------------------
if section tp-graphs "CUDA graphs vs eager on the TP ranks: AR, target TP $TP over NCCL"; then
  for ((i = 1; i <= ${#PROMPT_LIST[@]}; ++i)); do
    [[ -n ${GPU_AR_OK[$i]:-} ]] || continue  # graphs on: the exactness section's AR run
    timeout "$STEP_TIMEOUT" mpirun -n "$RANKS" --bind-to none -x SSD_CUDA_GRAPHS=off "$SSD" \
        generate -m "$MODEL" -p "${PROMPT_LIST[i - 1]}" -n "$N" --mode ar --tp "$TP" \
        "${PLACE[@]}" --backend "$BACKEND" --stats-json "$WORK/tp_eager$i.json" \
        >/dev/null 2>"$WORK/tp_eager$i.err" ||
      { rc=$?; step "prompt $i: eager AR on the TP ranks failed ($(last_err "$WORK/tp_eager$i.err"))" $rc; continue; }
    same_tokens "prompt $i: TP graphs" "TP eager" "$WORK/ar$i.json" "$WORK/tp_eager$i.json"
  done
fi

# ---- cpu-info: information only -------------------------------------------------------------
if section cpu-info "Information (not a pass/fail gate): AR on one CPU process vs AR on the GPUs"; then
  echo "Not expected to agree token for token (the GPU's float activations vs the CPU kernels'" \
       "8-bit activations, over the same decoded Q4_1 weights); only token streams are compared." \
       >>"$OUT"
  for ((i = 1; i <= ${#PROMPT_LIST[@]}; ++i)); do
    [[ -n ${GPU_AR_OK[$i]:-} ]] || { echo "- prompt $i: no GPU AR run to compare" >>"$OUT"; continue; }
    if "${ONE[@]}" "$SSD" generate -m "$MODEL" -p "${PROMPT_LIST[i - 1]}" -n "$N" --mode ar \
        --backend cpu --stats-json "$WORK/cpu$i.json" >/dev/null 2>"$WORK/cpu$i.err"; then
      echo "- prompt $i: CPU AR vs GPU AR: $(first_divergence "$WORK/cpu$i.json" "$WORK/ar$i.json")" \
        >>"$OUT"
    else
      echo "- prompt $i: CPU AR failed ($(last_err "$WORK/cpu$i.err")); not counted" >>"$OUT"
    fi
  done
fi

# ---- bench ----------------------------------------------------------------------------------
if section bench "AR / SD / SSD benchmark on $RANKS ranks ($TRANSPORT transport)"; then
  [[ $TRANSPORT == mpi ]] &&
    echo "Ranks share GPUs here: the figures measure a shared GPU, not the placement's speed." >>"$OUT"
  "${MPIRUN[@]}" "$SSD" bench -m "$MODEL" --prompt-file "$PROMPTS" --max-prompts "$MAX_PROMPTS" \
      -n "$N" --modes ar,sd,ssd --drafters "model:$MODEL" --k 4 --tp "$TP" "${PLACE[@]}" \
      --backend "$BACKEND" --out-md "$WORK/bench.md" >"$WORK/bench.log" 2>&1
  step "ssd bench --modes ar,sd,ssd" $?
  if [[ -f $WORK/bench.md ]]; then
    cat "$WORK/bench.md" >>"$OUT"
  else
    tail -5 "$WORK/bench.log" >>"$OUT"
  fi
fi

echo >>"$OUT"
RESULT=pass
[[ $FAILED == 0 ]] || RESULT=FAIL
echo "**Result: $RESULT** (sections not run are listed above with their reason)" >>"$OUT"
echo "gpu_smoke: report in $OUT"
exit $FAILED
