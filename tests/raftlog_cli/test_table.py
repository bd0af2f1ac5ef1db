"""The command line's tables: a header and rows laid out by the same columns."""

from __future__ import annotations

import pytest

from raftlog_cli.groups import list_summary
from raftlog_cli.table import Column, table


def test_a_title_and_its_cells_share_the_column_s_width_alignment_and_gap() -> None:
    columns = (Column("NAME", "<6"), Column("N", ">4", " "), Column("NOTE", gap="  "))
    assert table(columns, [("a", 7, "x"), ("bbbbbbbb", 12345, "")]) == [
        "NAME      N  NOTE",
        "a         7  x",
        "bbbbbbbb 12345  ",
    ]


def test_a_row_with_a_cell_too_many_or_too_few_is_refused() -> None:
    with pytest.raises(ValueError):
        table((Column("A"), Column("B")), [("only one",)])


def test_the_groups_list_lines_up_under_its_header() -> None:
    row = {"group": "g", "state": "Stable", "door": None, "members": 3, "generation": 12, "assignor": ""}
    header, line = list_summary([row]).splitlines()
    assert header.index("MEMBERS") + len("MEMBERS") == line.index("3") + 1  # right-aligned numbers
    assert line.endswith("  -") and line[header.index("DOOR")] == "-"


def test_the_groups_list_names_each_groups_type() -> None:
    rows = [
        {"group": "c", "state": "Stable", "door": "kafka", "members": 1, "generation": 2,
         "assignor": "range", "group_type": "classic"},
        {"group": "s", "state": "Stable", "door": "kafka", "members": 2, "generation": 4,
         "assignor": "simple", "group_type": "share"},
    ]  # fmt: skip
    header, classic, share = list_summary(rows).splitlines()
    assert header.split()[:3] == ["GROUP", "TYPE", "STATE"]
    assert classic.split()[:2] == ["c", "classic"] and share.split()[:2] == ["s", "share"]
