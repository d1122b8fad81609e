"""SSL principals (common/security/ssl_principal.py): Kafka's ssl.principal.mapping.rules, with the cases of
Kafka's SslPrincipalMapperTest, and the subject of a real certificate."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization

from common.security.principal import ANONYMOUS, KafkaPrincipal
from common.security.ssl_principal import NoMatchingRule, SslPrincipalMapper
from local_cluster.certificates import CertificateAuthority

RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
         "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")


@pytest.mark.parametrize(("subject", "name"), [
    ("CN=kafka1,OU=ServiceUsers,O=Org", "kafka1"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US,CN=duke", "DUKE"),
    ("O=Sun Microsystems,C=US", "O=Sun Microsystems,C=US"),
])
def test_rules_as_kafka_applies_them(subject: str, name: str) -> None:
    assert SslPrincipalMapper(RULES).name(subject) == name


def test_no_matching_rule_and_invalid_rules() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x")
    for bad in ("RULE:^CN=(.*)$/$1", "NOT A RULE", "RULE:([/$1/"):
        with pytest.raises(ValueError, match="Invalid rule"):
            SslPrincipalMapper(bad)


def test_back_references_beyond_the_groups_stay_literal() -> None:
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1-$2/").name("CN=a") == "a-$2"


def test_principal_of_a_certificate() -> None:
    issued = CertificateAuthority.create().issue("CN=alice,OU=dev,O=example")
    der = issued.certificate.public_bytes(serialization.Encoding.DER)
    assert SslPrincipalMapper().principal(der) == KafkaPrincipal("User", "CN=alice,OU=dev,O=example")
    assert str(SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/L").principal(der)) == "User:alice"
    assert SslPrincipalMapper().principal(None) is ANONYMOUS
