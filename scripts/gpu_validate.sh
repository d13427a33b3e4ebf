#!/usr/bin/env bash
# Full run on a CUDA machine, in parts that fit a short GPU lease (always built first):
#   tests      the error paths in one plain process (a C++ error that aborts shows its stderr);
#              the whole test suite (GPU tests included; one process per worker when pytest-xdist
#              is installed, so a crashing test is reported, not fatal); ctest
#   scenarios  timer validation; compile/cudagraph
#   pair       the boundary table twice (the first with the C++ section), their spread in
#              absolute medians and in ratios to the baseline
#   boundary   pair, a third run and the pairwise spreads, and one run unpinned (--no-pin)
#   kernels    compute-sanitizer (memcheck, racecheck) over scripts/kernel_check.py, its --bench
#              timings, the roofline (warm and cold L2) and launch scenarios, and on compute
#              capability 9.0 the roofline's mm with the mma.sync kernel (DBENCH_MM_KERNEL=mma_sync)
#   checks     tests + scenarios;  all: checks + kernels + boundary
# Usage: bash scripts/gpu_validate.sh OUTDIR [PART[,PART...]]   (default all)
# Each step is time-boxed; logs land in OUTDIR, and OUTDIR/steps.tsv lists every step with its exit
# status and seconds. The script ends with that list and exits 1 when any step failed or ran out
# of time (each part still runs to its end). COLLECT=DIR also copies every result JSON there (one
# flat folder). TEST_WORKERS=N sets the pytest-xdist worker count (default 14); TEST_LIMIT=S the
# test suite's limit (default 720 s: 367 s on 15 workers of an H200 host on 2026-12-02, past 480 s at 98 %
# on 14 workers on 2026-12-04 after the suite grew); TESTS the
# test files (a glob, default all of tests/), so the suite can be split over two short leases,
# e.g. TESTS='tests/test_[a-k]*.py' then TESTS='tests/test_[l-z]*.py'.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:?usage: gpu_validate.sh OUTDIR [PART[,PART...]]}
PARTS=",${2:-all},"
PARTS=${PARTS//,all,/,checks,kernels,boundary,}
PARTS=${PARTS//,checks,/,tests,scenarios,}
has() { [[ $PARTS == *",$1,"* ]]; }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
STEPS="$OUT/steps.tsv"
printf 'rc\tseconds\tstep\n' > "$STEPS"
# A step often runs inside a pipeline (a subshell): its status goes to the file, not a variable.
step() {
  local limit=$1 start=$SECONDS rc; shift
  echo "== $* (limit ${limit}s)"
  timeout "$limit" "$@"; rc=$?
  # One line a step, whatever its command holds: a newline in it would read as a step of its own
  # (and a failed one, at the summary below).
  printf '%s\t%s\t%s\n' "$rc" "$((SECONDS - start))" "$(printf '%s' "$*" | tr '\n\t' '  ' | tr -s ' ')" >> "$STEPS"
  echo "== rc=$rc$([ "$rc" = 124 ] && echo ' (out of time)')"
}
collect() { [ -n "${COLLECT:-}" ] && cp "$OUT/$1"/*.json "$COLLECT/$1.json" 2>/dev/null; true; }
boundary() {  # boundary NAME [run.py options...]
  local name=$1; shift
  step 170 python3 run.py --scenario boundary --out "$OUT/$name" "$@" 2>&1 | tee "$OUT/$name.log" | tail -3
  collect "$name"
}
spread() {  # spread A B
  python3 -m dbench.analysis.compare "$OUT/$1"/*.json "$OUT/$2"/*.json --csv "$OUT/spread-$1-$2.csv" \
    > "$OUT/spread-$1-$2.txt" 2>&1
  python3 -m dbench.analysis.compare "$OUT/$1"/*.json "$OUT/$2"/*.json --value ratio_median \
    --csv "$OUT/ratio-spread-$1-$2.csv" > "$OUT/ratio-spread-$1-$2.txt" 2>&1
  echo "-- spread $1 vs $2"; head -1 "$OUT/spread-$1-$2.txt"; grep "python cpu_us" "$OUT/spread-$1-$2.txt"
  echo "   ratios to baseline:"; grep "python cpu_us" "$OUT/ratio-spread-$1-$2.txt"
}

step 300 bash scripts/setup.sh 2>&1 | tail -3

if has tests; then
  step 90 python3 -X faulthandler -m pytest -v -p no:cacheprovider tests/test_errors.py > "$OUT/errors.log" 2>&1
  grep -E "passed|failed|Fatal|terminate|Abort|undefined symbol|Error" "$OUT/errors.log" | tail -15
  xdist=()
  python3 -c "import xdist" 2>/dev/null && xdist=(-n "${TEST_WORKERS:-14}")
  # shellcheck disable=SC2206  # TESTS is a glob: split and expanded here on purpose
  tests=(${TESTS:-tests})
  # The tests that assert on CPU time measured in a real run (marker `timing`) and those that take
  # most of the GPU's memory (`gpu_memory`) run after the others, one at a time: beside 13 other
  # workers on 16 cores a +100 µs A/B injection once went undecided, and on an 80 GB H100 the
  # Triton example's 4 GiB roofline ran out of memory.
  step "${TEST_LIMIT:-720}" python3 -m pytest -q -rfEs "${xdist[@]}" -p no:cacheprovider \
    -m "not timing and not gpu_memory" "${tests[@]}" \
    > "$OUT/pytest.log" 2>&1
  grep -E "^(FAILED|ERROR)|crashed|^[0-9]+ (passed|failed)" "$OUT/pytest.log" | tail -25
  # (pytest exits 5 when TESTS holds none of them: nothing to run is not a failure here)
  # shellcheck disable=SC2016  # expanded by the inner bash, which gets the test files as "$@"
  step 420 bash -c 'python3 -m pytest -q -rfEs -p no:cacheprovider -m "timing or gpu_memory" "$@"; rc=$?
                   exit $((rc == 5 ? 0 : rc))' \
    pytest "${tests[@]}" > "$OUT/pytest-timing.log" 2>&1
  grep -E "^(FAILED|ERROR)|^[0-9]+ (passed|failed)|deselected" "$OUT/pytest-timing.log" | tail -5
  step 180 ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure > "$OUT/ctest.log" 2>&1; tail -3 "$OUT/ctest.log"
fi

if has scenarios; then
  step 90 python3 run.py --scenario timer_validation --out "$OUT/tv" 2>&1 | tee "$OUT/tv.log" | tail -22; collect tv
  step 200 python3 run.py --scenario compile --out "$OUT/compile" 2>&1 | tee "$OUT/compile.log" | tail -4; collect compile
fi

if has kernels; then
  # scripts/sanitize.sh says how each tool is run. Racecheck is slow: the mm kernels, the row
  # kernels and the rest each get their own step.
  step 240 bash scripts/sanitize.sh memcheck > "$OUT/sanitizer-memcheck.log" 2>&1
  tail -4 "$OUT/sanitizer-memcheck.log"
  for part in mm rows elementwise,chain,delay,declared; do
    step 240 bash scripts/sanitize.sh racecheck --only "$part" > "$OUT/sanitizer-racecheck-${part%%,*}.log" 2>&1
    tail -4 "$OUT/sanitizer-racecheck-${part%%,*}.log"
  done
  step 120 python3 scripts/kernel_check.py --bench > "$OUT/kernel-bench.log" 2>&1; tail -12 "$OUT/kernel-bench.log"
  step 300 python3 run.py --scenario roofline --cache warm,cold --out "$OUT/roofline" > "$OUT/roofline.log" 2>&1
  tail -60 "$OUT/roofline.log"; collect roofline
  step 300 python3 run.py --scenario launch --out "$OUT/launch" > "$OUT/launch.log" 2>&1
  tail -45 "$OUT/launch.log"; collect launch
  # On compute capability 9.0 the default mm kernel is wgmma: the mma.sync kernel beside it
  # (its env.knobs record the choice).
  if python3 -c "import sys, torch; sys.exit(torch.cuda.get_device_capability() != (9, 0))"; then
    step 200 env DBENCH_MM_KERNEL=mma_sync python3 run.py --scenario roofline --ops mm --cache warm,cold \
      --out "$OUT/roofline-mma-sync" > "$OUT/roofline-mma-sync.log" 2>&1
    tail -30 "$OUT/roofline-mma-sync.log"; collect roofline-mma-sync
  fi
fi

if has pair || has boundary; then
  boundary run1
  boundary run2 --no-cpp
  spread run1 run2
fi
if has boundary; then
  boundary run3 --no-cpp
  spread run2 run3; spread run1 run3
  boundary nopin --no-cpp --no-pin
  spread run1 nopin
fi

echo "== steps (rc, seconds, step): $STEPS"
column -t -s $'\t' "$STEPS" 2>/dev/null || cat "$STEPS"
failed=$(awk -F'\t' 'NR > 1 && $1 != 0' "$STEPS" | wc -l)
[ "$failed" -eq 0 ] || { echo "== $failed step(s) failed or ran out of time"; exit 1; }
echo "== every step passed"
