"""Benchmarks that print numbers (never tests), run as ``raftlog bench storage|compaction|cluster|perf|
curve|scale|gossip`` or ``python -m raftlog_bench.<module>``. See README.md."""
