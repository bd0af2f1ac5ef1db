"""How every raftlog process logs: one line per record, with the time, level and logger, to stderr; a node
given ``raftlog serve --log-file FILE`` (what ``raftlog dev`` gives each node) writes FILE instead and
rotates it by size: at most ``--log-file-max-mib`` a file, ``--log-files-kept`` earlier ones (FILE.1 the
newest), the oldest removed, so a node's log holds a bounded room of its disk however much it logs.

Everything else the process writes on its stdout and stderr (a traceback Python prints as it exits, a
dump of ``faulthandler``) goes to the current file too: its descriptors are pointed at the file each time
it is opened, so they follow it through every rotation."""

from __future__ import annotations

import io
import logging
import logging.handlers
import os
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MiB = 1024 * 1024
LOG_FILE_MAX_MIB_DEFAULT = 64  # a file's size before it is rotated
LOG_FILES_KEPT_DEFAULT = 4  # rotated files kept besides the current one: at most 5 x 64 MiB in all


def configure(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=FORMAT)


class RotatingLog(logging.handlers.RotatingFileHandler):
    """Python's size-rotating handler whose every opened file also takes the process's stdout and stderr."""

    def _open(self) -> io.TextIOWrapper:
        stream = super()._open()
        for standard, descriptor in ((sys.stdout, 1), (sys.stderr, 2)):
            if standard is not None:
                standard.flush()
            os.dup2(stream.fileno(), descriptor)
        return stream


def to_file(path: str, file_bytes_max: int, files_kept: int) -> RotatingLog:
    """From now on, every log record of the process (and its stdout and stderr) goes to ``path``, rotated
    once it would pass ``file_bytes_max`` bytes, with ``files_kept`` rotated files kept."""
    if file_bytes_max < 1 or files_kept < 1:
        raise ValueError(f"file_bytes_max {file_bytes_max}, files_kept {files_kept}: each at least 1")
    handler = RotatingLog(path, maxBytes=file_bytes_max, backupCount=files_kept, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    return handler
