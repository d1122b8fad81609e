"""zk/acl.py and common/jaas.py: Kafka's default ACLs per path, and the ZooKeeper identity from a JAAS file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.jaas import JaasError, parse_jaas_config, parse_jaas_file_text
from zk.acl import ZkCredentials, ZkSecurity, default_acls


def _ids(acls: list) -> set[tuple[str, str, int]]:
    return {(a.id.scheme, a.id.id, a.perms) for a in acls}


def test_default_acls_are_kafkas() -> None:
    assert _ids(default_acls(False, "/brokers/ids/1")) == {("world", "anyone", 31)}
    assert _ids(default_acls(True, "/brokers/ids/1")) == {("auth", "", 31), ("world", "anyone", 1)}
    # Sensitive paths: not even world-readable (SCRAM credentials, broker configs).
    assert _ids(default_acls(True, "/config/users/alice")) == {("auth", "", 31)}
    assert _ids(default_acls(True, "/config/brokers")) == {("auth", "", 31)}
    assert _ids(default_acls(True, "/config/brokersx")) == {("auth", "", 31), ("world", "anyone", 1)}
    # Old consumers write there: open, as in Kafka.
    assert _ids(default_acls(True, "/consumers")) == {("world", "anyone", 31)}


def test_credentials_from_a_jaas_file(tmp_path: Path) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text('''
        // the broker's logins
        KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="a;b"; };
        /* ZooKeeper */
        Client {
            org.apache.zookeeper.server.auth.DigestLoginModule required
            username="minibroker"
            password="pa\\"ss";
        };
    ''')
    credentials = ZkCredentials.from_jaas_file(path)
    assert credentials == ZkCredentials("minibroker", 'pa"ss')
    assert "pa" not in repr(credentials)
    assert credentials.auth_data == [("digest", 'minibroker:pa"ss')]
    # What cluster up --security writes reads back the same.
    path.write_text(credentials.jaas_file_text())
    assert ZkCredentials.from_jaas_file(path) == credentials


@pytest.mark.parametrize(("text", "message"), [
    ("KafkaServer { x.Y required; };", "no 'Client' section"),
    ("Client { x.Y required a=\"b\"; };", "has no org.apache.zookeeper.server.auth.DigestLoginModule"),
    ("Client { org.apache.zookeeper.server.auth.DigestLoginModule required username=\"u\"; };",
     "needs username and password"),
    ("Client { x.Y mandatory; };", "control flag must be one of"),
    ("Client { x.Y required a=\"b; };", "unbalanced quotes"),
    ("Client { x.Y required a=b };", "expected key=value, found '}'"),
    ("Client { x.Y required a=b;", "section Client does not end with"),
])
def test_bad_jaas_files_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(JaasError, match=re.escape(message)):
        ZkCredentials.from_jaas_file(path)


def test_inline_sasl_jaas_config() -> None:
    modules = parse_jaas_config('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"'
                                ' password="x y";')
    assert [(m.class_name, m.flag, m.options) for m in modules] == [
        ("org.apache.kafka.common.security.scram.ScramLoginModule", "required",
         {"username": "alice", "password": "x y"})]
    assert parse_jaas_file_text("") == {}


def test_set_acl_needs_an_identity() -> None:
    with pytest.raises(JaasError, match=r"zookeeper\.set\.acl is true"):
        ZkSecurity(set_acl=True)
