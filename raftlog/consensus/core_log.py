"""Log access by index: the Raft core's reads of its journal, which is addressed by position.

Plain functions of the journal (``owner``, the replica's node id, only names it in an error): the term or the
entry at an index (None where the journal does not hold it), the entries a message carries from an index
(``RaftCore``'s ``__getEntries``, pysyncobj's name), and an entry off the wire as the journal's tuple. A
position holding another index than the one asked for is a broken invariant.
"""

from __future__ import annotations

from typing import Any

from raftlog.consensus.journal import Entry, RaftJournal
from raftlog.errors import InvariantViolation


def as_entry(raw: Any) -> Entry:
    """An entry off the wire (tuple after pickle, list after msgpack) as the journal's tuple."""
    command, index, term = raw
    return bytes(command), int(index), int(term)


def term_at(journal: RaftJournal, index: int, owner: str) -> int | None:
    """The term of the entry at ``index``, None if the journal does not hold it (no command read)."""
    position = index - journal.first_index
    if not len(journal) or position < 0 or position >= len(journal):
        return None
    entry_index, term = journal.index_term(position)
    if entry_index != index:
        raise InvariantViolation(
            f"{owner}: journal position {position} holds index {entry_index}, expected {index}"
        )
    return term


def entry_at(journal: RaftJournal, index: int, owner: str) -> Entry | None:
    if not len(journal):
        return None
    position = index - journal.first_index
    if position < 0 or position >= len(journal):
        return None
    entry = journal[position]
    if entry[1] != index:
        raise InvariantViolation(
            f"{owner}: journal position {position} holds index {entry[1]}, expected {index}"
        )
    return entry


def entries(
    journal: RaftJournal,
    from_index: int | None,
    count: int | None,
    size_bytes_max: int | None,
    entries_max: int,
) -> list[Entry]:
    """The entries from ``from_index`` on (none if the journal starts after it): at most ``count``, and, with
    ``size_bytes_max`` (a message's), at most ``entries_max``, stopping after the entry that reaches that
    size."""
    first = journal.first_index
    if from_index is None or from_index < first:
        return []
    start = from_index - first
    end = len(journal) if count is None else min(len(journal), start + count)
    if size_bytes_max is None:
        return journal[start:end]
    end = min(end, start + entries_max)
    found = []
    size = 0
    for position in range(start, end):
        entry = journal[position]
        found.append(entry)
        size += len(entry[0])
        if size >= size_bytes_max:
            break
    return found
