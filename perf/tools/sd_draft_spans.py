#!/usr/bin/env python3
"""sd_draft_spans.py DIR: where a 2-rank SD round's time goes on the drafter rank, from the jobs
perf/sd_drafter_trace.sh wrote (each job's --trace-json and outcome traces).

Per job: rounds; the drafter rank's answer per round ("answer outcome": the commit of the outcome
and the draft call; the first speculations excluded), the part of it that is the draft call
("fallback draft"), the rest of the drafter rank's loop between an outcome's arrival and its
answer's send, the target's verification; and the rows of the draft call's first forward (each
sequence's catch-up: its accepted tokens, its bonus and the token held back, see
runtime/drafters/model_draft_runner.h), all as medians with min..max. With --json PATH, the
per-round samples (job, k, batch, round, rows of step 0, answer ms) go to PATH."""
import glob
import json
import os
import re
import statistics
import sys


def spans(trace):
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    return sorted((e for e in ev if e.get("ph") == "X"), key=lambda e: e["ts"])


def outcome_rounds(trace_dir):
    """[(prompt batch, round) -> {seq: accepted}] in the job's order of batches."""
    out = []
    for path in sorted(glob.glob(os.path.join(trace_dir, "sd_p*.jsonl")),
                       key=lambda p: int(re.search(r"_p(\d+)", p).group(1))):
        rounds = {}
        for line in open(path):
            r = json.loads(line)
            rounds.setdefault(r["round"], {})[r["seq"]] = r["accepted"]
        out.append(rounds)
    return out


def med(v):
    return (f"{statistics.median(v):7.2f} ({min(v):.2f}..{max(v):.2f})" if v else "      -")


def job(path, samples):
    name = os.path.basename(path)[:-len(".trace.json")]
    m = re.search(r"_k(\d+)_b(\d+)", name)
    k, b = int(m.group(1)), int(m.group(2))
    ev = spans(path)
    answers = [e for e in ev if e["pid"] == 1 and e["name"] == "answer outcome"]
    drafts = [e for e in ev if e["pid"] == 1 and e["name"] == "fallback draft"]
    verifies = [e for e in ev if e["pid"] == 0 and e["name"] == "verify"]
    recv = [e for e in ev if e["pid"] == 1 and e["name"] == "recv Outcome"]
    send = [e for e in ev if e["pid"] == 1 and e["name"] == "send Speculation"]
    # The loop's own time around an answer: from the outcome's receipt to the answer's send, less
    # the answer itself.
    rest = []
    for a in answers:
        r = max((x for x in recv if x["ts"] <= a["ts"]), key=lambda x: x["ts"], default=None)
        s = min((x for x in send if x["ts"] >= a["ts"] + a["dur"]), key=lambda x: x["ts"],
                default=None)
        if r and s:
            rest.append((s["ts"] - r["ts"] - a["dur"]) / 1e3)
    # Rows of the draft's first forward: per sequence, the previous round's accepted + 2.
    batches = outcome_rounds(os.path.join(os.path.dirname(path), name + "_traces"))
    rows = []
    bi, prev_round = -1, None
    for a in answers:
        rnd = a["args"]["round"]
        if prev_round is None or rnd <= prev_round:
            bi += 1
        prev_round = rnd
        if bi >= len(batches) or rnd - 1 not in batches[bi]:
            continue
        acc = batches[bi][rnd - 1]
        n = sum(v + 2 for v in acc.values())
        rows.append(n)
        samples.append({"job": name, "k": k, "batch": b, "round": rnd, "rows0": n,
                        "seqs": len(acc), "answer_ms": a["dur"] / 1e3})
    ms = lambda v: [e["dur"] / 1e3 for e in v]
    print(f"{name:16s} rounds {len(answers):3d}  answer {med(ms(answers))}  draft call "
          f"{med(ms(drafts))}  loop rest {med(rest)}  verify {med(ms(verifies))}  "
          f"step-0 rows {med(rows)}")


def main():
    args = sys.argv[1:]
    out = None
    if "--json" in args:
        i = args.index("--json")
        out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    samples = []
    print("ms per round, median (min..max)")
    for path in sorted(glob.glob(os.path.join(args[0], "*.trace.json"))):
        job(path, samples)
    if out:
        with open(out, "w") as f:
            json.dump(samples, f, indent=1)


if __name__ == "__main__":
    main()
