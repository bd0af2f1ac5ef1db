"""The names users give things: topics, consumer groups and consumer instances (pure).

One check per kind, each complete: the whole name is matched (a regular expression's ``$`` also matches
before a final newline, so ``"nl\\n"`` once passed as a topic name), and every refusal says which
character or limit is at fault. The HTTP edge checks every name once as it enters; the controller checks
topic names again when it applies a creation.

- Topic names: 1 to 200 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``. A topic's name is part of its
  partitions' directory names (``<name>-<partition>.<topic_id>``, ``TopicMetadata.group_id``), which must
  stay within a file name's 255 bytes and the log manager's 249 whatever the partition and topic id: 200
  leaves 49 bytes for them (Kafka allows 249 because its directories add only ``-<partition>``).
- Topic names starting with ``__`` are reserved for the cluster's own topics (``__consumer_groups``,
  Kafka's ``__consumer_offsets``): users cannot create them or subscribe to them. The cluster's own
  creation path does not go through the user edge; topics of such names created before the rule still
  exist and are served.
- User names: as group names, and without ``:`` (HTTP Basic's separator).
- Transactional ids (Kafka's ``transactional.id``): text as group names, up to 512 bytes (Kafka Streams
  makes them of its application id, itself a group name, and a UUID).
- Consumer group and consumer instance names: 1 to 255 bytes of UTF-8 text without control or format
  characters (Unicode categories Cc, Cf, Zl, Zp: newlines, tabs, NUL, DEL, zero-width and bidirectional
  marks), so that ``"billing\\n"`` cannot become a group beside ``"billing"`` that looks the same.
"""

from __future__ import annotations

import re
import unicodedata
import zlib

from partitions.errors import InvalidName, ReservedName

TOPIC_NAME_BYTES_MAX = 200
GROUP_NAME_BYTES_MAX = 255
INSTANCE_NAME_BYTES_MAX = 255
USER_NAME_BYTES_MAX = 255
# Kafka Streams names its producers' ids after the application (a consumer group name) and a UUID
TRANSACTIONAL_ID_BYTES_MAX = 512
RESERVED_TOPIC_PREFIX = "__"
GROUPS_TOPIC = "__consumer_groups"  # the consumer groups' table: a group's coordinator leads its partition
# the transactional ids' table: a transactional id's coordinator leads its partition (Kafka's
# __transaction_state)
TRANSACTIONS_TOPIC = "__transactions"
SCHEMAS_TOPIC = "__schemas"  # the schema registry's table (Confluent's _schemas), one partition
# the topics the cluster keeps for itself
INTERNAL_TOPICS = frozenset({GROUPS_TOPIC, TRANSACTIONS_TOPIC, SCHEMAS_TOPIC})
_TOPIC_CHARACTERS = re.compile(r"[A-Za-z0-9._-]+")
_TOPIC_CHARACTER = re.compile(r"[A-Za-z0-9._-]")
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "a format character",
                       "Zl": "a line separator", "Zp": "a paragraph separator"}  # fmt: skip


def check_topic_name(name: object, field: str = "topic name") -> str:
    """``name`` if it can name a topic, else ``InvalidName`` saying why."""
    if not isinstance(name, str):
        raise InvalidName(field, name, "must be a string")
    if not name:
        raise InvalidName(field, name, "must not be empty")
    if len(name) > TOPIC_NAME_BYTES_MAX:
        raise InvalidName(field, name, f"is {len(name)} characters long; at most {TOPIC_NAME_BYTES_MAX}")
    if not _TOPIC_CHARACTERS.fullmatch(name):
        index, character = next((i, c) for i, c in enumerate(name) if not _TOPIC_CHARACTER.fullmatch(c))
        raise InvalidName(
            field, name, f"character {character!r} at index {index} is not allowed; use [A-Za-z0-9._-]"
        )
    if name in (".", ".."):
        raise InvalidName(field, name, "'.' and '..' are not topic names")
    return name


def is_reserved_topic(name: str) -> bool:
    """Names kept for the cluster's own topics."""
    return name.startswith(RESERVED_TOPIC_PREFIX)


def check_user_topic_name(name: object, field: str = "topic name") -> str:
    """``check_topic_name``, and ``ReservedName`` for the names kept for the cluster's own topics: what a
    user may create or subscribe to."""
    checked = check_topic_name(name, field)
    if is_reserved_topic(checked):
        raise ReservedName(
            field,
            checked,
            f"names starting with {RESERVED_TOPIC_PREFIX!r} are reserved for the cluster's own topics",
        )
    return checked


def check_group_name(name: object, field: str = "group") -> str:
    """``name`` if it can name a consumer group, else ``InvalidName`` saying why."""
    return _check_text(name, field, GROUP_NAME_BYTES_MAX)


def check_instance_name(name: object, field: str = "instance") -> str:
    """``name`` if it can name a consumer instance, else ``InvalidName`` saying why."""
    return _check_text(name, field, INSTANCE_NAME_BYTES_MAX)


def check_transactional_id(name: object, field: str = "transactional id") -> str:
    """``name`` if it can name a transactional producer, else ``InvalidName`` saying why."""
    return _check_text(name, field, TRANSACTIONAL_ID_BYTES_MAX)


def check_user_name(name: object, field: str = "user") -> str:
    """``name`` if it can name a user (text as a group's, and no ``:``, which separates the name from the
    password in HTTP Basic), else ``InvalidName`` saying why."""
    text = _check_text(name, field, USER_NAME_BYTES_MAX)
    if ":" in text:
        raise InvalidName(
            field, text, "must not contain ':' (HTTP Basic separates name and password with it)"
        )
    return text


def _check_text(name: object, field: str, bytes_max: int) -> str:
    if not isinstance(name, str):
        raise InvalidName(field, name, "must be a string")
    if not name:
        raise InvalidName(field, name, "must not be empty")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:
        reason = f"not UTF-8 text (an unpaired surrogate at index {exc.start})"
        raise InvalidName(field, name, reason) from None
    if size > bytes_max:
        raise InvalidName(field, name, f"is {size} bytes of UTF-8; at most {bytes_max}")
    for index, character in enumerate(name):
        kind = _REFUSED_CATEGORIES.get(unicodedata.category(character))
        if kind is not None:
            raise InvalidName(
                field, name, f"{kind} (U+{ord(character):04X}) at index {index} is not allowed in a name"
            )
    return name


_NUMBERED = re.compile(r"\D*?(\d{1,9})")


def broker_id(node_id: str) -> int:
    """A node's Kafka broker id (Kafka's are int32): the number a node id ends in (``n1`` -> 1), else a
    hash of the id. Every node computes the same for every other."""
    numbered = _NUMBERED.fullmatch(node_id)
    if numbered:
        return int(numbered.group(1))
    return zlib.crc32(node_id.encode()) & 0x7FFFFFFF


def is_internal(topic: str) -> bool:
    """Topics the cluster keeps for itself (hidden from ``GET /topics``)."""
    return topic in INTERNAL_TOPICS
