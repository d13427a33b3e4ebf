"""The results notebook: committed without outputs, and it runs headless on the committed results."""

from __future__ import annotations

from pathlib import Path

import pytest

# The notebook runtime comes with the README's setup (requirements.txt); a machine whose Python
# was set up otherwise (a GPU host with its own image) skips these two tests, saying why.
nbformat = pytest.importorskip("nbformat",
                               reason="the notebook runtime (nbformat, nbclient, ipykernel) is not installed")
NotebookClient = pytest.importorskip("nbclient",
                                     reason="the notebook runtime (nbclient) is not installed").NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "analysis" / "notebooks" / "results.ipynb"


def test_notebook_is_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    nbformat.validate(nb)


def test_notebook_reads_named_files_not_folders() -> None:
    """A run of the suite may add files to a results folder: the notebook names the committed files it
    reads, so its tables cannot change with what a run wrote (it once counted 8 tables instead of 7)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "glob(" not in code and "iterdir(" not in code and "listdir(" not in code


@pytest.mark.slow
def test_notebook_runs_and_rebuilds_the_tables_and_figures() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()  # raises on any cell error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    tables = [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert len(images) == 12 and len(tables) == 10
    assert any("| custom_op_autograd " in o["data"]["text/markdown"] for o in tables)
    assert any("µs per extra argument" in o["data"]["text/markdown"] for o in tables)  # the args scenario's
