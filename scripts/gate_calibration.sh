#!/usr/bin/env bash
# The regression gate's calibration on this machine: A/A and injected A/B runs of the boundary
# scenario (run.py --ab), then analysis.calibrate over them (noise, MDE and δ per row; the false
# alarms over the A/A runs and the detections of the injected rows).
#   bash scripts/gate_calibration.sh OUTDIR [AA_RUNS] [INJECTED_RUNS]     (default 3 and 2)
# Environment: DEVICE (cpu, cuda; default cuda when torch sees one), PAIRS (4), INJECT_NS (300: a
# CPU wait before the `cpp` variant's launches on side B), INJECT_GPU_NS (0; N: a wait of N ns inside
# its forward CUDA kernels),
# RUN_ARGS (more run.py options). Every run's log and result stays in OUTDIR; a run that fails is
# reported and left out, and the calibration uses what finished.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: gate_calibration.sh OUTDIR [AA_RUNS] [INJECTED_RUNS]}
AA=${2:-3}
INJ=${3:-2}
PAIRS=${PAIRS:-4}
INJECT_NS=${INJECT_NS:-300}
INJECT_GPU_NS=${INJECT_GPU_NS:-0}
# Bad counts fail here, in one line, before any run.
for pair in "AA_RUNS=$AA" "INJECTED_RUNS=$INJ" "PAIRS=$PAIRS" "INJECT_NS=$INJECT_NS" "INJECT_GPU_NS=$INJECT_GPU_NS"; do
  [[ ${pair#*=} =~ ^[0-9]+$ ]] || { echo "gate_calibration.sh: error: ${pair%%=*} must be a whole number, got '${pair#*=}'" >&2; exit 2; }
done
[ "$AA" -ge 2 ] || { echo "gate_calibration.sh: error: AA_RUNS must be at least 2 (the calibration needs two A/A runs), got $AA" >&2; exit 2; }
[ "$PAIRS" -ge 2 ] || { echo "gate_calibration.sh: error: PAIRS must be at least 2, got $PAIRS" >&2; exit 2; }
DEVICE=${DEVICE:-$(python3 -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')}
read -r -a extra <<< "${RUN_ARGS:-}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/aa" "$OUT/injected"

inject="env:DBENCH_INJECT_NS=$INJECT_NS"
[ "$INJECT_GPU_NS" != 0 ] && inject+=",DBENCH_INJECT_GPU_NS=$INJECT_GPU_NS"

ab() {  # ab KIND INDEX SIDE_B
  local kind=$1 i=$2 side_b=$3 start=$SECONDS
  echo "[calibration] $kind run $i: --ab env: $side_b --pairs $PAIRS on $DEVICE"
  if python3 run.py --scenario boundary --device "$DEVICE" --ab env: "$side_b" --pairs "$PAIRS" \
      --out "$OUT/$kind" "${extra[@]}" > "$OUT/$kind-$i.log" 2>&1; then
    echo "[calibration]   done in $((SECONDS - start)) s"
  else
    echo "[calibration]   FAILED (exit $?, $((SECONDS - start)) s): see $OUT/$kind-$i.log"
  fi
}

for i in $(seq 1 "$AA"); do ab aa "$i" env:; done
for i in $(seq 1 "$INJ"); do ab injected "$i" "$inject"; done

shopt -s nullglob
injected=("$OUT"/injected/*.json)
python3 -m dbench.analysis.calibrate "$OUT"/aa/*.json --out "$OUT/gate-calibration.json" \
  ${injected[@]:+--injected "${injected[@]}"} 2>&1 | tee "$OUT/calibration.txt"
