"""A previous release's code beside this checkout, to run a ``raftlog dev`` node on it (``raftlog dev
restart n2 --python PATH``) and try a rolling upgrade: ``python -m raftlog_dev.releases 0.1.0`` prints the
interpreter to pass.

The release's commit comes from CHANGELOG.md (``## 0.1.0 (commit 4a34550)``: git tags may not travel with
every clone). Its code is a git worktree of that commit under ``.releases/VERSION`` of this checkout, with
its own virtualenv ``.releases/VERSION/.venv`` whose ``raftlog*`` packages are the worktree's. Third-party
packages: when the release declares the same dependencies as this checkout, the virtualenv reads them from
this interpreter's site-packages (nothing downloaded, built in a second); otherwise ``uv pip install -e``
of the worktree (``pip`` where there is no uv) fetches them, uv from the cache this checkout's own set-up
filled. The C extension (``raftlog.storage._records``) is compiled in the worktree. A
tree once built is reused: a marker file records what it was built from. Builds of one checkout take turns
(a lock file under ``.releases/``): two processes asking at once, such as two test workers, get one build.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass

RELEASES_DIR = ".releases"
_MARKER = ".raftlog-release.json"
_CHANGELOG_RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) \(commit ([0-9a-f]{7,40})\)", re.MULTILINE)


class ReleaseError(Exception):
    """The release cannot be had (no such release in the CHANGELOG, git or the build failed): why."""


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    commit: str
    tree: str  # the worktree of its commit
    python: str  # its virtualenv's interpreter: runs the release's code from any folder


def checkout_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def released_commits(root: str | None = None) -> dict[str, str]:
    """Each release the CHANGELOG names with its commit: version -> commit (abbreviated as written)."""
    with open(os.path.join(root or checkout_root(), "CHANGELOG.md"), encoding="utf-8") as f:
        return dict(_CHANGELOG_RELEASE.findall(f.read()))


def _git(root: str, *argv: str) -> str:
    done = subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise ReleaseError(f"git {' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _commit(root: str, named: str) -> str:
    """The full commit ``named`` abbreviates; a shallow clone (CI's) is deepened first when it lacks it."""
    try:
        return _git(root, "rev-parse", "--verify", "--quiet", f"{named}^{{commit}}")
    except ReleaseError:
        if _git(root, "rev-parse", "--is-shallow-repository") != "true":
            raise ReleaseError(f"this clone has no commit {named}") from None
    _git(root, "fetch", "--quiet", "--unshallow")
    return _git(root, "rev-parse", "--verify", f"{named}^{{commit}}")


def _dependencies(tree: str) -> list[str]:
    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        return sorted(tomllib.load(f)["project"].get("dependencies", []))


def release(version: str, root: str | None = None, say: bool = False, into: str | None = None) -> Release:
    """The release ``version``'s code and interpreter, built under ``INTO/VERSION`` (``ROOT/.releases``
    unless told) unless built already (seconds when this checkout's packages serve it; a ``pip install``
    otherwise). One build at a time per checkout, whoever asks: the others wait, then find it built."""
    root = root or checkout_root()
    commits = released_commits(root)
    if version not in commits:
        raise ReleaseError(f"CHANGELOG.md names no release {version} with its commit (it names: {commits})")
    os.makedirs(os.path.join(root, RELEASES_DIR), exist_ok=True)
    with open(os.path.join(root, RELEASES_DIR, ".build.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        commit = _commit(root, commits[version])  # may deepen a shallow clone: one fetch at a time too
        tree = os.path.join(into or os.path.join(root, RELEASES_DIR), version)
        python = os.path.join(tree, ".venv", "bin", "python")
        marker = os.path.join(tree, _MARKER)
        built = {"commit": commit, "python": sys.version.split()[0], "base": sys.prefix}
        if not _built(marker, built, python):
            if say:
                print(f"building release {version} (commit {commit[:12]}) in {tree}", file=sys.stderr)
            _worktree(root, tree, commit)
            _virtualenv(tree, python)
            with open(marker, "w", encoding="utf-8") as f:
                json.dump(built, f)
    return Release(version, commit, tree, python)


def _built(marker: str, built: dict[str, str], python: str) -> bool:
    try:
        with open(marker, encoding="utf-8") as f:
            return json.load(f) == built and os.path.exists(python)
    except (OSError, ValueError):
        return False


def _worktree(root: str, tree: str, commit: str) -> None:
    """A clean git worktree of ``commit`` at ``tree`` (one left by an earlier build is replaced)."""
    if os.path.exists(tree):
        subprocess.run(["git", "-C", root, "worktree", "remove", "--force", tree], capture_output=True)
        shutil.rmtree(tree, ignore_errors=True)
    _git(root, "worktree", "prune")
    os.makedirs(os.path.dirname(tree), exist_ok=True)
    _git(root, "worktree", "add", "--force", "--detach", tree, commit)


def _virtualenv(tree: str, python: str) -> None:
    venv = os.path.dirname(os.path.dirname(python))
    base = getattr(sys, "_base_executable", sys.executable)
    if _dependencies(tree) == _dependencies(checkout_root()):
        _run([base, "-m", "venv", "--without-pip", venv])
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # the release's packages first, then this interpreter's third-party packages (not its .pth files,
        # so this checkout's own editable install stays out)
        ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        with open(os.path.join(site, "raftlog-release.pth"), "w", encoding="utf-8") as f:
            f.write("\n".join([tree, *sorted(ours)]) + "\n")
        _run([sys.executable, "-c", _BUILD_EXTENSION], cwd=tree)
    elif (uv := _uv()) is not None:  # uv installs from the cache this checkout's own set-up filled
        _run([base, "-m", "venv", "--without-pip", venv])
        _run([uv, "pip", "install", "--quiet", "--python", python, "-e", tree])
    else:
        _run([base, "-m", "venv", venv])
        _run([python, "-m", "pip", "install", "--quiet", "-e", tree])


def _uv() -> str | None:
    """The uv of this interpreter's virtualenv (``scripts/bootstrap.sh`` installs it there), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "uv")
    return beside if os.access(beside, os.X_OK) else shutil.which("uv")


# builds raftlog/storage/_records*.so in place, as pyproject's ext-modules table says
_BUILD_EXTENSION = """
import tomllib
from setuptools import Distribution, Extension
with open("pyproject.toml", "rb") as f:
    modules = tomllib.load(f)["tool"]["setuptools"].get("ext-modules", [])
extensions = [Extension(m["name"], m["sources"], extra_compile_args=m.get("extra-compile-args", []))
              for m in modules]
dist = Distribution({"ext_modules": extensions, "script_args": ["build_ext", "--inplace", "--quiet"]})
dist.parse_command_line()
dist.run_commands()
"""


def _run(argv: list[str], cwd: str | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise ReleaseError(f"{' '.join(argv[:4])}: {(done.stderr or done.stdout).strip()[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m raftlog_dev.releases",
        description="build a previous release's code under .releases/ and print its interpreter",
    )
    parser.add_argument("version", help="a release CHANGELOG.md names with its commit, e.g. 0.1.0")
    args = parser.parse_args(argv)
    try:
        built = release(args.version, say=True)
    except ReleaseError as exc:
        print(f"release {args.version}: {exc}", file=sys.stderr)
        return 1
    print(built.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
