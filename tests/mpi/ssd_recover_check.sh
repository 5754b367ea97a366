#!/usr/bin/env bash
# A dead or hung drafter costs speed, not the run (docs/faults.md, "Recovery"). Run by ctest:
#   ssd_recover_check.sh SSD_BIN kill|stop|stop_ngram|kill_miss_drafter|kill-abort [RANKS TP]
#   kill        recovery mode on, the drafter rank SIGKILLed mid-run: exit 0, ONE line naming rank
#               1 and "died", the output token for token the target's alone (AR), the loss in
#               --stats-json.
#   stop        recovery mode on, the drafter rank SIGSTOPped mid-run (a hang): the leader's
#               deadline (--watchdog-s 15) expires, the same line says so, the output is AR's.
#               (On a machine so busy that the drafter takes 15 s to load, the deadline expires
#               while the leader waits for it to load: the same line, the same output.)
#   stop_ngram  the same hang with the n-gram drafter, whose misses the leader drafts itself and
#               whose hits it takes from pushes: it waits for no answer, so it notices the hang
#               from the drafter lead's missing heartbeats (two step deadlines: --watchdog-s 5,
#               10 s) in the middle of a 3000-token run, and finishes it alone.
#   kill_miss_drafter  kill under --miss-at drafter: the leader holds no lookup copy while the
#               drafter lives, builds one at the loss from the running sequence's prompt and
#               tokens, and finishes with it as under --miss-at leader.
#               In all four the leader goes on drafting with its copy of the n-gram lookup
#               (--miss-at leader, the default: the backup speculator's copy under a model
#               drafter, the primary's under ngram; under --miss-at drafter built at the loss),
#               and its line says so (a drafter lost while it loads too: the leader then runs SD
#               alone with that lookup from the first token).
#               All four end the job with MPI_Abort(0) once the output is written (MPI_Finalize
#               may wait for the lost rank forever), with no rank left behind.
#   kill-abort  no recovery mode, the drafter SIGKILLed: the job ends with a non-zero status in
#               bounded time, and mpirun's report names rank 1 and the signal.
# RANKS and TP (default 2 and 1): the job's size and TP degree; the drafter lead, rank TP, is the
# one hit (with RANKS > TP + 1 the other drafter ranks must be stopped by the leader itself).
# Skips (exit 77) without the default model (SSD_MODEL).
set -uo pipefail
BIN=$1 HOW=$2 RANKS=${3:-2} TP=${4:-1}
LEAD=$TP
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PROMPT="Count from one to one thousand in words:"
N=96 DRAFTER_SPEC="model:$SSD_MODEL"
[[ $HOW == stop_ngram ]] && N=3000 DRAFTER_SPEC=ngram
MISS_AT=leader
[[ $HOW == kill_miss_drafter ]] && MISS_AT=drafter
COMMON=(-m "$SSD_MODEL" -p "$PROMPT" -n $N --ctx-size 4096 --ignore-eos --threads 1)
fail() { echo "FAIL: $*"; echo "--- the job's stderr:"; cat "$DIR/log"; exit 1; }

# What the target alone produces (one process, no mpirun).
if [[ $HOW != kill-abort ]]; then
  "$BIN" generate "${COMMON[@]}" --mode ar -q --stats-json "$DIR/ar.json" 2>"$DIR/ar.log" ||
    { echo "FAIL: the AR reference run failed"; cat "$DIR/ar.log"; exit 1; }
fi

REC=(--mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0)
[[ $HOW == kill-abort ]] && REC=()
WATCHDOG=60  # kill: only the process probe may notice the loss, never a slow round
[[ $HOW == stop ]] && WATCHDOG=15
[[ $HOW == stop_ngram ]] && WATCHDOG=5
START=$(date +%s)
${MPIEXEC:-mpirun} "${ROOT[@]}" --oversubscribe --bind-to none "${REC[@]}" -n "$RANKS" "$BIN" generate \
  "${COMMON[@]}" --mode ssd --drafter "$DRAFTER_SPEC" --k 4 --tp "$TP" --miss-at $MISS_AT \
  --watchdog-s $WATCHDOG \
  --stats-json "$DIR/run.json" >"$DIR/out" 2>"$DIR/log" &
