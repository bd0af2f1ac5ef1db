"""``raftlog serve --gc-gen0``: garbage collection tuned once a node serves."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from serve_args import check_int_option

from raftlog_node.process import GC_GEN0_DEFAULT, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_a_negative_gc_threshold_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    check_int_option(monkeypatch, "--gc-gen0", GC_GEN0_DEFAULT, "0", ("-1",))


def test_tuning_freezes_startup_objects_and_sets_the_young_threshold(restored_gc: None) -> None:
    _, gen1, gen2 = gc.get_threshold()
    tune_gc(12_345)
    assert gc.get_threshold() == (12_345, gen1, gen2)
    assert gc.get_freeze_count() > 0


def test_zero_keeps_pythons_defaults(restored_gc: None) -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    tune_gc(0)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
