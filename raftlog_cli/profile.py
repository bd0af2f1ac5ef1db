"""Where the cluster commands find their server, token, user and CA: the command line, else the environment
(``RAFTLOG_SERVER``, ``RAFTLOG_ADMIN_TOKEN``, ``RAFTLOG_USER`` and ``RAFTLOG_PASSWORD``, ``RAFTLOG_CA``),
else a profile of the config file, else the local ``raftlog dev`` on 127.0.0.1:8081. A user (HTTP Basic)
is what a cluster serving with ``--require-auth`` asks of the data commands; the password is never taken
from the command line (it would show in ``ps``), only from the environment or the file. The CA (a PEM
file) is what https servers are checked against, e.g. ``raftlog dev --tls``'s ``data/tls/ca.pem``
(default: the system's trusted roots).

The config file is ``$RAFTLOG_CONFIG``, else ``~/.config/raftlog/config.toml``::

    server = "http://127.0.0.1:8081"          # the default profile
    admin_token = "..."
    user = "alice"                            # with password = "...": for --require-auth clusters
    ca = "/path/to/data/tls/ca.pem"           # https servers signed by this CA

    [profiles.prod]
    server = "http://10.0.0.1:8081,http://10.0.0.2:8081"
    admin_token = "..."

``--profile NAME`` (or ``RAFTLOG_PROFILE``) picks one of ``[profiles.NAME]``; a name the file does not
have, a key it does not know or a file that is not TOML is an error naming it, never ignored.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass
from typing import Any

SERVER_DEFAULT = "http://127.0.0.1:8081"
KEYS = frozenset({"server", "admin_token", "user", "password", "ca"})


class ProfileError(Exception):
    """The config file or the profile asked for cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Target:
    server: str
    token: str | None
    user: tuple[str, str] | None = None  # (name, password)
    ca: str | None = None  # a PEM file of CA certificates


def config_path() -> str:
    return os.environ.get("RAFTLOG_CONFIG") or os.path.expanduser("~/.config/raftlog/config.toml")


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"config file {path}: {exc}") from None


def _checked(values: dict[str, Any], where: str) -> dict[str, str]:
    unknown = sorted(set(values) - KEYS - {"profiles"})
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    chosen = {key: values[key] for key in KEYS if key in values}
    for key, value in chosen.items():
        if not isinstance(value, str) or not value:
            raise ProfileError(f"{where}: {key} must be a non-empty string")
    return chosen


def resolve(args: argparse.Namespace) -> Target:
    """The server and token a command uses (see the module's docstring)."""
    path = config_path()
    config = _load(path)
    settings = _checked(config, path)
    name = args.profile or os.environ.get("RAFTLOG_PROFILE")
    if name:
        profiles = config.get("profiles", {})
        if not isinstance(profiles, dict) or name not in profiles:
            known = ", ".join(sorted(profiles)) if isinstance(profiles, dict) else ""
            raise ProfileError(f"no profile {name!r} in {path} (profiles: {known or 'none'})")
        settings = {**settings, **_checked(profiles[name], f"{path} [profiles.{name}]")}
    server = args.server or os.environ.get("RAFTLOG_SERVER") or settings.get("server") or SERVER_DEFAULT
    token = args.token or os.environ.get("RAFTLOG_ADMIN_TOKEN") or settings.get("admin_token")
    ca = args.ca or os.environ.get("RAFTLOG_CA") or settings.get("ca")
    if ca is not None and not os.path.isfile(ca):
        raise ProfileError(f"CA file {ca}: no such file (--ca, $RAFTLOG_CA or ca in {path})")
    name = args.user or os.environ.get("RAFTLOG_USER") or settings.get("user")
    if name is None:
        return Target(server, token, None, ca)
    password = os.environ.get("RAFTLOG_PASSWORD") or settings.get("password")
    if password is None:
        raise ProfileError(f"user {name!r} has no password: set $RAFTLOG_PASSWORD or password in {path}")
    return Target(server, token, (name, password), ca)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        help="base URL(s) of any node, comma-separated (default: $RAFTLOG_SERVER, the profile's, or "
        f"{SERVER_DEFAULT})",
    )
    parser.add_argument(
        "--admin-token", "--token", dest="token",
        help="admin API token (default: $RAFTLOG_ADMIN_TOKEN or the profile's)",
    )  # fmt: skip
    parser.add_argument(
        "--user", help="a user of the cluster (HTTP Basic; its password: $RAFTLOG_PASSWORD or the profile's)"
    )
    parser.add_argument(
        "--ca", metavar="FILE",
        help="PEM file of the CA that signed the servers' certificates, for https servers (default: "
        "$RAFTLOG_CA, the profile's, or the system's trusted roots)",
    )  # fmt: skip
    parser.add_argument(
        "--profile",
        help="a [profiles.NAME] of the config file ($RAFTLOG_CONFIG or ~/.config/raftlog/config.toml)",
    )
