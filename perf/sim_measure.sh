#!/usr/bin/env bash
# The measured side of the simulator's validation (docs/simulator.md): AR, SD and SSD tok/s over
# the matrix below, each real run recording its outcome trace (`ssd bench --outcome-trace`) for
# perf/sim_validate.py to replay on the CPU profile calibrated in the same rep.
#
#   ranks    1: the drafter in the target's process (--threads 2; modes ar, sd; every drafter
#               and k in one job per batch size)
#            2: target and drafter one core each over MPI (launch/ssd-launch; modes ar, sd, ssd;
#               one drafter, k and pre-speculation chunk per job; chunk 0 jobs run ssd only)
#   drafters ngram, domino (models/smollm2-domino), model (the target's GGUF drafting for itself:
#            the only GGUF the project has; slow, as an autoregressive drafter of its size is)
#   k        2, 4, 7, auto (the chosen k of every round is in the trace)
#   batch    1, 4
#   chunk    0, 2 (SSD --prespec-chunk)
#   misses   SSD with the runtime's default --miss-at leader (the target leader drafts a miss the
#            drafter answers with a lookup; each trace record says whether it did)
# Each rep first calibrates this machine with every drafter (`ssd simulate --calibrate
# --calibrate-drafters`): 2 threads for the 1-rank jobs, 1 thread pinned to one core for the
# 2-rank jobs (as a rank is). Every job is bracketed by two speed probes (`ssd simulate --probe`,
# the target's forwards at the calibration's shapes, ~0.5 s each, same threads and pinning):
# probe_<job>_pre.json and probe_<job>_post.json, from which perf/sim_validate.py scales the
# rep's profile to the machine's speed at the job's time (topology/sim/speed_probe.h).
#
#   perf/sim_measure.sh [--reps N] [--prompts N] [--tokens N] [--ranks 1,2]
#       [--drafters ngram,domino,model] [--ks 2,4,7,auto] [--batches 1,4] [--chunks 0,2]
#       [--estimate]
# --estimate prints the run time estimate and exits. Defaults: 2 reps, 4 prompts, 48 tokens.
# Reps append: they are numbered after the last rep already in OUT (rep1, rep2, ...), so three
# calls of --reps 1 give rep1..rep3 and perf/sim_validate.py takes each cell's median over them.
# Env: SSD_BIN, SSD_MODEL, PROMPTS (default the held-out set), OUT (default perf/out/sim_validate).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=2 NP=4 NT=48 RANKS=1,2 DRAFTERS=ngram,domino,model KS=2,4,7,auto BATCHES=1,4 CHUNKS=0,2
ESTIMATE=0
die() { echo "sim_measure: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --prompts) NP=$2; shift 2 ;;
    --tokens) NT=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --drafters) DRAFTERS=$2; shift 2 ;;
    --ks) KS=$2; shift 2 ;;
    --batches) BATCHES=$2; shift 2 ;;
    --chunks) CHUNKS=$2; shift 2 ;;
    --estimate) ESTIMATE=1; shift ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown flag '$1' (--help lists them)" ;;
  esac
done
for v in REPS NP NT; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"; done
BIN=${SSD_BIN:-$ROOT/build/bin/ssd}
MODEL=${SSD_MODEL:-$ROOT/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
PROMPTS=${PROMPTS:-$ROOT/perf/prompts/distill-heldout.txt}
OUT=${OUT:-$ROOT/perf/out/sim_validate}
DOMINO=$ROOT/models/smollm2-domino/domino.safetensors
IFS=, read -ra RANKS_L <<<"$RANKS"
IFS=, read -ra DRAFTERS_L <<<"$DRAFTERS"
IFS=, read -ra KS_L <<<"$KS"
IFS=, read -ra BATCHES_L <<<"$BATCHES"
IFS=, read -ra CHUNKS_L <<<"$CHUNKS"
spec_of() {
  case $1 in
    ngram) echo ngram ;;
    domino) echo "domino:$DOMINO" ;;
    model) echo "model:$MODEL" ;;
    *) die "unknown drafter '$1' (ngram, domino, model)" ;;
  esac
}
for d in "${DRAFTERS_L[@]}"; do spec_of "$d" >/dev/null; done
for r in "${RANKS_L[@]}"; do [[ $r == 1 || $r == 2 ]] || die "--ranks: 1 or 2, got '$r'"; done

