"""Terminal output readable at 80 columns: numbers never cut, never split from their units,
names never split mid-word.

Every verb builds its ``rich.table.Table`` as before and prints ``fit(table)``; free text (an
estimate's assumptions, notes) goes through ``prose(text)``. ``fit`` tries, in turn, until the
table fits the width (default: the terminal's, ``COLUMNS`` when not a terminal):

1. the table as it is;
2. cells wrapped at spaces only (a figure and its unit, "83.14 PFLOP/s", is one unbreakable
   cell), full headers, then headers abbreviated from ``HEADER_ABBREVIATIONS``;
3. long names also broken after a separator (``trn3-gen2-`` / ``ultraserver``,
   ``peak_flops.`` / ``bf16``; never inside a number such as ``3.1``), then without the
   table's outer border;
4. vertical: one block per row, each column's header beside its value.

Text is wrapped here, not by rich, so rich never folds a word; each column is given exactly
the width its wrapped text needs.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from rich.cells import cell_len
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

#: A number, optionally signed, with thousands separators, decimals, an exponent, and a short
#: unit or suffix ("96.62 PFLOP/s", "0.44x", "1,073,741,824", "12.2%", "-", "$1,234").
NUMBER = re.compile(
    r"^\s*(?:-|[-+$]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?\s*[%x]?\s*[A-Za-zµ/%]{0,10})\s*$"
)

#: Shorter headers, used only when the full ones do not fit (one list for every verb).
HEADER_ABBREVIATIONS: dict[str, str] = {
    "tokens/s/chip": "tok/s/chip",
    "tokens/s": "tok/s",
    "memory/chip": "mem/chip",
    "J/token": "J/tok",
    "step time": "step",
    "measured": "meas.",
    "latency (us)": "lat. (us)",
    "bandwidth (us)": "bw (us)",
    "algbw (GB/s)": "algbw GB/s",
    "busbw (GB/s)": "busbw GB/s",
    "max error": "max err",
    "instructions": "instr.",
    "utilisation": "util.",
}

#: After these a long name may break (``-`` ``_`` ``/`` ``[`` ``]`` ``)`` always; ``.`` and ``,``
#: not between digits, so "3.1" and "1,024" stay whole; never after ``:``, so "dma:8" does).
_BREAK_ALWAYS = "-_/)[]"
_BREAK_NOT_IN_NUMBER = ".,"


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return ""


def _text(cell: Any) -> Text:
    if isinstance(cell, Text):
        return cell.copy()
    return Text.from_markup(cell) if isinstance(cell, str) else Text(str(cell))


def is_number(text: str) -> bool:
    """True for a cell that shows one figure (possibly with its unit)."""
    return bool(text.strip()) and bool(NUMBER.match(text))


# --- wrapping ----------------------------------------------------------------------------------


def _tokens(line: str, names: bool) -> list[tuple[int, int]]:
    """Unbreakable pieces of one line as (start, end) offsets, each with its trailing spaces.
    ``names``: also break after separators inside long names."""
    out = []
    for m in re.finditer(r"\S+\s*", line):
        start, end = (0 if not out else m.start()), m.end()  # leading spaces: an indent
        if names:
            cut = start
            for i in range(start, m.end() - 1):
                ch, nxt = line[i], line[i + 1]
                prev = line[i - 1] if i > start else ""
                if nxt.isspace():
                    break
                if ch in _BREAK_ALWAYS or (
                    ch in _BREAK_NOT_IN_NUMBER and not (prev.isdigit() and nxt.isdigit())
                ):
                    out.append((cut, i + 1))
                    cut = i + 1
            start = cut
        out.append((start, end))
    return out


def _glue_figures(line: str, toks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A figure and the unit after it ("671 TFLOP/s", "2,000 ms") become one piece."""
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(toks):
        s, e = toks[i]
        word = line[s:e].strip()  # "1," ends a clause: the next word is not its unit
        if i + 1 < len(toks) and re.fullmatch(r"[-+$~(]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?", word):
            ns, ne = toks[i + 1]
            unit = line[ns:ne].strip()
            spaced = e == ns and line[s:e] != line[s:e].rstrip()  # "671 TFLOP/s", not "dma:10"
            if unit and len(unit) <= 12 and not unit[0].isdigit() and spaced:
                out.append((s, ne))
                i += 2
                continue
        out.append((s, e))
        i += 1
    return out


