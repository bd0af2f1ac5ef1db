"""The one place where pysyncobj callbacks (on the driver thread) become asyncio results.

A :class:`CallbackBridge` belongs to one group and one event loop. ``pending()`` returns an asyncio future
and the plain callback to hand to the core; the callback may run on any thread (the driver thread, or the
caller's thread for QUEUE_FULL) and resolves the future with ``loop.call_soon_threadsafe``. Pending futures
are tracked so that closing the group fails them instead of leaving them hanging: a call already handed
to the core with ``OutcomeUnknown`` (a proposal may be in the log, and a new leader commits it after this
replica closed: answering "not done" let a client send the same record again and have it twice), a call
made after the close with ``GroupClosed`` (nothing was handed over: not done).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from raftlog.consensus.errors import GroupClosed, OutcomeUnknown
from raftlog.consensus.failures import SUCCESS, error_for

logger = logging.getLogger(__name__)

CoreCallback = Callable[[object, int], None]


class CallbackBridge:
    def __init__(
        self, group_id: str, loop: asyncio.AbstractEventLoop, leader_hint: Callable[[], str | None]
    ) -> None:
        self._group_id = group_id
        self._loop = loop
        self._leader_hint = leader_hint
        self._lock = threading.Lock()
        self._pending: dict[asyncio.Future[object], str] = {}  # each future's request
        self._closed_error: GroupClosed | None = None

    def pending(self, request: str = "proposal") -> tuple[asyncio.Future[object], CoreCallback]:
        """Call on the event loop thread."""
        future: asyncio.Future[object] = self._loop.create_future()
        with self._lock:
            if self._closed_error is not None:
                future.set_exception(self._closed_error)
                return future, _ignore
            self._pending[future] = request

        def callback(result: object, fail_reason: int) -> None:
            # The leader hint is read here, on the driver thread, when the failure happens.
            hint = self._leader_hint() if fail_reason != SUCCESS else None
            try:
                self._loop.call_soon_threadsafe(self._resolve, future, result, fail_reason, hint, request)
            except RuntimeError:
                logger.warning("group %s: event loop closed; dropping a %s result", self._group_id, request)

        return future, callback

    def _resolve(
        self, future: asyncio.Future[object], result: object, fail_reason: int, hint: str | None, request: str
    ) -> None:
        with self._lock:
            self._pending.pop(future, None)
        if future.done():
            return  # the caller gave up (timeout or cancellation) before the core answered
        if fail_reason == SUCCESS:
            future.set_result(result)
        else:
            future.set_exception(error_for(self._group_id, fail_reason, hint, request))

    def fail_all(self, error: GroupClosed) -> None:
        """Fail every pending future with ``OutcomeUnknown`` (its call was handed to the core, which may
        have appended it) and all later ones with ``error`` (any thread)."""
        with self._lock:
            self._closed_error = error
            pending, self._pending = self._pending, {}
        for future, request in pending.items():
            reason = f"the replica closed with the {request} in flight ({error})"
            unknown = OutcomeUnknown(self._group_id, reason)
            try:
                self._loop.call_soon_threadsafe(_fail, future, unknown)
            except RuntimeError:
                logger.warning("group %s: event loop closed; cannot fail a pending call", self._group_id)

    def forget(self, future: asyncio.Future[object]) -> None:
        with self._lock:
            self._pending.pop(future, None)


def _fail(future: asyncio.Future[object], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _ignore(result: object, fail_reason: int) -> None:
    """Callback for a future that was failed at creation."""


class LoopNotifier:
    """Runs ``callback`` on ``loop`` soon after ``notify()`` is called from any thread (e.g. a state
    machine's apply on the driver thread). Notifications coalesce: many calls before the loop gets to it
    run the callback once, so a busy apply path costs one ``call_soon_threadsafe`` per loop turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback
        self._lock = threading.Lock()
        self._scheduled = False

    def notify(self) -> None:
        with self._lock:
            if self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._run)
        except RuntimeError:
            logger.debug("event loop closed; notification dropped")

    def _run(self) -> None:
        with self._lock:
            self._scheduled = False
        self._callback()
