"""raftlog core: the segmented log storage engine and the Raft consensus adapter."""


def version() -> str:
    """The installed raftlog's version ("unknown" when run from a tree that was never installed)."""
    import importlib.metadata  # here, not above: every command imports this package, few ask the version

    try:
        return importlib.metadata.version("raftlog")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
