"""The root of raftlog's typed error hierarchy.

Every error the core raises derives from :class:`RaftlogError`; the API layer maps each concrete class to
an HTTP status and a stable ``error_code`` in exactly one table (``api/errors.py``).
"""

from __future__ import annotations


class RaftlogError(Exception):
    """Base of every raftlog error."""


class InvariantViolation(RaftlogError):
    """A broken internal invariant: a bug, never an expected condition. Always raised, never stripped."""


def check(condition: bool, message: str) -> None:
    """Fail loudly when an invariant does not hold (unlike ``assert``, survives ``python -O``)."""
    if not condition:
        raise InvariantViolation(message)