MPI_PID=$!
# shellcheck source=tests/mpi/job_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
DRAFTER=$(job_rank_pid "$BIN" $MPI_PID "$LEAD" 400) || fail "the drafter rank never started"
# Hit the drafter once the job is in its rounds (tokens streamed), not while it loads.
wait_streaming "$DIR/out" $MPI_PID || fail "no tokens streamed within 60 s"
PIDS=$(job_ranks "$BIN" $MPI_PID)  # every rank of this job (all run once tokens stream)
if [[ $HOW == stop* ]]; then kill -STOP "$DRAFTER"; else kill -KILL "$DRAFTER"; fi
if ! wait_ended $MPI_PID 120; then
  kill -KILL "$DRAFTER" 2>/dev/null; kill -KILL $MPI_PID
  fail "the job still runs 120 s after the drafter rank was hit"
fi
wait $MPI_PID; STATUS=$?
echo "job ended with status $STATUS after $(($(date +%s) - START)) s; its stderr:"
grep -v '^ *[0-9]* |' "$DIR/log" | tail -n 12

if [[ $HOW == kill-abort ]]; then
  ((STATUS != 0)) || fail "exit status 0 without recovery mode"
  grep -qE "rank $LEAD .*signal 9" "$DIR/log" || fail "no report naming rank $LEAD and its signal"
  grep -q "lost drafter" "$DIR/log" && fail "the leader went on without recovery mode"
else
  ((STATUS == 0)) || fail "exit status $STATUS"
  grep -q "the requests are done; ending the job with MPI_Abort(0)" "$DIR/log" ||
    fail "the leader did not end the job past the lost rank"
  LINES=$(grep -c "^ssd: lost drafter rank $LEAD: " "$DIR/log")
  ((LINES == 1)) || fail "$LINES lines about the lost drafter, not 1"
  if [[ $HOW == kill* ]]; then
    grep -q "^ssd: lost drafter rank $LEAD: died" "$DIR/log" || fail "the line does not say it died"
  elif [[ $HOW == stop ]]; then
    grep -q "^ssd: lost drafter rank $LEAD: deadline of 15 s expired" "$DIR/log" ||
      fail "the line does not name the expired deadline"
  else
    grep -q "^ssd: lost drafter rank $LEAD: deadline of 10 s expired while waiting for a heartbeat from the drafter (rank $LEAD) in round" "$DIR/log" ||
      fail "the line does not name the missing heartbeats"
  fi
  python3 - "$DIR/ar.json" "$DIR/run.json" "$LEAD" "$N" "$DIR/log" "$HOW" <<'PY' || fail "the output differs from AR's, or the loss is misreported"
import json, sys
ar, run = (json.load(open(p)) for p in sys.argv[1:3])
assert run["status"] == "ok", run["status"]
loss = run["drafter_loss"]
assert loss and loss["rank"] == int(sys.argv[3]), loss
# The leader's n-gram copy finishes the run (held from the start, or built at the loss; a drafter
# lost while loading leaves the leader SD alone with it).
want = "the leader's n-gram drafts"
assert loss["fallback"] == want, loss
line = next(l for l in open(sys.argv[5]) if l.startswith("ssd: lost drafter rank"))
tail = f"; the target finishes every sequence with {want} (output unchanged)"
assert line.rstrip("\n").endswith(tail), f"the loss line {line!r} does not end with {tail!r}"
if sys.argv[6] == "kill_miss_drafter" and loss["round"] >= 0:  # the copy built at the loss drafted
    assert run["leader_drafted"] > 0, f"no speculation drafted by the leader: {run['leader_drafted']}"
a, b = ar["output_token_ids"], run["output_token_ids"]
assert len(a) == int(sys.argv[4]), len(a)
if a != b:
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    sys.exit(f"token {i}: AR {a[i:i+4]} vs run {b[i:i+4]} ({len(a)} vs {len(b)} tokens)")
print(f"output equals AR ({len(a)} tokens); loss: round {loss['round']}, {loss['cause']}")
PY
fi
# No rank of this job may outlive it.
# shellcheck disable=SC2086  # PIDS: one word a pid
LEFT=$(ranks_left $PIDS)
if [[ -n $LEFT ]]; then
  # shellcheck disable=SC2086
  kill -KILL $LEFT 2>/dev/null
  fail "rank process(es)$LEFT still running"
fi
echo "OK"
