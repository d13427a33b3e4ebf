#!/usr/bin/env bash
# One-time (idempotent) set-up: Python packages, native build tools, and the CMake build.
#   TORCH_SPEC   pip spec used when torch is missing (default torch==2.13.0)
#   PYTHON       interpreter to build against (default python3)
#   BUILD_DIR    CMake build folder (default build), reused between runs
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD_DIR=${BUILD_DIR:-build}

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  log "installing ${TORCH_SPEC:-torch==2.13.0}"
  "$PY" -m pip install --quiet "${TORCH_SPEC:-torch==2.13.0}"
fi
missing=$("$PY" - <<'PY'
import importlib.util
mods = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "rich": "rich", "pytest": "pytest",
        "tabulate": "tabulate", "matplotlib": "matplotlib", "nbformat": "nbformat", "nbclient": "nbclient",
        "ipykernel": "ipykernel"}
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  log "installing Python packages: $missing"
  if ! "$PY" -m pip install --quiet -r requirements.txt; then
    # A host without a package index (a GPU box with its own image) may lack only the notebook
    # runtime: go on without it (its tests skip, saying so); anything else missing is fatal.
    required=""
    for m in $missing; do case $m in nbformat|nbclient|ipykernel) ;; *) required+=" $m" ;; esac; done
    if [ -n "$required" ]; then
      log "error: cannot install$required"; exit 1
    fi
    log "warning: notebook runtime not installed ($missing): its tests will be skipped"
  fi
fi

# Native tools: cmake, a C++ compiler, ninja, GTest and Google Benchmark (Debian names).
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -e /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -e /usr/include/benchmark/benchmark.h ] || need_apt+=(libbenchmark-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "installing system packages: ${need_apt[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    log "warning: missing ${need_apt[*]} and cannot apt-get; the build may skip C++ tests"
  fi
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A build folder configured for another interpreter or torch would link the wrong libraries.
stamp=$("$PY" -c 'import sys, torch; print(sys.executable, torch.__version__, torch.__file__)')
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && [ "$(cat "$BUILD_DIR/.torch-stamp" 2>/dev/null)" != "$stamp" ]; then
  log "$BUILD_DIR was configured for another Python/torch: reconfiguring"
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  log "configuring $BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DPython3_EXECUTABLE="$(command -v "$PY")" ${CMAKE_ARGS:-}
fi
echo "$stamp" > "$BUILD_DIR/.torch-stamp"
log "building (first build takes a few minutes on 2 cores)"
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
log "ready: torch $("$PY" -c 'import torch; print(torch.__version__)')"
