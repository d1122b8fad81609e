"""TLS for minibroker's gRPC door, from Kafka's PEM stores: server and channel credentials, and the SASL-style
username and password a client may add to every call.

Brokers, controllers, tools and the client all make their gRPC channels here, so whether a channel is
plaintext or TLS (and with which certificate) is decided in one place (`GrpcSecurity.channel` and
`.aio_channel`). The stores are Kafka 2.7+'s PEM ones: a key store is one file holding the private key
(PKCS#8, encrypted when `ssl.key.password` is set) and its certificate chain; a trust store a file of CA
certificates. gRPC wants the key unencrypted in memory, so it is decrypted here with `cryptography`.

A client that has a username and password (Kafka's `sasl.username`/`sasl.password`, kafka-python's
`sasl_plain_username`/`sasl_plain_password`) sends them on every call as gRPC call credentials, an
`authorization: Basic <base64(user:password)>` header. gRPC only ever sends call credentials over TLS, so the
password never crosses the network in clear; the broker checks it against the user's SCRAM credential in
ZooKeeper (broker/security/grpc_authentication.py).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from common.jaas import JaasError, parse_jaas_config

AUTHORIZATION_METADATA_KEY = "authorization"
_BASIC = "Basic "
_PRIVATE_KEY_BLOCK = re.compile(
    rb"-----BEGIN (?:ENCRYPTED |EC |RSA )?PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)

ChannelOptions = Sequence[tuple[str, Any]]


class TlsConfigError(ValueError):
    """A key store or trust store that cannot be used; the message names the file and why."""


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsConfigError(f"cannot read the {what} {path}: {e.strerror}") from None


@dataclass(frozen=True)
class KeyStore:
    """A private key (PEM, unencrypted) and its certificate chain (PEM), as gRPC takes them."""

    key_pem: bytes
    chain_pem: bytes

    def __repr__(self) -> str:
        return "KeyStore([hidden])"

    @classmethod
    def from_pem(cls, key_and_chain: bytes, key_password: str | None, source: str) -> KeyStore:
        """Kafka's PEM key store: the private key block and certificate blocks, in any order, in one text."""
        key_block = _PRIVATE_KEY_BLOCK.search(key_and_chain)
        if key_block is None:
            raise TlsConfigError(f"{source} has no private key")
        try:
            key = serialization.load_pem_private_key(
                key_block.group(), password=key_password.encode() if key_password else None)
        except (ValueError, TypeError) as e:
            raise TlsConfigError(f"cannot read the private key of {source} (wrong ssl.key.password?): {e}") from None
        try:
            chain = x509.load_pem_x509_certificates(key_and_chain)
        except ValueError:
            raise TlsConfigError(f"{source} has no certificate") from None
        return cls(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()),
                   b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))

    @classmethod
    def load(cls, location: str, key_password: str | None = None, key_location: str | None = None) -> KeyStore:
        """From `ssl.keystore.location` (key and chain in one file), or the chain there and the key in
        `key_location` (librdkafka's ssl.certificate.location and ssl.key.location)."""
        text = _read(location, "key store")
        if key_location is not None:
            text = _read(key_location, "private key") + b"\n" + text
        return cls.from_pem(text, key_password, location)


def read_truststore(location: str) -> bytes:
    """`ssl.truststore.location` (Kafka) / `ssl.ca.location` (librdkafka): PEM CA certificates."""
    data = _read(location, "trust store")
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsConfigError(f"the trust store {location} holds no PEM certificate") from None
    return data


class _BasicAuth(grpc.AuthMetadataPlugin):
    def __init__(self, username: str, password: str) -> None:
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        self._metadata = ((AUTHORIZATION_METADATA_KEY, _BASIC + token),)

    def __call__(self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback) -> None:
        callback(self._metadata, None)


def basic_credentials(metadata: Sequence[tuple[str, str | bytes]] | None) -> tuple[str, str] | None:
    """The (username, password) of a call's `authorization: Basic` header; None without one or if malformed."""
    for key, value in metadata or ():
        if key != AUTHORIZATION_METADATA_KEY:
            continue
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if not text.startswith(_BASIC):
            return None
        try:
            decoded = base64.b64decode(text[len(_BASIC):], validate=True).decode()
        except ValueError:
            return None
        username, sep, password = decoded.partition(":")
        return (username, password) if sep and username else None
    return None


