"""`run.py --scenario breakdown`: what it cannot run is refused before any work (exit 2, one line,
no folder made), its device is CUDA where there is one (else the CPU), and one small real run writes the
breakdown document, table and figure in the run's folder, where a results folder's readers pass it by."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dbench.scenarios import DECLARATIONS, SCENARIOS

FAST = ["--no-pin", "--quick"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--baseline", "BASELINE"], "argument --baseline: a breakdown is not gated"),
    (["--dtype", "float64"], "argument --dtype float64: the instruction counts are taken in float32 only"),
    (["--shape", "8,8"], "argument --shape/--axis"),
    (["--modes", "inference"], "argument --modes: scenario breakdown has no modes to choose from"),
    (["--ab", "env:", "env:"], "argument --ab: scenario breakdown makes its own table; run it in one process"),
    (["--ops", "no_such_op"], "no_such_op"),
    (["--ops", "args_tensor_16,noop"],
     "argument --ops: the args scenario's ops (args_tensor_16) are counted on their own"),
    (["--ops", "args_tensor_16", "--variants", "cpp"], "cpp"),
    (["--variants", "no_such_variant"], "no_such_variant"),
], ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_what_the_breakdown_cannot_run_exits_2_before_any_work(
        run_main: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str) -> None:
    from tests.test_checks_up_front import COMMITTED

    argv = [str(COMMITTED) if a == "BASELINE" else a for a in argv]
    out = tmp_path / "out"
    try:  # the command line's own errors exit from the parser, the rest return the status
        code = run_main.main(["--scenario", "breakdown", *argv, *FAST, "--out", str(out)])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("run.py: error: "), err
    assert says in err, err
    assert not out.exists(), "nothing may be written, and no folder made"


def test_without_valgrind_the_breakdown_is_one_line_naming_the_install_step(
        run_main: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda name, *a, **k: None if name == "valgrind" else real_which(name, *a, **k))
    # Only the CPU's method needs valgrind (CUDA's times windows), so the CPU is named.
    assert run_main.main(["--scenario", "breakdown", "--device", "cpu", "--ops", "noop", *FAST,
                          "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("run.py: error: valgrind (with callgrind_control) is not installed: apt-get install "
                           "valgrind (see run.py --help)"), err


def test_the_breakdown_takes_the_device_every_scenario_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where CUDA is, the breakdown runs on it (torch's Python functions timed in windows: callgrind
    cannot run the CUDA driver); --device cpu keeps callgrind's layers."""
    import types

    import torch

    from dbench.analysis import breakdown, windows
    from dbench.bench.harness.device import resolve_device
    from dbench.bench.harness.options import RunOptions
    from dbench.scenarios.select import check_selection

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    args = types.SimpleNamespace(device=None, gpus=None, shards=None)
    assert resolve_device(args, in_process=False, default_cpu=DECLARATIONS["breakdown"].cpu_only) == ("cuda:0", [])
    check_selection(SCENARIOS["breakdown"], RunOptions(scenario="breakdown", device="cuda:0"), None)
    taken: list[str] = []
    monkeypatch.setattr(windows, "run_windows", lambda options, console: taken.append(options.device))
    breakdown.run_scenario(RunOptions(scenario="breakdown", device="cuda:0"), None)
    assert taken == ["cuda:0"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
                    reason="valgrind is not installed (scripts/setup.sh installs it)")
def test_a_real_breakdown_run_writes_its_document_beside_the_results(
        run_main: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import dbench

    out = tmp_path / "out"
    assert run_main.main(["--scenario", "breakdown", "--device", "cpu", "--ops", "noop", "--variants", "raw,cpp",
                          *FAST, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    (document_path,) = out.glob("breakdown-cpu-*.breakdown.json")
    stem = document_path.name.removesuffix(".breakdown.json")
    assert (out / f"{stem}.md").exists() and (out / f"{stem}-noop.png").read_bytes()[:4] == b"\x89PNG"
    document = json.loads(document_path.read_text())
    cpp = [r for r in document["rows"] if (r["variant"], r["mode"]) == ("cpp", "inference")]
    assert cpp and all(r.get("time_missing") is None and r["measured_delta_us"] > 0 for r in cpp)
    assert sum(r["delta_us"] for r in cpp) == pytest.approx(cpp[0]["delta_us_total"], abs=1e-3)
    assert "cases within ±20 %" in printed and f"wrote {document_path}" in printed.replace("\n", "")
    with pytest.raises(Exception, match="holds no result files"):  # not a result: the readers pass it by
        dbench.load_results([out])