def _pieces(text: str, number: bool, names: bool, glue: bool = True) -> list[list[tuple]]:
    """Per line of ``text``, its unbreakable pieces (a number cell is one piece per line)."""
    lines, out, offset = text.split("\n"), [], 0
    for line in lines:
        if number or not line.strip():
            toks = [(0, len(line))]
        else:
            toks = _tokens(line, names)
            if glue:
                toks = _glue_figures(line, toks)
        out.append([(offset + s, offset + e) for s, e in toks])
        offset += len(line) + 1
    return out


def _min_width(text: str, number: bool, names: bool) -> int:
    return max(
        (cell_len(text[s:e].rstrip()) for line in _pieces(text, number, names) for s, e in line),
        default=0,
    )


def _breaks(text: str, width: int, number: bool, names: bool, glue: bool = True) -> list:
    """(start, end) of each output line, greedy: as many pieces as fit in ``width``."""
    spans = []
    for line in _pieces(text, number, names, glue):
        if not line:
            spans.append(None)
            continue
        start, used = line[0][0], 0
        for s, e in line:
            need = cell_len(text[s:e].rstrip())
            if used and used + need > width:
                spans.append((start, s))
                start, used = s, 0
            used += cell_len(text[s:e])
        spans.append((start, line[-1][1]))
    return spans


def _wrap(cell: Any, width: int, number: bool, names: bool, glue: bool = True) -> Text:
    """The cell as a Text whose lines fit ``width`` (styles kept)."""
    text = _text(cell)
    plain = text.plain
    lines = []
    for span in _breaks(plain, width, number, names, glue):
        if span is None:
            lines.append(Text(""))
            continue
        piece = text[span[0] : span[1]]
        piece.rstrip()
        lines.append(piece)
    return Text("\n").join(lines)


class Prose:
    """Free text wrapped when printed, to the console's width (``prose``)."""

    def __init__(self, text: str | Text, style: str | None = None) -> None:
        self.text, self.style = text, style

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Text]:
        yield self.render(options.max_width)

    def render(self, width: int) -> Text:
        out = _wrap(self.text, max(width, 1), number=False, names=False, glue=True)
        if self.style:
            out.stylize(self.style)
        return out


def prose(text: str | Text, style: str | None = None) -> Prose:
    """A line of free text to print, wrapped at spaces to the console's width, a figure never
    split from its unit ("0.97 USD/chip-h"). ``text`` may hold rich markup."""
    return Prose(text, style)


# --- tables ------------------------------------------------------------------------------------


def _extra(table: Table, columns: int) -> int:
    """Border and padding columns of a table of ``columns`` columns."""
    _, right, _, left = table.padding
    pad = columns * (left + right)
    if not table.pad_edge:
        pad -= left + right
    if table.box:
        pad += columns - 1 + (2 if table.show_edge else 0)
    return pad


def _allocate(mins: list[int], natural: list[int], budget: int) -> list[int]:
    """Widths within ``budget``: every column at its natural width, then the widest column
    narrowed a character at a time (never below its minimum) until the table fits, so short
    columns stay whole and long text wraps."""
    widths = list(natural)
    excess = sum(widths) - budget
    while excess > 0:
        i = max(
            (j for j in range(len(widths)) if widths[j] > mins[j]),
            key=lambda j: widths[j],
        )
        widths[i] -= 1
        excess -= 1
    return widths


class Fitted:
    """A table laid out when printed, for the console's width (``fit``)."""

    def __init__(self, table: Table, width: int | None = None) -> None:
        self.table, self.width = table, width

    def __rich_console__(self, console: Any, options: Any) -> Iterator[RenderableType]:
        yield self.layout(self.width or options.max_width)

    def layout(self, width: int) -> RenderableType:
        """The table (a copy, laid out) as it fits ``width``."""
        table = copy.copy(self.table)
        table.columns = [copy.copy(c) for c in self.table.columns]
        for col in table.columns:
            col._cells = list(col._cells)
        return _layout(table, width)


