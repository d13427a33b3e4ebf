#!/usr/bin/env bash
# The gate's moderated t (rows of a class borrow strength: analysis.gate_stats.fit_prior, moderate)
# against the per-row t it replaced, on the committed real H200 nights of the nightly's design
# (three A/A nights and the +300 ns in-kernel injection, gate/aa-nights and gate/inject-nights):
#   real-nights.txt   each real night gated both ways: per class the test, its df and what it detects;
#   aa-6pairs*.{json,txt}   synthetic A/A nights of 6 pairs resampled from the three A/A nights
#                     (python -m dbench.analysis.nights), with the injected night drawn the same way,
#                     at the gate's defaults and, to see the per-row false-positive rate where it is
#                     countable, at a per-row α of 0.005 (CIs excluding 1 should then be ≤ 2α = 1 %).
#   bash scripts/gate_moderated.sh OUTDIR [NIGHTS]      (default 1000 nights a study; ~6 minutes on 2 cores)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${1:?usage: gate_moderated.sh OUTDIR [NIGHTS]}
NIGHTS=${2:-1000}
if ! [[ $NIGHTS =~ ^[0-9]+$ ]] || [ "$NIGHTS" -lt 1 ]; then
  echo "gate_moderated.sh: error: NIGHTS must be a whole number ≥ 1, got '$NIGHTS'" >&2; exit 2
fi
G=results/h200/gate
mkdir -p "$OUT"
status=0
for f in "$G"/aa-nights/*.json.gz "$G"/inject-nights/*.json.gz; do
  for test in moderated per-row; do
    echo "== $(basename "$f" .json.gz), $test"
    flags=()
    [ "$test" = per-row ] && flags=(--per-row)
    gated=$(python3 -m dbench.analysis.gate "$f" "${flags[@]}")
    # The verdicts are the data (exit 1 on the injected night is its FAIL); only bad input (2) is an error.
    [ $? -eq 2 ] && status=1
    grep -E '^(GPU time|CPU time|PASS|FAIL|NO DECISION)' <<< "$gated"
  done
done > "$OUT/real-nights.txt"
cat "$OUT/real-nights.txt"
nights() {  # nights NAME [analysis.nights options...]
  local name=$1; shift
  echo "== $name"
  python3 -m dbench.analysis.nights "$G"/aa-nights/*.json.gz --pairs 6 "$@" --nights "$NIGHTS" \
    --out "$OUT/$name.json" 2>/dev/null | tee "$OUT/$name.txt" || status=1
}
INJ=(--injected "$G"/inject-nights/*.json.gz --injected-row '/(function_)?cpp/|/cpp_(typed|boxed)/'
     --injected-metric gpu_us)
nights aa-6pairs-moderated "${INJ[@]}"
nights aa-6pairs-per-row --per-row "${INJ[@]}"
nights aa-6pairs-alpha-row-0.005-moderated --alpha 0.005
nights aa-6pairs-alpha-row-0.005-per-row --alpha 0.005 --per-row
exit $status
