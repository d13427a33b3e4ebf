"""The options of each shard's child process: the parent's resolved options with the shard's place."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dbench.bench.harness.options import RunOptions

REPO_ROOT = Path(__file__).resolve().parents[3]
RUN_PY = REPO_ROOT / "run.py"


def shard_options(options: RunOptions, shard_index: int, device: str, out_dir: Path, variants: Sequence[str],
                  cpp: bool) -> RunOptions:
    """Child `shard_index`'s options: its device, variants, folder and cores (--pin-offset: the
    shard's index), the C++ driver only where `cpp`, marked a shard's child (it times its share as
    given; the parent checked the whole selection), and none of what only the parent does."""
    return options.for_child(device=device, variants=tuple(variants), out=out_dir, pin_offset=shard_index,
                             no_cpp=options.no_cpp or not cpp, shard_child=True)
