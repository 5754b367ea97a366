#!/usr/bin/env bash
# A drafter rank killed at a set round (SSD_FAULT, actors/roles/fault_injection.h) under Open MPI's
# recovery mode costs speed, not the run (docs/faults.md, "Recovery"). Run by ctest:
#   ssd_recover_fault_check.sh SSD_BIN generate-secondary | generate-secondary-stop | serve-lead |
#                                      serve-secondary
#   generate-secondary  3 ranks (target, drafter lead, secondary drafter rank 2); rank 2 SIGKILLs
#                       itself adopting the lead's work for round 3. `ssd generate --mode ssd`
#                       must exit 0 with ONE line "lost drafter rank 2: died", the output token for
#                       token the target's alone (AR), the loss in --stats-json, and --trace-json
#                       written (rank 0's events, "lost_rank": 2, the "drafter rank 2 lost" instant).
#   generate-secondary-stop  the same with rank 2 SIGSTOPping itself (a hang) and --watchdog-s 30:
#                       the leader's deadline expires and the line names rank 2, stopped; the
#                       leader ends rank 2's process (SIGKILL) before its MPI_Abort(0).
#   Under `ssd generate` mpirun must return within 18 s of the leader's MPI_Abort(0) line (the
#   fault matrix's bound), with no rank process left.
#   serve-lead          `ssd serve --mode ssd` on 2 ranks; the drafter lead SIGKILLs itself
#   serve-secondary     answering round 3 (serve-lead), or rank 2 of 3 adopting round 3's work
#                       (serve-secondary), while two greedy requests run; a third comes after.
#                       Every response's tokens must equal AR's, /metrics must say
#                       ssd:drafter_lost{rank="N"} 1, and SIGTERM must drain the server: exit 0,
#                       one loss line, the job ended with MPI_Abort(0) past the lost rank.
# --watchdog-s 120 (but for the stop case): only the leader's process probe may find the loss,
# never a slow round. Every wait is bounded; no timing is asserted. Skips (exit 77) without the
# default model (SSD_MODEL).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"
BIN=$1 HOW=$2
if [[ -z ${SSD_MODEL:-} || ! -f ${SSD_MODEL:-} ]]; then
  echo "SKIP: set SSD_MODEL to run this check"; exit 77
fi
case $HOW in
  generate-secondary) RANKS=3 LOST=2 FAULT=secondary:kill:round:round=3 ;;
  generate-secondary-stop) RANKS=3 LOST=2 FAULT=secondary:stop:round:round=3 ;;
  serve-lead) RANKS=2 LOST=1 FAULT=drafter:kill:round:round=3 ;;
  serve-secondary) RANKS=3 LOST=2 FAULT=secondary:kill:round:round=3 ;;
  *) echo "unknown case '$HOW'"; exit 2 ;;
esac
ROOT=()
[[ $(id -u) -eq 0 ]] && ROOT=(--allow-run-as-root)
DIR=$(mktemp -d)
MPI_PID=""
cleanup() {
  [[ -n $MPI_PID ]] && kill -KILL "$MPI_PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- the job's stderr:"; cat "$DIR/log"; exit 1; }
REC=(--mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0)
export SSD_FAULT=$FAULT
MPI=("${MPIEXEC:-mpirun}" "${ROOT[@]}" --oversubscribe --bind-to none "${REC[@]}"
     -x SSD_FAULT -n "$RANKS" "$BIN")
WATCHDOG=120
[[ $FAULT == *:stop:* ]] && WATCHDOG=30
DRAFT=(--mode ssd --drafter "model:$SSD_MODEL" --k 4 --threads 1 --watchdog-s $WATCHDOG)
N=48
PROMPTS=("Count from one to one thousand in words:" "The capital of France is" "def fibonacci(n):")
# What the target alone produces (one process, no mpirun, no fault).
for i in "${!PROMPTS[@]}"; do
  [[ $HOW == generate-* && $i -gt 0 ]] && break
  SSD_FAULT="" "$BIN" generate -m "$SSD_MODEL" -p "${PROMPTS[$i]}" -n $N --ignore-eos -q \
    --threads 1 --mode ar --stats-json "$DIR/ar$i.json" 2>"$DIR/ar.log" ||
    { echo "FAIL: the AR reference run failed"; cat "$DIR/ar.log"; exit 1; }
done

if [[ $HOW == generate-* ]]; then
  timeout -s KILL 300 "${MPI[@]}" generate -m "$SSD_MODEL" -p "${PROMPTS[0]}" -n $N --ignore-eos \
    -q "${DRAFT[@]}" --stats-json "$DIR/run.json" --trace-json "$DIR/trace.json" >"$DIR/out" 2>"$DIR/log" &
  MPI_PID=$!
  # Once the leader ends the job past the lost rank, mpirun must return within the fault matrix's
  # bound of 18 s, leaving no rank behind (a stopped secondary once kept it 60 s, until the
  # drafter lead's heartbeat watch fired).
  for _ in $(seq 1 2900); do
    grep -q "ending the job with MPI_Abort(0)" "$DIR/log" && break
    kill -0 "$MPI_PID" 2>/dev/null || break
    sleep 0.1
  done
  RANKS_AT_END=$(job_ranks "$BIN" "$MPI_PID")
  if grep -q "ending the job with MPI_Abort(0)" "$DIR/log"; then
    wait_ended "$MPI_PID" 18 || fail "the job outlived the leader's MPI_Abort(0) by 18 s"
    # shellcheck disable=SC2086  # one pid a word
    LEFT=$(ranks_left $RANKS_AT_END)
    [[ -z $LEFT ]] || fail "rank processes left after the job:$LEFT"
  fi
  STATUS=0
  wait "$MPI_PID" || STATUS=$?
  MPI_PID=""
  echo "job ended with status $STATUS; its stderr:"
  grep -v '^ *[0-9]* |' "$DIR/log" | tail -n 8
  ((STATUS == 0)) || fail "exit status $STATUS"
  python3 - "$DIR/ar0.json" "$DIR/run.json" "$DIR/trace.json" "$LOST" "$HOW" <<'PY' || fail "above"
