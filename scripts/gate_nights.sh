#!/usr/bin/env bash
# The gate's synthetic nights from the committed H200 A/B runs (python -m dbench.analysis.nights):
# the nightly's design (the full boundary table) at its old per-row settings and at the defaults,
# by pairs per night; and the GPU gate study's design with its in-kernel injections.
#   bash scripts/gate_nights.sh OUTDIR [NIGHTS]      (default 1000 nights per line; ~10 minutes on 2 cores)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: gate_nights.sh OUTDIR [NIGHTS]}
NIGHTS=${2:-1000}
if ! [[ $NIGHTS =~ ^[0-9]+$ ]] || [ "$NIGHTS" -lt 1 ]; then
  echo "gate_nights.sh: error: NIGHTS must be a whole number ≥ 1, got '$NIGHTS'" >&2; exit 2
fi
G=results/h200/gate
mkdir -p "$OUT"
status=0
nights() {  # nights NAME [analysis.nights options...]
  local name=$1; shift
  echo "== $name"
  python3 -m dbench.analysis.nights "$@" --nights "$NIGHTS" --out "$OUT/$name.json" 2>/dev/null \
    | tee "$OUT/$name.txt" || status=1
}
# Full table (225 judged rows), A/A only: the per-row α 0.05 the gate had, every class gating ...
nights table-4pairs-alpha-row-0.05 "$G/aa" --pairs 4 --alpha 0.05 --require gpu,cpu-python,cpu-cpp
# ... and the defaults (0.01 a night shared by the rows; classes gate when they can flag +10 %).
for k in 4 6 8 10; do nights "table-${k}pairs" "$G/aa" --pairs "$k"; done
# The GPU study's design (72 rows): A/A, and side B waiting 300 ns or 50 ns in the cpp kernels.
for k in 4 6; do
  for ns in 300 50; do
    nights "gpu-${k}pairs-injected-${ns}ns" "$G/gpu/aa" --pairs "$k" --injected "$G/gpu/injected-${ns}ns" \
      --injected-row '/(function_)?cpp/' --injected-metric gpu_us
  done
done
# The full table's studies in one figure: outcomes and what each class detects, by pairs.
python3 -m dbench.analysis.nights plot "$OUT"/table-*.json --out "$OUT/table-by-pairs.png" || status=1
exit $status
