"""A Kafka listener's TLS in process (broker/api/kafka/listener.py, listener_security.py): real handshakes
over loopback with the development CA's certificates; each connection's principal as the connection is
handed it; refusals logged with the peer; a listener's bad security config named at start-up."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from pathlib import Path
from typing import Any, ClassVar

import pytest

from broker.api.kafka import listener as listener_module
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.listener import KafkaListener
from broker.api.kafka.listener_security import ListenerSecurity
from broker.config.kafka_config import KafkaConfig
from broker.security.scram import CredentialCache
from common.config import ConfigError
from common.security.principal import ANONYMOUS, KafkaPrincipal
from local_cluster.certificates import CertificateAuthority


def ssl_config(tmp_path: Path, **extra: str) -> tuple[KafkaConfig, CertificateAuthority]:
    ca = CertificateAuthority.create()
    keystore = ca.issue("CN=broker", hosts=["127.0.0.1"]).write_keystore(tmp_path / "broker.pem", "pw")
    config = KafkaConfig.from_props({
        "broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "listeners": "SSL://127.0.0.1:0,GRPC://:0",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.key.password": "pw", "ssl.truststore.location": str(ca.write(tmp_path / "ca")),
        "ssl.handshake.timeout.ms": "300", "connection.failed.authentication.delay.ms": "0", **extra})
    return config, ca


class Recorded:
    principals: ClassVar[list[KafkaPrincipal]] = []

    def __init__(self, context: KafkaContext, reader: Any, writer: asyncio.StreamWriter, peer: str,
                 security: Any) -> None:
        self.context, self.writer = context, writer

    async def run(self) -> None:
        Recorded.principals.append(self.context.principal)
        self.writer.close()


async def _connect(port: int, context: ssl.SSLContext | None) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    await reader.read()  # until the listener closes
    writer.close()


def test_principals_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 caplog: pytest.LogCaptureFixture) -> None:
    config, ca = ssl_config(tmp_path, **{"ssl.client.auth": "requested",
                                         "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*)$/$1@$2/L,DEFAULT"})
    monkeypatch.setattr(listener_module, "KafkaConnection", Recorded)
    Recorded.principals = []
    security = ListenerSecurity.of(config, "SSL", "SSL", CredentialCache())
    context: Any = KafkaContext(config, None, "cluster", None, "SSL", None, None)  # type: ignore[arg-type]

    def client(certificate_subject: str | None, signer: CertificateAuthority = ca) -> ssl.SSLContext:
        tls = ssl.create_default_context(cadata=ca.certificate_pem().decode())
        if certificate_subject is not None:
            tls.load_cert_chain(signer.issue(certificate_subject).write_keystore(
                tmp_path / f"{abs(hash(certificate_subject))}.pem"))
        return tls

    async def scenario() -> None:
        listener = KafkaListener(context, "127.0.0.1", 0, security)
        port = await listener.start()
        try:
            await _connect(port, client("CN=Alice,OU=Dev"))
            await _connect(port, client(None))
            await _connect(port, client("CN=bob", signer=CertificateAuthority.create("CN=other")))
            _, writer = await asyncio.open_connection("127.0.0.1", port)  # says nothing: cut at the deadline
            await asyncio.sleep(0.6)
            writer.close()
        finally:
            await listener.stop()

    with caplog.at_level(logging.WARNING, logger="broker.api.kafka.listener"):
        asyncio.run(scenario())
    assert Recorded.principals == [KafkaPrincipal("User", "alice@dev"), ANONYMOUS]
    refusals = [r.getMessage() for r in caplog.records]
    assert any("Failed TLS handshake with 127.0.0.1:" in m and "certificate verify failed" in m for m in refusals)
    assert any("taking longer than 0.3 seconds" in m for m in refusals), refusals


def test_bad_security_configs_are_named(tmp_path: Path) -> None:
    config, _ = ssl_config(tmp_path, **{"ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match=re.escape("ssl.keystore.location")):
        ListenerSecurity.of(config, "SSL", "SSL", CredentialCache())
    config, _ = ssl_config(tmp_path, **{"ssl.key.password": "wrong"})
    with pytest.raises(ConfigError, match="cannot load the key store"):
        ListenerSecurity.of(config, "SSL", "SSL", CredentialCache())
    config, _ = ssl_config(tmp_path, **{"listener.name.ssl.ssl.principal.mapping.rules": "RULE:x"})
    with pytest.raises(ConfigError, match=re.escape("listener.name.ssl.ssl.principal.mapping.rules")):
        ListenerSecurity.of(config, "SSL", "SSL", CredentialCache())
    sasl = KafkaConfig.from_props({"broker.id": "1", "zookeeper.connect": "z:1",
                                   "listeners": "SASL_PLAINTEXT://:0,GRPC://:0", "sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError, match=re.escape("listener.name.sasl_plaintext.plain.sasl.jaas.config")):
        ListenerSecurity.of(sasl, "SASL_PLAINTEXT", "SASL_PLAINTEXT", CredentialCache())


def test_inline_pem_stores_and_enabled_protocols(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """ssl.keystore.certificate.chain + ssl.keystore.key and ssl.truststore.certificates inline, as Kafka 2.7+
    takes them; ssl.enabled.protocols=TLSv1.3 refuses a TLS 1.2 client."""
    ca = CertificateAuthority.create()
    issued = ca.issue("CN=broker", hosts=["127.0.0.1"])
    config = KafkaConfig.from_props({
        "broker.id": "1", "zookeeper.connect": "z:1", "listeners": "SSL://127.0.0.1:0,GRPC://:0",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
        "ssl.keystore.certificate.chain": issued.chain_pem().decode(), "ssl.keystore.key": issued.key_pem().decode(),
        "ssl.truststore.certificates": ca.certificate_pem().decode(), "ssl.client.auth": "required",
        "ssl.enabled.protocols": "TLSv1.3", "connection.failed.authentication.delay.ms": "0"})
    monkeypatch.setattr(listener_module, "KafkaConnection", Recorded)
    Recorded.principals = []
    security = ListenerSecurity.of(config, "SSL", "SSL", CredentialCache())
    context: Any = KafkaContext(config, None, "cluster", None, "SSL", None, None)  # type: ignore[arg-type]
    client = ssl.create_default_context(cadata=ca.certificate_pem().decode())
    client.load_cert_chain(ca.issue("CN=carol").write_keystore(tmp_path / "carol.pem"))
    old_client = ssl.create_default_context(cadata=ca.certificate_pem().decode())
    old_client.load_cert_chain(tmp_path / "carol.pem")
    old_client.maximum_version = ssl.TLSVersion.TLSv1_2

    async def scenario() -> None:
        listener = KafkaListener(context, "127.0.0.1", 0, security)
        port = await listener.start()
        try:
            await _connect(port, client)
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await _connect(port, old_client)
        finally:
            await listener.stop()

    with caplog.at_level(logging.WARNING, logger="broker.api.kafka.listener"):
        asyncio.run(scenario())
    assert Recorded.principals == [KafkaPrincipal("User", "CN=carol")]
    assert any("Failed TLS handshake" in r.getMessage() and "UNSUPPORTED_PROTOCOL" in r.getMessage()
               for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
