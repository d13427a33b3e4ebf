#!/usr/bin/env bash
# Full run on a CUDA machine: build, the boundary table twice (with GPU rows and the C++ section) and
# their run-to-run spread, timer validation, compile/cudagraph, then the GPU tests.
# Usage: bash scripts/gpu_validate.sh OUTDIR      (each step is time-boxed; logs land in OUTDIR)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_validate.sh OUTDIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
step() { local limit=$1; shift; echo "== $* (limit ${limit}s)"; timeout "$limit" "$@"; echo "== rc=$?"; }
# COLLECT=DIR: also copy each result JSON there as it is written (one flat folder).
collect() { [ -n "${COLLECT:-}" ] && cp "$OUT/$1"/*.json "$COLLECT/$1.json" 2>/dev/null; true; }

step 240 bash scripts/setup.sh 2>&1 | tail -5
step 150 python3 run.py --scenario boundary --out "$OUT/run1" 2>&1 | tee "$OUT/run1.log" | tail -4; collect run1
step 150 python3 run.py --scenario boundary --no-cpp --out "$OUT/run2" 2>&1 | tee "$OUT/run2.log" | tail -4; collect run2
python3 -m analysis.compare "$OUT"/run1/*.json "$OUT"/run2/*.json --csv "$OUT/spread.csv" > "$OUT/spread.txt" 2>&1
tail -3 "$OUT/spread.txt"
step 60 python3 run.py --scenario timer_validation --out "$OUT/tv" 2>&1 | tee "$OUT/tv.log" | tail -24; collect tv
step 150 python3 run.py --scenario compile --out "$OUT/compile" 2>&1 | tee "$OUT/compile.log" | tail -4; collect compile
step "${TEST_LIMIT:-120}" python3 -m pytest -q -k "${TEST_FILTER:-cuda or gputimer}" tests > "$OUT/pytest_gpu.log" 2>&1
tail -3 "$OUT/pytest_gpu.log"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure > "$OUT/ctest.log" 2>&1; tail -2 "$OUT/ctest.log"
