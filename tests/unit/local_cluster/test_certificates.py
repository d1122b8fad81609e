"""The development CA (local_cluster/certificates.py): its files load into Python's ssl as Kafka's PEM
keystore and truststore do, and real TLS handshakes (in memory) accept what it signed and refuse the rest."""

from __future__ import annotations

import datetime
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature

from local_cluster.certificates import (
    CA_CERTIFICATE,
    CA_KEY,
    CertificateAuthority,
    parse_subject,
    subject_text,
)


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str = "localhost") -> x509.Name | None:
    """A TLS handshake through memory BIOs; the client certificate's subject as the server saw it."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(c_in, c_out, server_hostname=server_hostname)
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, side, out, peer_in in (("client", client_side, c_out, s_in), ("server", server_side, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            # TLS 1.3: the server learns of a rejected client certificate only when it reads; exchange a byte.
            client_side.write(b"x")
            s_in.write(c_out.read())
            assert server_side.read(1) == b"x"
            der = server_side.getpeercert(binary_form=True)
            return x509.load_der_x509_certificate(der).subject if der else None
    raise AssertionError("the handshake did not finish")


def _server(ca: CertificateAuthority, tmp_path: Path, password: str | None = None) -> ssl.SSLContext:
    issued = ca.issue("CN=broker-1,OU=minibroker", hosts=["localhost", "127.0.0.1"])
    keystore = issued.write_keystore(tmp_path / "broker-1.pem", password)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keystore, password=password)
    context.load_verify_locations(ca.write(tmp_path / "ca"))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _client(trusted: CertificateAuthority, keystore: Path | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=trusted.certificate_pem().decode())
    if keystore is not None:
        context.load_cert_chain(keystore)
    return context


def test_signed_client_is_accepted_and_seen_by_its_subject(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    alice = ca.issue("CN=alice,OU=dev,O=example").write_keystore(tmp_path / "alice.pem")
    subject = _handshake(_server(ca, tmp_path, password="s3cret"), _client(ca, alice))
    assert subject is not None
    assert subject_text(subject) == "CN=alice,OU=dev,O=example"


def test_foreign_ca_expired_and_missing_client_certificates_are_refused(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    server = _server(ca, tmp_path)
    foreign = CertificateAuthority.create("CN=someone else's CA").issue("CN=mallory")
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    expired = ca.issue("CN=old", not_before=past, not_after=past + datetime.timedelta(days=1))
    for name, issued in (("foreign", foreign), ("expired", expired)):
        with pytest.raises(ssl.SSLError, match="certificate"):
            _handshake(server, _client(ca, issued.write_keystore(tmp_path / f"{name}.pem")))
    with pytest.raises(ssl.SSLError, match="certificate"):
        _handshake(server, _client(ca, None))


def test_client_checks_the_servers_names_and_issuer(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    server = _server(ca, tmp_path)
    alice = ca.issue("CN=alice").write_keystore(tmp_path / "alice.pem")
    assert _handshake(server, _client(ca, alice), server_hostname="127.0.0.1") is not None
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        _handshake(server, _client(ca, alice), server_hostname="broker-9.example")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        _handshake(server, _client(CertificateAuthority.create(), alice))


def test_encrypted_key_needs_its_password(tmp_path: Path) -> None:
    issued = CertificateAuthority.create().issue("CN=broker-1")
    files = issued.write_files(tmp_path, "broker-1", password="s3cret")
    assert b"ENCRYPTED PRIVATE KEY" in files.key.read_bytes()
    assert files.keystore.read_bytes() == files.key.read_bytes() + files.certificate.read_bytes()
    assert files.certificate.read_bytes().count(b"BEGIN CERTIFICATE") == 2  # leaf, then the CA
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.certificate, files.key, password="s3cret")
    with pytest.raises(ssl.SSLError):
        context.load_cert_chain(files.certificate, files.key, password="wrong")
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600


def test_load_or_create_keeps_the_ca(tmp_path: Path) -> None:
    first = CertificateAuthority.load_or_create(tmp_path / "ca")
    assert stat.S_IMODE((tmp_path / "ca" / CA_KEY).stat().st_mode) == 0o600
    again = CertificateAuthority.load_or_create(tmp_path / "ca")
    assert again.certificate == first.certificate
    assert (tmp_path / "ca" / CA_CERTIFICATE).read_bytes() == first.certificate_pem()
    # What the reloaded CA signs, the original's certificate verifies.
    issued = again.issue("CN=later", hosts=["localhost"])
    issued.certificate.verify_directly_issued_by(first.certificate)
    with pytest.raises(InvalidSignature):
        issued.certificate.verify_directly_issued_by(CertificateAuthority.create().certificate)


def test_validity_follows_the_injected_clock() -> None:
    moment = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    ca = CertificateAuthority.create(clock=lambda: moment)
    issued = ca.issue("CN=x", valid_days=10)
    assert issued.certificate.not_valid_before_utc == moment - datetime.timedelta(minutes=5)
    assert issued.certificate.not_valid_after_utc == moment + datetime.timedelta(days=10)
    assert ca.certificate.not_valid_after_utc == moment + datetime.timedelta(days=3650)


def test_subjects_parse_as_kafka_prints_them() -> None:
    assert subject_text(parse_subject("CN=alice,OU=dev")) == "CN=alice,OU=dev"
    for bad in ("", "alice", "CN"):
        with pytest.raises(ValueError, match="invalid certificate subject"):
            parse_subject(bad)
