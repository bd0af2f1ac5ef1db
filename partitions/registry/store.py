"""``SchemaLog`` over a node's Raft groups: the one partition of ``__schemas`` is an ordinary replicated
partition whose state machine also applies schema registry commands (``PartitionStateMachine.schemas``).
The internal topic is created on first use, as ``__transactions`` is."""

from __future__ import annotations

from partitions import commands
from partitions.internal_topic import InternalTopicLog
from partitions.names import SCHEMAS_TOPIC
from partitions.registry.table import Done, Refusal, RegistryCommand, SchemaTable, encode
from raftlog.errors import check

PARTITION = 0  # the registry's one partition


class ReplicatedSchemaLog(InternalTopicLog[SchemaTable]):
    TOPIC = SCHEMAS_TOPIC
    TABLE = "schemas"

    async def propose(self, command: RegistryCommand) -> Done | Refusal:
        entry = commands.encode(commands.SchemaCommand(encode(command)))
        result = await self._propose_entry(PARTITION, entry)
        # anything else would be an entry this node encoded wrongly: a bug, not an answer
        check(isinstance(result, Done | Refusal), f"schema registry command on {SCHEMAS_TOPIC}: {result!r}")
        return result  # type: ignore[return-value]  # checked above
