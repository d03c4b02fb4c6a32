"""Terminal output of the command line: aligned tables with a legend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]], legend: str = "") -> str:
    """A plain-text table with aligned columns, and an optional legend line under it."""
    cells = [list(map(str, header)), *[list(map(str, row)) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if legend:
        lines.append(legend)
    return "\n".join(lines)
