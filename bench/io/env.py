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

REPO_ROOT = Path(__file__).resolve().parents[2]


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


# NVML clock-event (throttle) reason bits (nvml.h nvmlClocksEventReason*; stable across drivers).
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting",
}
# Reasons that are not a slowdown of a running kernel (an idle GPU, clocks set on purpose).
BENIGN_THROTTLE = {"gpu_idle", "applications_clocks_setting", "display_clock_setting"}
GPU_STATE_KEYS = ("nvidia_driver", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "mem_clock_max_mhz",
                  "temperature_c", "power_w", "gpu_throttle_reasons", "gpu_other_processes", "gpu_ecc_mode",
                  "gpu_ecc_errors")


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit] + (
        [f"unknown_0x{mask & ~sum(THROTTLE_REASONS):x}"] if mask & ~sum(THROTTLE_REASONS) else [])


def _number(text: Any) -> int | float | None:
    """An nvidia-smi field as a number ('[N/A]', '[Not Supported]', '' -> None)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


def _pci_bus_id(props: Any) -> str | None:
    """The device's PCI address as NVML and nvidia-smi name it: the same GPU under any CUDA_VISIBLE_DEVICES."""
    try:
        return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        return None


def _others(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Processes on the GPU other than this one and its parent (a --processes / --ab run's), each
    named by its program's file name: where another machine installed it is not the result's to keep."""
    mine = {os.getpid(), os.getppid()}
    return [{**p, "name": os.path.basename(p["name"])} if isinstance(p.get("name"), str) else p
            for p in processes if p.get("pid") not in mine]


def gpu_state_nvml(index: int, bus_id: str | None) -> dict[str, Any] | None:
    """Clocks, throttle reasons, other processes and ECC from NVML (nvidia-ml-py); None without it."""
    try:
        import pynvml  # optional (requirements.txt): nvidia-smi is the fallback
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001  # no driver library, or it refuses: the fallback decides
        return None
    info: dict[str, Any] = {}

    def get(key: str, call: Any, *call_args: Any) -> Any:
        try:
            info[key] = call(*call_args)
        except Exception:  # noqa: BLE001  # NotSupported on this GPU, or an older library
            info.setdefault(key, None)
        return info[key]

    try:
        try:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id) if bus_id else None
        except Exception:  # noqa: BLE001
            handle = None
        handle = handle or pynvml.nvmlDeviceGetHandleByIndex(index)
        driver = get("nvidia_driver", pynvml.nvmlSystemGetDriverVersion)
        info["nvidia_driver"] = driver.decode() if isinstance(driver, bytes) else driver
        get("sm_clock_mhz", pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM)
        get("sm_clock_max_mhz", pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM)
        get("mem_clock_mhz", pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_MEM)
        get("mem_clock_max_mhz", pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM)
        get("temperature_c", pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
        milliwatts = get("power_w", pynvml.nvmlDeviceGetPowerUsage, handle)
        info["power_w"] = None if milliwatts is None else round(milliwatts / 1000, 1)
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = get("gpu_throttle_reasons", reasons, handle)
        info["gpu_throttle_reasons"] = None if mask is None else throttle_names(int(mask))
        info["gpu_other_processes"] = _others(_nvml_processes(pynvml, handle))
        mode = get("gpu_ecc_mode", pynvml.nvmlDeviceGetEccMode, handle)
        info["gpu_ecc_mode"] = None if mode is None else ("enabled" if mode[0] else "disabled")
        info["gpu_ecc_errors"] = _nvml_ecc_errors(pynvml, handle) if mode is not None and mode[0] else None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return info


def _nvml_processes(pynvml: Any, handle: Any) -> list[dict[str, Any]]:
    """The GPU's compute and graphics processes (pid, MiB used, name), each pid once."""
    processes: list[dict[str, Any]] = []
    for lister in (pynvml.nvmlDeviceGetComputeRunningProcesses, pynvml.nvmlDeviceGetGraphicsRunningProcesses):
        try:
            for proc in lister(handle):
                used = getattr(proc, "usedGpuMemory", None)
                processes.append({"pid": proc.pid, "used_mib": None if not isinstance(used, int) or used < 0
                                  else round(used / 2**20)})
        except Exception:  # noqa: BLE001  # NotSupported on this GPU, or an older library
            pass
    for proc in processes:
        try:
            name = pynvml.nvmlSystemGetProcessName(proc["pid"])
            proc["name"] = name.decode() if isinstance(name, bytes) else name
        except Exception:  # noqa: BLE001
            proc["name"] = None
    return list({p["pid"]: p for p in processes}.values())


def _nvml_ecc_errors(pynvml: Any, handle: Any) -> dict[str, int | None] | None:
    """Volatile ECC error counts (ECC enabled); None when NVML gives neither."""
    errors: dict[str, int | None] = {}
    for name, kind in (("corrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                       ("uncorrected_volatile", pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        try:
            errors[name] = int(pynvml.nvmlDeviceGetTotalEccErrors(handle, kind, pynvml.NVML_VOLATILE_ECC))
        except Exception:  # noqa: BLE001
            errors[name] = None
    return errors or None


def _smi(device_id: str, fields: str) -> list[str] | None:
    out = _run(["nvidia-smi", f"--id={device_id}", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    return [f.strip() for f in out.splitlines()[0].split(",")] if out else None


def gpu_state_smi(device_id: str) -> dict[str, Any] | None:
    """The same facts from nvidia-smi queries; a field this driver's nvidia-smi lacks stays None.
    Each group is its own query: one unknown field fails a whole query."""
    base = _smi(device_id, "driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,"
                           "power.draw")
    if base is None:
        return None
    info: dict[str, Any] = {"nvidia_driver": base[0]}
    info.update({k: _number(v) for k, v in zip(GPU_STATE_KEYS[1:7], base[1:])})
    # clocks_event_reasons since driver 535; the older name before that
    mask = _smi(device_id, "clocks_event_reasons.active") or _smi(device_id, "clocks_throttle_reasons.active")
    try:
        info["gpu_throttle_reasons"] = throttle_names(int(mask[0], 16)) if mask else None
    except ValueError:
        info["gpu_throttle_reasons"] = None
    ecc = _smi(device_id, "ecc.mode.current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total")
    mode = ecc[0].lower() if ecc else ""
    info["gpu_ecc_mode"] = mode if mode in ("enabled", "disabled") else None
    info["gpu_ecc_errors"] = ({"corrected_volatile": _number(ecc[1]), "uncorrected_volatile": _number(ecc[2])}
                              if ecc and mode == "enabled" else None)
    apps = _run(["nvidia-smi", f"--id={device_id}", "--query-compute-apps=pid,process_name,used_memory",
                 "--format=csv,noheader,nounits"])
    processes = []
    for line in (apps or "").splitlines():
        pid, _, rest = line.partition(",")
        name, _, used = rest.rpartition(",")
        if _number(pid) is not None:
            processes.append({"pid": int(pid), "name": name.strip() or None, "used_mib": _number(used)})
    info["gpu_other_processes"] = _others(processes) if apps is not None else None
    return info


def gpu_info(device: str) -> dict[str, Any]:
    """The GPU's identity (torch) and state (NVML, else nvidia-smi; 'unknown' source when neither answers)."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return {}
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    bus_id = _pci_bus_id(props)
    info: dict[str, Any] = {
        "gpu_name": props.name,
        "gpu_index": index,
        "gpu_count": torch.cuda.device_count(),
        "gpu_sm_count": props.multi_processor_count,
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "gpu_capability": f"{props.major}.{props.minor}",
        "gpu_pci_bus_id": bus_id,
        **dict.fromkeys(GPU_STATE_KEYS),
    }
    state, source = gpu_state_nvml(index, bus_id), "nvml"
    if state is None:
        state, source = gpu_state_smi(bus_id or str(index)), "nvidia-smi"
    info.update(state or {})
    info["gpu_state_source"] = source if state is not None else "unknown"
    return info


def cpu_load() -> dict[str, Any]:
    """Load average and whether the machine looks busy (1-minute load above half the usable cores)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return {"load_average": None, "cpu_busy": None}
    # The machine's cores, not this process's: a run pins itself to one before its env is taken.
    return {"load_average": load, "cpu_busy": load[0] > (os.cpu_count() or 1) / 2}


# A process that finds this many of its imported modules without bytecode on disk spent seconds
# compiling them as it started (a few ms each: a GPU host's child processes compiled 1773 of their
# 2691 modules, 4.8 s of compile() under cProfile); a checkout's own ~100 modules cost a fraction of one.
UNCACHED_WARN = 500


def bytecode_uncached() -> dict[str, Any]:
    """How many of the modules imported so far have no bytecode cache on disk: each was compiled from
    source as this process started, and every later process compiles it again (Python could not write
    the cache: PYTHONDONTWRITEBYTECODE, or a site-packages this user cannot write)."""
    specs = [getattr(m, "__spec__", None) for m in list(sys.modules.values())]
    cached = [str(spec.cached) for spec in specs if spec is not None and getattr(spec, "cached", None)]
    return {"modules": sum(not os.path.exists(c) for c in cached), "of": len(cached),
            "writes_disabled": sys.dont_write_bytecode, "prefix": sys.pycache_prefix}


def warnings(env: dict[str, Any]) -> list[str]:
    """What in the environment makes this run's figures less likely to repeat (printed on the console)."""
    out = []
    if env.get("cpu_busy"):
        out.append(f"the machine looks busy: load average {env['load_average'][0]} on {os.cpu_count()} cores; "
                   "CPU figures will be slower and noisier")
    if env.get("cpu_governor") == "powersave":
        out.append("CPU frequency governor is 'powersave': CPU figures depend on how the clock ramps")
    slow = [r for r in env.get("gpu_throttle_reasons") or [] if r not in BENIGN_THROTTLE]
    if slow:
        out.append(f"the GPU is throttling ({', '.join(slow)}): GPU times are slower than the GPU can run")
    others = env.get("gpu_other_processes") or []
    if others:
        names = ", ".join(f"{p.get('name') or '?'} (pid {p.get('pid')})" for p in others[:4])
        out.append(f"{len(others)} other process(es) on the GPU: {names}{' ...' if len(others) > 4 else ''}")
    uncached = env.get("bytecode_uncached") or {}
    if (uncached.get("modules") or 0) >= UNCACHED_WARN:
        why, fix = (("PYTHONDONTWRITEBYTECODE is set", "unset it (and, where site-packages is read-only, set "
                     "PYTHONPYCACHEPREFIX to a folder of your own) to keep them")
                    if uncached.get("writes_disabled") else
                    ("their folders are not writable here",
                     "PYTHONPYCACHEPREFIX set to a folder of your own keeps them"))
        out.append(f"{uncached['modules']} of {uncached['of']} imported modules have no bytecode cache on disk "
                   f"({why}): every new process compiles them again as it starts (the processes of one "
                   f"--processes or --ab run share one cache in its folder; a run keeps one in the build folder "
                   f"where that folder is there and only yours); {fix}")
    errors = env.get("gpu_ecc_errors") or {}
    if errors.get("uncorrected_volatile"):
        out.append(f"the GPU reports {errors['uncorrected_volatile']} uncorrected ECC error(s) since the driver loaded")
    if str(env.get("device", "")).startswith("cuda") and env.get("gpu_state_source") == "unknown":
        out.append("GPU clocks, throttling, other processes and ECC unknown: neither NVML (nvidia-ml-py) nor "
                   "nvidia-smi answered")
    return out


SOURCE_DIRS = ("dbench", "ops", "bench", "scenarios", "analysis")
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
    the git metadata is missing or stale (a copied tree). `python -m dbench.bench.io.env` prints it for a checkout."""
    h = hashlib.sha256()
    for path in source_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def knobs() -> dict[str, str]:
    """The DBENCH_* environment settings of the run: some change what is measured (the mm kernel,
    an injected cost), so a result says which were set."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("DBENCH_")}


def capture(device: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    triton_version = None
    try:
        import triton

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
        **cpu_load(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "knobs": knobs(),
        "bytecode_uncached": bytecode_uncached(),
        "gpu_name": None,  # identity keys every run has (a gate refuses to compare across them)
        "nvidia_driver": None,
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
    build folder as <build>/..., paths inside the checkout relative to it, the temp
    folder as <tmp>/..., the home folder as ~/... and the folder of an --op file
    elsewhere as <op>/..."""
    import site
    import tempfile

    from dbench.ops.specs import USER_OP_FOLDERS

    from dbench.bench.core.native_build import build_dir

    prefixes = [(str(build_dir()).rstrip("/") + "/", "<build>/"), (str(REPO_ROOT) + "/", "")]
    prefixes += [(p.rstrip("/") + "/", "<site-packages>/") for p in site.getsitepackages()]
    prefixes += [(tempfile.gettempdir().rstrip("/") + "/", "<tmp>/"), (str(Path.home()).rstrip("/") + "/", "~/")]
    # Last (a named place above wins), deepest first; never the root folder, whose prefix is every "/".
    prefixes += [(f + "/", "<op>/") for f in sorted(USER_OP_FOLDERS, key=len, reverse=True) if f.rstrip("/")]

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
