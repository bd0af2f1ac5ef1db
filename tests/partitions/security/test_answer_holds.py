"""An answer's bytes in a listener's budget (``partitions.security.answer_holds``), and a Kafka connection's
large answers one at a time (``kafka_api.answers``): the rules the real-node attacks of
``tests/kafka_api/test_answer_bounds.py`` rest on, without a node."""

from __future__ import annotations

import asyncio

import pytest

from kafka_api.answers import Answers
from partitions.security.answer_holds import AnswerHold
from partitions.security.holds import RequestBytes

MiB = 1024 * 1024


async def test_an_answer_keeps_what_it_read_and_gives_the_rest_back_at_once() -> None:
    budget = RequestBytes(256 * MiB, 32 * MiB)
    hold = AnswerHold(budget, "User:mallory")
    await hold.take(32 * MiB)
    await hold.settle(3 * MiB)
    assert (budget.held, budget.holding("User:mallory")) == (3 * MiB, 3 * MiB)
    hold.give_back()
    hold.give_back()  # once only
    assert budget.held == 0


async def test_an_answer_past_its_holders_share_waits_until_its_others_are_written_out() -> None:
    budget = RequestBytes(256 * MiB, 32 * MiB)
    first, second = AnswerHold(budget, "User:mallory"), AnswerHold(budget, "User:mallory")
    await first.take(20 * MiB)
    taking = asyncio.ensure_future(second.take(20 * MiB))
    await asyncio.sleep(0.01)
    assert not taking.done(), "the holder's share holds 20 MiB of 32: a second 20 MiB waits"
    other = AnswerHold(budget, "User:bob")
    await asyncio.wait_for(other.take(20 * MiB), 1)  # another user's share is its own
    first.give_back()
    await asyncio.wait_for(taking, 1)
    assert budget.holding("User:mallory") == 20 * MiB


async def test_an_answer_larger_than_it_took_takes_its_size_anew_and_never_waits_for_itself() -> None:
    budget = RequestBytes(256 * MiB, 32 * MiB)
    hold = AnswerHold(budget, "User:mallory")
    await hold.take(1 * MiB)
    # one batch past max_bytes, and past the share: it goes in since its holder holds nothing else
    await asyncio.wait_for(hold.settle(40 * MiB), 1)
    assert budget.holding("User:mallory") == 40 * MiB
    hold.give_back()
    assert budget.held == 0


async def test_a_connections_large_answers_take_turns_and_end_with_it() -> None:
    budget = RequestBytes(256 * MiB, 32 * MiB)
    answers = Answers(budget, "127.0.0.1")
    first_turn, first_written = answers.turn()
    assert first_turn.done(), "the first large answer waits for nothing"
    second_turn, _ = answers.turn()
    third_turn, _ = answers.turn()
    hold = answers.hold("User:mallory")
    assert hold is not None and hold.holder == "User:mallory"
    await hold.take(16 * MiB)
    assert not second_turn.done(), "the second waits until the first is written out"
    answers.written_out(first_written)
    assert second_turn.done() and budget.held == 0, "written out: its bytes back, the next one's turn"
    answers.close()
    assert third_turn.cancelled(), "the connection ended: a large answer waiting for its turn ends too"
    assert budget.held == 0


async def test_an_answer_whose_connection_closed_leaves_nothing_held() -> None:
    """A Fetch's handler goes on after its connection closed (a long poll, a wait for room): what it holds
    is given back at the close, and what it would take after is not taken (it reads nothing more)."""
    budget = RequestBytes(256 * MiB, 32 * MiB)
    answers = Answers(budget, "127.0.0.1")
    hold = answers.hold("User:mallory")
    assert hold is not None
    await hold.take(1 * MiB)
    other = AnswerHold(budget, "User:mallory")
    await other.take(31 * MiB)
    waiting = asyncio.ensure_future(hold.take(16 * MiB))  # no room in the share: it waits
    await asyncio.sleep(0.01)
    answers.close()
    other.give_back()  # room comes, after the close
    assert await asyncio.wait_for(waiting, 1) is False, "taken after the close: given back, read nothing"
    assert await hold.take(1) is False
    await hold.settle(40 * MiB)
    assert budget.held == 0, "nothing left held for an answer that will not be sent"
    late = answers.hold("User:mallory")
    assert late is not None and await late.take(1 * MiB) is False, "a read begun after the close: nothing"
    assert budget.held == 0


async def test_an_anonymous_connections_answers_are_its_addresss() -> None:
    answers = Answers(RequestBytes(256 * MiB, 32 * MiB), "10.0.0.7")
    hold = answers.hold(None)
    assert hold is not None and hold.holder == "address:10.0.0.7"
    assert Answers().hold("User:x") is None, "a door without a budget counts nothing"


@pytest.mark.parametrize("size", [0, -1])
async def test_nothing_taken_holds_nothing(size: int) -> None:
    budget = RequestBytes(256 * MiB, 32 * MiB)
    hold = AnswerHold(budget, "User:mallory")
    await hold.take(size)
    hold.give_back()
    assert budget.held == 0
