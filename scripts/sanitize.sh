#!/usr/bin/env bash
# compute-sanitizer over scripts/kernel_check.py.
# Usage: bash scripts/sanitize.sh memcheck|racecheck [kernel_check.py options...]
# Exit: the sanitizer's (1 when it found an error or hazard), 2 for bad usage or a sanitizer
# without a kernel filter. No caching allocator, so memcheck sees each tensor's own allocation
# bounds. Racecheck instruments only the suite's kernels (all in namespace dbench): torch's own
# reductions inside the checks would otherwise take most of its time.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tool=${1:-}
case $tool in
  memcheck|racecheck) shift ;;
  *) echo "usage: sanitize.sh memcheck|racecheck [kernel_check.py options...] (got '$tool')" >&2; exit 2 ;;
esac
filter=()
if [[ $tool == racecheck ]]; then
  # The help is read whole: `--help | grep -q` under pipefail took the old spelling on a release
  # that has the new one (the pipeline fails when the help exits non-zero or grep stops early).
  help=$(compute-sanitizer --help 2>&1) || true
  if [[ $help == *--kernel-name* ]]; then
    filter=(--kernel-name kns=dbench)
  elif [[ $help == *--filter* ]]; then
    filter=(--filter kns=dbench)  # the option's name in older releases
  else
    echo "sanitize.sh: this compute-sanitizer has neither --kernel-name nor --filter" >&2
    exit 2
  fi
fi
export PYTORCH_NO_CUDA_MEMORY_CACHING=1
exec compute-sanitizer --tool "$tool" "${filter[@]}" --error-exitcode 1 python3 scripts/kernel_check.py "$@"
