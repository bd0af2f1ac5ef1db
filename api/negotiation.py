"""Content negotiation for the route table (pure): which media type an answer takes from the request's
``Accept``, and which type its JSON (and its errors) are labelled with.

Every route offers its ``answer_type`` (client routes: Confluent's ``application/vnd.kafka.v2+json``),
the alternatives it lists, and ``application/json`` as a plain alias of any JSON type; a route answering
the v2 type also takes Kafka's embedded types (``.json.v2+json``, ``.binary.v2+json``) as aliases of it
and answers in the v2 type, so a client that sends one ``Accept`` on all its requests is served. An
``Accept`` header is read as RFC 9110 says: media ranges with q-values, ``type/*`` and ``*/*``; a range with
``q=0`` refuses that type. No header, or ``*/*``, takes the route's own type. Nothing acceptable: 406.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raftlog_contract import BINARY_V2, JSON_V2, KAFKA_V2, PLAIN_JSON

VND_KAFKA = "application/vnd.kafka."
_V2_ALIASES = (JSON_V2, BINARY_V2)  # taken by routes answering the v2 type, which answer in it


@dataclass(frozen=True, slots=True)
class MediaRange:
    type: str  # "application/vnd.kafka.v2+json", "application/*" or "*/*"
    q: float
    order: int

    def matches(self, media: str) -> bool:
        if self.type == "*/*":
            return True
        if self.type.endswith("/*"):
            return media.split("/", 1)[0] == self.type[:-2]
        return media == self.type

    @property
    def specificity(self) -> int:
        return 0 if self.type == "*/*" else 1 if self.type.endswith("/*") else 2


def parse_accept(accept: str | None) -> list[MediaRange]:
    """The ranges of an ``Accept`` header, best first (q, then specificity, then order); unparsable
    entries are skipped (as if absent), an unparsable q counts as 1."""
    ranges = []
    for order, part in enumerate((accept or "").split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        media = media.lower()
        if "/" not in media:
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(1.0, max(0.0, float(value)))
                except ValueError:
                    q = 1.0
        ranges.append(MediaRange(media, q, order))
    return sorted(ranges, key=lambda r: (-r.q, -r.specificity, r.order))


def is_json(media: str) -> bool:
    return media == PLAIN_JSON or media.endswith("+json")


def offered(answer_type: str, alternatives: Sequence[str]) -> tuple[str, ...]:
    """What a route can answer, its own type first; ``application/json`` whenever it answers JSON."""
    types = [answer_type, *alternatives]
    if answer_type == KAFKA_V2:
        types += [t for t in _V2_ALIASES if t not in types]
    if any(is_json(t) for t in types) and PLAIN_JSON not in types:
        types.append(PLAIN_JSON)
    return tuple(types)


def choose(accept: str | None, types: Sequence[str]) -> str | None:
    """The type to answer in, or None when the header accepts none of ``types``."""
    ranges = parse_accept(accept)
    if not ranges:
        return types[0]
    refused = {t for t in types for r in ranges if r.q == 0 and r.specificity == 2 and r.matches(t)}
    for media_range in ranges:
        if media_range.q == 0:
            continue
        for media in types:
            if media not in refused and media_range.matches(media):
                return media
    return None


def label(chosen: str, answer_type: str) -> str:
    """The type an answer is labelled with: the chosen one, except that an embedded type asked of a
    route answering the v2 type gets the v2 type (what the answer is)."""
    return answer_type if answer_type == KAFKA_V2 and chosen in _V2_ALIASES else chosen


def names(accept: str | None, media: str) -> bool:
    """The header asks for ``media`` by its exact name (not through ``*/*`` or ``type/*``)."""
    return any(r.type == media and r.q > 0 for r in parse_accept(accept))


def error_type(chosen: str | None) -> str:
    """Errors are JSON: labelled with the chosen type when that is one of Kafka's v2 JSON types (as the
    reference proxies do), else ``application/json`` (also for a columnar or batch answer, and a 406)."""
    return chosen if chosen is not None and chosen.startswith(VND_KAFKA) else PLAIN_JSON
