"""The result document's JSON Schema: the committed copy is the generated one, it accepts every result
committed under results/ and tests/golden/, it refuses what the reader refuses, and every result the
tests write is validated against it (tests/conftest.py, bench.io.results.write_result)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from dbench.bench.io import schema
from dbench.bench.io.document import NotAResultError, ResultFileError, check_result, read_json

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (requirements.txt) validates the result schema")
ROOT = Path(__file__).resolve().parent.parent


def _results() -> list[Path]:
    """Every committed JSON file, plain or gzipped, that is a result document (the reader's own test)."""
    found = []
    files = [p for folder in (ROOT / "results", ROOT / "tests" / "golden") for pattern in ("*.json", "*.json.gz")
             for p in folder.rglob(pattern)]
    for path in sorted(files):
        try:
            check_result(read_json(path), path)
        except NotAResultError:  # a calibration, a night study, the instruction counts...
            continue
        found.append(path)  # a result the reader refuses fails the test below, with the schema's reason
    return found


RESULTS = _results()


def test_the_committed_schema_is_the_generated_one() -> None:
    assert schema.SCHEMA_PATH.read_text() == schema.text(), "run: python3 -m dbench.bench.io.schema --write"
    jsonschema.Draft202012Validator.check_schema(json.loads(schema.SCHEMA_PATH.read_text()))


@pytest.mark.slow
def test_every_committed_result_follows_the_schema() -> None:
    assert len(RESULTS) >= 60  # boundary, kernel, A/B, sharded and gate-study runs (62 on 2026-12-03)
    bad = {}
    for path in RESULTS:
        try:
            schema.validate(read_json(path))
        except jsonschema.ValidationError as exc:
            bad[str(path.relative_to(ROOT))] = exc.message
    assert bad == {}


def test_the_compiled_validator_agrees_with_the_reference_on_a_committed_run() -> None:
    """schema.validate's fast path (fastjsonschema) accepts what jsonschema accepts; the refusals of
    test_the_schema_refuses_what_the_reader_refuses go through it too."""
    pytest.importorskip("fastjsonschema", reason="fastjsonschema (requirements.txt) compiles the schema")
    assert schema._compiled() is not None
    doc = read_json(ROOT / "tests" / "golden" / "boundary-small-a.json")
    jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_PATH.read_text())).validate(doc)
    schema._compiled()(doc)


def _small() -> dict[str, Any]:
    return read_json(ROOT / "tests" / "golden" / "boundary-small-a.json")


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: d["rows"][0].update(median=0.0), "less than or equal to the minimum of 0"),
    (lambda d: d["rows"][0].update(median=-1.0), "less than or equal to the minimum of 0"),
    (lambda d: d["rows"][0].update(status="great"), "'great' is not one of"),
    (lambda d: d["rows"][0].pop("timer"), "'timer' is a required property"),
    (lambda d: d["rows"][0].update(samples=["1.0"]), "'1.0' is not of type"),
    (lambda d: d.update(status="done"), "'done' is not one of"),
    (lambda d: d.update(config=[1]), "is not of type 'object', 'null'"),
    (lambda d: d.pop("env"), "'env' is a required property"),
])
def test_the_schema_refuses_what_the_reader_refuses(change: Any, says: str) -> None:
    doc = copy.deepcopy(_small())
    timed = next(r for r in doc["rows"] if r["status"] == "ok" and r["unit"] == "us")
    doc["rows"].insert(0, doc["rows"].pop(doc["rows"].index(timed)))
    schema.validate(doc)  # the committed small result itself is fine
    change(doc)
    with pytest.raises(jsonschema.ValidationError, match=says):
        schema.validate(doc)
    if schema._compiled() is not None:  # the fast path refuses it on its own
        import fastjsonschema

        with pytest.raises(fastjsonschema.JsonSchemaException):
            schema._compiled()(doc)
    with pytest.raises(ResultFileError):
        check_result(doc, "changed")


def test_an_untimed_row_may_have_no_median() -> None:
    doc = copy.deepcopy(_small())
    doc["rows"][0].update(status="failed", median=None, reason="raised")
    schema.validate(doc)


def test_the_tests_validate_every_result_they_write(tmp_path: Path) -> None:
    from dbench.bench.io.results import write_result

    assert os.environ.get(schema.VALIDATE_ENV) == "1"
    doc = _small()
    write_result(tmp_path / "ok.json", doc)
    broken = copy.deepcopy(doc)
    broken["rows"][0]["median"] = 0.0
    with pytest.raises(jsonschema.ValidationError):
        write_result(tmp_path / "bad.json", broken)
    assert not (tmp_path / "bad.json").exists()
    # A status no reader knows is refused before that, by the document's type.
    with pytest.raises(ValueError, match="not 'done'"):
        write_result(tmp_path / "bad.json", {**doc, "status": "done"})
    assert not (tmp_path / "bad.json").exists()
