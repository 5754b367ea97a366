#!/usr/bin/env bash
# launch/ssd-launch --recovery adds Open MPI's recovery-mode settings to the mpirun line (and
# only then), so that a lost drafter rank costs speed, not the run (docs/faults.md, "Recovery").
# Usage: ssd_launch_recovery_test.sh SOURCE_DIR SSD_BIN (a dry run: nothing is started).
set -uo pipefail
SRC=$1
export SSD_BIN=$2
MCA="--mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0"
with=$("$SRC/launch/ssd-launch" --recovery --dry-run -- generate -m m.gguf --mode ssd 2>&1) ||
  { echo "FAIL: ssd-launch --recovery --dry-run failed: $with"; exit 1; }
grep -qF -- "$MCA" <<<"$with" || { echo "FAIL: no recovery settings in: $with"; exit 1; }
without=$("$SRC/launch/ssd-launch" --dry-run -- generate -m m.gguf --mode ssd 2>&1) ||
  { echo "FAIL: ssd-launch --dry-run failed: $without"; exit 1; }
grep -q "orte_enable_recovery" <<<"$without" && { echo "FAIL: recovery without --recovery"; exit 1; }
echo "OK"
