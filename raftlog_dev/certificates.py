"""``raftlog dev --tls``: a local certificate authority and the certificates a dev cluster needs, made once
in ``DATA_DIR/tls`` and kept (a restart reuses them): ``ca.pem`` (what clients trust), ``node.pem`` /
``node.key`` (every node's, for 127.0.0.1 and localhost, usable as server and as client: nodes present it
to each other) and ``client.pem`` / ``client.key`` (a client certificate, for a cluster that requires
one). Keys are written readable by their owner only. ``issue`` makes more (a test's expired one)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import astuple, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where certificates are made: every dev command without TLS starts sooner
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

VALID_DAYS = 825  # what browsers and most clients accept for a leaf certificate


@dataclass(frozen=True, slots=True)
class DevCertificates:
    ca: str
    node_cert: str
    node_key: str
    client_cert: str
    client_key: str


def _write(path: str, data: bytes, private: bool) -> None:
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "raftlog dev"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])  # fmt: skip


def make_ca(directory: str) -> tuple[str, str]:
    """A new CA in ``directory``: (ca.pem, ca.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("raftlog dev CA"))
        .issuer_name(_name("raftlog dev CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca.key")
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), private=False)
    return cert_path, key_path


def issue(
    ca_cert_path: str,
    ca_key_path: str,
    common_name: str,
    prefix: str,
    *,
    server: bool,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> tuple[str, str]:
    """A certificate signed by the CA: ``prefix``.pem and ``prefix``.key. ``server``: also for 127.0.0.1
    and localhost as a TLS server (every one is usable as a client)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    with open(ca_cert_path, "rb") as f:
        ca_cert = x509.load_pem_x509_certificate(f.read())
    with open(ca_key_path, "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca_key_path}: not the EC key raftlog dev makes")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server else [])
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
        .not_valid_after(not_after or now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if server:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(prefix + ".key", _key_pem(key), private=True)
    _write(prefix + ".pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
    return prefix + ".pem", prefix + ".key"


def tls_description(certificates: DevCertificates) -> dict[str, str]:
    """What cluster.json says of them: what a client trusts, and the client certificate it may present."""
    return {
        "ca": certificates.ca,
        "client_cert": certificates.client_cert,
        "client_key": certificates.client_key,
    }


def dev_certificates(data_dir: str) -> DevCertificates:
    """The dev cluster's certificates in ``data_dir/tls``, made the first time and reused after."""
    directory = os.path.join(data_dir, "tls")
    os.makedirs(directory, exist_ok=True)
    made = DevCertificates(*(os.path.join(directory, name) for name in
                             ("ca.pem", "node.pem", "node.key", "client.pem", "client.key")))  # fmt: skip
    if all(os.path.exists(path) for path in (*astuple(made), os.path.join(directory, "ca.key"))):
        return made
    ca_cert, ca_key = make_ca(directory)
    issue(ca_cert, ca_key, "raftlog dev node", os.path.join(directory, "node"), server=True)
    issue(ca_cert, ca_key, "raftlog dev client", os.path.join(directory, "client"), server=False)
    return made
