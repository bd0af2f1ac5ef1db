"""Every name a user gives is checked whole: topic, consumer group and consumer instance names."""

from __future__ import annotations

import pytest

from partitions import names
from partitions.controller.commands import validate_topic
from partitions.errors import InvalidName, ReservedName
from partitions.names import GROUPS_TOPIC


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("nl\n", "'\\n' at index 2"),
        ("\nnl", "'\\n' at index 0"),
        ("a b", "' ' at index 1"),
        ("bad/name", "'/' at index 3"),
        ("ü", "'ü' at index 0"),
        ("", "must not be empty"),
        (".", "'.' and '..'"),
        ("..", "'.' and '..'"),
        ("x" * 201, "201 characters long; at most 200"),
        (7, "must be a string"),
    ],
)
def test_a_bad_topic_name_is_refused_saying_why(name: object, reason: str) -> None:
    with pytest.raises(InvalidName) as refused:
        names.check_topic_name(name)
    assert reason in str(refused.value)


def test_topic_names_up_to_200_of_the_allowed_characters_are_accepted() -> None:
    for name in ("orders", "a.b_c-D9", "...", "x" * 200, GROUPS_TOPIC, "__mine"):
        assert names.check_topic_name(name) == name


def test_users_may_not_take_the_names_reserved_for_the_clusters_topics() -> None:
    for name in (GROUPS_TOPIC, "__consumer_offsets", "__x"):
        with pytest.raises(ReservedName, match="reserved for the cluster's own topics"):
            names.check_user_topic_name(name)
    assert names.check_user_topic_name("_single") == "_single"
    with pytest.raises(InvalidName):
        names.check_user_topic_name("__nl\n")


def test_the_controller_refuses_a_name_with_a_final_newline_and_keeps_the_internal_topic() -> None:
    with pytest.raises(InvalidName):
        validate_topic("nl\n", [["n1"]], {})
    validate_topic(GROUPS_TOPIC, [["n1"]], {})  # created by the cluster itself: must stay valid


@pytest.mark.parametrize("check", [names.check_group_name, names.check_instance_name])
@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("billing\n", "control character (U+000A) at index 7"),
        ("bill\ting", "control character (U+0009) at index 4"),
        ("a\x00", "control character (U+0000)"),
        ("a\x7f", "control character (U+007F)"),
        ("a\x85", "control character (U+0085)"),
        ("bill\u200bing", "format character (U+200B)"),
        ("rtl\u202e", "format character (U+202E)"),
        ("a\u2028", "line separator (U+2028)"),
        ("a\u2029", "paragraph separator (U+2029)"),
        ("a\ud800", "unpaired surrogate at index 1"),
        ("", "must not be empty"),
        ("é" * 128, "256 bytes of UTF-8; at most 255"),
        (None, "must be a string"),
    ],
)
def test_a_bad_group_or_instance_name_is_refused_saying_why(check, name: object, reason: str) -> None:
    with pytest.raises(InvalidName) as refused:
        check(name)
    assert reason in str(refused.value)


@pytest.mark.parametrize("check", [names.check_group_name, names.check_instance_name])
def test_group_and_instance_names_are_any_printable_text_up_to_255_bytes(check) -> None:
    for name in ("billing", "billing ", "a/b", "Zürich-🙂", "x" * 255, "é" * 127 + "x", "__g"):
        assert check(name) == name
