"""Raft consensus adapter around pysyncobj: core fixes, journal, driver, transport."""
