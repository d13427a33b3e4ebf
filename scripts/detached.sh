#!/usr/bin/env bash
# A long run (a night of the gate: ~8 min) on a machine reached through commands that each have a
# time limit: start it detached from the caller's session, then wait for it in bounded steps.
#   bash scripts/detached.sh start DIR -- CMD [ARG...]   start CMD under setsid (it outlives this
#                                                        command); output in DIR/out.log
#   bash scripts/detached.sh wait DIR SECONDS            wait up to SECONDS for it to end
# `wait` exits with CMD's own exit status once it has ended (also in DIR/rc), or 75 (EX_TEMPFAIL)
# while it still runs; call it again. `start` refuses a DIR that holds a run already (exit 2), so a
# retried call never starts a second one.
set -uo pipefail
usage() { echo "usage: detached.sh start DIR -- CMD [ARG...] | detached.sh wait DIR SECONDS" >&2; exit 2; }
[ $# -ge 2 ] || usage
verb=$1 dir=$2
shift 2
case $verb in
  start)
    if [ "${1:-}" != "--" ] || [ $# -lt 2 ]; then usage; fi
    shift
    if [ -e "$dir/started" ]; then
      echo "detached.sh: error: $dir already holds a run (started $(cat "$dir/started"))" >&2
      exit 2
    fi
    mkdir -p "$dir" || exit 2
    date -u +%Y-%m-%dT%H:%M:%SZ > "$dir/started"
    # The status is written to a temporary name and moved: a reader sees no rc or a whole one.
    # shellcheck disable=SC2016  # expanded by the inner bash, which gets DIR as $0 and CMD as "$@"
    setsid bash -c '"$@" > "$0/out.log" 2>&1; echo $? > "$0/rc.tmp"; mv "$0/rc.tmp" "$0/rc"' "$dir" "$@" \
      < /dev/null > /dev/null 2>&1 &
    echo "started in $dir: $*"
    ;;
  wait)
    if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then usage; fi
    [ -e "$dir/started" ] || { echo "detached.sh: error: no run was started in $dir" >&2; exit 2; }
    deadline=$((SECONDS + $1))
    until [ -e "$dir/rc" ]; do
      if [ $SECONDS -ge $deadline ]; then
        echo "still running in $dir (started $(cat "$dir/started")); wait again"
        exit 75
      fi
      sleep 1
    done
    rc=$(cat "$dir/rc")
    echo "ended in $dir with exit status $rc"
    exit "$rc"
    ;;
  *) usage ;;
esac
