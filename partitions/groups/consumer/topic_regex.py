"""Regular expression subscriptions (KIP-848's ``SubscribedTopicRegex``) resolved as Kafka resolves them:
with RE2 (``partitions.regex``), in time linear in the names matched. A regex RE2 does not accept, or
longer than ``REGEX_CHARS_MAX``, is INVALID_REGULAR_EXPRESSION, as Kafka answers one RE2/J refuses.

As Kafka's ``GroupMetadataManager.refreshRegularExpressions``: every topic's whole name is matched
(internal topics never), then the matches the member's principal may not DESCRIBE are left out
(``filterTopicDescribeAuthorizedTopics``), off the coordinator's thread. Kafka resolves a group's regexes
with the context of the member whose heartbeat asked; here each member's regex is resolved with its own
principal, at its own heartbeats, so one member never sees a topic through another's ACLs.

``RegexResolver`` does the matching on one worker thread of its own (the event loop is never held: RE2
releases the GIL while it matches), within a time budget per resolution
(``--group-consumer-regex-budget-ms``): past it the regex is refused INVALID_REGULAR_EXPRESSION when
new, and a kept one keeps the topics it last resolved to. A principal has one resolution waiting or
running at a time (its others wait their turn, so one user's regexes cannot queue ahead of everyone's),
and results are cached per regex, viewer and version of the topics and ACLs (a bounded cache), so the
heartbeats of a stable group match nothing."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from partitions.groups.defaults import REGEX_RESOLVE_BUDGET_MS_DEFAULT
from partitions.groups.errors import InvalidRegularExpression
from partitions.regex import REGEX_CHARS_MAX, RegexRefused, compile_re2

RESOLVE_BUDGET_MS_DEFAULT = REGEX_RESOLVE_BUDGET_MS_DEFAULT
# (regex, viewer) results kept, the least recently used dropped, all of them when the topics or ACLs change:
# each at most the cluster's 10,000 topic names (80 KiB of references), 20 MiB at most
RESOLVED_CACHED_MAX = 256
BUDGET_CHECK_EVERY = 64  # names matched between two looks at the clock
NAMES_ON_LOOP_MAX = 64  # a heartbeat's subscribed names checked on the loop; more on the thread

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Viewer:
    """Whose DESCRIBE filters the topics a regex resolves to and a group's description shows: ``principal``
    (None: ACLs are not enforced, every topic is visible), ``describable`` (may it DESCRIBE this topic, by
    the ACLs the node held when asked; called on the resolver's thread, so it reads nothing that changes),
    ``acls`` the node's ACLs it decided by (a new object whenever they change)."""

    principal: str | None
    host: str
    describable: Callable[[str], bool]
    acls: object = None

    @property
    def key(self) -> Hashable:
        return (self.principal, self.host)


EVERYONE = Viewer(None, "", lambda topic: True)  # ACLs not enforced


def check_length(regex: str) -> None:
    """InvalidRegularExpression when longer than ``REGEX_CHARS_MAX`` (its message quotes the start)."""
    if len(regex) > REGEX_CHARS_MAX:
        raise InvalidRegularExpression(regex[:64] + "...", f"longer than {REGEX_CHARS_MAX} characters")


def compile_regex(regex: str) -> Any:
    """The RE2 program of a subscription's regex; InvalidRegularExpression when RE2 refuses it (a syntax it
    has not, as a backreference or a lookaround; a program over ``REGEX_MEMORY_BYTES``) or it is longer than
    ``REGEX_CHARS_MAX``."""
    check_length(regex)
    try:
        return compile_re2(regex)
    except RegexRefused as refused:
        raise InvalidRegularExpression(regex, refused.reason) from None


class BudgetSpent(Exception):
    """A resolution ran past its time budget (turned into InvalidRegularExpression or kept topics)."""


def resolve(
    regex: str, topics: Iterable[str], describable: Callable[[str], bool], over: Callable[[], bool]
) -> tuple[str, ...]:
    """The topics whose whole name ``regex`` matches (internal topics, ``__``, never) and that
    ``describable`` lets the viewer see, sorted. ``over`` is asked every few names: True ends the
    resolution (BudgetSpent). Pure but for the budget."""
    pattern = compile_regex(regex)
    matched = []
    for count, topic in enumerate(topics, 1):
        if count % BUDGET_CHECK_EVERY == 0 and over():
            raise BudgetSpent(regex)
        if not topic.startswith("__") and pattern.fullmatch(topic) is not None:
            matched.append(topic)
    visible = []
    for count, topic in enumerate(matched, 1):
        if count % BUDGET_CHECK_EVERY == 0 and over():
            raise BudgetSpent(regex)
        if describable(topic):
            visible.append(topic)
    return tuple(sorted(visible))


class _Versions:
    """A number for each new object seen (the topics' mapping, the ACLs' tuple: each replaced whole when
    it changes), holding only the latest."""

    def __init__(self) -> None:
        self._latest: object = object()
        self.number = 0

    def of(self, value: object) -> int:
        if value is not self._latest:
            self._latest, self.number = value, self.number + 1
        return self.number


class _Turn:
    """A principal's turn: its lock and how many of its resolutions hold or wait for it."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class RegexResolver:
    """Resolves regexes off the event loop, one at a time on a thread of its own, each within
    ``budget_ms``; event loop only (``resolve`` is a coroutine)."""

    def __init__(
        self,
        budget_ms: int = RESOLVE_BUDGET_MS_DEFAULT,
        clock: Callable[[], float] = time.monotonic,
        cached_max: int = RESOLVED_CACHED_MAX,
    ) -> None:
        self.budget_ms = budget_ms
        self._clock = clock
        self._cached_max = cached_max
        self._cache: OrderedDict[tuple[Hashable, ...], tuple[str, ...] | BudgetSpent] = OrderedDict()
        self._topics, self._acls = _Versions(), _Versions()
        self._versions = (0, 0)  # of the topics and the ACLs the cached results are of
        self._turns: dict[Hashable, _Turn] = {}  # the principals resolving or waiting to
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self.resolved = 0  # resolutions run (not answered from the cache)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
            self._thread = None

    async def resolve(self, regex: str, topics: Collection[str], viewer: Viewer) -> tuple[str, ...]:
        """The topics ``regex`` resolves to for ``viewer`` among ``topics`` (every topic there is: an object
        replaced whole when topics change). InvalidRegularExpression when RE2 refuses it; BudgetSpent
        when matching ran past the budget (remembered for these topics and ACLs)."""
        versions = (self._topics.of(topics), self._acls.of(viewer.acls))
        if versions != self._versions:  # every result kept is of older topics or ACLs
            self._cache.clear()
            self._versions = versions
        key = (regex, viewer.key, *versions)
        found = self._cached(key)
        if found is None:

            async def matched() -> tuple[str, ...] | BudgetSpent:
                again = self._cached(key)  # resolved while this waited its turn
                if again is not None:
                    return again
                result = await self._run(regex, list(topics), viewer)
                self._cache[key] = result
                while len(self._cache) > self._cached_max:
                    self._cache.popitem(last=False)
                return result

            found = await self._in_turn(viewer, matched)
        if isinstance(found, BudgetSpent):
            raise found
        return found

    async def hidden(self, names: Collection[str], viewer: Viewer) -> str | None:
        """The first of ``names`` (sorted) ``viewer`` may not DESCRIBE, None when it may every one: on the
        loop for a few, else on the thread in the principal's turn (a heartbeat may name any number)."""

        def first() -> str | None:
            return next((topic for topic in sorted(set(names)) if not viewer.describable(topic)), None)

        if len(names) <= NAMES_ON_LOOP_MAX:
            return first()

        async def checked() -> str | None:
            return await asyncio.get_running_loop().run_in_executor(self._executor(), first)

        return await self._in_turn(viewer, checked)

    async def _in_turn(self, viewer: Viewer, work: Callable[[], Awaitable[_T]]) -> _T:
        """``work`` once the principal's earlier work is done (one of its resolutions at a time)."""
        turn = self._turns.get(viewer.key)
        if turn is None:
            turn = self._turns[viewer.key] = _Turn()
        turn.users += 1
        try:
            async with turn.lock:
                return await work()
        finally:
            turn.users -= 1
            if turn.users == 0:
                del self._turns[viewer.key]

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="group-regex")
        return self._thread

    def _cached(self, key: tuple[Hashable, ...]) -> tuple[str, ...] | BudgetSpent | None:
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
        return found

    async def _run(self, regex: str, topics: list[str], viewer: Viewer) -> tuple[str, ...] | BudgetSpent:
        clock, budget_s = self._clock, self.budget_ms / 1000

        def work() -> tuple[str, ...] | BudgetSpent:
            deadline = clock() + budget_s  # from when the thread takes it up
            try:
                return resolve(regex, topics, viewer.describable, lambda: clock() > deadline)
            except BudgetSpent as spent:
                return spent

        self.resolved += 1
        return await asyncio.get_running_loop().run_in_executor(self._executor(), work)
