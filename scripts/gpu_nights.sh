#!/usr/bin/env bash
# Real nights of the nightly's default design on one GPU host: the boundary table as an A/B run
# (the workflow's defaults: --duet --pairs 14 --rounds 336 --cpp-repetitions 336, each pair's two
# processes at once and their GPU passes in turns) gated with the gate's defaults, exactly as the
# nightly workflow gates it.
#   bash scripts/gpu_nights.sh OUTDIR NIGHT[,NIGHT...]
# NIGHT is `aa` (identical code on both sides: every row should pass), `injectNNN` (side B's
# `cpp` CUDA kernels wait NNN ns inside the kernel: DBENCH_INJECT_GPU_NS; the injected GPU rows
# should be called regressions and nothing else), `injectcpuNNN` (side B's `cpp` op busy-waits NNN ns
# on the host before each launch: DBENCH_INJECT_CPU_NS; its CPU rows, Python and C++ driver, should
# be called and nothing else) or `injectpyNNN` (the Python kernel of `define_impl` busy-waits:
# DBENCH_INJECT_PY_NS). Each night leaves OUTDIR/NAME.json (the A/B result), OUTDIR/NAME.gate.md
# and OUTDIR/NAME.gate.json, NAME being NIGHT-<its UTC start>; the script exits 1 when a run failed
# and 0 otherwise, whatever the gate said (its verdicts are the data). NIGHT_ARGS adds run.py options
# to every night, after the design's (a later value wins: NIGHT_ARGS="--pairs 18 --rounds 216
# --cpp-repetitions 216" runs the design before, 18 pairs of 12 rounds).
# OUTDIR is made and checked as run.py checks --out (a folder other users could write is refused).
# A night takes about 9 minutes on an H100 host: where each command has a shorter limit, start it
# with scripts/detached.sh and wait for it there.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: gpu_nights.sh OUTDIR NIGHT[,NIGHT...]}
IFS=, read -ra NIGHTS <<< "${2:?usage: gpu_nights.sh OUTDIR NIGHT[,NIGHT...]}"
side_b_of() {  # side B of a night's A/B run; every night is checked before any work
  case $1 in
    aa) echo env: ;;
    inject[0-9]*) echo "env:DBENCH_INJECT_GPU_NS=${1#inject}" ;;
    injectcpu[0-9]*) echo "env:DBENCH_INJECT_CPU_NS=${1#injectcpu}" ;;
    injectpy[0-9]*) echo "env:DBENCH_INJECT_PY_NS=${1#injectpy}" ;;
    *) echo "gpu_nights.sh: error: NIGHT must be aa, injectNNN, injectcpuNNN or injectpyNNN, got '$1'" >&2; return 2 ;;
  esac
}
for night in "${NIGHTS[@]}"; do side_b_of "$night" > /dev/null || exit 2; done
# OUTDIR made and checked as run.py's --out is (only its owner can write or swap it): the script runs as root
python3 -c 'import sys
from dbench.analysis.outputs import OutputPathError, check_output_dir
try:
    check_output_dir(sys.argv[1], "OUTDIR")
except OutputPathError as exc:
    sys.exit(f"gpu_nights.sh: error: {exc}")' "$OUT" || exit 2
export PYTHONUNBUFFERED=1
status=0
for night in "${NIGHTS[@]}"; do
  side_b=$(side_b_of "$night")
  # named by the night and its start (UTC), never reusing a name: a second call into OUTDIR keeps the first's files
  base="$night-$(date -u +%Y%m%dT%H%M%SZ)" name=$base k=1
  while [ -e "$OUT/$name.log" ] || [ -L "$OUT/$name.log" ]; do k=$((k + 1)); name="$base-$k"; done
  work=$(mktemp -d)
  design="--duet --pairs 14 --rounds 336 --cpp-repetitions 336"  # .github/workflows/nightly.yml's defaults
  echo "== $name: run.py --scenario boundary --ab env: $side_b $design ${NIGHT_ARGS:-}"
  start=$SECONDS
  # shellcheck disable=SC2086  # the design and NIGHT_ARGS are lists of options, split on purpose
  if python3 run.py --scenario boundary --ab env: "$side_b" $design ${NIGHT_ARGS:-} --out "$work" \
      > "$OUT/$name.log" 2>&1; then
    for f in "$work"/*.json; do  # the result, not its Google Benchmark companions
      case $f in *.gbench.json | *.gbench-gpu.json) ;; *) cp "$f" "$OUT/$name.json" ;; esac
    done
    python3 -m dbench.analysis.gate "$work" --format md > "$OUT/$name.gate.md"
    echo "   gate exit $? after $((SECONDS - start)) s: $(grep -m1 -E 'PASS|FAIL|NO DECISION' "$OUT/$name.gate.md")"
    python3 -m dbench.analysis.gate "$work" --format json > "$OUT/$name.gate.json"
  else
    echo "   run failed after $((SECONDS - start)) s (log: $OUT/$name.log)"; tail -5 "$OUT/$name.log"; status=1
  fi
  rm -rf "$work"
done
exit $status
