"""The result document as a JSON Schema (draft 2020-12), made from the result's types
(bench/io/result_types.py: `Row`'s fields by kind, `ResultDocument`'s parts), which the reader
(bench/io/document.py) checks with too, so the two never disagree. The committed copy,
docs/result.schema.json, is what users' tools validate against; tests/test_schema.py keeps it equal
to this one and validates every result the tests write (bench.io.results.write_result validates when
DBENCH_VALIDATE_RESULTS is set).

    python3 -m dbench.bench.io.schema [--write]     print it, or rewrite docs/result.schema.json
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

from dbench.bench.io import result_types as rt

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "result.schema.json"
VALIDATE_ENV = "DBENCH_VALIDATE_RESULTS"

_NUMBER = {"type": ["number", "null"]}
_TEXT = {"type": ["string", "null"]}
_SCALAR = {"type": ["string", "number", "boolean", "null"]}
# A value that may enter a row's identity (shape, an axis): a scalar or a list of them, nested.
_IDENTITY_VALUE = {"anyOf": [_SCALAR, {"type": "array", "items": {"$ref": "#/$defs/identity_value"}}]}


def schema() -> dict[str, Any]:
    """The result document's JSON Schema."""
    row_properties: dict[str, Any] = {
        **{name: _TEXT for name in rt.TEXT_FIELDS},
        **{name: _NUMBER for name in rt.NUMBER_FIELDS},
        **{name: {"type": ["array", "null"], "items": _NUMBER} for name in rt.NUMBER_LISTS},
        "status": {"enum": [*rt.ROW_STATUSES, None]},
        "a_status": {"enum": [*rt.ROW_STATUSES, None]},
        "shape": {"$ref": "#/$defs/identity_value"},
        "axes": {"type": ["array", "null"], "items": {"type": "string"}},
    }
    # A timed row of a time metric (unit us, status not FAILED or n/a): its times and ratios of times
    # are positive. (NaN and infinities are not JSON; the reader refuses them too.)
    # (Side A's fields are checked only when side A was timed too: not expressed here.)
    positive = {name: {"type": ["number", "null"], "exclusiveMinimum": 0} for name in rt.POSITIVE_FIELDS
                if name not in rt.SIDE_A}
    timed_time_row = {
        "if": {"properties": {"unit": {"const": "us"}, "status": {"not": {"enum": list(rt.UNTIMED)}}},
               "required": ["unit"]},
        "then": {"properties": {**positive, "median": {"type": "number", "exclusiveMinimum": 0}},
                 "required": ["median"]},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"dbench result document (schema_version {rt.SCHEMA_VERSION})",
        "description": "One run of a scenario: its configuration, environment and rows (one per case and metric). "
                       "Made by bench/io/schema.py from the types of bench/io/result_types.py.",
        "type": "object",
        "required": ["env", "rows"],
        "properties": {
            "schema_version": {"type": "integer", "minimum": 1, "maximum": rt.SCHEMA_VERSION},
            "scenario": {"type": "string"},
            "status": {"enum": list(rt.DOCUMENT_STATUSES)},
            "error": _TEXT,
            "env": {"type": "object", "properties": {"time": _TEXT}},
            **{name: {"type": ["object", "null"]} for name in rt.OBJECT_FIELDS},
            "rows": {"type": "array", "items": {"$ref": "#/$defs/row"}},
            "failures": {"type": "array", "items": {"type": "object"}},
        },
        "$defs": {
            "identity_value": _IDENTITY_VALUE,
            "row": {"type": "object", "required": list(rt.REQUIRED_ROW_FIELDS), "properties": row_properties,
                    "allOf": [timed_time_row]},
        },
    }


def text() -> str:
    return json.dumps(schema(), indent=1, ensure_ascii=False) + "\n"


def validate(document: Any) -> None:
    """Raise jsonschema.ValidationError when `document` does not follow the schema.

    A compiled validator (fastjsonschema, some 30 times faster on a run of a few hundred rows) decides
    first; jsonschema, the reference, runs on what it refuses, to raise with its own message. The
    schema uses no keyword whose meaning changed after draft-07 (fastjsonschema's latest; no `$ref`
    has siblings), and tests/test_schema.py checks that both refuse the same mutations."""
    fast = _compiled()
    if fast is not None:
        import fastjsonschema

        try:
            fast(document)
            return
        except fastjsonschema.JsonSchemaException:
            pass
    _validator().validate(document)


@functools.cache
def _compiled() -> Any:
    """The schema compiled to Python once per process, or None where fastjsonschema is missing."""
    try:
        import fastjsonschema
    except ImportError:
        return None
    return fastjsonschema.compile({**schema(), "$schema": "http://json-schema.org/draft-07/schema#"})


@functools.cache
def _validator() -> Any:
    """The schema's validator, made (and the schema itself checked) once per process."""
    import jsonschema

    made = schema()
    jsonschema.Draft202012Validator.check_schema(made)
    return jsonschema.Draft202012Validator(made)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--write"]):
        print("usage: python3 -m dbench.bench.io.schema [--write]", file=sys.stderr)
        return 2
    if args == ["--write"]:
        SCHEMA_PATH.write_text(text())
        print(f"wrote {SCHEMA_PATH}")
    else:
        sys.stdout.write(text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