import json, sys
ar, run = (json.load(open(p)) for p in sys.argv[1:3])
lost, died = int(sys.argv[4]), not sys.argv[5].endswith("-stop")
assert run["status"] == "ok", run["status"]
loss = run["drafter_loss"]
assert loss and loss["rank"] == lost and loss["died"] == died, loss
assert loss["fallback"] == "the leader's n-gram drafts", loss
a, b = ar["output_token_ids"], run["output_token_ids"]
assert len(a) == 48 and a == b, f"tokens differ: AR {a} vs run {b}"
trace = json.load(open(sys.argv[3]))
meta = trace["metadata"]
assert meta.get("lost_rank") == lost, meta
marks = [e for e in trace["traceEvents"] if e.get("name") == f"drafter rank {lost} lost"]
assert len(marks) == 1, f"{len(marks)} loss instants on the timeline"
print(f"output equals AR ({len(a)} tokens); loss: round {loss['round']}, {loss['cause']}; "
      f"trace: {len(trace['traceEvents'])} events, lost_rank {meta['lost_rank']}")
PY
else
  start_server "$DIR/port" "$DIR/log" "${MPI[@]}" serve -m "$SSD_MODEL" "${DRAFT[@]}" \
    --max-batch 4 --port 0 --port-file "$DIR/port" || fail "see above"
  python3 - "$PORT" "$DIR" "$N" "$LOST" "${PROMPTS[@]}" <<'PY' || fail "see above"
import json, sys, threading, urllib.request
port, out, n, lost, prompts = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
def call(prompt):
    body = json.dumps({"prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
                       "return_token_ids": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=240) as r:
        return json.load(r)["choices"][0]["token_ids"]
got = [None] * len(prompts)
def run(i): got[i] = call(prompts[i])
# Two requests while the drafter rank dies (at round 3 of their batch), then one after the loss.
threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
for t in threads: t.start()
for t in threads: t.join(300)
run(2)
bad = 0
for i, p in enumerate(prompts):
    ref = json.load(open(f"{out}/ar{i}.json"))["output_token_ids"]
    if got[i] != ref:
        print(f"MISMATCH for {p!r}: served {got[i]} vs AR {ref}")
        bad += 1
metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
lines = [l for l in metrics.splitlines() if l.startswith("ssd:drafter_lost{")]
print(f"{len(prompts)} requests, tokens equal AR's: {bad == 0}; {lines}")
assert len(lines) == 1 and f'rank="{lost}"' in lines[0] and lines[0].endswith(" 1"), lines
sys.exit(1 if bad else 0)
PY
  stop_server
  STATUS=$SERVER_STATUS
  echo "server ended with status $STATUS; its stderr:"
  grep -v '^ *[0-9]* |' "$DIR/log" | tail -n 8
  ((STATUS == 0)) || fail "exit status $STATUS"
  grep -q "drained, exiting" "$DIR/log" || fail "the server did not drain"
fi
KIND=$(cut -d: -f2 <<<"$FAULT")
grep -q "^ssd: fault injection: rank $LOST ([a-z]*) $KIND " "$DIR/log" || fail "the fault was not injected"
LINES=$(grep -c "^ssd: lost drafter rank " "$DIR/log")
((LINES == 1)) || fail "$LINES lines about a lost drafter, not 1"
# --miss-at leader (the default): the leader goes on with its copy of the n-gram backup.
grep -q "^ssd: lost drafter rank $LOST: .*; the target finishes every sequence with the leader's n-gram drafts (output unchanged)\$" "$DIR/log" ||
  fail "the line does not say the leader's n-gram drafts finish the run"
if [[ $FAULT == *:stop:* ]]; then
  grep -q "^ssd: lost drafter rank $LOST: deadline of $WATCHDOG s expired .*(its process is stopped" \
    "$DIR/log" || fail "the line does not name rank $LOST stopped at the deadline"
  grep -q "ended the lost rank $LOST's process (SIGKILL) first" "$DIR/log" ||
    fail "the leader did not end the stopped rank $LOST before the abort"
else
  grep -q "^ssd: lost drafter rank $LOST: died" "$DIR/log" || fail "the line does not name rank $LOST dead"
fi
grep -q "the requests are done; ending the job with MPI_Abort(0)" "$DIR/log" ||
  fail "the leader did not end the job past the lost rank"
echo "OK"
