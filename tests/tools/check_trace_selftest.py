#!/usr/bin/env python3
"""The trace checker's own test: a small well-formed two-rank timeline passes check_trace.py, and
each planted defect (spans that cross on one track, a flow end with no start, an outcome sent
before its round's verification, a round skipped, pre-speculation before its speculation was sent,
a clock offset outside its uncertainty, no overlap) is caught. A checker that passes everything
fails here."""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_trace import check  # noqa: E402


def X(pid, tid, name, ts, dur, rnd=-1, cat="target"):
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur, "cat": cat,
            "args": {"round": rnd} if rnd >= 0 else {}}


def flow(ph, pid, tid, name, ts, fid):
    return {"ph": ph, "pid": pid, "tid": tid, "name": name, "ts": ts, "id": fid, "cat": "link",
            "args": {}}


def good():
    ev = []
    for pid, tracks in ((0, [1]), (1, [1, 2])):
        ev.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "r"}})
        for t in tracks:
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t, "args": {"name": "t"}})
    t, fid = 0.0, 0
    for r in range(3):
        # drafter lead answers round r (r > 0 after an outcome), sends the speculation
        if r > 0:
            ev.append(X(1, 1, "answer outcome", t, 10, r, "drafter"))
            t += 11
        ev.append(X(1, 1, "send Speculation", t, 1, r, "link"))
        ev.append(flow("s", 1, 1, "Speculation", t, fid))
        ev.append(X(0, 1, "recv Speculation", t + 2, 1, r, "link"))
        ev.append(flow("f", 0, 1, "Speculation", t + 3, fid))
        fid += 1
        ev.append(X(1, 2, "pre-speculate chunk", t + 2, 30, r, "drafter"))
        ev.append(X(0, 1, "verify", t + 4, 40, r))
        t += 45
        if r < 2:
            ev.append(X(0, 1, "send Outcome", t, 1, r, "link"))
            ev.append(flow("s", 0, 1, "Outcome", t, fid))
            ev.append(X(1, 1, "recv Outcome", t + 2, 1, -1, "link"))
            ev.append(flow("f", 1, 1, "Outcome", t + 3, fid))
            fid += 1
            t += 4
    meta = {"clock_offsets": [{"rank": 0, "offset_us": 0, "uncertainty_us": 0},
                              {"rank": 1, "offset_us": 0.2, "uncertainty_us": 0.4}]}
    return {"traceEvents": ev, "metadata": meta}


def pushed_round():
    """The well-formed trace with round 1 answered by no Speculation: every speculation of it was
    taken from the drafter's push (or was a decode step), so the leader verifies at once."""
    d = good()
    ev = d["traceEvents"]
    drop = [e for e in ev if e.get("name") in ("send Speculation", "recv Speculation") and
            e.get("args", {}).get("round") == 1]
    times = {e["ts"] for e in drop}
    fids = {e["id"] for e in ev if e["ph"] in ("s", "f") and e["name"] == "Speculation" and
            any(abs(e["ts"] - t) <= 1 for t in times)}
    d["traceEvents"] = [e for e in ev if e not in drop and e.get("id") not in fids]
    return d


def planted():
    def edit(f):
        d = good()
        f(d)
        return d

    def find(d, name, rnd=None, ph="X"):
        return next(e for e in d["traceEvents"] if e.get("name") == name and e["ph"] == ph and
                    (rnd is None or e.get("args", {}).get("round") == rnd))

    def crossing(d):
        d["traceEvents"].append(X(0, 1, "crossing", find(d, "verify", 0)["ts"] + 20, 60, 0))

    def orphan(d):
        d["traceEvents"].append(flow("f", 0, 1, "Outcome", find(d, "verify", 1)["ts"] + 1, 999))

    def outcome_first(d):  # the send and its flow start, before round 1's verification
        send = find(d, "send Outcome", 1)
        start = next(e for e in d["traceEvents"] if e["ph"] == "s" and e["ts"] == send["ts"])
        send["ts"] = start["ts"] = find(d, "verify", 1)["ts"] - 3

    def skipped(d):  # the leader's rounds numbered 0, 2, 3
        for e in d["traceEvents"]:
            if e["pid"] == 0 and e.get("args", {}).get("round", 0) >= 1:
                e["args"]["round"] += 1

    def early_prespec(d):
        find(d, "pre-speculate chunk", 2)["ts"] = find(d, "send Speculation", 2)["ts"] - 5

    def bad_clock(d):
        d["metadata"]["clock_offsets"][1]["offset_us"] = 50.0

    def no_overlap(d):
        for e in d["traceEvents"]:
            if e.get("name") == "pre-speculate chunk":
                e["dur"] = 1

    return {"spans that cross": crossing, "flow without start": orphan,
            "outcome before verify": outcome_first, "round skipped": skipped,
            "pre-speculation before its speculation": early_prespec,
            "clock outside uncertainty": bad_clock, "no overlap": no_overlap}, edit


def main():
    failures = 0
    errs = check(good(), one_node=True, expect_overlap=True)
    if errs:
        print("the well-formed trace fails:", errs)
        failures += 1
    errs = check(pushed_round(), one_node=True, expect_overlap=True)
    if errs:
        print("the well-formed trace with a round of pushed speculations fails:", errs)
        failures += 1
    defects, edit = planted()
    for name, f in defects.items():
        errs = check(edit(f), one_node=True, expect_overlap=True)
        if errs:
            print(f"caught ({name}): {errs[0]}")
        else:
            print(f"NOT CAUGHT: {name}")
            failures += 1
    print(f"{len(defects) + 2 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
