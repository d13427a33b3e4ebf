"""Output formats are sinks: one module each in analysis/sinks/, found by name, rendering the tables
as data that analysis/report.py makes. A new format is one file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dbench.analysis import report, sinks, views
from dbench.bench.io.results import load_result

GOLDEN = Path(__file__).resolve().parent / "golden"
SMALL = GOLDEN / "boundary-small-a.json"


def test_every_sink_declares_its_format_and_the_report_offers_each() -> None:
    found = sinks.sinks()
    assert set(found) == {"md", "txt", "csv", "json", "bencher", "github-action-benchmark"}
    for fmt, module in found.items():
        assert module.FORMAT == fmt and isinstance(module.DESCRIPTION, str) and module.DESCRIPTION
    with pytest.raises(SystemExit):
        report.main([str(SMALL), "--format", "html"])


@pytest.mark.parametrize("fmt", sorted(sinks.formats()))
def test_every_sink_renders_a_result_and_one_without_rows(fmt: str) -> None:
    doc = load_result(SMALL)
    empty = {**doc, "rows": [], "status": "interrupted"}
    text = sinks.render(fmt, [(doc, SMALL.name), (empty, "empty.json")])
    assert isinstance(text, str) and text.strip()


def test_the_json_sink_has_the_tables_as_shown() -> None:
    doc = load_result(SMALL)
    (entry,) = json.loads(sinks.render("json", [(doc, SMALL.name)]))
    tables = views.document_tables(doc)
    assert entry["source"] == SMALL.name and entry["scenario"] == "boundary"
    assert [t["heading"] for t in entry["tables"]] == [t.heading for t in tables]
    first, grid = entry["tables"][0], tables[0].grid
    assert first["columns"] == list(grid.columns) and [r["name"] for r in first["rows"]] == list(grid.index)
    assert first["rows"][0]["cells"] == [str(v) for v in grid.iloc[0]]
    assert entry["notes"] == views.notes(doc)


def test_markdown_and_text_are_the_sinks(capsys: pytest.CaptureFixture[str]) -> None:
    doc = load_result(SMALL)
    assert report.markdown(doc, SMALL.name) == sinks.render("md", [(doc, SMALL.name)])
    assert report.text(doc, SMALL.name) == sinks.render("txt", [(doc, SMALL.name)])


def test_a_new_format_is_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "row_count.py").write_text(
        'FORMAT = "rows"\nDESCRIPTION = "how many rows each result has"\n\n'
        "def render(results):\n    return ''.join(f'{name}: {len(doc[\"rows\"])}\\n' for doc, name in results)\n")
    monkeypatch.setattr(sinks, "__path__", [*sinks.__path__, str(tmp_path)])
    sinks.sinks.cache_clear()
    try:
        assert "rows" in sinks.formats()
        assert report.report([SMALL], "rows") == f"{SMALL.name}: {len(load_result(SMALL)['rows'])}\n"
    finally:
        sinks.sinks.cache_clear()


def test_a_sink_module_without_its_contract_or_a_format_twice_is_refused(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    with pytest.raises(KeyError, match="unknown format 'html'"):
        sinks.render("html", [])
    monkeypatch.setattr(sinks, "__path__", [*sinks.__path__, str(tmp_path)])
    for text, says in (("FORMAT = 'x'\n", "needs FORMAT"), ("FORMAT = 'md'\ndef render(r):\n    return ''\n", "both")):
        for old in tmp_path.glob("*.py"):
            old.unlink()
        (tmp_path / "zz_broken.py").write_text(text)
        sys.modules.pop(f"{sinks.__name__}.zz_broken", None)
        sinks.sinks.cache_clear()
        try:
            with pytest.raises(TypeError, match=says):
                sinks.sinks()
        finally:
            sinks.sinks.cache_clear()
            sys.modules.pop(f"{sinks.__name__}.zz_broken", None)
