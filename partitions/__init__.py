"""The broker above storage and consensus, one folder a room; the modules here are its ground floor
(errors, names, the partition command codec, the peer-operation declaration, the worker pool)."""
