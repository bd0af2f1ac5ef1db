"""Which checker a history needs: the transactional workload's (``jepsen.txn_checker``: a history with
``txn``, ``end`` or ``init`` operations), the consumer-group workload's (``jepsen.group_checker``: one with
``consume`` operations), the share group's (``jepsen.share_checker``: one with ``acquire`` or ``ack``
operations) or the queue's and the compaction workload's (``jepsen.checker``). All return the same shape
of results."""

from __future__ import annotations

from jepsen import checker, group_checker, share_checker, txn_checker
from jepsen.history import History, JsonDict
from jepsen.results import EXAMPLES_PER_CLASS


def check(history: History, examples_per_class: int = EXAMPLES_PER_CLASS) -> JsonDict:
    if txn_checker.is_transactional(history):
        return txn_checker.check(history, examples_per_class)
    if group_checker.is_group(history):
        return group_checker.check(history, examples_per_class)
    if share_checker.is_share(history):
        return share_checker.check(history, examples_per_class)
    return checker.check(history, examples_per_class)
