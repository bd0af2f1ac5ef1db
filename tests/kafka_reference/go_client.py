"""The Go client's program (franz-go, ``go/main.go``) as the tests build it: once per run, with the
machine's Go or the Go module proxy's toolchain (``scripts/go_toolchain.sh``), its modules from the Go
module proxy, pinned by go.sum."""

from __future__ import annotations

import pathlib
import subprocess

GO_SOURCE = pathlib.Path(__file__).resolve().parent / "go"
BUILD_TIMEOUT_S = 600


def build_go_client(directory: pathlib.Path) -> pathlib.Path:
    """The program built into ``directory``; its path."""
    binary = directory / "kafkareference"
    toolchain = GO_SOURCE.parents[2] / "scripts" / "go_toolchain.sh"  # the machine's go, or the proxy's
    go = subprocess.run(
        [str(toolchain)], check=True, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    ).stdout
    subprocess.run(
        [go.strip(), "build", "-o", str(binary), "."],
        cwd=GO_SOURCE,
        check=True,
        capture_output=True,
        timeout=BUILD_TIMEOUT_S,
    )
    return binary
