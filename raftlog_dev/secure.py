"""``raftlog dev --secure``: the dev cluster as a production one is run, TLS and authentication on every
door. On top of ``--tls`` (``certificates``), every node serves with ``--require-auth`` (users on the
HTTP API,
SASL on Kafka), ``--enforce-acls`` (a user may do only what ACLs allow), an admin token for ``/v1`` and
``--super-user admin``; once the cluster is up the supervisor creates the user ``admin`` through
``/v1/users`` (setting its password again at every start). Other users need ACLs (``raftlog acl``).

The admin token and the user's random password are made once in ``DATA_DIR/security.json`` (readable by
its owner only) and kept; ``cluster.json``'s ``security`` object names them with the CA clients trust. The
nodes read the token from ``DATA_DIR/admin.token`` (owner-only too), never from their command line, which
every local user can read; the clients ``raftlog dev`` shows (``hints``) read them from the owner-only
files of ``client_files``, named on their command lines instead of the secrets."""

from __future__ import annotations

import json
import os
import secrets
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass

from raftlog_contract import USERS_PATH

USER = "admin"
SASL_MECHANISM = "SCRAM-SHA-256"  # the one the hints' Kafka clients use
CREATE_TIMEOUT_S = 30.0  # the controller elects its first leader within seconds of the nodes' start


@dataclass(frozen=True, slots=True)
class DevSecurity:
    user: str
    password: str
    admin_token: str

    def serve_args(self, token_file: str) -> list[str]:
        """What every node of the cluster is started with: the token by its file (``write_token``)."""
        return [
            "--require-auth", "--enforce-acls", "--admin-token-file", token_file, "--super-user", self.user,
        ]  # fmt: skip

    def description(self, ca: str) -> dict[str, str]:
        """cluster.json's ``security``: what a client needs (the CA to trust, a user and its password;
        the admin token for ``/v1``)."""
        return {"ca": ca, "user": self.user, "password": self.password, "admin_token": self.admin_token}


def dev_security(data_dir: str) -> DevSecurity:
    """The cluster's admin token and admin user, from ``data_dir/security.json``; made the first time."""
    path = os.path.join(data_dir, "security.json")
    try:
        with open(path, encoding="utf-8") as f:
            kept = json.load(f)
        return DevSecurity(str(kept["user"]), str(kept["password"]), str(kept["admin_token"]))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} cannot be read ({exc}): remove it to make new credentials") from None
    made = DevSecurity(USER, secrets.token_urlsafe(18), secrets.token_hex(16))
    _write_private(path, json.dumps(asdict(made), indent=2))
    return made


def write_token(data_dir: str, security: DevSecurity) -> str:
    """``data_dir/admin.token``, readable by its owner only, holding the admin token the nodes read
    (``serve --admin-token-file``); its path."""
    path = os.path.join(data_dir, "admin.token")
    _write_private(path, security.admin_token + "\n")
    return path


@dataclass(frozen=True, slots=True)
class ClientFiles:
    """Where clients find the credentials, in files of ``DATA_DIR`` only their owner may read: a command
    line names one of these, never a secret (every local user reads command lines, as ``ps`` does)."""

    admin_curl: str  # curl -K: the admin token's header
    user_curl: str  # curl -K: the admin user and its password (HTTP Basic)
    kafka: str  # librdkafka's properties (kcat -F, confluent-kafka): TLS and SASL with the admin user
    profile: str  # the raftlog command's config file ($RAFTLOG_CONFIG): server, CA, user and password


def client_files(data_dir: str) -> ClientFiles:
    return ClientFiles(
        *(
            os.path.join(data_dir, name)
            for name in ("admin.curl", "user.curl", "kafka.properties", "raftlog.toml")
        )
    )


def write_client_files(data_dir: str, security: DevSecurity, ca: str, server: str) -> ClientFiles:
    """The files of ``client_files`` for ``security``'s credentials, the CA ``ca`` and a node ``server``."""
    files = client_files(data_dir)
    _write_private(files.admin_curl, f'header = "Authorization: Bearer {security.admin_token}"\n')
    _write_private(files.user_curl, f'user = "{security.user}:{security.password}"\n')
    kafka = {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": ca,
        "sasl.mechanisms": SASL_MECHANISM,
        "sasl.username": security.user,
        "sasl.password": security.password,
    }
    _write_private(files.kafka, "".join(f"{key}={value}\n" for key, value in kafka.items()))
    profile = {"server": server, "ca": ca, "user": security.user, "password": security.password}
    _write_private(files.profile, "".join(f"{key} = {json.dumps(value)}\n" for key, value in profile.items()))
    return files


def _write_private(path: str, text: str) -> None:
    """``path`` replaced in one rename by a file of ``text`` that only its owner may read."""
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def create_user(urls: list[str], security: DevSecurity, context: ssl.SSLContext) -> str | None:
    """Create (or set again) the admin user through the first node that takes it, trying for
    ``CREATE_TIMEOUT_S``; None when done, else why not."""
    body = json.dumps({"name": security.user, "password": security.password}).encode()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {security.admin_token}"}
    deadline = time.monotonic() + CREATE_TIMEOUT_S
    problem = "no node was asked"
    while time.monotonic() < deadline:
        for url in urls:
            request = urllib.request.Request(url + USERS_PATH, body, headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=10, context=context):
                    return None
            except urllib.error.HTTPError as exc:
                problem = f"{url}{USERS_PATH} answered {exc.code}: {exc.read()[:200]!r}"
                exc.close()
                if exc.code != 503:  # anything but "not now" will not change by asking again
                    return problem
            except (urllib.error.URLError, OSError) as exc:
                problem = f"{url}{USERS_PATH}: {exc}"
        time.sleep(0.5)
    return f"the admin user was not created within {CREATE_TIMEOUT_S:.0f} s: {problem}"
