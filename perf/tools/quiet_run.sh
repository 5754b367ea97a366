#!/usr/bin/env bash
# quiet_run.sh CMD [ARGS...]: run a measurement on an almost quiet machine that others share.
#
# On a small VM, any other process on the cores changes a decode's speed by more than the
# differences a benchmark shows, even at nice 19 (the kernel's autogroup scheduling shares a
# core between sessions whatever their nice value). For CMD's duration this caps every other
# process that is niced (nice >= 10) or whose command line matches QUIET_MATCH (a regex; for
# example the path of other worktrees) to QUIET_PCT percent of one core (default 3) through a
# cgroup-v1 CPU quota, while CMD runs at nice 0 in a cgroup of its own. Measurements take turns
# on a lock file (QUIET_LOCK, default /tmp/ssd-quiet.lock). It prints the load average at CMD's
# start and end, to go beside the figures. Needs root and the cgroup-v1 cpu controller at
# /sys/fs/cgroup/cpu. The figures in the docs marked "quiet" ran under it.
set -u
LOCK=${QUIET_LOCK:-/tmp/ssd-quiet.lock}
PCT=${QUIET_PCT:-3}
MATCH=${QUIET_MATCH:-}
CG=/sys/fs/cgroup/cpu
(($#)) || { echo "usage: quiet_run.sh CMD [ARGS...]" >&2; exit 2; }
[[ -w $CG/cgroup.procs ]] || { echo "quiet_run: needs root and cgroup-v1 $CG" >&2; exit 2; }
mkdir -p $CG/capped $CG/measure
exec 9>"$LOCK"
if ! flock -n 9; then
  echo "quiet_run: waiting for the measurement lock $LOCK ($(date -u +%T))" >&2
  flock 9
fi
echo $$ > $CG/measure/cgroup.procs
renice -n 0 -p $$ >/dev/null
echo $((PCT * 1000)) > $CG/capped/cpu.cfs_quota_us
# The sweep itself must not be what stalls CMD: it runs at nice 19 and forks two processes a pass
# (ps and awk, which reads each process's cgroup from ps), where a grep per matched process at
# nice 0 cost about 30 ms of CPU a pass, three passes a second, each one preempting a thread of
# CMD (docs/speculation-length.md, "Where the stalls come from").
( renice -n 19 -p $BASHPID >/dev/null
  while :; do
    for p in $(ps -eo pid=,ni=,cgroup:512=,args= |
               awk -v m="$MATCH" '$2 != "-" && $3 !~ /[:,]cpu(,[a-z]+)*:\/(capped|measure)(,|$)/ &&
                                  ($2 >= 10 || (m != "" && $0 ~ m)) {print $1}'); do
      echo "$p" > $CG/capped/cgroup.procs 2>/dev/null
    done
    sleep 0.3
  done ) 9>&- &
SWEEP=$!
trap 'kill $SWEEP 2>/dev/null; echo -1 > $CG/capped/cpu.cfs_quota_us' EXIT
sleep 1.5
echo "quiet_run: start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
nice -n 0 "$@" 9>&-
rc=$?
echo "quiet_run: end $(date -u +%T) rc=$rc, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $rc
