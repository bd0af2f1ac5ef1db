"""``Closing``: the base of storage objects a ``with`` block closes (a log, its views and readers, a
directory lock)."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """``with`` returns the object itself and calls its :meth:`close` on the way out, however the block
    ends. Subclasses implement ``close``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