@dataclass(frozen=True)
class GrpcSecurity:
    """How one end of a gRPC connection secures it: plaintext (no `truststore`), or TLS checked against
    `truststore`, showing `keystore`'s certificate (mutual TLS) when there is one, and, for a client, a SASL
    username and password on every call."""

    truststore: bytes | None = None
    keystore: KeyStore | None = None
    username: str | None = None
    password: str | None = None

    def __repr__(self) -> str:
        return (f"GrpcSecurity(tls={self.tls}, certificate={self.keystore is not None},"
                f" username={self.username!r})")

    @property
    def tls(self) -> bool:
        return self.truststore is not None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        assert self.truststore is not None
        credentials = grpc.ssl_channel_credentials(
            self.truststore, *((self.keystore.key_pem, self.keystore.chain_pem) if self.keystore else ()))
        if self.username is None:
            return credentials
        return grpc.composite_channel_credentials(
            credentials, grpc.metadata_call_credentials(_BasicAuth(self.username, self.password or "")))

    def server_credentials(self, require_client_auth: bool) -> grpc.ServerCredentials:
        """For a TLS listener: its certificate, and with `require_client_auth` only clients whose certificate
        the trust store's CAs signed get through the handshake."""
        if self.keystore is None or self.truststore is None:
            raise TlsConfigError("a TLS gRPC listener needs a key store and a trust store")
        return grpc.ssl_server_credentials([(self.keystore.key_pem, self.keystore.chain_pem)],
                                           root_certificates=self.truststore,
                                           require_client_auth=require_client_auth)

    def channel(self, target: str, options: ChannelOptions = ()) -> grpc.Channel:
        """A blocking-API channel to `target`, plaintext or TLS as this says."""
        if not self.tls:
            return grpc.insecure_channel(target, options=list(options))
        return grpc.secure_channel(target, self.channel_credentials(), options=list(options))

    def aio_channel(self, target: str, options: ChannelOptions = ()) -> grpc.aio.Channel:
        """An asyncio channel to `target` (the client's channel_factory)."""
        if not self.tls:
            return grpc.aio.insecure_channel(target, options=list(options))
        return grpc.aio.secure_channel(target, self.channel_credentials(), options=list(options))

    @property
    def channel_factory(self) -> Callable[..., grpc.aio.Channel]:
        return lambda target, options=(): self.aio_channel(target, options)


PLAINTEXT = GrpcSecurity()

# Kafka's client security protocols, as a gRPC channel takes them: TLS or not (SASL is per call over TLS).
CLIENT_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")


def client_security(props: Mapping[str, str]) -> GrpcSecurity:
    """A client's gRPC security from Kafka client properties (a `--command-config` file), under either the
    Java client's or librdkafka's names, so one file serves kcat, confluent-kafka and minibroker's tools:
    security.protocol (PLAINTEXT, SSL, SASL_SSL); the CA: ssl.ca.location | ssl.truststore.location; a client
    certificate: ssl.certificate.location + ssl.key.location | ssl.keystore.location (key and chain), with
    ssl.key.password; a SASL user: sasl.username + sasl.password (librdkafka) | sasl.jaas.config's username and
    password (Java). TlsConfigError names what is missing or unreadable."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in CLIENT_SECURITY_PROTOCOLS:
        raise TlsConfigError(f"security.protocol {protocol} is not one minibroker's gRPC client speaks"
                             f" ({', '.join(CLIENT_SECURITY_PROTOCOLS)})")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    ca = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
    if not ca:
        raise TlsConfigError(f"security.protocol {protocol} needs the CA certificate: ssl.ca.location")
    password = props.get("ssl.key.password")
    keystore = None
    if props.get("ssl.certificate.location"):
        keystore = KeyStore.load(props["ssl.certificate.location"], password, props.get("ssl.key.location"))
    elif props.get("ssl.keystore.location"):
        keystore = KeyStore.load(props["ssl.keystore.location"], password)
    username = sasl_password = None
    if protocol == "SASL_SSL":
        username, sasl_password = props.get("sasl.username"), props.get("sasl.password")
        if username is None and props.get("sasl.jaas.config"):
            try:
                options = parse_jaas_config(props["sasl.jaas.config"])[0].options
            except JaasError as e:
                raise TlsConfigError(f"sasl.jaas.config: {e}") from None
            username, sasl_password = options.get("username"), options.get("password")
        if not username or sasl_password is None:
            raise TlsConfigError("security.protocol SASL_SSL needs sasl.username and sasl.password")
    return GrpcSecurity(read_truststore(ca), keystore, username, sasl_password)
