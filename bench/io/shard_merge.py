"""Merging the shards' result documents into one (the rules are in bench/children/shard/__init__.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dbench.bench.core.identity import case_label, row_identity
from dbench.bench.io.result_types import ResultDocument


def merged_status(statuses: Sequence[str]) -> str:
    """The status of a result merged from several runs (shards, processes): complete when all are,
    failed when one failed, else interrupted (a child interrupted, or not run after an interrupt)."""
    return ("complete" if all(s == "complete" for s in statuses)
            else "failed" if "failed" in statuses else "interrupted")


def child_failures(meta: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One named entry per child that failed (a merged document's "failures" list keeps them beside
    its failed rows): which child, its exit status, why, and the tail of its output."""
    return [{"child": m.get("name") or f"child {i}", "returncode": m.get("returncode"),
             "reason": m.get("reason") or "failed", "log": m.get("log"), "tail": m.get("tail")}
            for i, m in enumerate(meta) if (m.get("status") or "failed") == "failed"]


def _child_text(i: int, m: Mapping[str, Any]) -> str:
    status = m.get("status") or "failed"
    return f"{m.get('name') or f'child {i}'}: {m.get('reason') or status}"


def settle(doc: ResultDocument, meta: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A merged document's final status, its error and its named child failures, as written.

    failed when a child failed (each is named in "failures", its rows kept) or when nothing was merged
    (a document without rows is never complete); else complete or interrupted as merged_status says
    (a signalled stop before any row stays interrupted, with the children named in its error)."""
    doc.error = None  # a part's (settled before the whole) is not the whole's
    doc.status = merged_status([str(m.get("status") or "failed") for m in meta])
    doc.children_failed = child_failures(meta)
    if doc.children_failed:
        doc.error = "; ".join(f"{f['child']} failed ({f['reason']})" for f in doc.children_failed)
    elif not doc.rows:
        doc.status = "interrupted" if doc.status == "interrupted" else "failed"
        doc.error = "no rows were merged: " + "; ".join(_child_text(i, m) for i, m in enumerate(meta))
    return doc.to_json()


def empty_merge(scenario: str, what: str, meta: Sequence[Mapping[str, Any]], config: Mapping[str, Any],
                env: Mapping[str, Any]) -> dict[str, Any]:
    """The document of a run none of whose children (`what`: "process", "shard") wrote a result:
    failed, with every child named with how it ended."""
    doc = ResultDocument(scenario, "failed", dict(config), dict(env))
    settle(doc, meta)
    doc.error = f"no {what} wrote a result: " + "; ".join(_child_text(i, m) for i, m in enumerate(meta))
    return doc.to_json()


def _gpu_index(device: Any, env: Mapping[str, Any]) -> int | None:
    text = str(device or "")
    if not text.startswith("cuda"):
        return None
    _, _, index = text.partition(":")
    if index.isdigit():
        return int(index)
    value = env.get("gpu_index")
    return int(value) if isinstance(value, int) else 0



def row_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One-process order: Python CPU rows, Python GPU rows, then other drivers; op, variant, mode within."""
    from dbench.ops.variants import MODES, VARIANT_NAMES

    ops: dict[Any, int] = {}
    seen: dict[Any, int] = {}
    modes: dict[Any, int] = {m: i for i, m in enumerate(MODES)}
    for r in rows:
        ops.setdefault(r.get("op"), len(ops))
        seen.setdefault(r.get("variant"), len(seen))
        modes.setdefault(r.get("mode"), len(modes))
    variant_index: dict[Any, int] = {v: i for i, v in enumerate(VARIANT_NAMES)}

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        driver = r.get("driver") or "python"
        group = 0 if driver == "python" and r.get("metric") == "cpu_us" else 1 if driver == "python" else 2
        v = r.get("variant")
        return group, ops[r.get("op")], variant_index.get(v, len(variant_index) + seen[v]), modes[r.get("mode")]

    return sorted(rows, key=key)  # stable: metrics of one case keep their order


def merge_results(
    docs: Sequence[Mapping[str, Any] | None],
    meta: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One result document from the shards' documents (docs[i] is shard i's; None when it wrote none).

    meta[i] may carry what only the parent knows about shard i (variants,
    seconds, status, command, log, result...): it goes into env["shards"][i],
    and its "status" (complete / interrupted / failed) wins over the document's.
    See the module docstring for the merge rules.
    """
    meta = list(meta or [])
    meta += [{}] * (len(docs) - len(meta))
    present = [d for d in docs if d is not None]
    if not present:
        raise ValueError("no shard wrote a result")
    rows: list[dict[str, Any]] = []
    duplicates: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    shard_info: list[dict[str, Any]] = []
    warnings: list[str] = []
    ended: list[dict[str, Any]] = []  # how each shard ended (settle() names the failed ones)
    for i, doc in enumerate(docs):
        m = dict(meta[i])
        status = _shard_status(m.pop("status", None), doc)
        ended.append({"name": f"shard {i}", **m, "status": status})
        env = dict(doc.get("env", {})) if doc else {}
        device = m.pop("device", None) or env.get("device")
        doc_rows = list(doc.get("rows", [])) if doc else []
        for row in _shard_rows(i, doc_rows, device, env, warnings):
            ident = row_identity(row)
            if ident in seen:
                duplicates.append({**row, "duplicate_baseline": True})
            else:
                seen.add(ident)
                rows.append(row)
        shard_info.append(_shard_info(i, doc, m, doc_rows, device, env, status))
    first = present[0]
    return settle(ResultDocument(
        scenario=first.get("scenario"),
        status=None,
        config=_merged_config(first, present, shard_info, len(docs)),
        env=_merged_env(first, shard_info, warnings),
        speed_probe=first.get("speed_probe"),  # each shard's median: env.shards[i].speed_probe
        rows=row_order(rows),
        duplicate_baseline_rows=duplicates,
    ), ended)


def _shard_status(given: str | None, doc: Mapping[str, Any] | None) -> str:
    """How a shard ended: the parent's word, else its document's status, else failed."""
    if given:
        return given
    if doc is None:
        return "failed"
    return str(doc["status"]) if doc.get("status") in ("complete", "failed") else "interrupted"


def _shard_rows(i: int, doc_rows: list[dict[str, Any]], device: Any, env: Mapping[str, Any],
                warnings: list[str]) -> list[dict[str, Any]]:
    """Shard i's rows, each marked with its shard and GPU; a Python row whose baseline that shard did
    not run is warned about (its delta has no pair)."""
    labels = {case_label(r) for r in doc_rows if (r.get("driver") or "python") == "python"}
    rows = []
    for row in doc_rows:
        row = {**row, "shard": i, "gpu_index": _gpu_index(row.get("device", device), env)}
        if (row.get("driver") or "python") == "python" and row.get("baseline") and row["baseline"] not in labels:
            warnings.append(f"shard {i}: {row['op']}/{row['variant']}/{row['mode']} is paired with "
                            f"{row['baseline']}, which that shard did not run")
        rows.append(row)
    return rows


def _shard_info(i: int, doc: Mapping[str, Any] | None, m: dict[str, Any], doc_rows: list[dict[str, Any]],
                device: Any, env: Mapping[str, Any], status: str) -> dict[str, Any]:
    """env["shards"][i]: where shard i ran, what it timed and how it ended (the parent's meta kept)."""
    config = dict(doc.get("config", {})) if doc else {}
    variants = m.pop("variants", None) or list(dict.fromkeys(
        r.get("variant") for r in doc_rows if (r.get("driver") or "python") == "python"))
    return {
        "shard": i,
        "gpu_index": _gpu_index(device, env),
        "device": device,
        "variants": list(variants),
        "seconds": m.pop("seconds", config.get("seconds")),  # the child process, start to exit
        "rounds_seconds": config.get("seconds"),  # its CPU pass (config.seconds of a one-process run)
        "status": status,
        "rounds_done": config.get("rounds_done"),
        "gpu_rounds_done": config.get("gpu_rounds_done"),
        "stop_reason": config.get("stop_reason"),
        "pinned_cpu": env.get("pinned_cpu"),
        "speed_probe": (doc.get("speed_probe") or {}).get("median") if doc else None,
        **m,
    }


def _merged_config(first: Mapping[str, Any], present: Sequence[Mapping[str, Any]],
                   shard_info: Sequence[Mapping[str, Any]], shards: int) -> dict[str, Any]:
    """The first shard's config, with the rounds every shard finished and the longest CPU pass."""
    def shard_min(key: str) -> Any:
        values = [v for v in (d.get("config", {}).get(key) for d in present) if v is not None]
        return min(values) if values else None

    config = dict(first.get("config", {}))
    config.update(rounds_done=shard_min("rounds_done"), shards=shards)
    if "gpu_rounds_done" in config:
        config["gpu_rounds_done"] = shard_min("gpu_rounds_done")
    seconds = [s["rounds_seconds"] for s in shard_info if isinstance(s["rounds_seconds"], (int, float))]
    if seconds:
        config["seconds"] = max(seconds)
    if "stop_reason" in config:
        reasons = dict.fromkeys(d.get("config", {}).get("stop_reason") for d in present)
        config["stop_reason"] = "; ".join(str(r) for r in reasons)
    return config


def _merged_env(first: Mapping[str, Any], shard_info: Sequence[Mapping[str, Any]],
                warnings: list[str]) -> dict[str, Any]:
    """The first shard's env, with every shard's devices and cores, and the shards themselves."""
    env = dict(first.get("env", {}))
    devices = list(dict.fromkeys(s["device"] for s in shard_info if s["device"]))
    env["device"] = ",".join(devices) if devices else env.get("device")
    cores = sorted({c for s in shard_info for c in (s["pinned_cpu"] or [])})
    env["pinned_cpu"] = cores or None
    if len({s["gpu_index"] for s in shard_info if s["gpu_index"] is not None}) > 1:
        env["gpu_index"] = None
    env["shards"] = shard_info
    if warnings:
        env["shard_warnings"] = warnings
    return env
