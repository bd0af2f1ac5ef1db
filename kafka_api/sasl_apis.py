"""SaslHandshake (v1; v0 refused) and SaslAuthenticate (v0-v2): a connection authenticates with PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512 against the SCRAM credentials the controller replicates, or with SCRAM and
a delegation token (``tokenauth=true``: the token's id and HMAC; the connection acts as its owner, while
the token is held and has not expired, and is cut once it is not). The exchanges
themselves are ``kafka_api.sasl``'s; this is where they meet a connection (``door.session``).

What closes the connection once the answer is sent (``session.closing``), as Kafka does: a failed
authentication (SASL_AUTHENTICATION_FAILED, with words that do not say whether the user exists), a
mechanism not offered (UNSUPPORTED_SASL_MECHANISM), SaslHandshake v0 (UNSUPPORTED_VERSION: after it a
client would send its SASL tokens without Kafka's framing, which this listener does not read), and a
SaslAuthenticate without a SaslHandshake or a second SaslHandshake before the end of the exchange
(ILLEGAL_SASL_STATE). An authenticated connection asking again is answered ILLEGAL_SASL_STATE and stays
open: there is no re-authentication (KIP-368), sessions do not expire (``session_lifetime`` 0); instead
the listener re-checks what the connection authenticated with (its token, else its user's credentials:
``Session.token_id``, ``Session.credentials``) at every request and every second, and cuts it once that
is gone from the node's metadata (``kafka_api.server``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_api import wire
from kafka_api.door import Door
from kafka_api.sasl import (
    MECHANISMS,
    PLAIN,
    AuthenticationFailed,
    Exchange,
    PlainExchange,
    ScramExchange,
    Users,
    failure_message,
)
from partitions.security.tokens import check_token, is_users_token
from partitions.security.users import ScramCredential

log = logging.getLogger(__name__)


async def sasl_handshake(door: Door, request: wire.Request) -> Any:
    session = door.session
    cls = wire.response_class(request.api_key, request.api_version)

    def answer(code: ErrorCode) -> Any:
        return wire.build(cls, error_code=code, mechanisms=MECHANISMS)

    if request.api_version == 0:
        session.closing = "SaslHandshake v0 (SASL tokens without Kafka's framing) is not served: use v1"
        return answer(ErrorCode.unsupported_version)
    if session.user is not None:
        return answer(ErrorCode.illegal_sasl_state)  # authenticated already: no re-authentication
    if session.mechanism is not None:
        session.closing = "a second SaslHandshake during a SASL exchange"
        return answer(ErrorCode.illegal_sasl_state)
    mechanism = request.body.mechanism
    if mechanism not in MECHANISMS:
        session.closing = f"SASL mechanism {mechanism[:40]!r} is not offered"
        return answer(ErrorCode.unsupported_sasl_mechanism)
    session.mechanism = mechanism
    return answer(ErrorCode.none)


def _exchange(door: Door, mechanism: str) -> Exchange:
    users = door.node.metadata.users()  # as the controller holds them now
    security = door.security
    session = door.session
    if mechanism == PLAIN:  # a password, or one of the user's API tokens in its place
        tokens, now_ms = door.node.metadata.tokens(), security.clock_ms()

        def verify(users: Users, name: str, password: str) -> bool:
            # runs off the loop while the connection's one SASL request waits for it: nothing else
            # touches the session meanwhile
            if is_users_token(tokens, users, name, password, now_ms):
                token = check_token(tokens, password, now_ms)
                session.token_id = None if token is None else token.token_id
                return True
            return security.verifier.verify(users, name, password)

        return PlainExchange(users, verify)
    delegation_tokens, now_ms = door.node.metadata.delegation_tokens(), security.clock_ms()

    def token_credential(mechanism: str, token_id: str) -> tuple[str, ScramCredential] | None:
        # a token held, not expired, whose owner is still a user (PBKDF2 once per token: remembered)
        token = delegation_tokens.get(token_id)
        if token is None or token.expired(now_ms) or token.owner not in users:
            return None
        return token.owner, security.token_secrets.scram_credential(token_id, mechanism)

    return ScramExchange(mechanism, users, security.unknown_salt_key, token_credential=token_credential)


async def sasl_authenticate(door: Door, request: wire.Request) -> Any:
    session = door.session
    cls = wire.response_class(request.api_key, request.api_version)

    def answer(code: ErrorCode, message: str | None = None, data: bytes = b"") -> Any:
        return wire.build(cls, error_code=code, error_message=message, auth_bytes=data)

    if session.user is not None:
        return answer(ErrorCode.illegal_sasl_state, "this connection has authenticated already")
    mechanism = session.mechanism
    if mechanism is None:
        session.closing = "SaslAuthenticate before SaslHandshake"
        return answer(ErrorCode.illegal_sasl_state, "SaslHandshake comes first: it chooses the mechanism")
    failures, now_s = door.security.login_failures, time.monotonic()
    wait_s = failures.retry_after_s(session.host, None, now_s)  # the node's count, the HTTP door's too
    if wait_s is not None:
        session.exchange = None
        session.closing = f"SASL refused unchecked: too many failed logins from {session.host} lately"
        # the words of every failure, so that a client's check of them holds, and why
        return answer(
            ErrorCode.sasl_authentication_failed,
            f"{failure_message(mechanism)} (too many failed logins lately: retry in {math.ceil(wait_s)} s)",
        )
    if session.exchange is None:
        session.exchange = _exchange(door, mechanism)
    exchange = session.exchange
    token = request.body.auth_bytes
    try:
        # PLAIN may run PBKDF2 (milliseconds): off the event loop; a SCRAM step is a few HMACs
        step = await asyncio.to_thread(exchange.step, token) if exchange.blocking else exchange.step(token)
    except AuthenticationFailed as failed:
        session.exchange = None
        session.closing = f"SASL authentication failed: {failed}"
        reached = failures.failed(session.host, None, now_s)
        count = failures.log_due(now_s)
        if count is not None:
            log.warning(
                "Kafka: SASL %s failed from %s: %s%s (%d failed logins on this node since the last line)",
                mechanism, session.host, failed,
                "; its further attempts are refused for a while" if reached else "", count,
            )  # fmt: skip
        return answer(ErrorCode.sasl_authentication_failed, failure_message(mechanism))
    if step.user is not None:
        session.user, session.exchange = step.user, None
        session.delegation_token_id = step.token_id
        # what the listener re-checks while the connection lasts (``Security.credential_gone``)
        session.credentials = door.node.metadata.users().get(step.user, ())
        log.debug("Kafka: a connection authenticated as %s with %s", session.principal, mechanism)
    return answer(ErrorCode.none, None, step.data)
