"""Which checker a history needs: the transactional workload's (``jepsen.txn_checker``: a history with
``txn``, ``end`` or ``init`` operations), the consumer-group workload's (``jepsen.group_checker``: one with
``consume`` operations), the share group's (``jepsen.share_checker``: one with ``acquire`` or ``ack``
operations) or the queue's and the compaction workload's (``jepsen.checker``). All return the same shape
of results. Whatever the workload, the ``old-release`` fault's proof and the replicas' comparison after
the run (``replicas``: ``run.json``'s, when the run made one) are judged by ``jepsen.old_release_checker``."""

from __future__ import annotations

from jepsen import checker, group_checker, old_release_checker, share_checker, txn_checker
from jepsen.history import History, JsonDict
from jepsen.results import EXAMPLES_PER_CLASS


def check(
    history: History, examples_per_class: int = EXAMPLES_PER_CLASS, replicas: JsonDict | None = None
) -> JsonDict:
    if txn_checker.is_transactional(history):
        results = txn_checker.check(history, examples_per_class)
    elif group_checker.is_group(history):
        results = group_checker.check(history, examples_per_class)
    elif share_checker.is_share(history):
        results = share_checker.check(history, examples_per_class)
    else:
        results = checker.check(history, examples_per_class)
    return old_release_checker.judge(history, results, replicas)
