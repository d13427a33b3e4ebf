"""The environment block of a result file: what a reader needs to trust or reproduce a number."""

from __future__ import annotations

import ctypes
import datetime as dt
import hashlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=REPO_ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info() -> dict[str, Any]:
    sha = _run(["git", "rev-parse", "HEAD"])
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return {"sha": sha, "dirty": bool(status) if status is not None else None}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_governor() -> str | None:
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cuda_driver_version() -> str | None:
    """The driver's CUDA version (cuDriverGetVersion), e.g. '13.0'."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return f"{version.value // 1000}.{(version.value % 1000) // 10}"


def gpu_info(device: str) -> dict[str, Any]:
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return {}
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    smi = _run(["nvidia-smi", f"--id={index}", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw",
                "--format=csv,noheader,nounits"])
    info: dict[str, Any] = {
        "gpu_name": props.name,
        "gpu_index": index,
        "gpu_count": torch.cuda.device_count(),
        "gpu_sm_count": props.multi_processor_count,
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "gpu_capability": f"{props.major}.{props.minor}",
    }
    if smi:
        fields = [f.strip() for f in smi.split(",")]
        keys = ["nvidia_driver", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "temperature_c", "power_w"]
        info.update(dict(zip(keys, fields)))
    return info


SOURCE_DIRS = ("ops", "bench", "scenarios", "analysis")
SOURCE_SUFFIXES = {".py", ".h", ".hpp", ".cpp", ".cu", ".cmake"}


def source_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files whose content decides what a run measures (code, not results or docs)."""
    files = [root / "run.py", root / "CMakeLists.txt"]
    for folder in SOURCE_DIRS:
        for path in (root / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and (
                    path.suffix in SOURCE_SUFFIXES or path.name == "CMakeLists.txt"):
                files.append(path)
    return sorted(p for p in files if p.is_file())


def source_digest(root: Path = REPO_ROOT) -> str:
    """SHA-256 over the source files' paths and contents: names the code a result came from even where
    the git metadata is missing or stale (a copied tree). `python -m bench.env` prints it for a checkout."""
    h = hashlib.sha256()
    for path in source_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def capture(device: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    triton_version = None
    try:
        import triton  # noqa: PLC0415

        triton_version = triton.__version__
    except ImportError:
        pass
    env: dict[str, Any] = {
        "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git": git_info(),
        "source_digest": source_digest(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "torch": torch.__version__,
        "torch_git": torch.version.git_version,
        "cuda_runtime": torch.version.cuda,
        "cuda_driver": cuda_driver_version(),
        "triton": triton_version,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_governor": cpu_governor(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    env.update(gpu_info(device))
    env.update(extra or {})
    return env


def machine_slug(env: dict[str, Any]) -> str:
    """Folder name under results/: the GPU for CUDA runs, else the CPU model."""
    name = env.get("gpu_name") or f"cpu-{env.get('cpu_model', 'unknown')}"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = re.sub(r"^nvidia-", "", slug)
    return slug[:60] or "unknown"


def redact_paths(value: Any) -> Any:
    """Result files travel: write install locations as <site-packages>/..., the
    build folder as <build>/..., paths inside the checkout relative to it, the
    temp folder as <tmp>/... and the home folder as ~/..."""
    import site
    import tempfile

    from ops.native import build_dir

    prefixes = [(str(build_dir()).rstrip("/") + "/", "<build>/"), (str(REPO_ROOT) + "/", "")]
    prefixes += [(p.rstrip("/") + "/", "<site-packages>/") for p in site.getsitepackages()]
    prefixes += [(tempfile.gettempdir().rstrip("/") + "/", "<tmp>/"), (str(Path.home()).rstrip("/") + "/", "~/")]

    def redact(v: Any) -> Any:
        if isinstance(v, str):
            for prefix, repl in prefixes:
                v = v.replace(prefix, repl)
            return v
        if isinstance(v, dict):
            return {k: redact(x) for k, x in v.items()}
        if isinstance(v, list):
            return [redact(x) for x in v]
        return v

    return redact(value)


if __name__ == "__main__":
    print(source_digest())
