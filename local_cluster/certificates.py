"""A development certificate authority and the certificates it signs, as PEM files (with `cryptography`).

What a secure local cluster and the tests need, and what Kafka 2.7+ reads as `ssl.keystore.type=PEM`:
a CA certificate (the truststore, `ssl.truststore.location`), and per broker, controller or client a key
with its CA-signed certificate chain in one file (the keystore, `ssl.keystore.location`), its private key
encrypted when a password is given (`ssl.key.password`). Certificates are good for both ends of a TLS
connection (serverAuth and clientAuth), since a broker is a server to clients and a client to its peers,
and name the hosts they serve as subject alternative names (TLS clients check the name they dialled).

A subject is written as Kafka prints an SSL principal, RFC 4514 / X.500 order: "CN=alice,OU=dev".
Keys are EC P-256: quick to make (a cluster's worth in milliseconds) and accepted by every TLS client here.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

CA_CERTIFICATE = "ca.pem"
CA_KEY = "ca-key.pem"
DEFAULT_CA_SUBJECT = "CN=minibroker development CA,O=minibroker"
CA_VALID_DAYS = 3650
VALID_DAYS = 825  # what browsers and most TLS stacks still accept for a leaf certificate
# A certificate is valid from a little before it is made: the clocks of the other processes may lag.
BACKDATE = datetime.timedelta(minutes=5)

Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def parse_subject(subject: str) -> x509.Name:
    """"CN=alice,OU=dev" (RFC 4514, as Kafka prints a principal) -> an X.509 name."""
    try:
        name = x509.Name.from_rfc4514_string(subject)
    except ValueError as e:
        raise ValueError(f"invalid certificate subject {subject!r}: {e}") from None
    if not len(name):
        raise ValueError(f"invalid certificate subject {subject!r}: it is empty")
    return name


def subject_text(name: x509.Name) -> str:
    """The RFC 4514 form of a name: what Java's X500Principal.getName() gives, so Kafka's SSL principal."""
    return name.rfc4514_string()


def _san(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _write_private(path: Path, data: bytes) -> Path:
    """Write a file only its owner can read (it may hold a private key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
    return path


@dataclass(frozen=True)
class IssuedCertificate:
    """A key and its certificate, signed by `issuer` (whose certificate completes the chain)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    issuer: x509.Certificate

    @property
    def subject(self) -> str:
        return subject_text(self.certificate.subject)

    def certificate_pem(self) -> bytes:
        return _cert_pem(self.certificate)

    def chain_pem(self) -> bytes:
        """The certificate then its issuer's: Kafka's `ssl.keystore.certificate.chain`."""
        return _cert_pem(self.certificate) + _cert_pem(self.issuer)

    def key_pem(self, password: str | None = None) -> bytes:
        """The private key, PKCS#8, encrypted with `password` if one is given: Kafka's `ssl.keystore.key`."""
        return _key_pem(self.key, password)

    def keystore_pem(self, password: str | None = None) -> bytes:
        """Key and chain in one PEM file: Kafka's `ssl.keystore.location` with `ssl.keystore.type=PEM`
        (and the `certfile` of Python's ssl.load_cert_chain, librdkafka's `ssl.key.location` +
        `ssl.certificate.location`)."""
        return self.key_pem(password) + self.chain_pem()

    def write_keystore(self, path: Path, password: str | None = None) -> Path:
        return _write_private(path, self.keystore_pem(password))

    def write_files(self, directory: Path, name: str, password: str | None = None) -> CertificateFiles:
        """`<name>.pem` (key + chain), `<name>-cert.pem` (chain) and `<name>-key.pem` (key) in `directory`,
        for the clients that want the key and the certificate apart (librdkafka, kcat, grpc)."""
        key, chain = self.key_pem(password), self.chain_pem()  # one encryption (its salt is random)
        return CertificateFiles(
            keystore=_write_private(directory / f"{name}.pem", key + chain),
            certificate=_write_private(directory / f"{name}-cert.pem", chain),
            key=_write_private(directory / f"{name}-key.pem", key),
        )


@dataclass(frozen=True)
class CertificateFiles:
    keystore: Path  # key then chain
    certificate: Path  # chain only
    key: Path  # key only (encrypted when written with a password)


class CertificateAuthority:
    """A self-signed CA that signs certificates; created fresh, or loaded from the files it wrote."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate,
                 clock: Clock = _utcnow) -> None:
        self.key = key
        self.certificate = certificate
        self._clock = clock

    @classmethod
    def create(cls, subject: str = DEFAULT_CA_SUBJECT, *, valid_days: int = CA_VALID_DAYS,
               clock: Clock = _utcnow) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = parse_subject(subject)
        now = clock()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + datetime.timedelta(days=valid_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate, clock)

    @classmethod
    def load(cls, directory: Path, clock: Clock = _utcnow) -> CertificateAuthority:
        """The CA written by `write(directory)`."""
        key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{directory / CA_KEY} is not an EC private key")
        certificate = x509.load_pem_x509_certificate((directory / CA_CERTIFICATE).read_bytes())
        return cls(key, certificate, clock)

    @classmethod
    def load_or_create(cls, directory: Path, subject: str = DEFAULT_CA_SUBJECT,
                       clock: Clock = _utcnow) -> CertificateAuthority:
        """The CA of `directory`, made and written there the first time: a cluster started again keeps the
        CA its clients trust."""
        if (directory / CA_CERTIFICATE).is_file() and (directory / CA_KEY).is_file():
            return cls.load(directory, clock)
        ca = cls.create(subject, clock=clock)
        ca.write(directory)
        return ca

    @property
    def subject(self) -> str:
        return subject_text(self.certificate.subject)

    def certificate_pem(self) -> bytes:
        """The truststore: Kafka's `ssl.truststore.location` (PEM), librdkafka's `ssl.ca.location`."""
        return _cert_pem(self.certificate)

    def write(self, directory: Path) -> Path:
        """`ca.pem` (the certificate, world-readable) and `ca-key.pem` (owner only); returns ca.pem's path."""
        directory.mkdir(parents=True, exist_ok=True)
        _write_private(directory / CA_KEY, _key_pem(self.key, None))
        path = directory / CA_CERTIFICATE
        path.write_bytes(self.certificate_pem())
        return path

    def issue(self, subject: str, *, hosts: Sequence[str] = (), valid_days: int = VALID_DAYS,
              not_before: datetime.datetime | None = None,
              not_after: datetime.datetime | None = None) -> IssuedCertificate:
        """A new key and a certificate for `subject` ("CN=broker-1,OU=minibroker"), for servers and clients,
        naming `hosts` (DNS names or IP addresses) as its alternative names. `not_before`/`not_after` set the
        validity outright (an expired certificate for a test: both in the past)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = self._clock()
        start = not_before if not_before is not None else now - BACKDATE
        end = not_after if not_after is not None else now + datetime.timedelta(days=valid_days)
        builder = (
            x509.CertificateBuilder()
            .subject_name(parse_subject(subject))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_agreement=True,
                                         content_commitment=False, data_encipherment=False,
                                         key_cert_sign=False, crl_sign=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                           critical=False)
        )
        if hosts:
            builder = builder.add_extension(x509.SubjectAlternativeName(_san(hosts)), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        return IssuedCertificate(key, certificate, self.certificate)
