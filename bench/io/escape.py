"""Text from result files made safe to show: the one place every rendering (the sinks, the console
tables, gate, compare, history) passes strings of a document through before output.

A result file is data anyone can write: an op's or variant's name, a FAILED row's reason (a user
op's exception text), the environment, the A/B sides, a file name. Shown raw, such a string could
drive the terminal (ESC sequences retitle the window or clear the screen; a carriage return or a
bidi override rewrites what the line seems to say) or, in markdown (a PR comment, a job summary),
add table rows, HTML, images and links. Four renderings, by where the text goes:

* `terminal`: every control character (C0, DEL, C1; newlines and tabs too: one cell, one line)
  and the bidi controls (U+202A-U+202E, U+2066-U+2069, and the marks U+200E, U+200F, U+061C) and
  line/paragraph separators are shown as Python-style escapes: ESC as `\\x1b`, a newline as `\\n`,
  U+202E as `\\u202e`. Escapes rather than U+FFFD, so the reader sees what the file held. A
  backslash stays as it is, so a literal `\\x1b` in a name looks the same as an ESC: harmless.
* `rich`: `terminal`, then rich's markup escaped (text printed by a rich console, or put in its tables).
* `markdown`: `terminal`, then `\\`, `|`, `` ` `` and `*` backslash-escaped, `&`, `<`, `>` as
  entities (no HTML, no autolinks), and the marks that only act in some places escaped only there,
  so that ordinary names (`fwd_bwd`, `[1.16, 1.22]`, the `~` of a noisy cell) read unchanged:
  `_` not between two letters or digits, `~` touching a non-space, `!` before `[`, and `]` before
  `(`, `[` or `:` (inline links, images, references, definitions).
* `csv_cell`: `terminal`, and a text cell starting with `=`, `+`, `-` or `@` (a formula to a
  spreadsheet) prefixed with `'`, unless the whole cell reads as a number.

Stdlib only: rich is imported by `rich` when called."""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

Render = Callable[[Any], Any]  # one of terminal, rich, markdown, csv_cell

_BIDI_AND_SEPARATORS = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(code: int) -> str:
    char = chr(code)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_TERMINAL = str.maketrans({code: _shown(code) for code in
                           [*range(0x00, 0x20), *range(0x7F, 0xA0), *_BIDI_AND_SEPARATORS]})


def terminal(text: Any) -> str:
    """`text` (str() of it) with no character that acts on a terminal: each shown as an escape."""
    return str(text).translate(_TERMINAL)


def rich(text: Any) -> str:
    """`terminal(text)` with rich's markup escaped: for console.print and rich Table cells."""
    from rich.markup import escape

    return escape(terminal(text))


_MARKDOWN_ALWAYS = str.maketrans({"\\": "\\\\", "|": "\\|", "`": "\\`", "*": "\\*",
                                  "&": "&amp;", "<": "&lt;", ">": "&gt;"})
_MARKDOWN_PLACED = re.compile(
    r"(?<![^\W_])_|_(?![^\W_])"  # _ that is not inside a word (intraword _ is never emphasis)
    r"|~(?=\S)|(?<=\S)~"  # ~ that could open or close a strikethrough
    r"|!(?=\[)"  # an image: ![...]
    r"|\](?=[(\[:])")  # a link, reference or link definition: [...](, [...][, [...]:


def markdown(text: Any) -> str:
    """`text` as literal text of one markdown line or table cell (GitHub flavour)."""
    return _MARKDOWN_PLACED.sub(lambda m: "\\" + m.group(), terminal(text).translate(_MARKDOWN_ALWAYS))


def code(text: Any) -> str:
    """`text` as a markdown code span: fenced by more backticks than it holds (CommonMark), and on
    one line; a `|` escaped, as GitHub tables split cells on it even in code."""
    shown = terminal(text).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def csv_cell(value: Any) -> Any:
    """A CSV cell: text made `terminal`-safe and kept from being a spreadsheet formula; numbers and
    other values as they are."""
    if not isinstance(value, str):
        return value
    shown = terminal(value)
    if shown[:1] in ("=", "+", "-", "@"):
        try:
            float(shown)
        except ValueError:
            return "'" + shown
    return shown


def rows(cells: Sequence[Sequence[Any]], render: Render) -> list[list[Any]]:
    """Every cell of a table (lists of cells) through `render` (terminal, rich, markdown)."""
    return [[render(c) for c in row] for row in cells]


def frame(grid: Any, render: Render) -> Any:
    """A copy of a pandas frame with its index, columns, their names and its text cells through
    `render`; numbers stay numbers."""
    shown = grid.apply(lambda column: column.map(lambda v: render(v) if isinstance(v, str) else v))
    shown.index = [render(i) if isinstance(i, str) else i for i in grid.index]
    shown.columns = [render(c) if isinstance(c, str) else c for c in grid.columns]
    shown.index.name = None if grid.index.name is None else render(grid.index.name)
    shown.columns.name = None if grid.columns.name is None else render(grid.columns.name)
    return shown


def table(cells: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str) -> str:
    """A tabulate table of text cells: `fmt` "md" (GitHub markdown) or "txt" (plain, for a terminal),
    every cell and heading escaped for it."""
    from tabulate import tabulate

    render: Render = markdown if fmt == "md" else terminal
    return tabulate(rows(cells, render), [render(h) for h in headers],
                    tablefmt="github" if fmt == "md" else "simple", disable_numparse=True)
