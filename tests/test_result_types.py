"""The result's types (bench/io/result_types.py): the reader's field groups and the schema come from
`Row`, and every document is made by `ResultDocument.to_json`, whichever way it was built."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.io import document, result_types, schema
from dbench.bench.io.result_types import ResultDocument, Row, RowContract

ROOT = Path(__file__).resolve().parent.parent


def _row(status: str = "ok", reason: str | None = None) -> dict[str, Any]:
    return {"scenario": "boundary", "op": "noop", "variant": "raw", "mode": "inference", "device": "cpu",
            "driver": "python", "metric": "cpu_us", "unit": "us", "timer": "perf_counter", "median": 1.0,
            "q1": 1.0, "q3": 1.0, "ci_low": 1.0, "ci_high": 1.0, "samples": [1.0], "status": status,
            "reason": reason}


def test_the_readers_field_groups_are_rows_fields_by_kind() -> None:
    hints = typing.get_type_hints(Row)
    assert set(document.TEXT_FIELDS) == {k for k, v in hints.items() if v == typing.Optional[str]}
    assert "checked_on" in document.TEXT_FIELDS and "median" in document.NUMBER_FIELDS
    assert "process_medians" in document.NUMBER_LISTS and "status" not in document.TEXT_FIELDS
    assert document.REQUIRED_ROW_FIELDS == tuple(RowContract.__annotations__)
    assert set(document.REQUIRED_ROW_FIELDS) <= set(hints)
    # Every field is of one kind at most, and the positive ones are numbers (or lists of them).
    groups = (document.TEXT_FIELDS, document.NUMBER_FIELDS, document.NUMBER_LISTS)
    assert sum(len(g) for g in groups) == len(set().union(*groups))
    assert set(document.POSITIVE_FIELDS) <= set(document.NUMBER_FIELDS)
    assert set(document.POSITIVE_LISTS) <= set(document.NUMBER_LISTS)
    assert document.OBJECT_FIELDS == ("config", "ab", "speed_probe", "a_speed_probe", "roofs")


def test_the_schema_lists_every_field_of_row_and_every_part_of_a_document() -> None:
    made = schema.schema()
    assert set(typing.get_type_hints(Row)) - {"gpu_bound"} <= set(made["$defs"]["row"]["properties"])
    assert made["$defs"]["row"]["required"] == list(RowContract.__annotations__)
    assert set(document.OBJECT_FIELDS) <= set(made["properties"])


_CHILD = {"child": "process 1", "returncode": 1, "reason": "exit status 1", "log": None, "tail": None}


def _failed_document() -> dict[str, Any]:
    return ResultDocument("boundary", "failed", rows=[_row(), _row("failed", "opcheck test_schema: boom")],
                          children_failed=[_CHILD], error="process 1 failed").to_json()


def test_to_json_lists_failed_rows_then_failed_children_and_leaves_out_absent_parts() -> None:
    out = _failed_document()
    assert list(out) == ["schema_version", "scenario", "status", "config", "env", "error", "rows", "failures"]
    assert out["schema_version"] == result_types.SCHEMA_VERSION
    assert out["failures"] == [{"row": "noop/raw/inference", "driver": "python", "metric": "cpu_us",
                                "reason": "opcheck test_schema: boom"}, _CHILD]
    document.check_result(json.loads(json.dumps(out)), "made")


def test_a_made_document_passes_the_json_schema() -> None:
    pytest.importorskip("jsonschema", reason="jsonschema (requirements.txt) validates the result schema")
    schema.validate(_failed_document())


def test_from_json_takes_a_written_document_back_whole() -> None:
    written = json.loads((ROOT / "tests" / "golden" / "boundary-small-a.json").read_text())
    again = ResultDocument.from_json(written).to_json()
    assert {k: v for k, v in again.items() if k != "failures"} == {**written, "schema_version": 2}
    # A failed child's entry survives the round trip; a failed row's entry is made again from the row.
    merged = ResultDocument("boundary", "failed", rows=[_row("failed", "x")],
                            children_failed=[{"child": "shard 0", "reason": "killed"}]).to_json()
    assert ResultDocument.from_json(merged).to_json()["failures"] == merged["failures"]


@pytest.mark.parametrize(("given", "says"), [
    ({"status": "done"}, "not 'done'"),
    ({"status": "complete", "rowz": []}, "no field rowz"),
])
def test_a_document_no_reader_knows_is_refused_when_made(given: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ResultDocument.from_json({"scenario": "boundary", "env": {}, "rows": [], **given})


def test_every_document_writer_builds_a_result_document() -> None:
    """No module builds a result document as a dict literal: each goes through ResultDocument."""
    writers = ["bench/harness/rounds.py", "bench/harness/custom.py", "bench/harness/interrupts.py",
               "bench/harness/supervisor.py", "bench/io/results.py", "bench/io/shard_merge.py",
               "bench/io/process_merge.py", "bench/io/ab.py"]
    for path in writers:
        text = (ROOT / path).read_text()
        assert "ResultDocument" in text, path
        assert '"rows": [' not in text and '"rows": rows' not in text, path
