"""A node's loggers and their levels, read and changed while it runs, as Kafka's ``RuntimeLoggerManager``
changes a broker's (KIP-412: ``kafka-configs --entity-type broker-loggers --entity-name ID --alter
--add-config LOGGER=LEVEL``, the resource ``BROKER_LOGGER``). A change is the node's own and lasts until
it stops (its ``--log-level`` applies again at the next start), as on Kafka's broker.

The loggers are ``root`` and those of the node's packages (``PACKAGES``) that exist in the process; the
levels are Kafka's words (log4j's), each mapped onto Python's (``TRACE`` is below ``DEBUG``, ``FATAL`` is
``CRITICAL``). ``check`` refuses what Kafka refuses, with its words: a logger that does not exist or a
level it has not (InvalidResourceConfig: INVALID_CONFIG), the root logger's level removed, APPEND or
SUBTRACT (InvalidConfigRequest: INVALID_REQUEST); ``change`` then SETs a level or DELETEs one (the logger
takes its parent's again)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from partitions.errors import InvalidConfigRequest, InvalidResourceConfig

PACKAGES = ("raftlog", "partitions", "kafka_api", "api", "membership")  # whose loggers a node describes
ROOT = "root"
TRACE = 5  # below DEBUG (10): log4j's TRACE
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # fmt: skip
VALID_LEVELS = ", ".join(sorted(LEVELS))  # as Kafka's message lists them
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations
_OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

logging.addLevelName(TRACE, "TRACE")


def names() -> list[str]:
    """``root`` first, then every logger of ``PACKAGES`` this process has, sorted."""
    known = logging.root.manager.loggerDict
    return [ROOT, *sorted(n for n in known if n.split(".")[0] in PACKAGES)]


def level_of(name: str) -> str:
    """The logger's effective level in Kafka's words."""
    level = logging.getLogger(None if name == ROOT else name).getEffectiveLevel()
    for word, value in LEVELS.items():
        if level <= value:
            return word
    return "FATAL"


def check(changes: list[tuple[str, int, str | None]]) -> None:
    """The (logger, operation, level) changes of one request as Kafka's ``ConfigAdminManager`` and
    ``validateLogLevelConfigs`` check them; nothing changes."""
    if len({name for name, _, _ in changes}) != len(changes):
        raise InvalidConfigRequest("Error due to duplicate config keys")
    nulls = [name for name, operation, level in changes if operation != DELETE and level is None]
    if nulls:
        raise InvalidConfigRequest(f"Null value not supported for : {', '.join(nulls)}")
    existing = set(names())
    for name, operation, level in changes:
        if operation in _OPERATION_NAMES:
            raise InvalidConfigRequest(
                f"{_OPERATION_NAMES[operation]} operation is not allowed for the BROKER_LOGGER resource"
            )
        if operation not in (SET, DELETE):
            raise InvalidConfigRequest(
                f"Unknown operation type {operation} is not allowed for the BROKER_LOGGER resource"
            )
        if name not in existing:
            raise InvalidResourceConfig(f"Logger {name} does not exist!")
        if operation == SET and level not in LEVELS:
            raise InvalidResourceConfig(
                f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
                f"Valid log levels are {VALID_LEVELS}"
            )
        if operation == DELETE and name == ROOT:
            raise InvalidConfigRequest("Removing the log level of the root logger is not allowed")


def change(changes: Iterable[tuple[str, int, str | None]], log: logging.Logger) -> None:
    """The checked changes made: a SET gives the logger its level, a DELETE unsets it (its parent's
    applies), each logged at WARN as Kafka logs it."""
    for name, operation, level in changes:
        logger = logging.getLogger(None if name == ROOT else name)
        if operation == SET and level is not None:
            logger.setLevel(LEVELS[level])
            log.warning("Updated the log level of %s to %s", name, level)
        elif operation == DELETE:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)
