"""``make dev`` installs what a node needs and nothing that only the tests use: run as a user without root
on a machine without kcat, zsh, fish, fuse3 or promtool, ``scripts/bootstrap.sh cluster`` installs raftlog
without its extras and succeeds; the test level asks for those tools by name. Run in a copy of the
project's set-up files whose ``.venv/bin/python`` records what pip is asked, so nothing is installed."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = (
    "bash", "env", "cat", "sha256sum", "cut", "ls", "rm", "touch", "dirname", "python3", "gcc", "mktemp",
    "mkdir",
)  # fmt: skip
FAULT_TOOLS = ("ip", "tc", "mkfs.ext4", "mount")  # network namespaces, small disks: tests/required_tools.py


def _project(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, dict[str, str]]:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    (root / "raftlog" / "storage").mkdir(parents=True)
    for script in ("bootstrap.sh", "debian_tool.sh"):
        shutil.copy(ROOT / "scripts" / script, root / "scripts" / script)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    shutil.copy(ROOT / "scripts" / "python-constraints.txt", root / "scripts" / "python-constraints.txt")
    (root / "examples").mkdir()
    for name in ("quixstreams-requirements.txt", "quixstreams-constraints.txt"):
        shutil.copy(ROOT / "examples" / name, root / "examples" / name)
    shutil.copy(ROOT / "raftlog" / "storage" / "_records.c", root / "raftlog" / "storage" / "_records.c")
    (root / "raftlog" / "storage" / "_records.built.so").write_bytes(b"")
    (root / "api" / "console").mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(ROOT / "api" / "console" / name, root / "api" / "console" / name)
    calls = tmp_path / "pip-calls"
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n')
    venv_python.chmod(0o755)
    tools = tmp_path / "bin"  # only these commands: none of the test tools, and `id` says not root
    tools.mkdir()
    for tool in TOOLS:
        found = sys._base_executable if tool == "python3" else shutil.which(tool)  # not pyenv's shim
        assert found is not None, tool
        (tools / tool).symlink_to(os.path.realpath(found))
    (tools / "id").write_text("#!/usr/bin/env bash\necho 1000\n")
    (tools / "id").chmod(0o755)
    # npm, as the console's assets need it: records what it is asked and installs an empty package
    (tools / "npm").write_text(
        f'#!/usr/bin/env bash\necho "npm $*" >> {calls}\nmkdir -p node_modules/uplot\n'
    )
    (tools / "npm").chmod(0o755)
    return root, calls, {"PATH": str(tools), "HOME": str(tmp_path)}


def test_the_cluster_level_needs_no_test_tool_and_installs_no_extra(tmp_path: pathlib.Path) -> None:
    root, calls, environment = _project(tmp_path)
    done = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "cluster"], env=environment,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    installs = [line for line in calls.read_text().splitlines() if " install " in f" {line} "]
    assert installs[-1].endswith("-e ."), installs  # raftlog alone: no dev, spark or jepsen extra
    assert "-c scripts/python-constraints.txt" in installs[-1], installs  # at the versions last tested
    assert not any(tool in done.stderr for tool in ("kcat", "zsh", "fish", "fuse3", "promtool"))
    assert "npm ci --no-audit --no-fund --loglevel=error" in calls.read_text()  # the console's chart library
    before = calls.read_text()
    again = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "cluster"], env=environment,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert again.returncode == 0 and calls.read_text() == before, "the second run finds it done"


def test_the_test_level_names_the_tool_it_needs(tmp_path: pathlib.Path) -> None:
    root, calls, environment = _project(tmp_path)
    done = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], env=environment,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1
    assert "kcat is missing" in done.stderr and "apt-get install kcat" in done.stderr
    # named first: before ~1.2 GB of packages and the jars are downloaded, and before any chain starts
    asked = calls.read_text().splitlines() if calls.exists() else []
    assert not any(" install " in f" {line} " for line in asked), asked
    assert not list((root / ".venv").glob(".installed-*"))


def test_the_test_level_names_chromium_for_the_browser_tests(tmp_path: pathlib.Path) -> None:
    # the web console's tests drive Debian's Chromium with the dev extra's Playwright
    root, _, environment = _project(tmp_path)
    tools = pathlib.Path(environment["PATH"])
    for present in ("kcat", "zsh", "fish", "fusermount3", *FAULT_TOOLS):  # the tools asked for before it
        (tools / present).write_text("#!/usr/bin/env bash\n")
        (tools / present).chmod(0o755)
    done = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], env=environment,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1
    assert "chromium is missing" in done.stderr and "apt-get install chromium" in done.stderr, done.stderr
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dev_extra = extras["dev"]
    assert any(requirement.startswith("playwright") for requirement in dev_extra), dev_extra


def test_the_test_level_names_the_fault_tools_it_needs(tmp_path: pathlib.Path) -> None:
    """Without them the fault tests fail (``tests/required_tools.py``): the set-up installs each by name."""
    root, _, environment = _project(tmp_path)
    tools = pathlib.Path(environment["PATH"])
    packages = {"ip": "iproute2", "tc": "iproute2", "mkfs.ext4": "e2fsprogs", "mount": "mount"}
    for present in ("kcat", "zsh", "fish", "fusermount3"):
        (tools / present).write_text("#!/usr/bin/env bash\n")
        (tools / present).chmod(0o755)
    for tool in FAULT_TOOLS:
        done = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], env=environment,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert done.returncode == 1
        assert f"{tool} is missing" in done.stderr, done.stderr
        assert f"apt-get install {packages[tool]}" in done.stderr, done.stderr
        (tools / tool).write_text("#!/usr/bin/env bash\n")
        (tools / tool).chmod(0o755)


def test_a_download_chain_that_fails_fails_the_test_level_naming_it(tmp_path: pathlib.Path) -> None:
    """The test level's downloads run beside the Python install: one that fails (here Kafka's install
    script, absent from this copy) fails the set-up after the install, and the message names it."""
    root, calls, environment = _project(tmp_path)
    tools = pathlib.Path(environment["PATH"])
    for present in ("kcat", "zsh", "fish", "fusermount3", *FAULT_TOOLS, "chromium", "java", "mvn", "setsid"):
        if not (tools / present).exists():
            (tools / present).symlink_to(os.path.realpath(shutil.which(present) or "/bin/true"))
    quixstreams = root / ".venv" / "quixstreams"  # found installed: no other chain downloads anything
    quixstreams.mkdir()
    files = ("quixstreams-requirements.txt", "quixstreams-constraints.txt")
    pinned = b"".join((root / "examples" / name).read_bytes() for name in files)
    (quixstreams / f".installed-{hashlib.sha256(pinned).hexdigest()[:16]}").touch()
    done = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], env=environment,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "installing quixstreams" not in done.stderr, done.stderr
    assert "bootstrap: installing Kafka's and Avro's jars" in done.stderr, done.stderr
    assert "failed (exit 127)" in done.stderr, done.stderr
    asked = calls.read_text().splitlines()
    assert any(line.endswith("-e .[dev,spark]") for line in asked), asked  # the install went on meanwhile
