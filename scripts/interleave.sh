#!/usr/bin/env bash
# Two checkouts' boundary tables, one process at a time in ABBA order (A B B A A B ...), so both see
# the host's slow and fast spells alike; each run uses its own checkout's code and build. Gate the
# two folders afterwards as independent runs:
#   bash scripts/interleave.sh A_DIR B_DIR N OUTDIR [run.py options...]
#   python3 -m dbench.analysis.gate OUTDIR/b OUTDIR/a --format md
# A_DIR and B_DIR are set-up checkouts (scripts/setup.sh run in each); N processes per side (≥ 2).
# Exit 0; 1 when a run failed to produce a result (its log is in OUTDIR); 2 bad usage.
set -uo pipefail
usage="usage: interleave.sh A_DIR B_DIR N OUTDIR [run.py options...]"
[ $# -ge 4 ] || { echo "interleave.sh: error: $usage" >&2; exit 2; }
a=$1 b=$2 n=$3 out=$4; shift 4
for dir in "$a" "$b"; do
  [ -f "$dir/run.py" ] || { echo "interleave.sh: error: $dir is not a checkout of this suite (no run.py)" >&2; exit 2; }
done
if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -lt 2 ]; then
  echo "interleave.sh: error: N must be a whole number ≥ 2, got '$n'" >&2; exit 2
fi
mkdir -p "$out/a" "$out/b" || exit 2
out=$(cd "$out" && pwd)
status=0
turn() {  # turn SIDE DIR INDEX
  local side=$1 dir=$2 i=$3
  echo "[interleave] $side $i/$n ($dir)"
  (cd "$dir" && python3 run.py --scenario boundary --out "$out/$side" "${@:4}") > "$out/$side-$i.log" 2>&1
  local rc=$?
  # 1 is a FAILED case (its row says so, and the gate reports it); more is a run that did not finish
  if [ "$rc" -gt 1 ]; then echo "[interleave] $side $i exited $rc (log: $out/$side-$i.log)" >&2; status=1; fi
}
for ((i = 1; i <= n; i++)); do
  if (( i % 2 )); then turn a "$a" "$i" "$@"; turn b "$b" "$i" "$@"; else turn b "$b" "$i" "$@"; turn a "$a" "$i" "$@"; fi
done
for side in a b; do
  # result files only: not the C++ driver's JSON kept beside each (<stem>.gbench*.json)
  found=$(find "$out/$side" -maxdepth 1 -name '*.json' ! -name '*.gbench.json' ! -name '*.gbench-gpu.json' | wc -l)
  [ "$found" -eq "$n" ] || { echo "interleave.sh: $side has $found result files of $n (logs: $out/$side-*.log)" >&2; status=1; }
done
exit $status
