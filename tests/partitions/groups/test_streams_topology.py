"""A streams group's topology (KIP-1071): Kafka's refusals of a topology, and Kafka's configuration of its
topics (missing source topics, internal topics to create with their partitions inferred, copartitioning,
an internal topic of the wrong size), in Kafka's words; the stored row and its round trip."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from partitions.groups.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    TOPOLOGY_ROW_VERSION,
    CopartitionGroup,
    InvalidTopology,
    StreamsTopology,
    Subtopology,
    TopicInfo,
    configure,
    validate,
)


def topology(*subtopologies: Subtopology, epoch: int = 1) -> StreamsTopology:
    return StreamsTopology(epoch, subtopologies)


def counts(**partitions: int) -> Any:
    return lambda topic: partitions.get(topic.replace("-", "_"))


# an aggregation: subtopology 0 reads "words" and writes app-rep, which subtopology 1 reads into a store
WORD_COUNT = topology(
    Subtopology("0", source_topics=("words",), repartition_sink_topics=("app-rep",)),
    Subtopology(
        "1",
        repartition_source_topics=(TopicInfo("app-rep", configs=(("cleanup.policy", "delete"),)),),
        state_changelog_topics=(TopicInfo("app-store-changelog", 0, 3, (("cleanup.policy", "compact"),)),),
    ),
)


def test_a_changelog_topic_with_a_partition_count_is_refused_in_kafkas_words() -> None:
    bad = topology(Subtopology("0", ("in",), state_changelog_topics=(TopicInfo("app-changelog", 4),)))
    with pytest.raises(InvalidTopology) as refused:
        validate(bad)
    assert str(refused.value) == (
        "Changelog topic app-changelog must have an undefined partition count, but it is set to 4."
    )


def test_a_subtopology_given_twice_or_a_copartition_index_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidTopology, match="Subtopology 0 is defined more than once"):
        validate(topology(Subtopology("0", ("a",)), Subtopology("0", ("b",))))
    out_of_range = Subtopology("0", ("a",), copartition_groups=(CopartitionGroup((0, 1)),))
    with pytest.raises(InvalidTopology, match="refers to source topic 1, but the subtopology has 1 source"):
        validate(topology(out_of_range))


def test_a_valid_topology_passes_validation() -> None:
    validate(WORD_COUNT)


def test_missing_source_topics_are_named_sorted_and_summarized_after_three() -> None:
    missing = topology(Subtopology("0", ("e", "d", "c")), Subtopology("1", ("b", "a", "present")))
    configured = configure(missing, counts(present=1))
    assert not configured.ready
    assert configured.status == (
        MISSING_SOURCE_TOPICS,
        "Source topics a, b, c and 2 additional topics are missing.",
    )
    assert configured.tasks == {} and configured.to_create == ()
    one = configure(topology(Subtopology("0", ("words",))), counts())
    assert one.status == (MISSING_SOURCE_TOPICS, "Source topics words are missing.")


def test_missing_internal_topics_are_to_be_created_with_partitions_inferred_and_their_configs() -> None:
    configured = configure(WORD_COUNT, counts(words=4))
    assert configured.status == (
        MISSING_INTERNAL_TOPICS,
        "Internal topics are missing: app-rep, app-store-changelog",
    )
    assert configured.tasks == {}
    assert configured.to_create == (
        TopicInfo("app-rep", 4, 0, (("cleanup.policy", "delete"),)),
        TopicInfo("app-store-changelog", 4, 3, (("cleanup.policy", "compact"),)),
    )
    assert configured.stateful == frozenset({"1"})


def test_once_the_internal_topics_exist_the_topology_is_ready_with_its_tasks() -> None:
    configured = configure(WORD_COUNT, counts(words=4, app_rep=4, app_store_changelog=4))
    assert configured.ready and configured.status is None and configured.to_create == ()
    assert configured.tasks == {"0": 4, "1": 4}
    assert configured.stateful == frozenset({"1"})


def test_repartition_counts_flow_along_a_chain_of_subtopologies_given_in_any_order() -> None:
    chain = [
        Subtopology("0", ("small",), ("r1",)),
        Subtopology("1", ("big",), ("r2",), repartition_source_topics=(TopicInfo("r1"),)),
        Subtopology(
            "2", repartition_source_topics=(TopicInfo("r2"),), state_changelog_topics=(TopicInfo("c"),)
        ),
    ]
    for order in (chain, chain[::-1]):
        configured = configure(topology(*order), counts(small=3, big=5))
        assert {t.name: t.partitions for t in configured.to_create} == {"r1": 3, "r2": 5, "c": 5}
        ready = configure(topology(*order), counts(small=3, big=5, r1=3, r2=5, c=5))
        assert ready.tasks == {"0": 3, "1": 5, "2": 5}


def test_a_fixed_repartition_count_is_kept() -> None:
    fixed = topology(
        Subtopology("0", ("in",), ("r",)),
        Subtopology("1", repartition_source_topics=(TopicInfo("r", 7),)),
    )
    assert configure(fixed, counts(**{"in": 2})).to_create == (TopicInfo("r", 7),)
    assert configure(fixed, counts(**{"in": 2}, r=7)).tasks == {"0": 2, "1": 7}


def test_a_repartition_loop_or_an_unfed_repartition_topic_is_an_invalid_topology() -> None:
    loop = topology(
        Subtopology("0", (), ("r2",), repartition_source_topics=(TopicInfo("r1"),)),
        Subtopology("1", (), ("r1",), repartition_source_topics=(TopicInfo("r2"),)),
    )
    with pytest.raises(InvalidTopology) as refused:
        configure(loop, counts())
    assert str(refused.value) == (
        "Failed to compute number of partitions for all repartition topics. "
        "There may be loops in the topology that cannot be resolved."
    )
    unfed = topology(Subtopology("0", ("in",), repartition_source_topics=(TopicInfo("nobody-writes"),)))
    with pytest.raises(InvalidTopology) as refused:
        configure(unfed, counts(**{"in": 1}))
    assert str(refused.value) == (
        "Failed to compute number of partitions for all repartition topics, "
        "because a repartition source topic is never used as a sink topic."
    )


def test_a_subtopology_reading_nothing_is_an_invalid_topology() -> None:
    with pytest.raises(InvalidTopology, match=r"^No source topics found for subtopology 0$"):
        configure(topology(Subtopology("0")), counts())


def test_copartitioned_source_topics_of_different_sizes_are_incorrectly_partitioned() -> None:
    join = topology(Subtopology("0", ("left", "right"), copartition_groups=(CopartitionGroup((0, 1)),)))
    configured = configure(join, counts(left=3, right=4))
    assert configured.status == (
        INCORRECTLY_PARTITIONED_TOPICS,
        "Following topics do not have the same number of partitions: [{left=3, right=4}]",
    )
    assert configured.tasks == {}
    assert configure(join, counts(left=4, right=4)).tasks == {"0": 4}


def test_a_copartitioned_repartition_topic_takes_the_count_of_its_source_topics() -> None:
    # r would have big's 8 partitions, but it is joined with table (3): it gets 3, and so do the tasks
    join = topology(
        Subtopology("0", ("big",), ("r",)),
        Subtopology(
            "1",
            ("table",),
            repartition_source_topics=(TopicInfo("r"),),
            copartition_groups=(CopartitionGroup((0,), (0,)),),
        ),
    )
    assert configure(join, counts(big=8, table=3)).to_create == (TopicInfo("r", 3),)
    assert configure(join, counts(big=8, table=3, r=3)).tasks == {"0": 8, "1": 3}


def test_a_fixed_repartition_topic_copartitioned_with_another_count_is_incorrectly_partitioned() -> None:
    join = topology(
        Subtopology("0", ("big",), ("r",)),
        Subtopology(
            "1",
            ("table",),
            repartition_source_topics=(TopicInfo("r", 8),),
            copartition_groups=(CopartitionGroup((0,), (0,)),),
        ),
    )
    assert configure(join, counts(big=8, table=3)).status == (
        INCORRECTLY_PARTITIONED_TOPICS,
        "Number of partitions [8] of repartition topic [r] doesn't match number of partitions [3] "
        "of the source topic.",
    )


def test_an_existing_internal_topic_with_another_partition_count_is_incorrectly_partitioned() -> None:
    configured = configure(WORD_COUNT, counts(words=4, app_rep=4, app_store_changelog=2))
    assert configured.status == (
        INCORRECTLY_PARTITIONED_TOPICS,
        "Existing topic app-store-changelog has different number of partitions: expected 4, found 2",
    )
    assert configured.tasks == {} and configured.to_create == ()


def test_a_task_reads_its_partition_of_each_input_topic_that_has_it() -> None:
    two = topology(Subtopology("0", ("wide", "narrow")))
    configured = configure(two, counts(wide=4, narrow=2))
    assert configured.tasks == {"0": 4}
    assert configured.source_partitions(two, ("0", 1)) == [("narrow", 1), ("wide", 1)]
    assert configured.source_partitions(two, ("0", 3)) == [("wide", 3)]
    assert configured.source_partitions(two, ("9", 0)) == []
    not_ready = configure(WORD_COUNT, counts(words=4))
    assert not_ready.source_partitions(WORD_COUNT, ("0", 0)) == []


def test_the_configured_topology_is_immutable() -> None:
    configured = configure(WORD_COUNT, counts(words=4, app_rep=4, app_store_changelog=4))
    with pytest.raises(TypeError):
        configured.tasks["0"] = 9  # type: ignore[index]
    with pytest.raises(AttributeError):
        configured.status = None  # type: ignore[misc]


def test_the_row_is_plain_data_and_reads_back_the_same() -> None:
    full = topology(
        Subtopology(
            "0",
            ("a", "b"),
            ("r",),
            (TopicInfo("c", 0, 2, (("k", "v"),)),),
            (TopicInfo("s", 3, 1, (("x", "y"), ("z", "w"))),),
            (CopartitionGroup((0, 1), (0,)), CopartitionGroup((), (0,))),
        ),
        Subtopology("1", ("d",)),
        epoch=7,
    )
    row = full.to_row()
    assert row[0] == TOPOLOGY_ROW_VERSION
    wire = msgpack.unpackb(msgpack.packb(row))
    assert wire == row
    assert StreamsTopology.from_row(wire) == full
    assert StreamsTopology.from_row(topology().to_row()) == topology()


def test_a_row_of_a_newer_writer_with_extra_trailing_fields_still_reads() -> None:
    row = WORD_COUNT.to_row()
    newer = [*row[:2], [[*s, "extra"] for s in row[2]], {"future": 1}]
    for subtopology in newer[2]:
        subtopology[3] = [[*t, "more"] for t in subtopology[3]]
    assert StreamsTopology.from_row(newer) == WORD_COUNT
