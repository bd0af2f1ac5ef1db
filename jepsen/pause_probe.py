"""What the pause nemesis asks around a paused leader, so that the history shows the fault landed where it
matters: a leader paused past the election timeout while it led, a new leader elected meanwhile, and the
old leader asked reads in the window after it runs again, while it still believes it leads
(``jepsen.read_checker.paused_leaders`` reads the proof back; the checker judges the reads).

- :meth:`PauseProbe.led`, just before SIGSTOP: the keys the node leads, asked of the node itself
  (``GET`` the partition's state: its leader, term and high watermark), for the pause's start event.
- :meth:`PauseProbe.before_resume`, just before SIGCONT: each such key's leader and term, asked of the
  other nodes, for the stop event; then, for each key another node leads in a higher term, a poll of the
  key from the paused node's old high watermark, sent to the paused node itself (it waits in its socket
  and is answered once the node runs again). The polls are the workload's own (``Operations.poll``: an
  invoke and a completion of their own process each, numbered from ``first_process``), so the checker
  holds them to everything else the history says of their key.
- :meth:`PauseProbe.wait`: the polls still out (each bounded by the poll's own timeout).

The queue and compaction workloads have it (their polls read a key from an offset); the others do not.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jepsen.workload import Http, Operations, split_key
from raftlog_client.client import RaftlogClient
from raftlog_client.errors import ClientError

STATE_TIMEOUT_S = 2.0  # asking a node for a partition's state: the window does not wait longer
SENT_S = 0.2  # the polls' requests leave for the paused node before it runs again


class PauseProbe:
    def __init__(
        self,
        urls: Mapping[str, str],
        keys: Sequence[str],
        admin_token: str | None,
        operations: Callable[[Http], Operations],
        first_process: int,
        rng: random.Random,
    ) -> None:
        """``urls``: each node's HTTP URL; ``operations(http)``: the workload's operations over ``http``
        (the probe's polls go through them, recorded as the workload's are)."""
        self._urls = dict(urls)
        self._keys = list(keys)
        self._admin_token = admin_token
        self._operations = operations
        self._next_process = first_process
        self._rng = rng
        self._polls: list[asyncio.Task[Any]] = []
        self._https: list[Http] = []

    async def led(self, node: str) -> dict[str, dict[str, int]]:
        """The keys ``node`` leads, by its own account: key -> its term and high watermark."""
        states = await self._states([self._urls[node]])
        return {
            key: {"term": int(state["term"]), "high_watermark": int(state["high_watermark"])}
            for key, state in states.items()
            if state.get("leader") == node
        }

    async def before_resume(
        self, node: str, led: Mapping[str, Mapping[str, int]]
    ) -> tuple[dict[str, dict[str, Any]], list[int]]:
        """Just before ``node`` runs again: who leads the keys it led, asked of the others (key -> leader and
        term), and the processes of the polls sent to it, one for each key another node leads in a higher
        term, from the key's old high watermark."""
        others = [url for other, url in sorted(self._urls.items()) if other != node]
        states = await self._states(others, keys=list(led))
        now = {
            key: {"leader": state.get("leader"), "term": state.get("term")} for key, state in states.items()
        }
        http = Http([self._urls[node]], random.Random(self._rng.getrandbits(64)))
        self._https.append(http)
        operations = self._operations(http)
        processes = []
        for key, state in sorted(now.items()):
            term = state["term"]
            if state["leader"] in (None, node) or not isinstance(term, int) or term <= led[key]["term"]:
                continue
            process = self._next_process
            self._next_process += 1
            processes.append(process)
            self._polls.append(asyncio.create_task(operations.poll(process, key, led[key]["high_watermark"])))
        if processes:
            await asyncio.sleep(SENT_S)
        return now, processes

    async def wait(self) -> None:
        polls, self._polls = self._polls, []
        await asyncio.gather(*polls, return_exceptions=True)
        https, self._https = self._https, []
        for http in https:
            await http.close()

    async def _states(self, urls: list[str], keys: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
        """Each key's partition state as the first of ``urls`` that answers gives it (a key none answers
        for is left out), the keys asked at once."""
        clients = [
            RaftlogClient([url], admin_token=self._admin_token, timeout_s=STATE_TIMEOUT_S, retries=0)
            for url in urls
        ]

        async def state(key: str) -> tuple[str, dict[str, Any] | None]:
            topic, partition = split_key(key)
            for client in clients:
                try:
                    return key, await client.cluster.partition_state(topic, partition)
                except (ClientError, OSError, TimeoutError):
                    continue
            return key, None

        try:
            found = await asyncio.gather(*(state(key) for key in (self._keys if keys is None else keys)))
        finally:
            for client in clients:
                await client.close()
        return {key: answer for key, answer in found if answer is not None}
