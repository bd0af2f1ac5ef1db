"""Benchmarks that print numbers (never tests). ``python -m raftlog.bench.storage`` measures the storage
engine against the machine's raw write and fsync rates, measured in the same run on the same directory."""
