"""Who a client is to a cluster and which https servers it trusts: one rule for every client here
(``RaftlogClient``, ``BlockingClient``), so a user, a token or a CA works the same through each."""

from __future__ import annotations

import base64
import ssl

from raftlog_client.errors import ClientError


def trusting(ca: str | None) -> ssl.SSLContext | None:
    """How https servers are checked: against the CA certificates of the PEM file ``ca`` (a cluster's
    own CA, e.g. ``raftlog dev --tls``'s ``ca.pem``), None: against the system's trusted roots.
    Raises ``ClientError`` naming a file that is missing or holds no certificate."""
    if ca is None:
        return None
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(f"CA file {ca}: {exc}") from None


def user_authorization(user: tuple[str, str] | None, user_token: str | None) -> str | None:
    """The ``Authorization`` a cluster serving with ``--require-auth`` asks of calls outside the admin
    API: a user's name and password (HTTP Basic) or one of its API tokens (``rlt_...``, a bearer token);
    None for neither. Both at once is refused: which one would the cluster see?"""
    if user is not None and user_token is not None:
        raise ValueError("user or user_token: one way to call as a user, not both")
    if user_token is not None:
        return f"Bearer {user_token}"
    if user is not None:
        return "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    return None
