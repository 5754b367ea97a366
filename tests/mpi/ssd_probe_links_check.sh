#!/usr/bin/env bash
# `ssd probe-links` under mpirun, run by ctest:  ssd_probe_links_check.sh SSD_BIN RANKS TP
# Checks the --stats-json figures: one entry per drafter rank with a positive latency and 1 MiB
# and 64 MiB bandwidths, the TP all-reduce's busbw = algbw x 2(n-1)/n when TP > 1, and the
# start-up probe (no 64 MiB, a time budget: at least one ping and one bandwidth try, and how many
# it took) of the same job; the full probe takes every sample (--pings 8, 3 bandwidth tries); with
# EMULATE_US the job runs with --link-emulate
# EMULATE_US and both probes must measure a latency of at least that. Needs no model. Also: on one rank it says there is
# no link and exits 0.
set -euo pipefail
BIN=$1 RANKS=$2 TP=$3 EMULATE=${4:-0}
EXTRA=()
[[ $EMULATE != 0 ]] && EXTRA=(--link-emulate "$EMULATE")
MPIRUN=${MPIEXEC:-mpirun}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
timeout 120 "$MPIRUN" "${ROOT[@]}" --oversubscribe --bind-to none -n "$RANKS" "$BIN" probe-links \
  --tp "$TP" --pings 8 "${EXTRA[@]}" --stats-json "$OUT/links.json" >"$OUT/out.txt" 2>"$OUT/err.txt" || {
  echo "mpirun failed:"; cat "$OUT/out.txt" "$OUT/err.txt"; exit 1; }
cat "$OUT/out.txt"
python3 - "$OUT/links.json" "$RANKS" "$TP" "$EMULATE" <<'PY'
import json, math, sys
j, ranks, tp = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
emulated = float(sys.argv[4])
for key, full in (("links", True), ("startup_links", False)):
    l = j[key]
    peers = [d["peer"] for d in l["drafters"]]
    assert peers == list(range(tp, ranks)), f"{key}: drafter peers {peers}"
    for d in l["drafters"]:
        assert 0 < d["latency_us"] < 1e6 and 0 < d["gbps_1mib"] < 1e4, d
        assert ("gbps_64mib" in d) == full, f"{key}: 64 MiB measured {'gbps_64mib' in d}"
        assert d["latency_us"] >= emulated, f"{key}: {d['latency_us']} us < emulated {emulated} us"
        if full:  # no budget: every sample asked for
            assert d["pings"] == 8 and d["bulk_tries"] == 3, d
        else:  # the start-up probe: at least one of each, at most what it asks for
            assert 1 <= d["pings"] <= 16 and 1 <= d["bulk_tries"] <= 3, d
    if full:
        assert l["budget_s"] == 0 and not l["cut_short"], f"{key}: {l}"
    else:
        assert l["budget_s"] > 0, f"{key}: the start-up probe has no budget: {l}"
    if tp > 1:
        a = l["tp_allreduce"]
        assert a["ranks"] == tp and a["algbw_gbps"] > 0
        assert a["samples"] == 5 if full else 1 <= a["samples"] <= 3, f"{key}: {a}"
        assert math.isclose(a["busbw_gbps"], a["algbw_gbps"] * 2 * (tp - 1) / tp, rel_tol=1e-9)
    else:
        assert "tp_allreduce" not in l
print("probe-links figures ok")
PY
"$BIN" probe-links | grep -q "no link to probe"
