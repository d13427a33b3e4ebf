"""Strings of a result file reach terminals, job summaries and PR comments: op and variant names,
a FAILED row's reason (a user op's exception text), the environment, the A/B sides. Every output
escapes them (bench/io/escape.py): no terminal sequence, no HTML, no added markdown table row, no
spreadsheet formula, no rich markup; ordinary names unchanged (the golden files: test_report.py,
test_gate.py)."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dbench.bench.io import escape
from dbench.analysis import compare, gate, history, kernels, report, sinks
from dbench.analysis.console import finished
from dbench.analysis.table import print_ab_table

GOLDEN = Path(__file__).resolve().parent / "golden"

TITLE, CLEAR, IMG = "\x1b]0;pwned\x07", "\x1b[2J", "<img src=x onerror=alert(1)>"
ROWS, FORMULA, MARKUP = "a|b\n| fake | row |", '=HYPERLINK("http://x","y")', "[bold red]fake[/]"
BIDI, CSI8 = "\u202etxt.exe", "\x9b31m"
OP = f"muladd{TITLE}{CLEAR}{IMG}{BIDI}"
VARIANT = f"v{ROWS}{MARKUP}"
REASON = f"boom{TITLE}{CLEAR}{IMG}{ROWS}{MARKUP}{CSI8} see [here](http://evil) ![x](http://evil/t.png)"

# Anything a terminal acts on: C0 but a line's end, DEL, C1, bidi controls, separators.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours, on a colour console


def hostile(doc: dict[str, Any], fail: str = "triton_op") -> dict[str, Any]:
    """`doc` with its first op, two variants, the environment and a FAILED row's reason from an attacker."""
    doc = copy.deepcopy(doc)
    first = doc["rows"][0]["op"]
    renames = {first: OP, "define_impl": VARIANT, "cpp_autograd": FORMULA, "custom_op": "@SUM(1)"}
    for row in doc["rows"]:
        row["op"] = OP if row["op"] == first else row["op"]
        row["variant"] = renames.get(row["variant"], row["variant"])
        if isinstance(row.get("baseline"), str):
            row["baseline"] = "/".join(renames.get(p, p) for p in row["baseline"].split("/"))
    failing = next(r for r in doc["rows"] if r["variant"] == fail and r["metric"] == "cpu_us")
    failing.update(status="failed", reason=REASON, median=None, q1=None, q3=None, ci_low=None, ci_high=None,
                   samples=[], delta_median=None, delta_ci_low=None, delta_ci_high=None, ratio_median=None,
                   ratio_ci_low=None, ratio_ci_high=None)
    doc["env"].update(gpu_name=f"GPU{TITLE}{IMG}", cpu_model=f"CPU{CLEAR}{ROWS}", torch=f"2.x{BIDI}{MARKUP}")
    return doc


def clean(text: str, *, colours: bool = False, html: bool = False) -> None:
    """No raw terminal control (after rich's own colours); in markdown (`html`) no tag either."""
    shown = SGR.sub("", text) if colours else text
    assert not RAW.search(shown), repr(RAW.search(shown))
    assert "\x1b" not in shown and "\x07" not in shown
    assert not html or "<img" not in shown


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


@pytest.fixture()
def docs(tmp_path: Path) -> dict[str, Any]:
    plain = json.loads((GOLDEN / "boundary-small-a.json").read_text())
    path = tmp_path / f"run{CLEAR}.json"
    path.write_text(json.dumps(hostile(plain)))
    return {"plain": plain, "evil": hostile(plain), "path": path}


def test_markdown_report_escapes_everything_and_adds_no_row(docs: dict[str, Any]) -> None:
    text = report.report([docs["path"]], "md")
    clean(text, html=True)
    plain = sinks.render("md", [(docs["plain"], "run.json")])
    assert len(table_rows(text)) == len(table_rows(plain))  # no fake rows
    assert not any(line.startswith("| fake") for line in text.splitlines())
    # the pipes a table has are its own: every row of a table splits into as many cells as its header
    for block in re.split(r"\n\n", text):
        lines = table_rows(block)
        if lines:
            widths = {len(re.split(r"(?<!\\)\|", line)) for line in lines}
            assert len(widths) == 1, lines
    # shown as written: `\\x1b` is markdown for the text \x1b
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\\\\x1b]0;pwned\\\\x07" in text
    assert not re.search(r"(?<!\\)\]\(|(?<!\\)!\[", text)  # no link, no image
    assert "\\\\u202etxt.exe" in text


def test_text_and_json_reports_have_no_terminal_control(docs: dict[str, Any]) -> None:
    for fmt in ("txt", "json", "bencher", "github-action-benchmark"):
        text = report.report([docs["path"]], fmt)
        clean(text)
    text = report.report([docs["path"]], "txt")
    assert MARKUP in text  # shown as written, not interpreted
    assert "| fake | row |" not in text.replace("\\n", "\n").splitlines()


def test_csv_report_has_no_formula_and_no_control(docs: dict[str, Any]) -> None:
    text = report.report([docs["path"]], "csv")
    clean(text)
    cells = [c for row in csv.reader(io.StringIO(text)) for c in row]
    for cell in cells:
        if cell[:1] in ("=", "+", "-", "@"):
            float(cell)  # only numbers may start so
    assert "'" + FORMULA in cells
    assert any(re.fullmatch(r"-\d+\.\d+", c) for c in cells)  # negative numbers stay numbers


