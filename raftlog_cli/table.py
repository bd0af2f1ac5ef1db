"""The command line's tables: each declared once as its columns, a title with the format spec (alignment
and width) its cells share and the gap before it, so that a header and its rows cannot disagree."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Column:
    title: str
    spec: str = ""  # "<32": left in 32 characters, ">8": right in 8, "": as it is (a last column)
    gap: str = ""  # what stands before the column


def table(columns: Sequence[Column], rows: Iterable[Sequence[object]]) -> list[str]:
    """The header line, then a line per row (a cell per column, shown with ``str``)."""

    def line(cells: Sequence[object]) -> str:
        return "".join(f"{c.gap}{format(str(cell), c.spec)}" for c, cell in zip(columns, cells, strict=True))

    return [line([c.title for c in columns]), *(line(row) for row in rows)]
