"""The one client of raftlog's public HTTP API (see README.md): the wire contract's names, the asyncio
client, the blocking client, the lean HTTP/1.1 client and a throwaway local cluster."""
