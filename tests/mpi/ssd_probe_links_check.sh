#!/usr/bin/env bash
# `ssd probe-links` under mpirun, run by ctest:  ssd_probe_links_check.sh SSD_BIN RANKS TP
# Checks the --stats-json figures: one entry per drafter rank with a positive latency and 1 MiB
# and 64 MiB bandwidths, the TP all-reduce's busbw = algbw x 2(n-1)/n when TP > 1, and the
# start-up probe (no 64 MiB; a time budget: as many samples as it allowed, said in the JSON, the
# figures 0 where it allowed none) of the same job; the full probe takes every sample (--pings 8, 3 bandwidth tries); with
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
        if full:  # no budget: every sample asked for
            assert d["pings"] == 8 and d["bulk_tries"] == 3, d
            assert 0 < d["latency_us"] < 1e6 and 0 < d["gbps_1mib"] < 1e4, d
        else:  # the start-up probe: as many as its budget allowed, the figures 0 without one
            assert 0 <= d["pings"] <= 16 and 0 <= d["bulk_tries"] <= 3, d
            assert (d["pings"] > 0) == (0 < d["latency_us"] < 1e6), d
            assert (d["bulk_tries"] > 0) == (0 < d["gbps_1mib"] < 1e4), d
            assert l["cut_short"] or (d["pings"] == 16 and d["bulk_tries"] == 3), d
        assert ("gbps_64mib" in d) == full, f"{key}: 64 MiB measured {'gbps_64mib' in d}"
        if d["pings"] > 0:
            assert d["latency_us"] >= emulated, f"{key}: {d['latency_us']} us < emulated {emulated} us"
    if full:
        assert l["budget_s"] == 0 and not l["cut_short"], f"{key}: {l}"
    else:
        assert l["budget_s"] > 0, f"{key}: the start-up probe has no budget: {l}"
    if tp > 1:
        a = l["tp_allreduce"]
        assert a["ranks"] == tp, a
        assert a["samples"] == 5 if full else 0 <= a["samples"] <= 3, f"{key}: {a}"
        assert (a["samples"] > 0) == (a["algbw_gbps"] > 0), a
        assert math.isclose(a["busbw_gbps"], a["algbw_gbps"] * 2 * (tp - 1) / tp, rel_tol=1e-9)
    else:
        assert "tp_allreduce" not in l
print("probe-links figures ok")
PY
"$BIN" probe-links | grep -q "no link to probe"
