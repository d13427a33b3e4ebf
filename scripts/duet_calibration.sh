#!/usr/bin/env bash
# The nightly's duet design, calibrated on its real nights (results/h100/gate/duet-nights): synthetic
# nights judged by the gate exactly as the nightly is (python -m dbench.analysis.nights).
#   bash scripts/duet_calibration.sh [OUTDIR]        (default: results/h100/gate/duet-nights/calibration)
# 1. design: the 72 pairs of the default design's four A/A nights (aa18cache, the two aa18 nights
#    of 2026-12-06 19:07 and 19:17, and aa18 of 2026-12-07 15:44), 18 drawn at a time and each
#    pair's sides swapped at random (a sign-flip randomisation: under A/A the labels are
#    exchangeable), plus the +500 ns nights' 30 pairs drawn 18 at a time for what is caught;
#    design16: the same for the design before it (16 pairs, aa16turns);
#    design14x24: the same for the trial of 14 pairs of 24 rounds (its three A/A nights of 2026-12-07,
#    one on a noisy host and two on quiet ones, the last right after aa18's 15:44 night on the same
#    host), 14 drawn at a time;
# 2. every-duet: all 64 pairs of the five 2026-12-05/06 duet A/A nights before the shared bytecode
#    cache, 16 drawn at a time: nights of four designs mixed, so a stress test of the gate's false
#    alarms rather than a model of one night.
# Each writes OUTDIR/NAME.json (analysis.nights' document) and OUTDIR/NAME.txt (its summary).
set -euo pipefail
cd "$(dirname "$0")/.."
NIGHTS=results/h100/gate/duet-nights
OUT=${1:-$NIGHTS/calibration}
mkdir -p "$OUT"
run() {  # run NAME PAIRS ARGS...
  local name=$1 pairs=$2
  shift 2
  python3 -m dbench.analysis.nights "$@" --pairs "$pairs" --nights 1000 --seed 0 --out "$OUT/$name.json" \
    2>&1 | grep -v '^\[nights\]' > "$OUT/$name.txt"
  echo "$OUT/$name.txt:"
  cat "$OUT/$name.txt"
}
INJECTED=("$NIGHTS"/injectcpu500-20261205T163102Z.json.gz "$NIGHTS"/injectcpu500overlap-20261206T094130Z.json.gz)
run design 18 "$NIGHTS"/aa18cache-20261206T130630Z.json.gz "$NIGHTS"/aa18-20261206T190730Z.json.gz \
  "$NIGHTS"/aa18-20261206T191655Z.json.gz "$NIGHTS"/aa18-20261207T154405Z.json.gz --injected "${INJECTED[@]}" \
  --injected-row '/(cpp|function_cpp|cpp_typed|cpp_boxed)/' --injected-metric cpu_us
run design16 16 "$NIGHTS"/aa16turns-20261206T055715Z.json.gz --injected "${INJECTED[@]}" \
  --injected-row '/(cpp|function_cpp|cpp_typed|cpp_boxed)/' --injected-metric cpu_us
run design14x24 14 "$NIGHTS"/aa14x24-20261207T091013Z.json.gz "$NIGHTS"/aa14x24-20261207T122905Z.json.gz \
  "$NIGHTS"/aa14x24-20261207T155250Z.json.gz \
  --injected "${INJECTED[@]}" --injected-row '/(cpp|function_cpp|cpp_typed|cpp_boxed)/' --injected-metric cpu_us
run every-duet 16 "$NIGHTS"/aa-20261205T162546Z.json.gz "$NIGHTS"/aa-20261205T163624Z.json.gz \
  "$NIGHTS"/aa12-20261205T194710Z.json.gz "$NIGHTS"/aa16turns-20261206T055715Z.json.gz \
  "$NIGHTS"/aa24overlap-20261206T093043Z.json.gz