def fit(table: Table, width: int | None = None) -> Fitted:
    """``table`` to print, laid out for the console's width (or ``width``) when printed
    (module docstring)."""
    return Fitted(table, width)


def _layout(table: Table, width: int) -> RenderableType:
    """``table`` laid out to fit ``width`` (module docstring), changed in place."""
    columns = table.columns
    if not columns or not all(
        isinstance(c, str | Text) for col in columns for c in (col.header, *col._cells)
    ):
        for col in columns:
            col.overflow = "fold"
        return table
    cells = [[_plain(c) for c in col._cells] for col in columns]
    numeric = [[is_number(t) for t in col] for col in cells]
    headers = [_plain(col.header) for col in columns]
    short = [HEADER_ABBREVIATIONS.get(h, h) for h in headers]
    budget = width - _extra(table, len(columns))

    def widest(i: int, hdrs: list[str], names: bool, natural: bool = False) -> int:
        def w(text: str, number: bool) -> int:
            if natural:
                return max((cell_len(line) for line in text.split("\n")), default=0)
            return _min_width(text, number, names)

        body = max((w(t, n) for t, n in zip(cells[i], numeric[i], strict=True)), default=0)
        return max(body, w(hdrs[i], False))

    natural = [widest(i, headers, False, natural=True) for i in range(len(columns))]
    if sum(natural) <= budget:
        for col in columns:
            col.overflow = "fold"
        return _title(table, sum(natural) + _extra(table, len(columns)))
    levels = ((headers, False, False), (short, False, False), (short, True, False))
    for hdrs, names, compact in (*levels, (short, True, True)):
        if compact:  # no outer border or outer padding: 4 more columns for the text
            table.show_edge, table.pad_edge = False, False
            budget = width - _extra(table, len(columns))
        mins = [widest(i, hdrs, names) for i in range(len(columns))]
        if sum(mins) > budget:
            continue
        nat = [max(natural[i], mins[i]) for i in range(len(columns))]
        widths = _allocate(mins, nat, budget)
        for i, col in enumerate(columns):
            col.header = _wrap(hdrs[i], widths[i], False, names)
            col._cells = [
                _wrap(c, widths[i], n, names) for c, n in zip(col._cells, numeric[i], strict=True)
            ]
            col.width = widths[i]
            col.min_width = None
            col.max_width = None
            col.overflow = "fold"
        return _title(table, sum(widths) + _extra(table, len(columns)))
    table.show_edge, table.pad_edge = True, True
    return _vertical(table, headers, width)


def _title(table: Table, width: int) -> Table:
    """The title wrapped here (a figure kept with its unit) to the table's own width, which
    is where rich puts it."""
    if isinstance(table.title, str | Text) and _plain(table.title):
        table.title = _wrap(table.title, max(width, 20), number=False, names=False, glue=True)
    return table


def _vertical(table: Table, headers: list[str], width: int) -> Table:
    """One block per row: each column's header beside its value (the last resort)."""
    out = Table(
        title=table.title,
        title_justify=table.title_justify,
        show_header=False,
        box=table.box,
        show_lines=False,
    )
    key_w = max(cell_len(h) for h in headers)
    value_w = max(8, width - _extra(out, 2) - key_w)
    out.add_column("", width=key_w, style="bold", overflow="fold")
    out.add_column("", width=value_w, overflow="fold")
    rows = len(table.columns[0]._cells)
    for r in range(rows):
        for i, col in enumerate(table.columns):
            cell = col._cells[r]
            number = is_number(_plain(cell))
            value = _wrap(cell, value_w, number, names=False)
            if max((cell_len(x) for x in value.plain.split("\n")), default=0) > value_w:
                value = _wrap(cell, value_w, number, names=True)
            out.add_row(
                _wrap(headers[i], key_w, False, False),
                value,
                end_section=(i == len(table.columns) - 1 and r < rows - 1),
            )
    return _title(out, key_w + value_w + _extra(out, 2))
