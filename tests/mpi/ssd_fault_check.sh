#!/usr/bin/env bash
# A rank of a real SSD job fails; the job must end within a bound, with a non-zero status, a
# message naming what happened, and no rank left running. Run by ctest:
#   ssd_fault_check.sh SSD_BIN kill|stop
#   kill  SIGKILL the drafter rank mid-run: Open MPI notices and ends the job.
#   stop  SIGSTOP the drafter rank (a hang): the target leader's watchdog (--watchdog-s 3) names
#         the rank it waited for and what it was doing, and aborts the job.
# Skips (exit 77) without the default model (SSD_MODEL).
set -uo pipefail
BIN=$1 HOW=$2
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
LOG=$(mktemp)
OUT=$(mktemp)  # the streamed text: once it grows, the job is in its rounds
trap 'rm -f "$LOG" "$OUT"' EXIT
START=$(date +%s)
${MPIEXEC:-mpirun} "${ROOT[@]}" --oversubscribe --bind-to none -n 2 "$BIN" generate \
  -m "$SSD_MODEL" -p "Count from one to one thousand in words:" -n 4000 --ctx-size 8192 \
  --ignore-eos --threads 1 --mode ssd --drafter "model:$SSD_MODEL" --k 4 \
  --watchdog-s 3 >"$OUT" 2>"$LOG" &
MPI_PID=$!
# Whether process $1 descends from process $2 (walks the parent chain in /proc).
descends_from() {
  local p=$1
  while [[ -n $p && $p -gt 1 ]]; do
    [[ $p == "$2" ]] && return 0
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || return 1
  done
  return 1
}
# The drafter rank: the ssd process of THIS job (a descendant of its mpirun: other jobs of the
# same binary may run on the machine) whose environment says world rank 1.
DRAFTER=""
for _ in $(seq 1 200); do
  for p in $(pgrep -f "$BIN generate" || true); do
    descends_from "$p" "$MPI_PID" || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then
      DRAFTER=$p
    fi
  done
  [[ -n $DRAFTER ]] && break
  sleep 0.05
done
[[ -n $DRAFTER ]] || { echo "FAIL: the drafter rank never started"; cat "$LOG"; exit 1; }
# Hit the drafter only once the job is in its rounds (tokens streamed), not while the ranks still
# load the model: on a loaded machine loading can take longer than any fixed pause.
for _ in $(seq 1 1200); do
  (($(stat -c %s "$OUT") > 40)) && break
  kill -0 $MPI_PID 2>/dev/null || break
  sleep 0.05
done
(($(stat -c %s "$OUT") > 40)) || { echo "FAIL: no tokens streamed within 60 s"; cat "$LOG"; exit 1; }
if [[ $HOW == kill ]]; then kill -KILL "$DRAFTER"; else kill -STOP "$DRAFTER"; fi
STATUS=0
for _ in $(seq 1 600); do
  kill -0 $MPI_PID 2>/dev/null || break
  sleep 0.05
done
if kill -0 $MPI_PID 2>/dev/null; then
  echo "FAIL: the job still runs 30 s after the drafter rank was hit"; kill -KILL $MPI_PID
  [[ $HOW == stop ]] && kill -KILL "$DRAFTER" 2>/dev/null
  cat "$LOG"; exit 1
fi
wait $MPI_PID; STATUS=$?
ELAPSED=$(($(date +%s) - START))
[[ $HOW == stop ]] && kill -KILL "$DRAFTER" 2>/dev/null
echo "job ended with status $STATUS after ${ELAPSED}s; its output:"; tail -n 8 "$LOG"
((STATUS != 0)) || { echo "FAIL: exit status 0"; exit 1; }
if [[ $HOW == stop ]]; then
  grep -q "timed out after 3 s while waiting for the speculation of round" "$LOG" ||
    { echo "FAIL: no watchdog message naming the wait"; exit 1; }
fi
# No rank of this job may outlive it (zombies of an un-reaping PID 1 do not count).
sleep 1
for p in $(pgrep -f "$BIN generate" || true); do
  state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo Z)
  [[ $state == Z || $state == T ]] && continue
  echo "FAIL: rank process $p still running"; exit 1
done
echo "OK"
