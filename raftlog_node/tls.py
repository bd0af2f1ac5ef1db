"""TLS on a node's doors (the HTTP API and the Kafka listener) and on its calls to other nodes.

``raftlog serve --tls-cert FILE --tls-key FILE [--tls-ca FILE] [--tls-client-auth none|optional|required]``:
both listeners present the certificate; ``--tls-ca`` is what the node trusts, for the certificates clients
present (``optional``: checked when one is sent; ``required``: a client without a valid one is refused in
the handshake) and for the other nodes it calls over HTTPS, to which it presents its own certificate (so
``required`` holds between nodes too). Without ``--tls-ca`` the system's trusted roots are used. TLS 1.2 at
least. Raft and gossip traffic between nodes is sealed with the cluster secret instead (``consensus/wire``).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A TLS option that cannot be used: the message names it and says why."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: str
    key: str
    ca: str | None = None
    client_auth: str = "none"


def tls_files(cert: str | None, key: str | None, ca: str | None, client_auth: str) -> TlsFiles | None:
    """The TLS options as given (None: no TLS), checked: both of cert and key, readable files, a CA to
    check client certificates with."""
    if cert is None and key is None:
        if ca is not None or client_auth != "none":
            raise TlsConfigError("--tls-ca and --tls-client-auth need --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise TlsConfigError("--tls-cert and --tls-key go together")
    if client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"--tls-client-auth {client_auth!r}: one of {', '.join(CLIENT_AUTH)}")
    if client_auth != "none" and ca is None:
        raise TlsConfigError(
            f"--tls-client-auth {client_auth} needs --tls-ca: the CA client certificates are checked with"
        )
    for option, path in (("--tls-cert", cert), ("--tls-key", key), ("--tls-ca", ca)):
        if path is not None and not os.access(path, os.R_OK):
            raise TlsConfigError(f"{option} {path}: not a readable file")
    files = TlsFiles(os.path.abspath(cert), os.path.abspath(key), ca and os.path.abspath(ca), client_auth)
    server_context(files)  # a key that does not match the certificate, or a file that is not PEM, fails here
    return files


def server_context(files: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(files.cert, files.key)
        if files.ca is not None:
            context.load_verify_locations(files.ca)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(
            f"--tls-cert {files.cert} / --tls-key {files.key} / --tls-ca {files.ca}: {exc}"
        ) from exc
    context.verify_mode = CLIENT_AUTH[files.client_auth]
    return context


def peer_context(files: TlsFiles) -> ssl.SSLContext:
    """How a node calls the others: it checks their certificates (against ``--tls-ca``, else the system's
    roots, host names included) and presents its own."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=files.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    return context


def client_context(ca: str | None, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """A client's: trusts ``ca`` (else the system's roots) and presents ``cert``/``key`` when given."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context
