"""What ``raftlog log compare`` runs (``log_command`` declares it): whether a partition's replicas hold the
same bytes, read offline with ``raftlog.storage.compare`` (read-only, no lock: a running node's data too).

Given partition log directories (``DIR DIR [DIR...]``: one partition's replicas), or with ``--nodes``
nodes' data directories or a ``raftlog dev`` folder (``layout``), whose partitions held by two nodes or
more are compared, each by its directory's name (its Raft group id). A partition per paragraph (or a JSON
object per line with ``--json``, the summary then on stderr), then how many partitions and batches were
compared. Exit 0: every partition compared is identical where its replicas all hold offsets; 1: one
differs; 2: a usage error (a directory that is no log or cannot be read, nothing to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from raftlog.storage.compare import (
    BatchSeen,
    Comparison,
    DifferenceKind,
    Replica,
    Unreadable,
    compare_partition,
)
from raftlog_cli.log_files import LOGS_DIR, layout, log_directories

PREFIX = "raftlog log compare"


class _Usage(Exception):
    pass


@dataclass(slots=True)
class _Plan:
    """The partitions to compare, each as (replica name, log directory), and those held by one node."""

    partitions: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    lone: list[tuple[str, str]] = field(default_factory=list)  # (partition, the node holding it)


def _directories_plan(directories: list[str]) -> _Plan:
    if len(directories) < 2:
        raise _Usage(
            "give two partition log directories or more (one partition's replicas), or --nodes DATA_DIR..."
        )
    seen = [os.path.realpath(d) for d in directories]
    if len(set(seen)) < len(seen):
        raise _Usage("a directory is given twice")
    names = sorted({os.path.basename(os.path.normpath(d)) for d in directories})
    return _Plan([(" vs ".join(names), [(d, d) for d in directories])])


def _nodes_plan(roots: list[str]) -> _Plan:
    if not roots:
        raise _Usage("--nodes needs a node's data directory (or a raftlog dev folder), or more")
    nodes: list[str] = []
    for root in roots:
        found = layout(os.path.abspath(root))
        if found is None:
            raise _Usage(
                f"{root} is no node data directory (it holds no {LOGS_DIR}/) nor a folder of them "
                "(raftlog dev's)"
            )
        nodes.extend(n for n in found.nodes if os.path.realpath(n) not in map(os.path.realpath, nodes))
    basenames = [os.path.basename(n) for n in nodes]
    names = basenames if len(set(basenames)) == len(basenames) else nodes
    held: dict[str, list[tuple[str, str]]] = {}
    for name, node in zip(names, nodes, strict=True):
        try:
            directories = log_directories(node)
        except OSError as exc:
            raise _Usage(f"{node}: {exc.strerror or exc}") from None
        for directory in directories:
            held.setdefault(os.path.basename(directory), []).append((name, directory))
    plan = _Plan()
    for partition, replicas in sorted(held.items()):
        if len(replicas) > 1:
            plan.partitions.append((partition, replicas))
        else:
            plan.lone.append((partition, replicas[0][0]))
    if not plan.partitions:
        where = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} ({', '.join(names)})"
        raise _Usage(f"nothing to compare: no partition of {where} is held by more than one of them")
    return plan


def compare(args: argparse.Namespace) -> int:
    try:
        plan = _nodes_plan(args.paths) if args.nodes else _directories_plan(args.paths)
    except _Usage as exc:
        print(f"{PREFIX}: {exc}", file=sys.stderr)
        return 2
    out: TextIO = sys.stdout
    report = sys.stderr if args.json else out
    identical = differ = batches = 0
    unreadable: list[str] = []
    for partition, directories in plan.partitions:
        try:
            comparison = compare_partition(partition, directories)
        except Unreadable as exc:
            if not args.nodes:  # the one partition asked for
                print(f"{PREFIX}: {exc}", file=sys.stderr)
                return 2
            unreadable.append(partition)
            if args.json:
                out.write(
                    json.dumps({"partition": partition, "verdict": "unreadable", "error": str(exc)}) + "\n"
                )
            else:
                out.write(f"partition {partition}: UNREADABLE: {exc}\n\n")
            continue
        identical += comparison.identical
        differ += not comparison.identical
        batches += comparison.batches
        out.write(json.dumps(comparison_row(comparison)) + "\n" if args.json else describe(comparison) + "\n")
        out.flush()
    for partition, node in plan.lone:
        if args.json:
            row = {"partition": partition, "verdict": "not compared", "replicas": [node]}
            out.write(json.dumps(row) + "\n")
    compared = identical + differ
    report.write(
        f"{compared} partition{'s' if compared != 1 else ''} compared: {identical} identical, {differ} "
        f"differ{'s' if differ == 1 else ''}; {batches} batch{'es' if batches != 1 else ''} compared\n"
    )
    if plan.lone:
        names = ", ".join(f"{p} ({n})" for p, n in plan.lone)
        report.write(f"{len(plan.lone)} held by one node only, not compared: {names}\n")
    if unreadable:
        report.write(f"{len(unreadable)} could not be read: {', '.join(unreadable)}\n")
    return 1 if differ else 2 if unreadable else 0


# -- what is printed ---------------------------------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 'es' if word.endswith('ch') else 's'}"


def _batch_text(seen: BatchSeen | None) -> str:
    if seen is None:
        return "no batch there"
    h = seen.header
    crc = "" if seen.crc_valid else " (its bytes do not match it: damaged)"
    return (
        f"batch [{h.base_offset}, {h.end_offset}) at {os.path.basename(seen.path)} byte {seen.position}: "
        f"{h.record_count} records, {h.size_bytes} bytes, CRC {h.crc:#010x}{crc}, leader epoch {h.term}"
    )


def _replica_text(comparison: Comparison, replica: Replica) -> str:
    line = f"  {replica.name}  [{replica.log_start_offset}, {replica.end_offset})"
    behind = comparison.behind(replica)
    if behind:
        line += f"  behind by {_plural(behind, 'offset')}"
    if replica.level is not None and replica.level > 1:
        line += f"  (format level {replica.level})"
    return line


def describe(comparison: Comparison) -> str:
    """A paragraph: the verdict, each replica's offsets (and its batch at a difference), then notes."""
    c = comparison
    span = f"[{c.compared_from}, {c.compared_to})"
    difference = c.difference
    if difference is None:
        verdict = (
            f"identical, {_plural(c.batches, 'batch')} compared over offsets {span}"
            if c.batches
            else f"nothing to compare: no offset from {c.compared_from} on is held by two replicas"
        )
    elif difference.kind is DifferenceKind.DAMAGED:
        verdict = (
            f"DIFFERS at offset {difference.offset}: damaged, {difference.damage} "
            f"(`raftlog log verify DIR` lists the damage); {_plural(c.batches, 'batch')} identical "
            f"over {span}"
        )
    else:
        fields = ", ".join(difference.fields) if difference.fields else "no header field (the records)"
        verdict = (
            f"DIFFERS at offset {difference.offset} ({difference.kind.value}): {fields} "
            f"differ{'s' if len(difference.fields) <= 1 else ''}; {_plural(c.batches, 'batch')} identical "
            f"over {span}"
        )
    lines = [f"partition {c.partition}: {verdict}"]
    for index, replica in enumerate(c.replicas):
        line = _replica_text(c, replica)
        if difference is not None and difference.kind is not DifferenceKind.DAMAGED:
            line += "  " + _batch_text(difference.batches[index])
        lines.append(line)
    lines.extend(f"  note: {note}" for note in notes(c))
    return "\n".join(lines) + "\n"


