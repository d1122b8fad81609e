"""SASL mechanisms (broker/security/sasl.py) against real clients' message flows: PLAIN as Kafka's
PlainSaslServer answers it, SCRAM with scramp's client on the other side, credentials in Kafka's text form."""

from __future__ import annotations

import pytest
import scramp

from broker.security.jaas import JaasConfigError, parse_jaas_config, plain_users
from broker.security.sasl import PlainServer, SaslAuthenticationError, ScramServer, server_factory
from broker.security.scram import (
    CredentialCache,
    ScramCredential,
    alter_user_config,
    describe_user_config,
    make_credential,
    parse_scram_request,
)

INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism"


def test_jaas_config_as_kafka_writes_it() -> None:
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"\n'
            '  password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" pw;";')
    (module,) = parse_jaas_config(text)
    assert module.class_name.endswith("PlainLoginModule") and module.flag == "required"
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'a "quoted" pw;'}
    for bad in ("", "PlainLoginModule;", "PlainLoginModule required user_a=", 'X required user_a="b"',
                'X maybe user_a="b";'):
        with pytest.raises(JaasConfigError):
            parse_jaas_config(bad)


@pytest.mark.parametrize(("token", "log", "client"), [
    (b"\0bob\0bob-secret", None, None),
    (b"bob\0bob\0bob-secret", None, None),
    (b"\0bob\0wrong", "Invalid username or password", "Authentication failed: Invalid username or password"),
    (b"\0nobody\0bob-secret", "Invalid username or password", "Authentication failed: Invalid username or password"),
    (b"alice\0bob\0bob-secret", "authorization id", "authorization id that is different from username"),
    (b"\0bob", "expected 3 tokens, got 2", INVALID),
    (b"\0\0pw", "username not specified", INVALID),
])
def test_plain(token: bytes, log: str | None, client: str | None) -> None:
    server = PlainServer({"bob": "bob-secret"})
    if log is None:
        assert server.evaluate(token) == b"" and server.complete and server.authorization_id == "bob"
        return
    with pytest.raises(SaslAuthenticationError, match=log) as caught:
        server.evaluate(token)
    assert client in caught.value.client_message and "nobody" not in caught.value.client_message
    assert not server.complete


def _scram_exchange(server: ScramServer, mechanism: str, user: str, password: str) -> bytes:
    client = scramp.ScramClient([mechanism], user, password)
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    return server.evaluate(client.get_client_final().encode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_cached_credentials(mechanism: str) -> None:
    cache = CredentialCache()
    cache.update_user("alice", {mechanism: make_credential(mechanism, "alice-secret", 8192).to_text()})
    server = ScramServer(mechanism, cache)
    assert _scram_exchange(server, mechanism, "alice", "alice-secret").startswith(b"v=")
    assert server.complete and server.authorization_id == "alice"
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret")):
        with pytest.raises(SaslAuthenticationError) as caught:
            _scram_exchange(ScramServer(mechanism, cache), mechanism, user, password)
        assert caught.value.client_message == f"{INVALID} {mechanism}"


def test_scram_client_nonce_checked_as_kafka_does() -> None:
    """Kafka only requires the client-final nonce to end with the server's: so does this server (kcat's
    librdkafka 2.0 sends the client nonce twice: tests/integration/security/test_kafka_security.py). The proof covers
    the message as sent, so a nonce changed after the proof was made still fails."""
    cache = CredentialCache()
    cache.update_user("alice", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw").to_text()})
    server = ScramServer("SCRAM-SHA-256", cache)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    server_first = server.evaluate(client.get_client_first().encode()).decode()
    client.set_server_first(server_first)
    final = client.get_client_final()
    nonce = final.split("r=")[1].split(",")[0]
    tampered = final.replace(f"r={nonce}", f"r=x{nonce}")  # the proof was computed over the other nonce
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(tampered.encode())
    # A nonce that does not end with the server's is refused outright.
    other = ScramServer("SCRAM-SHA-256", cache)
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "pw")
    client.set_server_first(other.evaluate(client.get_client_first().encode()).decode())
    final = client.get_client_final()
    nonce = final.split("r=")[1].split(",")[0]
    with pytest.raises(SaslAuthenticationError):
        other.evaluate(final.replace(f"r={nonce}", f"r={nonce}x").encode())


def test_credentials_in_kafkas_text_form() -> None:
    credential = make_credential("SCRAM-SHA-512", "pw", 4096)
    text = credential.to_text()
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential
    for bad in ("salt=abc", "salt=!!,stored_key=a,server_key=b,iterations=1", "x=1"):
        with pytest.raises(ValueError, match="invalid SCRAM credential"):
            ScramCredential.from_text(bad)
    with pytest.raises(ValueError, match="Invalid iterations 100"):
        make_credential("SCRAM-SHA-256", "pw", 100)


def test_cache_follows_a_users_config() -> None:
    cache = CredentialCache()
    good = make_credential("SCRAM-SHA-256", "pw").to_text()
    assert cache.update_user("bob", {"SCRAM-SHA-256": good, "SCRAM-SHA-512": "garbage"}) == ["SCRAM-SHA-512"]
    assert cache.get("SCRAM-SHA-256", "bob") is not None and cache.get("SCRAM-SHA-512", "bob") is None
    cache.update_user("bob", {})
    assert cache.get("SCRAM-SHA-256", "bob") is None and cache.users("SCRAM-SHA-256") == []


def test_configs_add_and_delete_requests() -> None:
    config = alter_user_config({}, {"SCRAM-SHA-256": "iterations=8192,password=pw",
                                    "SCRAM-SHA-512": "password=pw"}, [])
    assert describe_user_config(config) == "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    assert "pw" not in describe_user_config(config)
    assert list(alter_user_config(config, {}, ["SCRAM-SHA-512"])) == ["SCRAM-SHA-256"]
    with pytest.raises(ValueError, match="no such credential"):
        alter_user_config({}, {}, ["SCRAM-SHA-512"])
    with pytest.raises(ValueError, match=r"Invalid config\(s\): consumer_byte_rate"):
        alter_user_config({}, {"consumer_byte_rate": "1"}, [])
    with pytest.raises(ValueError, match="expected"):
        parse_scram_request("SCRAM-SHA-256", "iterations=4096,salt=x,password=pw")


def test_server_factory_serves_the_enabled_mechanisms() -> None:
    make = server_factory({"bob": "pw"}, CredentialCache())
    assert isinstance(make("PLAIN"), PlainServer)
    assert make("SCRAM-SHA-512").mechanism == "SCRAM-SHA-512"
    with pytest.raises(ValueError, match="GSSAPI"):
        make("GSSAPI")
