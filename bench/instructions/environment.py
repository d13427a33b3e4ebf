"""What makes a count independent of the CI machine's CPU, and what the file records about it.

Under valgrind a program sees valgrind's CPU (a fixed CPUID of a few models, chosen by what the
host supports; AVX-512 is never offered), not the host's. On top of that:
  * ATEN_CPU_CAPABILITY=default: ATen's DispatchStub runs its default (non-vectorised) kernels,
    whatever the CPU offers;
  * glibc's tunables mask the SIMD features its string/memory functions choose their variant
    by (hwcaps), and fix the cache sizes and thresholds that decide how memcpy/memset copy;
  * fastbins off (malloc.mxfast=0): freed small blocks go through the same path every time;
  * PYTHONHASHSEED fixed, one torch thread, and a minimal, fixed environment (the stack layout
    and every string hash depend on the environment's size);
  * address-space randomisation off for the measured process (personality ADDR_NO_RANDOMIZE):
    with it on, heap addresses change from run to run, and with them malloc's work for aligned
    blocks (c10's 64-byte aligned tensors), CPython's type-attribute cache (indexed by the
    attribute name's address) and every pointer-keyed hash table: up to 1.7 % per row between
    two runs of 2000 calls; with it off, 0 to 0.8 % between runs of 10 000 calls;
  * the code runs from one fixed path (staging.py): a checkout elsewhere moved rows by up to 2.8 %;
  * jemalloc instead of glibc's malloc (LD_PRELOAD). What was left after all of the above was
    glibc's malloc: c10 allocates every tensor 64-byte aligned, and glibc's memalign path splits
    and coalesces chunks, so its work per call depends on what lies in the bins, i.e. on every
    allocation before the cases. Between runs whose only difference was 300 or 2500 extra small
    objects kept alive, `raw/inference` moved by 2.9 % and the whole difference was in
    `_int_malloc`, `unlink_chunk` and `_int_free`; with jemalloc (size classes, a per-thread
    cache) the same runs agree within 0.05 %.
The host's CPU model and flags are recorded all the same, and the glibc variants that ran are read
from the dumps, so a file says whether the masking held.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

# glibc >= 2.33 feature names (glibc.cpu.hwcaps takes "-NAME" to mask a feature). With these off,
# the x86-64 string functions fall back to their SSE2 baseline variants.
MASKED_FEATURES: tuple[str, ...] = (
    "AVX512F", "AVX512CD", "AVX512BW", "AVX512DQ", "AVX512VL", "AVX512_FP16", "AVX_VNNI", "AVX2", "AVX",
    "FMA", "FMA4", "BMI1", "BMI2", "LZCNT", "MOVBE", "POPCNT", "SSE4_2", "SSE4_1", "SSSE3", "ERMS", "FSRM", "RTM",
    "AVX_Fast_Unaligned_Load",  # a "preferred" flag, not a feature: memmove picks its AVX variant by it
)
CACHE_TUNABLES: dict[str, int] = {
    "glibc.cpu.x86_data_cache_size": 32 * 1024,
    "glibc.cpu.x86_shared_cache_size": 1024 * 1024,
    "glibc.cpu.x86_non_temporal_threshold": 768 * 1024,
    "glibc.cpu.x86_rep_movsb_threshold": 2048,
    "glibc.cpu.x86_rep_stosb_threshold": 2048,
}


ADDR_NO_RANDOMIZE = 0x0040000

# Debian's libjemalloc2 (scripts/setup.sh installs it as root); DBENCH_JEMALLOC names another.
JEMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2",
                  "/usr/lib64/libjemalloc.so.2", "/usr/lib/libjemalloc.so.2")


def jemalloc() -> str | None:
    """The jemalloc library the measured process preloads, or None when there is none."""
    named = os.environ.get("DBENCH_JEMALLOC")
    for path in ([named] if named else JEMALLOC_PATHS):
        if Path(path).is_file():
            return path
    return None


def disable_aslr() -> None:
    """preexec_fn of the measured process: its address space, and valgrind's, without randomisation.
    Best effort: a sandbox may refuse the call (collect.py records whether it held)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    current = libc.personality(0xFFFFFFFF)
    if current != -1:
        libc.personality(current | ADDR_NO_RANDOMIZE)


def aslr_disabled(pid: int) -> bool | None:
    """Whether a running process has ADDR_NO_RANDOMIZE (from /proc/PID/personality)."""
    try:
        return bool(int(Path(f"/proc/{pid}/personality").read_text(), 16) & ADDR_NO_RANDOMIZE)
    except (OSError, ValueError):
        return None


def glibc_tunables(mask_cpu: bool = True) -> str:
    items = ["glibc.malloc.mxfast=0"]
    if mask_cpu:
        items.append("glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in MASKED_FEATURES))
        items += [f"{k}={v}" for k, v in CACHE_TUNABLES.items()]
    return ":".join(items)


def child_environment(repo_root: Path, mask_cpu: bool = True, allocator: str | None = None) -> dict[str, str]:
    """The whole environment of the measured process: fixed, so two machines give it the same bytes
    (except the paths, which CI's clone may place elsewhere). allocator: a malloc to preload."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/nonexistent",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": str(repo_root),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "ATEN_CPU_CAPABILITY": "default",
        "GLIBC_TUNABLES": glibc_tunables(mask_cpu),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),  # vgdb (callgrind_control) talks through it
    }
    # valgrind's helpers (callgrind_control, vgdb) must be found wherever valgrind is installed.
    valgrind = shutil.which("valgrind")
    if valgrind:
        env["PATH"] = f"{Path(valgrind).parent}:{env['PATH']}"
    if "DBENCH_BUILD_DIR" in os.environ:
        env["DBENCH_BUILD_DIR"] = os.environ["DBENCH_BUILD_DIR"]
    if allocator:
        env["LD_PRELOAD"] = allocator
    return env


def host_cpu() -> dict[str, Any]:
    model: str | None = None
    flags: list[str] = []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model is None:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    return {"model": model or platform.processor() or platform.machine(), "flags": flags}


def valgrind_version(valgrind: str) -> str | None:
    try:
        out = subprocess.run([valgrind, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def code_digests(repo_root: Path) -> dict[str, str | None]:
    """What names the measured code: the suite's source digest (bench/io/env.py) and one of the native
    libraries the child loads (a rebuild with the same sources can still change them)."""
    import hashlib

    from dbench.bench.io.env import source_digest
    from dbench.bench.core.native_build import build_dir

    h = hashlib.sha256()
    build = build_dir() / "lib"  # the libraries staged.py copies (DBENCH_BUILD_DIR checked: bench/core/trust.py)
    libs = sorted(build.glob("*.so")) if build.is_dir() else []
    for lib in libs:
        h.update(lib.name.encode() + b"\0" + lib.read_bytes())
    return {"source_digest": source_digest(repo_root), "build_digest": h.hexdigest()[:16] if libs else None}


def glibc_version() -> str:
    return "-".join(platform.libc_ver())
