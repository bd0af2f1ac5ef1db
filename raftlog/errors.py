"""The root of raftlog's typed error hierarchy.

Every error the core raises derives from :class:`RaftlogError`; the API layer maps each concrete class to
an HTTP status and a stable ``error_code`` in exactly one table (``api/errors.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TypeVar, dataclass_transform

_E = TypeVar("_E", bound=BaseException)


class RaftlogError(Exception):
    """Base of every raftlog error."""

    # The message of a ``@with_fields`` error: a ``str.format`` template over its fields.
    template: ClassVar[str] = ""

    def __post_init__(self) -> None:
        super().__init__(self.describe())

    def describe(self) -> str:
        """The message of a ``@with_fields`` error; a class whose words need more than ``template``
        overrides this."""
        return self.template.format_map(vars(self))


@dataclass_transform(eq_default=False)
def with_fields(cls: type[_E]) -> type[_E]:
    """Declares an error by its fields, once: the annotated names become its constructor's parameters (in
    order) and its attributes, and its message is ``describe()`` (its ``template`` filled in with them).
    Equality, hash and repr stay Exception's (identity; the message)."""
    return dataclass(eq=False, repr=False)(cls)


class InvariantViolation(RaftlogError):
    """A broken internal invariant: a bug, never an expected condition. Always raised, never stripped."""


def check(condition: bool, message: str) -> None:
    """Fail loudly when an invariant does not hold (unlike ``assert``, survives ``python -O``)."""
    if not condition:
        raise InvariantViolation(message)
