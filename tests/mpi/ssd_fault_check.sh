#!/usr/bin/env bash
# A rank of a real SSD job fails; the job must end within a bound, with a non-zero status, a
# message naming what happened, and no rank left running. Run by ctest:
#   ssd_fault_check.sh SSD_BIN kill|stop|stop_ngram
#   kill  SIGKILL the drafter rank mid-run: Open MPI notices and ends the job.
#   stop  SIGSTOP the drafter rank (a hang): the target leader's watchdog (--watchdog-s 3) names
#         the rank it waited for and what it was doing, and aborts the job.
#   stop_ngram  the same with the n-gram drafter, whose misses the leader drafts itself and whose
#         hits it takes from pushes, so it waits for no answer: it learns of the hang from the
#         drafter lead's missing heartbeats (two step deadlines, 6 s) and ends the job, naming it.
#         (Without them it decoded all 4000 tokens alone, and only then timed out asking the
#         drafter's figures.)
# Skips (exit 77) without the default model (SSD_MODEL).
set -uo pipefail
BIN=$1 HOW=$2
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
DRAFTER="model:$SSD_MODEL"
# kill, stop: the drafter answers every miss with the model (--miss-policy primary), so every
# round the leader takes no pushed hit for waits for the drafter's answer. Under the default
# policy a miss could go to the n-gram backup, which the leader drafts itself: then it waits for
# no answer and learns of a hang from the heartbeats instead, as stop_ngram checks (seen under
# load, when the measured costs made the backup the cheaper answer).
POLICY=(--miss-policy primary)
[[ $HOW == stop_ngram ]] && DRAFTER=ngram POLICY=()
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
LOG=$(mktemp)
OUT=$(mktemp)  # the streamed text: once it grows, the job is in its rounds
trap 'rm -f "$LOG" "$OUT"' EXIT
START=$(date +%s)
${MPIEXEC:-mpirun} "${ROOT[@]}" --oversubscribe --bind-to none -n 2 "$BIN" generate \
  -m "$SSD_MODEL" -p "Count from one to one thousand in words:" -n 4000 --ctx-size 8192 \
  --ignore-eos --threads 1 --mode ssd --drafter "$DRAFTER" --k 4 "${POLICY[@]}" \
  --watchdog-s 3 >"$OUT" 2>"$LOG" &
MPI_PID=$!
# shellcheck source=tests/mpi/job_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
DRAFTER_PID=$(job_rank_pid "$BIN" $MPI_PID 1) ||
  { echo "FAIL: the drafter rank never started"; cat "$LOG"; exit 1; }
# Hit the drafter only once the job is in its rounds (tokens streamed), not while it loads.
wait_streaming "$OUT" $MPI_PID || { echo "FAIL: no tokens streamed within 60 s"; cat "$LOG"; exit 1; }
PIDS=$(job_ranks "$BIN" $MPI_PID)  # every rank of this job (all run once tokens stream)
if [[ $HOW == kill ]]; then kill -KILL "$DRAFTER_PID"; else kill -STOP "$DRAFTER_PID"; fi
if ! wait_ended $MPI_PID 30; then
  echo "FAIL: the job still runs 30 s after the drafter rank was hit"; kill -KILL $MPI_PID
  [[ $HOW != kill ]] && kill -KILL "$DRAFTER_PID" 2>/dev/null
  cat "$LOG"; exit 1
fi
wait $MPI_PID; STATUS=$?
ELAPSED=$(($(date +%s) - START))
[[ $HOW != kill ]] && kill -KILL "$DRAFTER_PID" 2>/dev/null
echo "job ended with status $STATUS after ${ELAPSED}s; its output:"; tail -n 8 "$LOG"
((STATUS != 0)) || { echo "FAIL: exit status 0"; exit 1; }
if [[ $HOW == stop ]]; then
  grep -q "timed out after 3 s while waiting for the speculation of round" "$LOG" ||
    { echo "FAIL: no watchdog message naming the wait"; exit 1; }
fi
if [[ $HOW == stop_ngram ]]; then
  grep -q "timed out after 6 s while waiting for a heartbeat from the drafter (rank 1) in round" \
    "$LOG" || { echo "FAIL: no message naming the missing heartbeats"; exit 1; }
fi
# No rank of this job may outlive it.
# shellcheck disable=SC2086  # PIDS: one word a pid
LEFT=$(ranks_left $PIDS)
if [[ -n $LEFT ]]; then
  # shellcheck disable=SC2086
  kill -KILL $LEFT 2>/dev/null
  echo "FAIL: rank process(es)$LEFT still running"; exit 1
fi
echo "OK"
