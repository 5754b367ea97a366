# shellcheck shell=bash
# What the mpirun checks share (ssd_fault_check.sh, ssd_recover_check.sh, ssd_recover_fault_check.sh,
# ssd_serve_check.sh, ssd_startup_agreement_check.sh, ssd_init_deadline_check.sh): finding a
# running `ssd generate` job's rank processes (other jobs of the same binary may run on the
# machine, ctest runs checks side by side), waiting for its rounds, for its end, and for its ranks
# to be gone; starting `ssd serve` under mpirun and stopping it as a client would; running a job
# that must end by itself with a line and a non-zero status. Sourced:  . "$(dirname "${BASH_SOURCE[0]}")/job_lib.sh"

# Whether process $1 descends from process $2 (walks the parent chain in /proc).
descends_from() {
  local p=$1
  while [[ -n $p && $p -gt 1 ]]; do
    [[ $p == "$2" ]] && return 0
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null) || return 1
  done
  return 1
}

# The pids of the `$1 generate` processes that descend from mpirun $2: the job's ranks.
job_ranks() {
  local p
  for p in $(pgrep -f "$1 generate" || true); do
    descends_from "$p" "$2" && echo "$p"
  done
  return 0
}

# Prints the pid of world rank $3 of the job of mpirun $2 running `$1 generate`, looking up to
# ${4:-200} times 50 ms apart; prints nothing and fails when it never started.
job_rank_pid() {
  local p
  for _ in $(seq 1 "${4:-200}"); do
    for p in $(job_ranks "$1" "$2"); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$3"; then
        echo "$p"
        return 0
      fi
    done
    sleep 0.05
  done
  return 1
}

# Waits up to 60 s until the job of mpirun $2 has streamed more than 40 bytes of text to file $1,
# i.e. it is in its rounds (loading can take longer than any fixed pause on a loaded machine);
# fails when it has not.
wait_streaming() {
  for _ in $(seq 1 1200); do
    (($(stat -c %s "$1") > 40)) && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.05
  done
  (($(stat -c %s "$1") > 40))
}

# Waits up to $2 seconds for process $1 to end; fails when it still runs.
wait_ended() {
  for _ in $(seq 1 $(($2 * 10))); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  ! kill -0 "$1" 2>/dev/null
}

# Of the pids given, prints those still alive after up to 5 s (a zombie of an un-reaping PID 1
# counts as gone: mpirun can return while the kernel still tears the killed ranks down).
ranks_left() {
  local p state left
  for _ in $(seq 1 50); do
    left=""
    for p in "$@"; do
      state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo Z)
      [[ $state == Z ]] || left="$left $p"
    done
    [[ -z $left ]] && break
    sleep 0.1
  done
  echo "$left"
}

# Starts the mpirun line "${@:3}" (an `ssd serve ... --port 0 --port-file $1` job) in the
# background with its stderr in file $2, and waits up to 120 s until it listens. Sets MPI_PID
# (mpirun's pid: the caller's cleanup kills it), PORT and LEADER (rank 0's pid, from its start-up
# line). Fails, saying why on stdout, when the job exits first or never listens.
start_server() {
  local port_file=$1 log=$2
  shift 2
  "$@" 2>"$log" &
  MPI_PID=$!
  for _ in $(seq 1 1200); do
    [[ -s $port_file ]] && grep -q "listening on" "$log" && break
    kill -0 "$MPI_PID" 2>/dev/null || { echo "ssd serve exited at start-up"; return 1; }
    sleep 0.1
  done
  [[ -s $port_file ]] || { echo "ssd serve did not listen within 120 s"; return 1; }
  PORT=$(cat "$port_file")
  LEADER=$(grep -o 'pid [0-9]*)' "$log" | grep -o '[0-9]*')
}

# SIGTERM to the server's rank 0 (what stops a server), then waits up to 120 s for mpirun
# $MPI_PID to return. Sets SERVER_STATUS to mpirun's status and clears MPI_PID.
stop_server() {
  kill -TERM "$LEADER"
  for _ in $(seq 1 1200); do kill -0 "$MPI_PID" 2>/dev/null || break; sleep 0.1; done
  SERVER_STATUS=0
  wait "$MPI_PID" || SERVER_STATUS=$?
  MPI_PID=""
}

# expect_job_fails NAME WANT RANKS -- MPIRUN-ARGS...: runs `$MPIEXEC (as root: --allow-run-as-root)
# --oversubscribe --bind-to none MPIRUN-ARGS` with its output in $LOG, which must end by itself
# with a non-zero status within $BOUND seconds of its start and print a line containing WANT; the
# `$BIN` processes it started (its ranks, looked up every 0.1 s while it runs) must be gone after
# it, and RANKS of them must have been seen (0: any number). Prints one line for the case and,
# when it fails, why and the job's output; counts failures in `fails`.
expect_job_fails() {
  local name=$1 want=$2 ranks=$3 root=() t0 t1 status secs mpi seen="" p left
  shift 4
  [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
  t0=$(date +%s.%N)
  timeout $((BOUND + 5)) "${MPIEXEC:-mpirun}" "${root[@]}" --oversubscribe --bind-to none "$@" \
    >"$LOG" 2>&1 &
  mpi=$!
  while kill -0 "$mpi" 2>/dev/null; do
    for p in $(pgrep -f "^$BIN " || true); do
      [[ " $seen " == *" $p "* ]] || ! descends_from "$p" "$mpi" || seen="$seen $p"
    done
    sleep 0.1
  done
  wait "$mpi"
  status=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  echo "$name: status $status after ${secs} s: $(grep -m1 -F -- "$want" "$LOG" || echo '<no line>')"
  if ((status == 0 || status == 124)) || awk -v s="$secs" -v b="$BOUND" 'BEGIN { exit !(s > b) }'; then
    echo "FAIL: $name: status $status after ${secs} s (bound ${BOUND} s)"; cat "$LOG"; fails=$((fails + 1))
  elif ! grep -qF -- "$want" "$LOG"; then
    echo "FAIL: $name: no line saying: $want"; cat "$LOG"; fails=$((fails + 1))
  fi
  if ((ranks > 0 && $(wc -w <<<"$seen") != ranks)); then
    echo "FAIL: $name: $ranks ranks expected, seen:${seen:- none}"; fails=$((fails + 1))
  fi
  # shellcheck disable=SC2086
  left=$(ranks_left $seen)
  if [[ -n $left ]]; then
    echo "FAIL: $name: ranks left after the job:$left"; kill -9 $left 2>/dev/null; fails=$((fails + 1))
  fi
}
