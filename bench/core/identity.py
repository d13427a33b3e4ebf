"""Row identity: the one definition of which case a row measures, used by every consumer.

A case is identified by its full parameters: the core fields below plus the
scenario's own axes (size, cache state, chain length...). A scenario's axes
are flattened into the case key as ordinary fields, and the key's ``axes``
lists their names, so a row stays a flat record (tables and CSV read it
directly) and its identity is still fully determined by the row itself.

* ``case_identity(key)``: hashable; two cases of any runs measure the same
  thing exactly when it is equal. The device enters as its kind (cpu / cuda):
  the index says where a row ran (the shards of one run use several GPUs),
  not what it measured; the environment check compares GPUs.
  A user's op (``op_source``: its file, name and source digest) adds that
  field, so an edited op is a new case, never paired with the old one.
* ``row_identity(row)``: the case identity plus the metric.
* ``case_label(key)``: the readable name of a case inside one run
  (``muladd/raw/inference``, with ``[size=4096]`` when it has axes, ``[shape=8x64]``
  when its run took several shapes: an axis over a core field, not added to the identity). Labels
  are unique within a run (``check_unique_labels``): a run's pairing, GPU
  timer windows, NVTX ranges and ``baseline`` references use them.

Result files of schema 1 have no ``axes`` field; they read as axis-free rows,
which is what they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

CORE_FIELDS: tuple[str, ...] = ("scenario", "op", "variant", "mode", "shape", "dtype", "device", "driver")


def _value(value: Any) -> Any:
    """A JSON-like value as something hashable and order-stable (lists -> tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_value(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return int(value)  # 4096 and 4096.0 (pandas) are one size
    return value


def device_kind(device: Any) -> str | None:
    return None if device is None else str(device).partition(":")[0]


def axis_names(key: Mapping[str, Any]) -> tuple[str, ...]:
    axes = key.get("axes")
    return tuple(axes) if isinstance(axes, (list, tuple)) else ()


def case_identity(key: Mapping[str, Any]) -> tuple[Any, ...]:
    core = tuple(
        device_kind(key.get(f)) if f == "device" else (key.get(f) or "python") if f == "driver" else _value(key.get(f))
        for f in CORE_FIELDS
    )
    # A user's op is also told apart by its file and source digest: two ops of one name never pair.
    source = (("op_source", key["op_source"]),) if key.get("op_source") else ()
    # An axis over a core field (the shape, when a run takes several) is already in `core`: a row's
    # identity does not depend on how many shapes its run took.
    axes = sorted(a for a in axis_names(key) if a not in CORE_FIELDS)
    return core + source + tuple((name, _value(key.get(name))) for name in axes)


def row_identity(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return case_identity(row) + (row.get("metric"),)


def identity_text(identity: tuple[Any, ...]) -> str:
    """An identity as one string (a pandas join key, a CSV column)."""
    return json.dumps(identity, default=str)


def case_label(key: Mapping[str, Any]) -> str:
    label = "/".join(str(key[k]) for k in ("op", "variant", "mode"))
    axes = axis_names(key)
    return label + ("[" + ",".join(f"{a}={axis_text(key[a])}" for a in axes) + "]" if axes else "")


def axis_text(value: Any) -> str:
    """An axis value as a label (and --axis) writes it: a shape as 8x64."""
    return "x".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def check_unique_labels(keys: Iterable[Mapping[str, Any]]) -> None:
    """Two cases of one run with one label would be paired, timed and tabled as one: refuse."""
    seen: dict[str, tuple[Any, ...]] = {}
    for key in keys:
        label, ident = case_label(key), case_identity(key)
        if label in seen and seen[label] != ident:
            raise ValueError(f"two cases share the label {label!r} ({seen[label]} and {ident}): "
                             "declare what tells them apart as a scenario axis")
        if label in seen:
            raise ValueError(f"case {label!r} appears twice")
        seen[label] = ident
