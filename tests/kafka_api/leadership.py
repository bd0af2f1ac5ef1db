"""Handing a partition's leadership to a node, as the leader balancer does, for the tests whose clients
must follow it (kept out of ``kafka_fixtures``, which the tests run against Apache Kafka import: a change
there would ask every recorded Kafka answer again)."""

from __future__ import annotations

import urllib.error
import urllib.request

from raftlog_client.local_cluster import LocalCluster
from tests.waiting import wait_for


def hand_leadership(cluster: LocalCluster, topic: str, partition: int, target: str, limit_s: float) -> None:
    """``topic``'s ``partition`` handed to node ``target`` through its admin endpoint, asked again while
    a move or an election is under way (409, 503)."""
    request = urllib.request.Request(
        f"{cluster.urls[target]}/v1/partitions/{topic}/{partition}/transfer_leadership?target={target}",
        method="POST",
    )

    def transferred() -> bool:
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return bool(answer.status == 200)
        except urllib.error.HTTPError as error:
            if error.code in (409, 503):
                return False
            raise

    wait_for(transferred, f"{topic}/{partition} handed to {target}", limit_s)
