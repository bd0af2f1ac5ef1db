"""Regular expressions a caller sends, compiled as Kafka compiles them: with RE2 (Kafka's RE2/J; here
Google's own RE2 through its maintained binding ``google-re2``), whose matching takes time linear in the
text, never Python's backtracking ``re`` (``o(([a-z-]*)*)*!`` against one long name held a node's event
loop, and with it the GIL, for seconds). A consumer group's topic subscription (``SubscribedTopicRegex``,
``groups.consumer.topic_regex``) and a transaction listing's ``TransactionalIdPattern`` (KIP-1152,
``transactions.service.TransactionFilter``) and a JSON schema's ``pattern`` (``registry.patterns``) are
compiled here, each turning ``RegexRefused`` into its own API's error. Pure."""

from __future__ import annotations

from typing import Any

import re2

REGEX_CHARS_MAX = 1_000  # an alternation of dozens of whole names fits; RE2's work grows with it
REGEX_MEMORY_BYTES = 8 << 20  # RE2's max_mem (its default) for one regex: its program and its DFAs' cache


class RegexRefused(ValueError):
    """RE2 does not accept the regex (``reason`` says why), or it is longer than ``REGEX_CHARS_MAX``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_length(regex: str, chars_max: int = REGEX_CHARS_MAX) -> None:
    if len(regex) > chars_max:
        raise RegexRefused(f"longer than {chars_max} characters")


def compile_re2(regex: str, chars_max: int | None = REGEX_CHARS_MAX) -> Any:
    """The RE2 program of ``regex`` (a yes or no: its ``fullmatch``, Kafka's ``Matcher.matches``, or its
    ``search``); RegexRefused when RE2 refuses it (a syntax it has not, as a backreference or a lookaround;
    a program over ``REGEX_MEMORY_BYTES``) or it is longer than ``chars_max`` (None: a schema's pattern,
    bounded by the schema's own size)."""
    if chars_max is not None:
        check_length(regex, chars_max)
    options = re2.Options()
    options.max_mem = REGEX_MEMORY_BYTES
    options.log_errors = False
    options.never_capture = True  # a yes or no is all a match answers: RE2 keeps to its DFA
    try:
        return re2.compile(regex, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise RegexRefused(
            reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        ) from None
    finally:
        re2.purge()  # the binding keeps 128 programs (and their DFAs) in a cache of its own: only ours live
