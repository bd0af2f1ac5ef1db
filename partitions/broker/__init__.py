"""The broker composed: a node's rooms built and wired together (``Node``), and its local services."""