# The estimate, from the job times of a quiet rep of the whole matrix (the 2-core VM, no other
# work: 2 min 13 s): ~1 s of start-up per job, tokens at ~250 tok/s at batch 1 and ~500 at
# batch 4 per mode and configuration (AR, SD and SSD alike; the model drafter's 1.5x slower),
# and per calibration 2 s for the target + 9 s per drafter (its SD runs at the measured runs'
# token count, each run 3 times, and its pre-speculation calls; a quiet rep took 3 min 11 s),
# + 1.3 s per job and 1.3 s per drafter per calibration for the speed probes around them.
# A loaded machine takes longer.
est=0   # milliseconds
nd=${#DRAFTERS_L[@]}
tok_ms() {  # tok_ms BATCH DRAFTER: milliseconds of one configuration's tokens
  local ms=$((NP * NT * 1000 / ($1 == 1 ? 250 : 500)))
  [[ $2 == model ]] && ms=$((ms * 3 / 2))
  echo "$ms"
}
for r in "${RANKS_L[@]}"; do
  est=$((est + 2000 + 10300 * nd))   # the calibration at this placement's threads
  for b in "${BATCHES_L[@]}"; do
    if [[ $r == 1 ]]; then   # one job per batch: AR, then SD per drafter and k
      est=$((est + 2300 + $(tok_ms "$b" -)))
      for d in "${DRAFTERS_L[@]}"; do
        est=$((est + ${#KS_L[@]} * $(tok_ms "$b" "$d")))
      done
    else
      for d in "${DRAFTERS_L[@]}"; do
        for c in "${CHUNKS_L[@]}"; do
          modes=$([[ $c == 0 ]] && echo 1 || echo 3)   # ssd; or ar, sd, ssd
          est=$((est + ${#KS_L[@]} * (2300 + modes * $(tok_ms "$b" "$d"))))
        done
      done
    fi
  done
done
est=$((est * REPS / 1000))
echo "sim_measure: ${REPS} reps x ranks {$RANKS} x drafters {$DRAFTERS} x k {$KS} x batch" \
  "{$BATCHES} x chunk {$CHUNKS}, $NP prompts x $NT tokens: about $((est / 60)) min" \
  "$((est % 60)) s on a quiet 2-core machine"
((ESTIMATE)) && exit 0

for f in "$BIN" "$MODEL" "$PROMPTS" "$DOMINO"; do
  [[ -e $f ]] || { echo "sim_measure: missing $f" >&2; exit 1; }
done
specs=""
for d in "${DRAFTERS_L[@]}"; do specs+="${specs:+,}$(spec_of "$d")"; done
common=(-m "$MODEL" --prompt-file "$PROMPTS" -n "$NT" --max-prompts "$NP")
probe() {  # probe DIR JOB THREADS pre|post [taskset -c N]: a speed probe into DIR/probe_JOB_WHEN.json
  local dir=$1 job=$2 threads=$3 when=$4; shift 4
  "$@" "$BIN" simulate --probe --calibrate-model "$MODEL" --calibrate-batch "$BATCHES" \
    --threads "$threads" --out "$dir/probe_${job}_$when.json" >>"$dir/probes.log" 2>&1 ||
    { cat "$dir/probes.log"; echo "sim_measure: the speed probe failed" >&2; exit 1; }
}
run() {  # run LOG cmd...: the command's output to LOG (the load average beside); stop on failure
  local log=$1; shift
  echo "$(basename "$log" .log) $(cut -d' ' -f1-3 /proc/loadavg)" >>"$(dirname "$log")/load.txt"
  "$@" >"$log" 2>&1 || { cat "$log"; echo "sim_measure: failed: $*" >&2; exit 1; }
}
last=0   # the highest rep number already in OUT
for d in "$OUT"/rep*; do
  n=${d##*/rep}
  [[ -d $d && $n =~ ^[0-9]+$ ]] && ((n > last)) && last=$n
done
for rep in $(seq $((last + 1)) $((last + REPS))); do
  dir=$OUT/rep$rep
  mkdir -p "$dir"
  # The drafters' SD runs generate as many tokens as the measured runs do.
  cal=(simulate --calibrate --calibrate-model "$MODEL" --calibrate-drafters "$specs"
       --calibrate-batch "$BATCHES" --calibrate-tokens "$NT")
  for r in "${RANKS_L[@]}"; do
    if [[ $r == 1 ]]; then
      run "$dir/cal_2t.log" "$BIN" "${cal[@]}" --threads 2 --out "$dir/cal_2t.json"
      for b in "${BATCHES_L[@]}"; do
        probe "$dir" "r1_b$b" 2 pre
        run "$dir/r1_b$b.log" "$BIN" bench "${common[@]}" --drafters "$specs" --k "$KS" \
          --modes ar,sd --threads 2 --batch "$b" --outcome-trace "$dir/r1_b${b}_traces" \
          --out-json "$dir/r1_b$b.json"
        probe "$dir" "r1_b$b" 2 post
      done
    else
      run "$dir/cal_1t.log" taskset -c 0 "$BIN" "${cal[@]}" --threads 1 --out "$dir/cal_1t.json"
      for d in "${DRAFTERS_L[@]}"; do
        for k in "${KS_L[@]}"; do
          for b in "${BATCHES_L[@]}"; do
            for c in "${CHUNKS_L[@]}"; do
              modes=$([[ $c == 0 ]] && echo ssd || echo ar,sd,ssd)
              name=r2_${d}_k${k}_b${b}_c${c}
              probe "$dir" "$name" 1 pre taskset -c 0
              run "$dir/$name.log" env SSD_BIN="$BIN" "$ROOT/launch/ssd-launch" --target-ranks 1 \
                --drafter-ranks 1 -- bench "${common[@]}" --drafters "$(spec_of "$d")" --k "$k" \
                --modes "$modes" --batch "$b" --prespec-chunk "$c" \
                --outcome-trace "$dir/${name}_traces" --out-json "$dir/$name.json"
              probe "$dir" "$name" 1 post taskset -c 0
            done
          done
        done
      done
    fi
  done
  echo "rep $rep done"
done
