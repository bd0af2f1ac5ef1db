"""Which peers a hub lets in by what their code announces (``MuxHub``'s ``gate``).

Each side of a handshake may announce the feature levels its code supports (``wire``: ``levels`` in HELLO
and CHALLENGE, bound into the transcript). Once authenticated, the hub asks the gate's ``admit(peer,
announced)`` whether to carry Raft traffic with that peer: ``announced`` is None for a peer that announced
nothing (a node of release 0.1.0), and a reason string keeps the peer out (its connection is closed
before any group hears of it, and dialed again on the usual back-off). The rule itself is the caller's
(``partitions.features.kept_out``): this module only records, for health and the operator, what each peer
last announced and why a peer is kept out. ``MuxHub.recheck`` asks it again for every connection (the
cluster's levels rose).

Thread-safe: judged on the hub's thread, read from any.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Announced = Mapping[str, int] | None
Admit = Callable[[str, Announced], str | None]


@dataclass(frozen=True, slots=True)
class KeptOut:
    """A peer this hub refused at its last handshake, and why."""

    reason: str
    since_s: float  # wall-clock seconds of the first refusal in a row
    refusals: int  # in a row, since it was last let in


class LevelGate:
    def __init__(self, levels: Mapping[str, int] | None = None, admit: Admit | None = None) -> None:
        """``levels``: what this node announces (None: nothing, as release 0.1.0); ``admit``: the rule
        (None: every authenticated peer is let in)."""
        self.levels = None if levels is None else dict(levels)
        self._admit = admit
        self._lock = threading.Lock()
        self._announced: dict[str, Announced] = {}
        self._kept_out: dict[str, KeptOut] = {}

    def judge(self, peer_id: str, announced: Announced) -> str | None:
        """Why ``peer_id``, having announced ``announced``, is kept out (None: let in); recorded."""
        reason = None if self._admit is None else self._admit(peer_id, announced)
        with self._lock:
            self._announced[peer_id] = None if announced is None else dict(announced)
            if reason is None:
                self._kept_out.pop(peer_id, None)
            else:
                previous = self._kept_out.get(peer_id)
                since = time.time() if previous is None else previous.since_s
                count = 1 if previous is None else previous.refusals + 1
                self._kept_out[peer_id] = KeptOut(reason, since, count)
        return reason

    def kept_out(self) -> dict[str, KeptOut]:
        """The peers refused at their last handshake."""
        with self._lock:
            return dict(self._kept_out)

    def refused(self, peer_id: str) -> str | None:
        """Why ``peer_id`` was refused at its last handshake (None: it was not)."""
        with self._lock:
            kept_out = self._kept_out.get(peer_id)
        return None if kept_out is None else kept_out.reason

    def announced(self, peer_id: str) -> tuple[bool, Announced]:
        """(whether ``peer_id`` ever completed a handshake here, what it announced at its last)."""
        with self._lock:
            return peer_id in self._announced, self._announced.get(peer_id)
