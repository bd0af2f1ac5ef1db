"""``raftlog dev``: a local cluster on this machine, one ``python -m raftlog_node`` process per node,
supervised (ports, readiness, certificates and credentials for ``--secure``, status and control)."""