def notes(comparison: Comparison) -> list[str]:
    """What an operator needs to read the verdict right: where the comparison started and why, what was
    left out, which replica may be on a running node."""
    c = comparison
    found = []
    if c.difference is not None and c.difference.kind is not DifferenceKind.DAMAGED:
        ends = {b.header.end_offset for b in c.difference.batches if b is not None}
        bases = {b.header.base_offset for b in c.difference.batches if b is not None}
        if len(ends) > 1 or len(bases) > 1:
            found.append(
                f"offsets diverge from {c.difference.offset}: the batches there start at "
                f"{sorted(bases)} and end at {sorted(ends)}"
            )
    starts = {r.log_start_offset for r in c.replicas}
    if len(starts) > 1:
        found.append(
            f"the log start differs (retention or DeleteRecords moved one replica's start before another's): "
            f"compared from offset {max(starts)}"
        )
    compacted = max(r.compacted_below for r in c.replicas)
    if compacted > max(starts):
        found.append(
            f"below offset {compacted} compaction rewrote batches on purpose (each replica compacts its own "
            "copy, at its own time): compared from there"
        )
    for r in c.replicas:
        if r.tail_bytes:
            found.append(
                f"{r.name}: {_plural(r.tail_bytes, 'byte')} after offset {r.end_offset} are no whole batch, "
                "not compared (a write in progress, or a torn tail that the node's recovery drops: "
                f"{r.tail_reason})"
            )
        if r.holder is not None:
            found.append(
                f"{r.name}: its lock file names {r.holder.describe()}: the node may be running; its files "
                "were compared as far as they held when read"
            )
    return found


def _batch_row(seen: BatchSeen | None) -> dict[str, Any] | None:
    if seen is None:
        return None
    h = seen.header
    return {
        "file": seen.path,
        "position": seen.position,
        "base_offset": h.base_offset,
        "end_offset": h.end_offset,
        "length": h.length,
        "crc": h.crc,
        "crc_valid": seen.crc_valid,
        "records_count": h.record_count,
        "last_offset_delta": h.last_offset_delta,
        "attributes": h.attributes,
        "leader_epoch": h.term,
        "first_timestamp": h.first_timestamp_ms,
        "max_timestamp": h.max_timestamp_ms,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.sequence,
    }


def comparison_row(comparison: Comparison) -> dict[str, Any]:
    c = comparison
    difference = c.difference
    return {
        "partition": c.partition,
        "verdict": "identical" if difference is None else "differs",
        "compared": {"from": c.compared_from, "to": c.compared_to, "batches": c.batches},
        "replicas": [
            {
                "name": r.name,
                "directory": r.directory,
                "log_start_offset": r.log_start_offset,
                "end_offset": r.end_offset,
                "behind_by": c.behind(r),
                "tail_bytes": r.tail_bytes,
                "compacted_below": r.compacted_below,
                "format_level": r.level,
                "lock_holder": None if r.holder is None else r.holder.describe(),
            }
            for r in c.replicas
        ],
        "difference": None
        if difference is None
        else {
            "offset": difference.offset,
            "kind": difference.kind.value,
            "fields": list(difference.fields),
            "damage": difference.damage or None,
            "batches": {r.name: _batch_row(b) for r, b in zip(c.replicas, difference.batches, strict=True)},
        },
        "notes": notes(c),
    }
