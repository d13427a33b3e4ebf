"""bench/io/env.py's machine checks: GPU clocks, throttling, other processes and ECC (NVML, else nvidia-smi,
else unknown), load average and busy machine, the identity keys every run records, the console warnings."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dbench.bench.io import env as envmod


def test_without_nvml_the_nvml_reader_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    assert envmod.gpu_state_nvml(0, None) is None


def test_without_nvidia_smi_the_fallback_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envmod, "_run", lambda cmd: None)
    assert envmod.gpu_state_smi("0") is None


def test_nvidia_smi_answers_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "driver_version": "580.159.04, 1980, 1980, 3201, 3201, 35, 120.51",
        "clocks_event_reasons.active": None,  # an older nvidia-smi: the old field name answers
        "clocks_throttle_reasons.active": "0x0000000000000005",
        "ecc.mode.current": "Enabled, 0, 2",
        "--query-compute-apps": f"{os.getpid()}, python3, 500\n4242, /opt/jobs/bin/other-job, 1024",
    }

    def fake_run(cmd: list[str]) -> str | None:
        for key, value in answers.items():
            if any(key in part for part in cmd):
                return value
        raise AssertionError(cmd)

    monkeypatch.setattr(envmod, "_run", fake_run)
    info = envmod.gpu_state_smi("00000000:19:00.0")
    assert info["nvidia_driver"] == "580.159.04" and info["sm_clock_mhz"] == 1980 and info["power_w"] == 120.51
    assert info["mem_clock_max_mhz"] == 3201 and info["temperature_c"] == 35
    assert info["gpu_throttle_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert info["gpu_ecc_mode"] == "enabled" and info["gpu_ecc_errors"] == {"corrected_volatile": 0,
                                                                          "uncorrected_volatile": 2}
    # not this process; named by its program, not where the machine installed it
    assert info["gpu_other_processes"] == [{"pid": 4242, "name": "other-job", "used_mib": 1024}]


def test_nvidia_smi_fields_it_lacks_stay_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(cmd: list[str]) -> str | None:
        if any("driver_version" in c for c in cmd):
            return "550.1, [N/A], [N/A], 1000, [N/A], 40, [Not Supported]"
        if any("ecc.mode" in c for c in cmd):
            return "[N/A], [N/A], [N/A]"
        return None

    monkeypatch.setattr(envmod, "_run", fake_run)
    info = envmod.gpu_state_smi("0")
    assert info["sm_clock_mhz"] is None and info["power_w"] is None and info["mem_clock_mhz"] == 1000
    assert info["gpu_throttle_reasons"] is None and info["gpu_ecc_mode"] is None and info["gpu_ecc_errors"] is None
    assert info["gpu_other_processes"] is None


class _NotSupported(Exception):
    pass


def _fake_pynvml(ecc: bool) -> Any:
    def not_supported(*_: Any) -> Any:
        raise _NotSupported

    procs = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=2**29), SimpleNamespace(pid=77, usedGpuMemory=None)]
    return SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByPciBusId=not_supported, nvmlDeviceGetHandleByIndex=lambda i: f"h{i}",
        nvmlSystemGetDriverVersion=lambda: b"580.1",
        nvmlDeviceGetClockInfo=lambda h, c: {1: 345, 2: 2619}[c],
        nvmlDeviceGetMaxClockInfo=lambda h, c: {1: 1980, 2: 3201}[c],
        nvmlDeviceGetTemperature=lambda h, t: 30, nvmlDeviceGetPowerUsage=lambda h: 75500,
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x41,
        nvmlDeviceGetComputeRunningProcesses=lambda h: procs, nvmlDeviceGetGraphicsRunningProcesses=not_supported,
        nvmlSystemGetProcessName=lambda pid: b"trainer",
        nvmlDeviceGetEccMode=(lambda h: (1, 1)) if ecc else not_supported,
        nvmlDeviceGetTotalEccErrors=lambda h, kind, counter: 3 * kind,
    )


def test_nvml_answers_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(ecc=True))
    info = envmod.gpu_state_nvml(0, "00000000:19:00.0")
    assert info["nvidia_driver"] == "580.1" and info["sm_clock_mhz"] == 345 and info["sm_clock_max_mhz"] == 1980
    assert info["mem_clock_mhz"] == 2619 and info["power_w"] == 75.5 and info["temperature_c"] == 30
    assert info["gpu_throttle_reasons"] == ["gpu_idle", "hw_thermal_slowdown"]
    assert info["gpu_other_processes"] == [{"pid": 77, "used_mib": None, "name": "trainer"}]
    assert info["gpu_ecc_mode"] == "enabled"
    assert info["gpu_ecc_errors"] == {"corrected_volatile": 0, "uncorrected_volatile": 3}
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(ecc=False))
    no_ecc = envmod.gpu_state_nvml(0, None)
    assert no_ecc["gpu_ecc_mode"] is None and no_ecc["gpu_ecc_errors"] is None  # a GPU without ECC


def test_every_run_records_what_a_gate_compares(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    env = envmod.capture("cpu")
    for key in ("gpu_name", "nvidia_driver", "torch", "torch_git", "cuda_runtime", "cpu_governor",
                "load_average", "cpu_busy"):
        assert key in env, key
    assert env["gpu_name"] is None and env["nvidia_driver"] is None  # a CPU run
    assert len(env["load_average"]) == 3 and isinstance(env["cpu_busy"], bool)


def test_every_run_records_its_dbench_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    for key in [k for k in os.environ if k.startswith("DBENCH_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("DBENCH_MM_KERNEL", "wgmma")
    monkeypatch.setenv("DBENCH_INJECT_NS", "300")
    monkeypatch.setenv("NOT_DBENCH_X", "1")
    assert envmod.capture("cpu")["knobs"] == {"DBENCH_INJECT_NS": "300", "DBENCH_MM_KERNEL": "wgmma"}


def test_busy_means_load_above_half_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "getloadavg", lambda: (8.5, 3.0, 1.0))
    assert envmod.cpu_load() == {"load_average": [8.5, 3.0, 1.0], "cpu_busy": True}
    monkeypatch.setattr(os, "getloadavg", lambda: (7.9, 3.0, 1.0))
    assert envmod.cpu_load()["cpu_busy"] is False


def test_warnings_name_what_makes_figures_move() -> None:
    quiet = {"device": "cuda:0", "cpu_busy": False, "gpu_throttle_reasons": ["gpu_idle"], "gpu_other_processes": [],
             "gpu_ecc_errors": {"uncorrected_volatile": 0}, "gpu_state_source": "nvml", "cpu_governor": "performance"}
    assert envmod.warnings(quiet) == []
    noisy = {**quiet, "cpu_busy": True, "load_average": [9.0, 1, 1], "gpu_throttle_reasons": ["sw_thermal_slowdown"],
             "gpu_other_processes": [{"pid": 5, "name": "job"}], "gpu_ecc_errors": {"uncorrected_volatile": 1},
             "cpu_governor": "powersave"}
    text = "\n".join(envmod.warnings(noisy))
    for word in ("busy", "powersave", "sw_thermal_slowdown", "job (pid 5)", "uncorrected ECC"):
        assert word in text, word
    unknown = envmod.warnings({"device": "cuda:0", "gpu_state_source": "unknown"})
    assert unknown and "unknown" in unknown[0]
    assert envmod.warnings({"device": "cpu"}) == []


def test_modules_imported_without_a_bytecode_cache_are_counted_and_warned_of(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that cannot write its modules' bytecode compiles them at every start: the env says
    how many, and the console warns with the fix once there are many."""
    import importlib
    import sys

    from dbench.bench.io import env as envmod

    (tmp_path / "uncached_probe_mod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    before = envmod.bytecode_uncached()
    importlib.import_module("uncached_probe_mod")
    try:
        after = envmod.bytecode_uncached()
    finally:
        sys.modules.pop("uncached_probe_mod", None)
    assert after["modules"] == before["modules"] + 1 and after["of"] == before["of"] + 1
    assert after["writes_disabled"] is True and not (tmp_path / "__pycache__").exists()
    many = {"bytecode_uncached": {"modules": 1773, "of": 2691, "writes_disabled": False, "prefix": None}}
    (line,) = envmod.warnings(many)
    assert line.startswith("1773 of 2691 imported modules have no bytecode cache on disk (their folders are not "
                           "writable here)") and "PYTHONPYCACHEPREFIX" in line
    assert envmod.warnings({"bytecode_uncached": {"modules": 3, "of": 2691}}) == []
    many["bytecode_uncached"]["writes_disabled"] = True
    (line,) = envmod.warnings(many)
    assert "(PYTHONDONTWRITEBYTECODE is set)" in line and "unset it" in line
    assert "the processes of one --processes or --ab run share one cache" in line  # bench/children/bytecode.py
