"""Human-readable units for tables (code and JSON stay SI)."""

from __future__ import annotations

_DECIMAL = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_SMALL = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))


def pretty(value: float | int | str | bool | None, unit: str = "", digits: int = 4) -> str:
    """``pretty(2.517e15, "FLOP/s") == "2.517 PFLOP/s"``; ``pretty(1.3e-6, "s") == "1.3 µs"``."""
    if value is None:
        return "-"
    if isinstance(value, bool | str):
        return str(value)
    if unit in ("", "elem", "elem/cycle", "cycles", "chips"):
        return f"{plain(value, digits)} {unit}".strip()
    if unit == "B" and value >= 1024 and value == int(value) and int(value) % 1024 == 0:
        for div, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
            if div <= value < 1024 * div and value % div == 0:
                return f"{value / div:g} {prefix}B"
    mag = abs(value)
    table = _DECIMAL if mag >= 1e3 else _SMALL
    for div, prefix in table:
        if mag >= div:
            return f"{value / div:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}"


def plain(value: float | int, digits: int = 4) -> str:
    """A count as people write it: ``digits`` significant digits, thousands separators, no
    exponent below 10^15 ("77,070", "0.1004", "1,024"); exponent notation beyond."""
    if isinstance(value, int) and abs(value) < 10**15:
        return f"{value:,}"
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0 or not 1e-4 <= abs(rounded) < 1e15:
        return f"{value:,.{digits}g}"
    if rounded.is_integer():
        return f"{rounded:,.0f}"
    return f"{rounded:,.{digits}g}" if abs(rounded) >= 1 else f"{rounded:.{digits}g}"


def usd(value: float | None, digits: int = 4) -> str:
    """Money: "$0.1004", "$1,234", "-" when there is no price."""
    if value is None:
        return "-"
    sign = "-" if value < 0 else ""
    return f"{sign}${plain(abs(value), digits)}"
