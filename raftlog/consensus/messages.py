"""The Raft messages as this project's code reads and writes them: one ``TypedDict`` per type of
:data:`raftlog.consensus.wire_messages.MESSAGE_TYPES`, with the shapes its decoder restores (pure, types
only).

They are what pysyncobj sends and indexes (plain dicts keyed by ``type`` and the field names), so nothing
changes at run time: a message decoded from the wire is checked field by field against its schema there,
and from that point on the type checker holds every read and every message built in
``raftlog.consensus.core`` to these fields (a misspelt field or a wrong kind fails ``make typecheck``).
``tests/consensus/test_raft_messages.py`` holds these types to the wire's schema, so neither can change
without the other.
"""

# no ``from __future__ import annotations``: a TypedDict reads ``NotRequired`` from evaluated annotations
from typing import Literal, NotRequired, TypedDict

Entry = tuple[bytes, int, int]  # (command, index, term)
SnapshotChunk = None | Literal[False] | tuple[bytes, bool, bool]  # (data, is_first, is_last)


class RequestVote(TypedDict):
    type: Literal["request_vote"]
    term: int
    last_log_index: int
    last_log_term: int
    pre: NotRequired[bool]  # would you vote for me in ``term``? (nothing persisted)


class ResponseVote(TypedDict):
    type: Literal["response_vote"]
    term: int
    pre: NotRequired[bool]  # a pre-vote granted for ``term``


class AppendEntries(TypedDict):
    type: Literal["append_entries"]
    term: int
    commit_index: int
    entries: NotRequired[list[Entry]]
    prevLogIdx: NotRequired[int]
    prevLogTerm: NotRequired[int]
    transmission: NotRequired[Literal["start", "process", "finish"]]
    data: NotRequired[bytes]
    serialized: NotRequired[SnapshotChunk]
    quiesce: NotRequired[bool]  # a leader with nothing in flight asks its followers to go quiet


class NextNodeIdx(TypedDict):
    type: Literal["next_node_idx"]
    next_node_idx: int
    reset: bool
    success: bool
    term: NotRequired[int]  # the replier's term, so a stale acknowledgement can be ignored
    quiet: NotRequired[bool]  # the follower went quiet on a quiescing heartbeat


class ApplyCommand(TypedDict):
    type: Literal["apply_command"]
    command: bytes
    request_id: NotRequired[int]


class ApplyCommandResponse(TypedDict):
    type: Literal["apply_command_response"]
    request_id: int
    error: NotRequired[int]
    log_idx: NotRequired[int]
    log_term: NotRequired[int]


class TimeoutNow(TypedDict):
    type: Literal["timeout_now"]
    term: int


class Wake(TypedDict):
    type: Literal["wake"]
    term: int


class LeaderGone(TypedDict):
    type: Literal["leader_gone"]
    term: int


RaftMessage = (
    RequestVote
    | ResponseVote
    | AppendEntries
    | NextNodeIdx
    | ApplyCommand
    | ApplyCommandResponse
    | TimeoutNow
    | Wake
    | LeaderGone
)
MESSAGE_CLASSES: tuple[type, ...] = (
    RequestVote,
    ResponseVote,
    AppendEntries,
    NextNodeIdx,
    ApplyCommand,
    ApplyCommandResponse,
    TimeoutNow,
    Wake,
    LeaderGone,
)
