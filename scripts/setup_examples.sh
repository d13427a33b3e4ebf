#!/usr/bin/env bash
# The public libraries the examples use: torch-scatter (examples/scatter_segment), built against the
# installed torch (a source build of its C++ ops: about 3-4 min on 2 cores the first time; pip keeps
# the wheel, so a second run takes seconds), and torchao (examples/ao_quantize, a wheel of Python
# ops, pinned: its ops' schemas are what the example declares). Fails when either cannot be
# installed (.ci/run calls it so that the examples' tests run there, never skipped).
#   PYTHON   interpreter (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
log() { printf '\033[1m[setup-examples]\033[0m %s\n' "$*"; }

TORCHAO=0.18.0
if ! "$PY" -c "import torchao" >/dev/null 2>&1; then
  log "installing torchao $TORCHAO"
  # --no-deps: it must not replace this torch.
  "$PY" -m pip install --quiet --no-deps "torchao==$TORCHAO"
fi
"$PY" -c "import torch, torchao; torch.ops.torchao.quantize_affine" 2>/dev/null \
  || { log "error: torchao was installed but its ops do not load"; exit 1; }

if "$PY" -c "import torch_scatter" >/dev/null 2>&1; then
  log "torch-scatter is installed"
  exit 0
fi
log "building torch-scatter against torch $("$PY" -c 'import torch; print(torch.__version__)') (a few minutes, once)"
# Its setup.py imports torch: build against this one (no isolated build env, no other torch pulled in).
"$PY" -m pip install --quiet setuptools wheel
"$PY" -m pip install --quiet --no-build-isolation --no-deps torch-scatter
"$PY" -c "import torch, torch_scatter; torch.ops.torch_scatter.segment_sum_csr" \
  || { log "error: torch-scatter was installed but its ops do not load"; exit 1; }
log "ready: torch-scatter $("$PY" -c 'import torch_scatter; print(torch_scatter.__version__)')"
