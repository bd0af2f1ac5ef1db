"""Opening a group whose replicas talk over the node's ``MuxHub`` (plain node ids, no pysyncobj types
leak to callers)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from pysyncobj.node import Node as _PlainNodeId

from raftlog.consensus.config import CoreConfig
from raftlog.consensus.driver import Driver
from raftlog.consensus.file_journal import FileJournal
from raftlog.consensus.group import ReplicaGroup
from raftlog.consensus.hub import MuxHub
from raftlog.consensus.interface import StateMachine
from raftlog.consensus.transport import transport_class
from raftlog.storage.space import DiskSpace


async def open_mux_group(
    group_id: str,
    node_id: str,
    voters: Sequence[str],
    machine: StateMachine,
    driver: Driver,
    hub: MuxHub,
    config: CoreConfig,
    journal_directory: str,
    discard: Callable[[str], None] = os.unlink,
    learners: Sequence[str] = (),
    space: DiskSpace | None = None,
    opener: Executor | None = None,
) -> ReplicaGroup:
    """This node's replica of ``group_id`` with a durable journal in ``journal_directory``; ``discard``
    takes away the journal's segment files it no longer needs (``FileJournal``). ``voters`` and
    ``learners``: the configuration a new group starts from (a restarted one keeps what its log says).
    ``space``: the node's knowledge of room on its disk, shared by its journals and logs. The journal's
    files are opened (and a new one's synced) on ``opener``, the event loop's default executor when None:
    never on the event loop, which serves meanwhile, nor on the driver thread, which drives every group."""
    journal = await asyncio.get_running_loop().run_in_executor(
        opener, functools.partial(FileJournal, journal_directory, discard=discard, space=space)
    )
    return await ReplicaGroup.open(
        group_id,
        node_id,
        [*voters, *learners],
        machine,
        driver,
        config=config,
        journal=journal,
        transport_class=transport_class(hub, group_id),
        node_class=_PlainNodeId,
        learners=learners,
    )
