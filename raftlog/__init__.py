"""raftlog core: the segmented log storage engine and the Raft consensus adapter."""
