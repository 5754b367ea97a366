#!/usr/bin/env python3
"""Checks a --trace-json timeline (Chrome trace events) of an SSD run against its rules:

  names     every rank has a process_name and every track a thread_name metadata event;
  nesting   the "X" spans of one track nest (each lies inside the enclosing one or after it);
  flows     every flow end ("f") has exactly one start ("s") with its id, no earlier than the
            start less both ranks' clock uncertainty, and each flow end sits inside a span of
            its track;
  protocol  on the target leader each round r reads: recv Speculation(r) -> verify(r) ->
            send Outcome(r) -> recv Speculation(r + 1) ...; on the drafter lead each answer
            (round r) follows the receipt of an Outcome and precedes send Speculation(r), and
            round r's pre-speculation starts after that send; another drafter rank drafts round
            r only after recv PrespecWork and sends its share after;
  clocks    (--one-node) every rank's offset lies within its stated uncertainty (one node shares
            one monotonic clock, so the true offset is 0);
  overlap   (--expect-overlap) some drafter pre-speculation overlaps a target verification.

Usage: check_trace.py TRACE.json [--one-node] [--expect-overlap]. Prints one line per broken rule
and exits 1, or prints a summary and exits 0.
"""
import json
import sys
from collections import defaultdict

EPS_US = 0.5  # float rounding of microsecond stamps


