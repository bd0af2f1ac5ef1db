"""Where the cluster commands find their server, token, user and CA: the command line, else the environment
(``RAFTLOG_SERVER``, ``RAFTLOG_ADMIN_TOKEN``, ``RAFTLOG_USER`` and ``RAFTLOG_PASSWORD`` or
``RAFTLOG_USER_TOKEN``, ``RAFTLOG_CA``), else a profile of the config file, else the local ``raftlog
dev`` on 127.0.0.1:8081. A user is what a cluster serving with ``--require-auth`` asks of the data
commands: a name and password (HTTP Basic), or one of the user's API tokens (``rlt_...``, made by
``raftlog user token create``, sent as a bearer token), one or the other; the first place that names a
user decides (``--user``, else the environment, else the file). Neither a password nor a token is ever
taken from the command line (it would show in ``ps``), only from the environment or the file: the admin
token too (``$RAFTLOG_ADMIN_TOKEN`` or ``admin_token``; ``--admin-token T`` is refused), which is sent on
the admin API only. The CA (a PEM file) is what
https servers are checked against, e.g. ``raftlog dev --tls``'s ``data/tls/ca.pem`` (default: the
system's trusted roots).

The config file is ``$RAFTLOG_CONFIG``, else ``~/.config/raftlog/config.toml``::

    server = "http://127.0.0.1:8081"          # the default profile
    admin_token = "..."
    user = "alice"                            # with password = "...": for --require-auth clusters
    # user_token = "rlt_..."                  # or, instead of user and password, one of a user's tokens
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
KEYS = frozenset({"server", "admin_token", "user", "password", "user_token", "ca"})
TOKEN_PREFIX = "rlt_"  # a user's API token (an admin token is not one)


class ProfileError(Exception):
    """The config file or the profile asked for cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Target:
    server: str
    token: str | None
    user: tuple[str, str] | None = None  # (name, password)
    ca: str | None = None  # a PEM file of CA certificates
    user_token: str | None = None  # one of a user's API tokens, instead of ``user``


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
    if args.token is not None:
        raise ProfileError(
            f"--admin-token would show the token to every local user (ps, /proc/PID/cmdline): set "
            f"$RAFTLOG_ADMIN_TOKEN, or admin_token in {path}"
        )
    token = os.environ.get("RAFTLOG_ADMIN_TOKEN") or settings.get("admin_token")
    ca = args.ca or os.environ.get("RAFTLOG_CA") or settings.get("ca")
    if ca is not None and not os.path.isfile(ca):
        raise ProfileError(f"CA file {ca}: no such file (--ca, $RAFTLOG_CA or ca in {path})")
    name, user_token = _as_user(args, settings, path)
    if user_token is not None:
        return Target(server, token, None, ca, user_token)
    if name is None:
        return Target(server, token, None, ca)
    password = os.environ.get("RAFTLOG_PASSWORD") or settings.get("password")
    if password is None:
        raise ProfileError(f"user {name!r} has no password: set $RAFTLOG_PASSWORD or password in {path}")
    return Target(server, token, (name, password), ca)


def _as_user(args: argparse.Namespace, settings: dict[str, str], path: str) -> tuple[str | None, str | None]:
    """(user name, user token): at most one, from the first place that names either."""
    if args.user:
        return args.user, None
    places = (
        ("$RAFTLOG_USER", os.environ.get("RAFTLOG_USER"), "$RAFTLOG_USER_TOKEN",
         os.environ.get("RAFTLOG_USER_TOKEN")),
        (f"user in {path}", settings.get("user"), f"user_token in {path}", settings.get("user_token")),
    )  # fmt: skip
    for user_place, name, token_place, user_token in places:
        if name and user_token:
            raise ProfileError(f"{user_place} and {token_place}: give a user or a user's token, not both")
        if user_token:
            if not user_token.startswith(TOKEN_PREFIX):
                raise ProfileError(
                    f"{token_place} is not a user's API token (they start with {TOKEN_PREFIX}; the admin "
                    "token goes in $RAFTLOG_ADMIN_TOKEN or admin_token)"
                )
            return None, user_token
        if name:
            return name, None
    return None, None


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        help="base URL(s) of any node, comma-separated (default: $RAFTLOG_SERVER, the profile's, or "
        f"{SERVER_DEFAULT})",
    )
    # never in argv, which every local user reads (ps): taken only to refuse it, naming the ways that work
    parser.add_argument("--admin-token", "--token", dest="token", help=argparse.SUPPRESS)
    parser.add_argument(
        "--user",
        help="a user of the cluster (HTTP Basic; its password: $RAFTLOG_PASSWORD or the profile's). A user's "
        "API token instead: $RAFTLOG_USER_TOKEN or the profile's user_token",
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
