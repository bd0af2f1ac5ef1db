"""``tests/warm_rewrites.py`` writes pytest's rewritten byte-code of the test modules that have none, once,
and does nothing when every one has it."""

from __future__ import annotations

import pathlib

import warm_rewrites


def test_modules_without_their_rewritten_byte_code_get_it_once(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "suite" / "part"
    folder.mkdir(parents=True)
    for name in ("test_one.py", "test_two.py", "test_three.py"):
        (folder / name).write_text("def test_it():\n    assert 1 + 1 == 2\n")
    (folder / "helper.py").write_text("X = 1\n")  # not a test module: pytest does not rewrite it
    root = tmp_path / "suite"
    names = [m.name for m in warm_rewrites.unrewritten(root)]
    assert names == ["test_one.py", "test_three.py", "test_two.py"]
    assert warm_rewrites.main([str(root)]) == 0
    assert warm_rewrites.unrewritten(root) == []
    assert all(warm_rewrites.cache_of(folder / name).is_file() for name in ("test_one.py", "test_two.py"))
    assert warm_rewrites.main([str(root)]) == 0  # nothing left: no collection started