def check(doc, one_node=False, expect_overlap=False):
    errors = []
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return ["no traceEvents list"]
    meta = doc.get("metadata", {})
    clocks = {c["rank"]: c for c in meta.get("clock_offsets", [])}
    pnames, tnames = set(), set()
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pnames.add(e["pid"])
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tnames.add((e["pid"], e["tid"]))
    body = [e for e in events if e.get("ph") != "M"]
    for e in body:
        if e["pid"] not in pnames:
            errors.append(f"rank {e['pid']} has no process_name")
            pnames.add(e["pid"])
        if (e["pid"], e["tid"]) not in tnames:
            errors.append(f"track {e['pid']}/{e['tid']} has no thread_name")
            tnames.add((e["pid"], e["tid"]))
        if e["pid"] not in clocks:
            errors.append(f"rank {e['pid']} has no clock offset in the metadata")
            clocks[e["pid"]] = {"offset_us": 0, "uncertainty_us": 0}

    # nesting, per track
    spans = defaultdict(list)
    for e in body:
        if e["ph"] == "X":
            spans[(e["pid"], e["tid"])].append(e)
    for track, xs in spans.items():
        xs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in xs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS_US:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + EPS_US:
                top = stack[-1]
                errors.append(f"track {track}: '{e['name']}' at {e['ts']:.1f} us overlaps "
                              f"'{top['name']}' ({top['ts']:.1f}+{top['dur']:.1f} us) without nesting")
            stack.append(e)

    def inside_span(e):
        return any(x["ts"] - EPS_US <= e["ts"] <= x["ts"] + x["dur"] + EPS_US
                   for x in spans.get((e["pid"], e["tid"]), []))

    # flows
    starts, ends = defaultdict(list), defaultdict(list)
    for e in body:
        if e["ph"] == "s":
            starts[e["id"]].append(e)
        elif e["ph"] == "f":
            ends[e["id"]].append(e)
    for fid, fs in ends.items():
        ss = starts.get(fid, [])
        if len(ss) != 1 or len(fs) != 1:
            errors.append(f"flow {fid}: {len(ss)} start(s) and {len(fs)} end(s)")
            continue
        s, f = ss[0], fs[0]
        slack = clocks[s["pid"]].get("uncertainty_us", 0) + clocks[f["pid"]].get("uncertainty_us", 0)
        if f["ts"] < s["ts"] - slack - EPS_US:
            errors.append(f"flow {fid} ({f['name']}) arrives {s['ts'] - f['ts']:.1f} us before it "
                          f"was sent (clock slack {slack:.1f} us)")
        for end in (s, f):
            if not inside_span(end):
                errors.append(f"flow {fid} ({end['name']}, {end['ph']}) is in no span of its track")

    # protocol
    def named(pid, *names):
        return sorted((e for e in body if e["pid"] == pid and e["ph"] == "X" and e["name"] in names),
                      key=lambda e: e["ts"])

    leader = named(0, "recv Speculation", "verify", "send Outcome")
    expect = "recv Speculation"
    last_round = -1
    for e in leader:
        r = e.get("args", {}).get("round", -1)
        if e["name"] == "recv Speculation":
            if expect not in ("recv Speculation", "send Outcome or recv Speculation"):
                errors.append(f"leader: recv Speculation(round {r}) while expecting {expect}")
            if r != last_round + 1:
                errors.append(f"leader: round {r} follows round {last_round}")
            last_round = r
            expect = "verify"
        elif e["name"] == "verify":
            if expect == "recv Speculation" and r == last_round + 1:
                # A round no answer comes for: decode steps and speculations the leader took from
                # the drafter's push alone (protocol.h: SpeculationMsg, PrespecPush).
                last_round = r
            elif expect != "verify" or r != last_round:
                errors.append(f"leader: verify(round {r}) while expecting {expect} of round {last_round}")
            expect = "send Outcome or recv Speculation"
        else:
            if expect != "send Outcome or recv Speculation" or r != last_round:
                errors.append(f"leader: send Outcome(round {r}) while expecting {expect} of round {last_round}")
            expect = "recv Speculation"
    if last_round < 0:
        errors.append("leader: no round recorded")

    drafter_pids = sorted({e["pid"] for e in body if e.get("cat") == "drafter"})
    lead = drafter_pids[0] if drafter_pids else None
    if lead is not None:
        seq = named(lead, "recv Outcome", "answer outcome", "send Speculation")
        pending_outcome, answered = 0, None
        for e in seq:
            r = e.get("args", {}).get("round", -1)
            if e["name"] == "recv Outcome":
                pending_outcome += 1
            elif e["name"] == "answer outcome":
                if pending_outcome == 0:
                    errors.append(f"drafter lead: answer(round {r}) before any Outcome arrived")
                pending_outcome = max(0, pending_outcome - 1)
                answered = r
            elif r > 0 and answered != r:
                errors.append(f"drafter lead: send Speculation(round {r}) without its answer")
        sent = {e["args"].get("round"): e["ts"] for e in named(lead, "send Speculation")}
        # A round whose every speculation the leader took from the push gets no Speculation:
        # its pre-speculation follows the answer itself.
        answers = {e["args"].get("round"): e["ts"] + e["dur"]
                   for e in named(lead, "answer outcome")}
        for e in named(lead, "pre-speculate chunk"):
            r = e["args"].get("round")
            after = sent.get(r, answers.get(r))
            if after is None or e["ts"] < after - EPS_US:
                errors.append(f"drafter lead: pre-speculation of round {r} starts before its "
                              f"speculation was sent")
        for pid in drafter_pids[1:]:
            work = [e for e in named(pid, "recv PrespecWork")]
            shares = [e for e in named(pid, "send PrespecShare")]
            for e in named(pid, "pre-speculate chunk"):
                if not any(w["ts"] <= e["ts"] + EPS_US for w in work):
                    errors.append(f"drafter rank {pid}: drafts before any PrespecWork arrived")
            if work and not shares:
                errors.append(f"drafter rank {pid}: got work but sent no share")

    # clocks
    if one_node:
        for r, c in clocks.items():
            if abs(c.get("offset_us", 0)) > c.get("uncertainty_us", 0) + 0.01:
                errors.append(f"rank {r}: clock offset {c['offset_us']:.2f} us exceeds its "
                              f"uncertainty {c['uncertainty_us']:.2f} us on one node")

    # overlap
    if expect_overlap:
        verifies = [(e["ts"], e["ts"] + e["dur"]) for e in named(0, "verify")]
        chunks = [(e["ts"], e["ts"] + e["dur"]) for pid in drafter_pids
                  for e in named(pid, "pre-speculate chunk")]
        if not any(a < d and c < b for a, b in verifies for c, d in chunks):
            errors.append("no pre-speculation overlaps any verification")
    return errors


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    doc = json.load(open(argv[1]))
    errors = check(doc, "--one-node" in argv, "--expect-overlap" in argv)
    for e in errors[:40]:
        print("trace:", e)
    if errors:
        print(f"trace: {len(errors)} problem(s) in {argv[1]}")
        return 1
    body = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    print(f"trace ok: {len(body)} events on {len({e['pid'] for e in body})} ranks, "
          f"{sum(e['ph'] == 'f' for e in body)} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
