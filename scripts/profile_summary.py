"""Summarise a py-spy ``--format raw`` profile (collapsed stacks, one ``frame;frame;... count`` a line)
as text: samples per stage of the produce path, the top functions by own time and by total time.

Usage: ``python scripts/profile_summary.py PROFILE.raw [--top 25] [--title TEXT]``

Record one with ``py-spy record -p PID -d 15 -r 100 -f raw -o PROFILE.raw`` while ``raftlog bench perf``
loads the cluster. A sample is charged to the innermost frame that names a stage, so JSON encoding done
inside the HTTP handler counts as JSON and an fsync inside the Raft journal counts as fsync."""

from __future__ import annotations

import argparse
import re
from collections import Counter

# (stage, pattern on a frame "function (file:line)"), innermost match wins; order breaks ties in a frame.
STAGES = [
    ("fsync", re.compile(r"\bfsync\b|fdatasync|Segment\.flush |FileJournal\.sync ")),
    ("JSON", re.compile(r"\((json/|api/schemas\.py)")),
    ("encode (batch, msgpack, crc)", re.compile(r"raftlog/storage/batch\.py|msgpack|crc32c")),
    (
        "apply (state machine, log append)",
        re.compile(r"partitions/state_machine\.py|raftlog/storage/(log|segment|index)\.py"),
    ),
    ("Raft (consensus, journal, transport)", re.compile(r"raftlog/consensus/|pysyncobj/")),
    (
        "routing / forwarding",
        re.compile(
            r"api/routing\.py|aiohttp/client|partitions/(cluster|peer_client|routing|cluster_view)\.py"
        ),
    ),
    (
        "HTTP parse / write (aiohttp server)",
        re.compile(
            r"aiohttp/(web_protocol|http_parser|streams|web_request|web_response|http_writer|helpers|multidict|web_app|web_urldispatcher)"
        ),
    ),
    ("API handler (api/app.py)", re.compile(r"api/app\.py")),
    ("membership (gossip)", re.compile(r"membership/")),
    ("event loop", re.compile(r"asyncio/|uvloop")),
    ("threads (other)", re.compile(r"threading\.py")),
]


def parse(path: str) -> list[tuple[list[str], int]]:
    stacks = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            stack, _, count = line.rpartition(" ")
            if stack and count.isdigit():
                stacks.append((stack.split(";"), int(count)))
    return stacks


IDLE = re.compile(r"^(EpollSelector\.select|PollPoller\.poll|Condition\.wait|Event\.wait|select|poll) ")


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, pattern in STAGES:
            if pattern.search(frame):
                return name
    return "other"


def _name(frame: str) -> str:
    return re.sub(r":\d+\)$", ")", frame)


def summarise(stacks: list[tuple[list[str], int]], top: int, title: str) -> str:
    idle = sum(count for frames, count in stacks if IDLE.match(frames[-1]))
    stacks = [(frames, count) for frames, count in stacks if not IDLE.match(frames[-1])]
    total = sum(count for _, count in stacks) or 1
    stages: Counter[str] = Counter()
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for frames, count in stacks:
        stages[stage_of(frames)] += count
        own[_name(frames[-1])] += count
        for name in {_name(frame) for frame in frames}:
            inclusive[name] += count
    lines = [
        title,
        f"{total} busy samples (percentages below are of these); {idle} more samples were threads"
        " waiting in select/poll/Condition.wait, left out",
        "",
        "By stage (innermost frame that names a stage):",
    ]
    lines += [f"  {100 * n / total:5.1f}%  {stage}" for stage, n in stages.most_common()]
    lines += ["", f"Top {top} functions by own time:"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in own.most_common(top)]
    lines += ["", f"Top {top} functions by total time (own + callees):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    print(summarise(parse(args.profile), args.top, args.title or args.profile))


if __name__ == "__main__":
    main()
