"""Benchmarks that print numbers (never tests). ``python -m raftlog.bench.storage`` measures the storage
engine against the machine's raw write and fsync rates, measured in the same run on the same directory.
``python -m raftlog.bench.cluster`` measures a 3-node cluster through its HTTP API (produce, produce
latency, consume, idle CPU), starting one with ``raftlog dev`` unless given ``--server``.
``python -m raftlog.bench.perf`` (``raftlog bench perf``) drives producers and consumers against raftlog
and, with ``--compare nats,rabbitmq``, the same workload against NATS JetStream and RabbitMQ streams.
``python -m raftlog.bench.curve`` (``raftlog bench curve``) runs its single-record phase at several rates."""
