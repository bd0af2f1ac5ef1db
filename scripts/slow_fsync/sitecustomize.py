"""A slower disk for experiments: with this directory on PYTHONPATH and SLOW_FSYNC_S set (seconds), every
os.fsync and os.fdatasync of the Python processes started so (a test, the node processes it starts)
waits that long before syncing, as a loaded or networked disk does. Nothing of raftlog imports it.

    PYTHONPATH=scripts/slow_fsync SLOW_FSYNC_S=0.01 .venv/bin/python scripts/restart_probe.py
"""

import os
import time

_DELAY_S = float(os.environ.get("SLOW_FSYNC_S", "0") or 0)

if _DELAY_S > 0:
    _fdatasync, _fsync = os.fdatasync, os.fsync

    def _slow_fdatasync(fd: int) -> None:
        time.sleep(_DELAY_S)
        _fdatasync(fd)

    def _slow_fsync(fd: int) -> None:
        time.sleep(_DELAY_S)
        _fsync(fd)

    os.fdatasync = _slow_fdatasync
    os.fsync = _slow_fsync
