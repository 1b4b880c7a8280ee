"""lossgrad-demo's plain-text tables and numbers."""

from __future__ import annotations

from collections.abc import Sequence


def number(x: float) -> str:
    """Three significant digits; 0 as "0"."""
    return "0" if x == 0 else f"{x:.3g}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns under a header and a rule of dashes."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [
        "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines)
