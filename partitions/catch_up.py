"""Bringing a replica's log up to an installed snapshot by copying committed batches from a peer.

When the leader has compacted its Raft journal past what a follower holds, the follower receives the
partition's metadata snapshot instead of the entries; the records themselves live in the peers' segmented
logs. ``catch_up`` copies them, batch by batch, exactly as stored (offsets, terms and CRCs unchanged), from
whichever replica can serve them, over ``GET /replication/partitions/{topic}/{p}/batches``.

It runs inside ``StateMachine.restore`` on the consensus driver thread and therefore blocks that thread
while it copies; every request is bounded by ``timeout_s`` and ``max_bytes``.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from partitions.errors import ReplicaBehind
from raftlog.storage.batch import BatchFormatError, split_batches
from raftlog.storage.log import Log

log = logging.getLogger("raftlog.catch_up")

FETCH_BYTES_MAX = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PeerAnswer:
    data: bytes = b""
    log_start_offset: int | None = None  # set when the peer no longer has the offset asked for


Fetch = Callable[[str, int], PeerAnswer]  # (peer base URL, offset) -> answer


def http_fetch(topic: str, partition: int, credential: str, timeout_s: float = 10.0) -> Fetch:
    """A ``Fetch`` over the peers' HTTP API (blocking; urllib), presenting the cluster ``credential``
    (``operations.internal_credential``) that internal endpoints require."""

    def fetch(base_url: str, offset: int) -> PeerAnswer:
        path = (
            f"/replication/partitions/{urllib.parse.quote(topic, safe='')}/{partition}/batches"
            f"?offset={offset}&max_bytes={FETCH_BYTES_MAX}"
        )
        try:
            request = urllib.request.Request(
                base_url + path, headers={"Authorization": f"Bearer {credential}"}
            )
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                return PeerAnswer(answer.read())
        except urllib.error.HTTPError as error:
            if error.code == 416:
                body = json.loads(error.read() or b"{}")
                start = body.get("log_start_offset")
                if isinstance(start, int) and start > offset:
                    return PeerAnswer(log_start_offset=start)
            raise

    return fetch


def catch_up(log_: Log, target_offset: int, peers: Sequence[str], fetch: Fetch) -> None:
    """Append committed batches from ``peers`` until ``log_`` reaches ``target_offset``.

    If every peer's log starts after our end (retention moved on), the local log restarts at the earliest
    start a peer offers. Raises ``ReplicaBehind`` when no peer can make progress.
    """
    while log_.end_offset < target_offset:
        offset = log_.end_offset
        progressed = False
        for peer in peers:
            try:
                answer = fetch(peer, offset)
            except (OSError, ValueError) as error:  # URLError and HTTPError are OSErrors
                log.warning(
                    "%s: catch-up from %s at offset %d failed: %s", log_.directory, peer, offset, error
                )
                continue
            if answer.log_start_offset is not None:
                log.warning("%s: %s starts at %d, after our end %d: restarting the log there",
                            log_.directory, peer, answer.log_start_offset, offset)  # fmt: skip
                log_.truncate_fully_and_start_at(answer.log_start_offset)
                progressed = True
                break
            try:
                for batch in split_batches(answer.data):
                    if log_.end_offset >= target_offset:
                        break
                    log_.append_batch(batch, enforce_size_limit=False)
                    progressed = True
            except BatchFormatError as error:
                log.warning("%s: torn response from %s: %s", log_.directory, peer, error)
            if progressed:
                break
        if not progressed:
            raise ReplicaBehind(log_.end_offset, target_offset)
    log.info("%s: caught up to offset %d", log_.directory, log_.end_offset)
