#!/usr/bin/env bash
# Ranks started with different start-up-shaping flags (mpirun's MPMD syntax, `A : B`) must end at
# once with one line naming the flag, its values and the ranks, and a non-zero status, instead of
# blocking in a collective the flags shape (a --transport mismatch blocked for good before the
# start-up agreement; --tp 1 vs 2 waited for the watchdog and named nothing). `ssd probe-links`
# needs no model. Run by ctest: ssd_startup_agreement_check.sh SSD_BIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
BIN=$1
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
WATCHDOG=5
# The bound counts from mpirun's start, so it includes loading the binary: on the shared VM a
# CUDA-linked ssd took up to 50 s to load while the disk served several builds. A job that blocks
# (the --transport case before the agreement) never ends by itself: the kill at the bound says so.
BOUND=${SSD_STARTUP_BOUND_S:-120}
fails=0
# run_case NAME EXPECTED-LINE -- mpirun MPMD arguments (expect_job_fails, job_lib.sh: also no
# rank may be left after the job)
run_case() {
  expect_job_fails "$1" "$2" 0 "${@:3}"
}
P=(probe-links --watchdog-s $WATCHDOG)
run_case transport "--transport is 'mpi' on rank 0 but 'nccl' on rank 1" -- \
  -n 1 "$BIN" "${P[@]}" --transport mpi : -n 1 "$BIN" "${P[@]}" --transport nccl
run_case tp_1_vs_2 "--tp is '1' on rank 0 but '2' on rank 1, '2' on rank 2" -- \
  -n 1 "$BIN" "${P[@]}" --tp 1 : -n 2 "$BIN" "${P[@]}" --tp 2
run_case tp_2_vs_1 "--tp is '2' on rank 0 but '1' on rank 1" -- \
  -n 1 "$BIN" "${P[@]}" --tp 2 : -n 1 "$BIN" "${P[@]}" --tp 1 : -n 1 "$BIN" "${P[@]}" --tp 2
run_case tp_mode "--tp-mode is 'exact' on rank 0 but 'megatron' on rank 1" -- \
  -n 1 "$BIN" "${P[@]}" --tp 2 --tp-mode exact : -n 1 "$BIN" "${P[@]}" --tp 2 --tp-mode megatron
((fails == 0)) && echo OK
exit $((fails > 0))
