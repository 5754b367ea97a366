#!/usr/bin/env python3
"""drop_timed_start.py SRC DST: copies a reps directory of perf/sim_measure.sh, dropping every
calibration's timed start of a model drafter (its runs' rows with "start", their "start_s"
fields), so a binary from before the start was timed (`ssd simulate --refit`) can replay the reps:
the "before" of docs/simulator.md's sim10 validation."""
import glob
import json
import os
import shutil
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1:]
    if os.path.exists(dst):
        sys.exit(f"drop_timed_start: {dst} exists")
    shutil.copytree(src, dst, symlinks=True)
    for path in glob.glob(os.path.join(dst, "rep*", "cal_*.json")):
        j = json.load(open(path))
        for m in (j.get("drafter_measurements") or {}).values():
            m["runs"] = [r for r in m["runs"] if not r.get("start")]
            for r in m["runs"]:
                r.pop("start_s", None)
        with open(path, "w") as f:
            json.dump(j, f)


if __name__ == "__main__":
    main()
