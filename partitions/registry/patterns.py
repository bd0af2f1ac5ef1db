"""The regular expressions of JSON schemas (``pattern``, ``patternProperties``), matched with RE2 (pure).

A schema's patterns are a client's text, matched against records' strings and property names: with
Python's ``re`` a pattern such as ``(a+)+$`` backtracks exponentially on ``aaaa...!`` while holding the
GIL, which would freeze the node that checks the record (a leader validating a topic's records, the HTTP
door encoding one, a registration comparing schemas). RE2 matches in time linear in the text, as the
group regex subscriptions do (``groups.consumer.topic_regex``). What RE2 cannot express (backreferences,
lookaround) is refused when the schema is registered, with a clear message; ECMA 262's other syntax
reads the same.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from partitions.regex import RegexRefused, compile_re2

PATTERNS_KEPT = 1024  # compiled patterns kept (one schema's, many schemas')


class UnsupportedPattern(ValueError):
    """A pattern RE2 does not take."""


@functools.lru_cache(maxsize=PATTERNS_KEPT)
def compiled(pattern: str) -> Any:
    """The compiled pattern (UnsupportedPattern naming it and why)."""
    try:
        return compile_re2(pattern, chars_max=None)
    except RegexRefused as refused:
        raise UnsupportedPattern(
            f"pattern {pattern!r} is not supported: {refused.reason} (patterns are matched in linear time, "
            "with RE2: no backreferences or lookaround)"
        ) from None


def is_regex(pattern: str) -> bool:
    """Whether the pattern is a regular expression at all (Python's reading: compiled, never matched)."""
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def search(pattern: str, text: str) -> bool:
    return compiled(pattern).search(text) is not None


def schema_patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` name in a schema document, however deep."""
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                yield pattern
            named = node.get("patternProperties")
            if isinstance(named, dict):
                yield from (name for name in named if isinstance(name, str))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
