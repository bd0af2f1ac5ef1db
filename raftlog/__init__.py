"""raftlog core: the segmented log storage engine and the Raft consensus adapter."""

import importlib.metadata


def version() -> str:
    """The installed raftlog's version ("unknown" when run from a tree that was never installed)."""
    try:
        return importlib.metadata.version("raftlog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
