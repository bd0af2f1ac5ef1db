"""raftlog core: the segmented log storage engine and the Raft consensus adapter."""

__version__ = "0.2.0"  # this code's release (CHANGELOG.md); pyproject.toml's version is the same


def version() -> str:
    """This code's raftlog version: its own, whichever installation runs it (a node of another checkout
    reports that checkout's)."""
    return __version__