def test_gate_md_and_txt_escape_rows_notes_and_sources(docs: dict[str, Any]) -> None:
    base = hostile(json.loads((GOLDEN / "gate-base.json").read_text()), fail="cpp")
    new = hostile(json.loads((GOLDEN / "gate-new.json").read_text()), fail="cpp")
    result = gate.gate([new], [base], new_sources=[f"new{TITLE}.json"], baseline_sources=[f"b{IMG}.json"])
    md = gate.render(result, "md")
    clean(md, html=True)
    plain_base, plain_new = (json.loads((GOLDEN / f"gate-{n}.json").read_text()) for n in ("base", "new"))
    plain = gate.render(gate.gate([plain_new], [plain_base]), "md")
    assert len(table_rows(md)) == len(table_rows(plain))
    assert "&lt;img" in md and "\\\\x1b]0;pwned\\\\x07" in md
    txt = gate.render(result, "txt")
    clean(txt)
    assert "\\x1b[2J" in txt and MARKUP in txt


def test_the_run_console_shows_names_and_reasons_inert(docs: dict[str, Any], tmp_path: Path) -> None:
    doc = docs["evil"]
    doc["config"]["stop_reason"] = f"rounds{CLEAR}"
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="truecolor", width=300)
    finished(None, doc, tmp_path / f"r{TITLE}.json", tmp_path / "r.csv", console, figures=False)
    text = buffer.getvalue()
    clean(text, colours=True)
    plain = SGR.sub("", text)
    assert MARKUP in plain and "\\x1b]0;pwned\\x07" in plain


def test_ab_table_and_kernel_tables_escape_their_strings() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="truecolor", width=300)
    row = {"op": OP, "variant": VARIANT, "mode": "inference", "metric": f"cpu_us{CLEAR}", "unit": "us",
           "median": 2.0, "a_median": 1.0, "ab_ratio_median": 2.0, "ab_pairs": 3, "status": "ok", "a_status": "ok"}
    print_ab_table({"ab": {"a": f"build:{TITLE}", "b": f"env:X={MARKUP}", "pairs": 3}, "rows": [row]}, console)
    import pandas as pd

    grid = pd.DataFrame({f"col{IMG}": [f"1.0{CLEAR}"]}, index=pd.Index([VARIANT], name=f"n{TITLE}"))
    kernels._print_grids(console, [(f"heading{TITLE}", grid)], {"env": {"device": f"cpu{CSI8}"}})
    text = buffer.getvalue()
    clean(text, colours=True)
    assert MARKUP in SGR.sub("", text)


def test_compare_and_history_escape(docs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.json"
    other.write_text(docs["path"].read_text())
    compare.main([str(docs["path"]), str(other)])
    clean(capsys.readouterr().out)
    nights = [history.Night(f"n{i}{TITLE}.json", f"t{IMG}", f"g{CLEAR}", f"torch{ROWS}") for i in range(3)]
    rows = [history.RowHistory(history.Series(f"{OP}/{VARIANT}", "cpu_us", [0, 1, 2], [1.0, 1.0, 2.0]), 0.01,
                               [history.ChangePoint(2, 1.0, 1.0, 1.0, 2.0)])]
    md, txt = history.render(rows, nights, "md"), history.render(rows, nights, "txt")
    clean(md, html=True)
    clean(txt)
    assert len(table_rows(md)) == 3  # header, rule, one row


@pytest.mark.parametrize("name", ["custom_op", "fwd_bwd", "muladd", "cpu_us/floor", "[1.163, 1.218]", "6.34 ~",
                                  "~ noisy (23 of 38 CPU rows): IQR above 10%", "n/a raw: no grad_fn", "±5.0%"])
def test_ordinary_text_is_unchanged(name: str) -> None:
    assert escape.terminal(name) == escape.markdown(name) == escape.rich(name) == escape.csv_cell(name) == name


def test_the_escapes() -> None:
    assert escape.terminal("a\x1b[2Jb\n\u202e") == "a\\x1b[2Jb\\n\\u202e"
    assert escape.markdown("a|b <i> &amp; `x` *y* _z_ [l](u) ![i](s) [d]: u ~~s~~") == (
        "a\\|b &lt;i&gt; &amp;amp; \\`x\\` \\*y\\* \\_z\\_ [l\\](u) \\![i\\](s) [d\\]: u \\~\\~s\\~\\~")
    assert escape.code("a`b|c") == "``a`b\\|c``"
    assert escape.csv_cell("=1+1") == "'=1+1" and escape.csv_cell("-1.5") == "-1.5" and escape.csv_cell(-2) == -2
    assert escape.rich("[red]x[/red]") == "\\[red]x\\[/red]"


def test_a_live_failed_line_shows_a_users_exception_text_escaped() -> None:
    # The run prints a case's FAILED reason (a user op's exception text) as it happens, on a terminal.
    import io

    from rich.console import Console

    from dbench.bench.harness.progress import RichProgress

    out = io.StringIO()
    RichProgress(Console(file=out, force_terminal=True, color_system="standard")).failed(
        "myop/custom_op/inference", "boom \x1b]0;pwned\x07\x1b[2J [bold]x[/bold]", "opcheck")
    text = out.getvalue()
    assert "\x07" not in text and "\x1b]" not in text and "\x1b[2J" not in text  # rich's own colours stay
    assert "\\x1b]0;pwned\\x07" in text and "[bold]x[/bold]" in text
