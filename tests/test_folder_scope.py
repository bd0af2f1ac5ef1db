"""``folder_scope.shared``: made on a folder's first ask, ended when the run leaves the folder (and made
again on a return), a failed make given to the folder's later modules without a second try. Each case is
a small pytest run of its own, in a folder of files made here."""

from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent

CONFTEST = """
import pathlib
import folder_scope
import pytest

EVENTS = pathlib.Path(__file__).parent.parent / "events"


def note(text):
    with EVENTS.open("a") as f:
        f.write(text + "\\n")


def _made():
    note("make")
    if (pathlib.Path(__file__).parent / "fail").exists():
        raise RuntimeError("cannot make it")
    yield "thing"
    note("end")


@pytest.fixture(scope="module")
def thing(request):
    return folder_scope.shared(request, _made)
"""

USES = """
from conftest import note


def test_{name}(thing):
    note("{name} " + thing)
"""


def _run(root: pathlib.Path, *paths: str) -> tuple[list[str], str]:
    (root / "events").unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-o", "asyncio_default_fixture_loop_scope=function", *paths],
        cwd=root, env={"PYTHONPATH": str(HERE), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    events = (root / "events").read_text().split("\n")[:-1] if (root / "events").exists() else []
    return events, done.stdout + done.stderr


def _folders(root: pathlib.Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "conftest.py").write_text(CONFTEST)
    for name in ("a1", "a2"):
        (root / "a" / f"test_{name}.py").write_text(USES.format(name=name))
    (root / "b").mkdir()
    (root / "b" / "test_b.py").write_text(
        "import pathlib\n\n\ndef test_b():\n"
        "    with (pathlib.Path(__file__).parent.parent / 'events').open('a') as f:\n"
        "        f.write('b\\n')\n"
    )


def test_it_is_made_once_for_the_folder_and_ended_before_the_next_folder(tmp_path: pathlib.Path) -> None:
    _folders(tmp_path)
    events, output = _run(tmp_path, "a", "b")
    assert events == ["make", "a1 thing", "a2 thing", "end", "b"], output


def test_a_run_that_comes_back_to_the_folder_makes_it_again(tmp_path: pathlib.Path) -> None:
    _folders(tmp_path)
    events, output = _run(tmp_path, "a/test_a1.py", "b/test_b.py", "a/test_a2.py")
    assert events == ["make", "a1 thing", "end", "b", "make", "a2 thing", "end"], output


def test_a_failed_make_is_every_later_modules_error_without_a_second_try(tmp_path: pathlib.Path) -> None:
    _folders(tmp_path)
    (tmp_path / "a" / "fail").touch()
    events, output = _run(tmp_path, "a", "b")
    assert events == ["make", "b"], output
    assert output.count("RuntimeError: cannot make it") >= 2 and "2 errors" in output, output


def test_a_failed_make_is_tried_again_on_the_next_visit(tmp_path: pathlib.Path) -> None:
    _folders(tmp_path)
    (tmp_path / "a" / "fail").touch()
    events, output = _run(tmp_path, "a/test_a1.py", "b/test_b.py", "a/test_a2.py")
    assert events == ["make", "b", "make"], output
