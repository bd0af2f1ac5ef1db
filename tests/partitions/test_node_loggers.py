"""A node's loggers changed while it runs (``partitions.node_loggers``, Kafka's ``RuntimeLoggerManager``):
Kafka's levels on Python's loggers, a DELETE back to the parent's level, and Kafka's refusals in its
words, with nothing changed by a refused request."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from partitions import node_loggers
from partitions.errors import InvalidConfigRequest, InvalidResourceConfig
from partitions.node_loggers import APPEND, DELETE, SET, SUBTRACT

NAME = "partitions.node_loggers_test"


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    created = logging.getLogger(NAME)
    root_level = logging.root.level
    try:
        yield created
    finally:
        created.setLevel(logging.NOTSET)
        logging.root.setLevel(root_level)


def test_a_level_is_set_in_kafka_s_words_and_deleted_back_to_the_parent_s(logger: logging.Logger) -> None:
    names = node_loggers.names()
    assert names[0] == "root" and NAME in names
    for word, level in (
        ("TRACE", 5),
        ("DEBUG", 10),
        ("INFO", 20),
        ("WARN", 30),
        ("ERROR", 40),
        ("FATAL", 50),
    ):
        changes = [(NAME, SET, word)]
        node_loggers.check(changes)
        node_loggers.change(changes, logging.getLogger("test"))
        assert logger.level == level and node_loggers.level_of(NAME) == word
    node_loggers.change([("root", SET, "ERROR"), (NAME, DELETE, None)], logging.getLogger("test"))
    assert logger.level == logging.NOTSET and node_loggers.level_of(NAME) == "ERROR"  # the root's again


@pytest.mark.parametrize(
    ("changes", "refusal", "words"),
    [
        ([(NAME, SET, "LOUD")], InvalidResourceConfig,
         f"Cannot set the log level of {NAME} to LOUD as it is not a supported log level. "
         "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        ([("no.such.logger", SET, "DEBUG")], InvalidResourceConfig, "Logger no.such.logger does not exist!"),
        ([("root", DELETE, None)], InvalidConfigRequest, "Removing the log level of the root logger"),
        ([(NAME, APPEND, "DEBUG")], InvalidConfigRequest, "APPEND operation is not allowed for the"),
        ([(NAME, SUBTRACT, "DEBUG")], InvalidConfigRequest, "SUBTRACT operation is not allowed"),
        ([(NAME, 7, "DEBUG")], InvalidConfigRequest, "Unknown operation type 7 is not allowed"),
        ([(NAME, SET, "DEBUG"), (NAME, SET, "INFO")], InvalidConfigRequest, "duplicate config keys"),
        ([(NAME, SET, None)], InvalidConfigRequest, f"Null value not supported for : {NAME}"),
    ],
)  # fmt: skip
def test_what_kafka_refuses_is_refused_in_its_words(
    logger: logging.Logger, changes: list[tuple[str, int, str | None]], refusal: type[Exception], words: str
) -> None:
    before = logger.level
    with pytest.raises(refusal) as refused:
        node_loggers.check(changes)
    assert words in str(refused.value)
    assert logger.level == before
