#!/usr/bin/env bash
# A rank stopped before MPI_Init (SSD_FAULT=<role>:stop:init) held every other rank of the job in
# MPI_Init for good: the watchdog only started after it. Now each waiting rank gives MPI_Init the
# --watchdog-s deadline, at least 60 s (it also waits out the others' loading of the binary), then
# prints one line saying so and exits with status 1, and mpirun ends the job, the stopped rank
# included. Checked for a stopped drafter and a stopped leader, with
# `ssd probe-links` (no model), 2 ranks:
#   - mpirun returns a non-zero status within BOUND seconds of its start;
#   - a line "rank R of 2: MPI_Init has not returned after 60 s" names the rank that waited;
#   - no rank of the job is left.
# Run by ctest: ssd_init_deadline_check.sh SSD_BIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
BIN=$1
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
MPI=(${MPIEXEC:-mpirun} "${ROOT[@]}" --oversubscribe --bind-to none)
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
WATCHDOG=5
# The bound counts from mpirun's start, so it includes loading the binary (up to 50 s on the
# shared VM while the disk served several builds; see ssd_startup_agreement_check.sh).
BOUND=${SSD_STARTUP_BOUND_S:-120}
fails=0
# run_case ROLE WAITING-RANK
run_case() {
  local role=$1 waiting=$2 t0 t1 status secs pids left
  t0=$(date +%s.%N)
  SSD_FAULT=$role:stop:init timeout $((BOUND + 5)) "${MPI[@]}" -x SSD_FAULT -n 2 "$BIN" \
    probe-links --watchdog-s $WATCHDOG >"$LOG" 2>&1 &
  local mpi=$!
  # The job's two ranks, seen while they wait out the deadline (job_ranks matches `generate`).
  pids=""
  for _ in $(seq 1 600); do
    pids=$(for p in $(pgrep -f "$BIN probe-links" || true); do
      descends_from "$p" "$mpi" && echo "$p"
    done)
    (($(wc -w <<<"$pids") == 2)) && break
    kill -0 "$mpi" 2>/dev/null || break
    sleep 0.1
  done
  wait "$mpi"
  status=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local want="rank $waiting of 2: MPI_Init has not returned after 60 s"
  echo "$role stopped before MPI_Init: status $status after ${secs} s: $(grep -m1 'MPI_Init has not' "$LOG")"
  if ((status == 0 || status == 124)) || awk -v s="$secs" -v b="$BOUND" 'BEGIN { exit !(s > b) }'; then
    echo "FAIL: $role: status $status after ${secs} s (bound ${BOUND} s)"; cat "$LOG"; fails=$((fails + 1))
  elif ! grep -qF -- "$want" "$LOG"; then
    echo "FAIL: $role: no line saying: $want"; cat "$LOG"; fails=$((fails + 1))
  fi
  if (($(wc -w <<<"$pids") != 2)); then
    echo "FAIL: $role: the job's two ranks were not seen running (pids: ${pids:-none})"; fails=$((fails + 1))
  fi
  # shellcheck disable=SC2086
  left=$(ranks_left $pids)
  if [[ -n $left ]]; then
    echo "FAIL: $role: ranks left after the job:$left"; kill -9 $left 2>/dev/null; fails=$((fails + 1))
  fi
}
run_case drafter 0
run_case leader 1
((fails == 0)) && echo OK
exit $((fails > 0))
