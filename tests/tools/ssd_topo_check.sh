#!/usr/bin/env bash
# `ssd topo`, run by ctest:  ssd_topo_check.sh SSD_BIN
# Places a 2 + 3 layout on this node and checks the JSON: 5 ranks with their roles, each with
# CPUs of this node, the cores hwloc found, "no GPU" with a reason when NVML is absent (devices
# -1), oversubscription said when 5 ranks exceed the cores; a bad layout flag fails naming it.
set -euo pipefail
BIN=$1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$BIN" topo --tp 2 --drafters 3 --stats-json "$OUT/topo.json" >"$OUT/out.txt"
cat "$OUT/out.txt"
python3 - "$OUT/topo.json" "$OUT/out.txt" <<'PY'
import json, os, sys
j, text = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
ranks = j["ranks"]
assert [r["rank"] for r in ranks] == [0, 1, 2, 3, 4], ranks
assert "target leader" in ranks[0]["role"] and "drafter 1 of 3" in ranks[2]["role"], ranks
cores = len(j["cores"])
assert cores >= 1
pus = {p for c in j["cores"] for p in c}
for r in ranks:
    assert r["cpus"] and set(r["cpus"]) <= pus, r
if not j["gpus"]:
    assert j["gpu_note"].startswith("no GPU"), j["gpu_note"]
    assert all(r["device"] == -1 for r in ranks)
    assert "no GPU" in text
assert ("oversubscribed" in text) == (5 > cores), text
print("topo ok")
PY
if "$BIN" topo --tp 0 2>"$OUT/err.txt"; then echo "--tp 0 was accepted"; exit 1; fi
grep -q -- "--tp" "$OUT/err.txt" || { echo "the error does not name --tp:"; cat "$OUT/err.txt"; exit 1; }
