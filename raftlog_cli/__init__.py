"""The ``raftlog`` command line (see README.md): a client tool above the server, the client package and
the benchmarks."""
