"""One raftlog node process: what composes storage, consensus, the broker and both front doors (the
HTTP API of ``api/`` and the Kafka listener of ``kafka_api/``) and runs them (``python -m raftlog_node``,
what ``raftlog serve`` runs)."""
