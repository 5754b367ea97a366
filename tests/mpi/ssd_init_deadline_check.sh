#!/usr/bin/env bash
# A rank stopped before MPI_Init (SSD_FAULT=<role>:stop:init) held every other rank of the job in
# MPI_Init for good: the watchdog only started after it. Now each waiting rank gives MPI_Init the
# --watchdog-s deadline, at least 60 s (it also waits out the others' loading of the binary), then
# prints one line saying so and exits with status 1, and mpirun ends the job, the stopped rank
# included. Checked for a stopped drafter and a stopped leader, with `ssd probe-links` (no model),
# 2 ranks (expect_job_fails, job_lib.sh):
#   - mpirun returns a non-zero status within BOUND seconds of its start;
#   - a line "rank R of 2: MPI_Init has not returned after 60 s" names the rank that waited;
#   - both ranks were seen, and none is left.
# Run by ctest: ssd_init_deadline_check.sh SSD_BIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
BIN=$1
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
# The bound counts from mpirun's start, so it includes loading the binary (up to 50 s on the
# shared VM while the disk served several builds; see ssd_startup_agreement_check.sh).
BOUND=${SSD_STARTUP_BOUND_S:-120}
fails=0
for stopped in drafter:0 leader:1; do
  role=${stopped%:*} waiting=${stopped#*:}
  expect_job_fails "$role stopped before MPI_Init" \
    "rank $waiting of 2: MPI_Init has not returned after 60 s" 2 -- \
    -x SSD_FAULT="$role:stop:init" -n 2 "$BIN" probe-links --watchdog-s 5
done
((fails == 0)) && echo OK
exit $((fails > 0))
