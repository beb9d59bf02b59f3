"""Terminal tables readable at 80 columns: labels wrap, numbers are never cut.

Every verb builds its ``rich.table.Table`` as before and prints ``fit(table)``. ``fit`` sets
each column to fold (wrap) its text instead of truncating it with "…", and gives a column
holding numbers a minimum width of its widest number, so a figure such as "83.14 PFLOP/s" is
always printed whole (labels and names give way instead).
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

#: A number, optionally signed, with thousands separators, decimals, an exponent, and a short
#: unit or suffix ("96.62 PFLOP/s", "0.44x", "1,073,741,824", "12.2%", "-", "$1,234").
NUMBER = re.compile(
    r"^\s*(?:-|[-+$]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?\s*[%x]?\s*[A-Za-zµ/%]{0,10})\s*$"
)


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return ""


def is_number(text: str) -> bool:
    """True for a cell that shows one figure (possibly with its unit)."""
    return bool(text.strip()) and bool(NUMBER.match(text))


def fit(table: Table, width: int | None = None) -> Table:
    """Make ``table`` fold long labels and keep every number whole; returns it.

    A column holding numbers gets a fixed width: its widest figure with its unit (and room for
    a short header when the terminal allows); only the label columns then shrink, folding their
    text. When the figures alone exceed ``width`` (default: the terminal's), a unit may go to
    the next line, but the digits never split.
    """
    if width is None:
        from rich.console import Console

        width = Console().width
    whole: list[int] = []
    digits: list[int] = []
    roomy: list[int] = []
    for column in table.columns:
        column.overflow = "fold"
        numbers = [t.strip() for t in (_plain(c) for c in column._cells) if is_number(t)]
        w = max((cell_len(t) for t in numbers), default=0)
        whole.append(w)
        digits.append(max((cell_len(t.split()[0]) for t in numbers), default=0))
        header = cell_len(_plain(column.header))
        roomy.append(max(w, min(header, 12)) if w else 0)
    labels = sum(1 for w in whole if not w)
    budget = width - (3 * len(table.columns) + 1) - 8 * labels
    for choice in (roomy, whole, digits):
        if sum(choice) <= budget:
            break
    for column, w in zip(table.columns, choice, strict=True):
        if w:
            column.width = max(column.width or 0, w)
    return table
