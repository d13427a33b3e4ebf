"""The command line of each shard's child process: the parent's arguments, rewritten."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
RUN_PY = REPO_ROOT / "run.py"
# Options the parent sets for every child (a value follows each); the child's
# own --device, --variants, --out and --pin-offset replace any the user gave.
REWRITTEN_OPTIONS = ("--gpus", "--shards", "--device", "--variants", "--out", "--pin-offset")
# Options only the parent acts on (option -> number of values): a child runs one process of the
# scenario and never gates, repeats or pairs itself.
PARENT_ONLY_OPTIONS: dict[str, int] = {"--processes": 1, "--ab": 2, "--pairs": 1, "--baseline": 1}


def _resolve_option(name: str, options: Iterable[str]) -> str:
    """argparse's view of an option token: exact, else a unique prefix of a known option."""
    options = list(options)
    if name in options or not options:
        return name
    matches = [o for o in options if o.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def strip_options(argv: Sequence[str], drop: Mapping[str, int], options: Iterable[str] = ()) -> list[str]:
    """`argv` without the options in `drop` (option -> how many values follow it; the
    ``--opt=value`` form carries its one value), abbreviations resolved against `options`."""
    options = list(options)
    kept: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":  # everything after is positional: keep as is
            kept.extend(tokens[i:])
            break
        if token.startswith("--"):
            name, eq, _ = token.partition("=")
            resolved = _resolve_option(name, options)
            if resolved in drop:
                i += 1 if eq else 1 + drop[resolved]
                continue
        kept.append(token)
        i += 1
    return kept


def has_option(argv: Sequence[str], option: str, options: Iterable[str] = ()) -> bool:
    options = list(options)
    return any(_resolve_option(t.partition("=")[0], options) == option for t in argv if t.startswith("--"))


def shard_command(
    argv: Sequence[str],
    shard_index: int,
    n: int,
    device: str,
    out_dir: Path | str,
    variants: Sequence[str],
    *,
    cpp: bool = True,
    options: Iterable[str] = (),
    python: str = sys.executable,
    script: Path | str = RUN_PY,
) -> list[str]:
    """The command line of child `shard_index` of `n`: the parent's arguments, with
    --gpus/--shards (and the parent-only options) removed and --device, --variants, --out,
    --pin-offset replaced (``--opt value`` and ``--opt=value`` forms, and abbreviations when
    `options` lists the parser's option strings); ``--no-cpp`` added when `cpp` is False."""
    if not 0 <= shard_index < n:
        raise ValueError(f"shard index {shard_index} out of range for {n} shards")
    options = list(options)
    kept = strip_options(argv, {**{o: 1 for o in REWRITTEN_OPTIONS}, **PARENT_ONLY_OPTIONS}, options)
    if not cpp and not has_option(kept, "--no-cpp", options):
        kept.append("--no-cpp")
    return [python, str(script), *kept, "--device", device, "--variants", ",".join(variants),
            "--out", str(out_dir), "--pin-offset", str(shard_index)]
