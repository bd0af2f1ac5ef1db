"""Kafka's transactions, coordinated: the replicated table of transactional ids, the coordinator that
drives each transaction to its end, and the ``TransactionService`` the doors and the partitions' leaders
ask (storage-agnostic: the replicated log and the markers' writer are protocols)."""
