"""Who may act for the cluster on gRPC (common/security/cluster_action.py): Kafka's CLUSTER_ACTION on the Cluster
from the authorizer for the call's principal, the cluster credential on a plaintext listener that has one, a
verified certificate on TLS without an authorizer."""

from __future__ import annotations

import logging

import pytest

from common.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from common.security.authorizer import AclAuthorizer, Session, parse_super_users
from common.security.cluster_action import authorize_cluster_action
from common.security.principal import KafkaPrincipal

BROKER = Session(KafkaPrincipal("User", "CN=broker-1,OU=minibroker"), "127.0.0.1")
ALICE = Session(KafkaPrincipal("User", "CN=alice,OU=outsiders"), "127.0.0.1")
CLUSTER = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


def test_the_authorizer_decides_on_tls_a_certificate_alone_is_not_enough(caplog: pytest.LogCaptureFixture) -> None:
    authorizer = AclAuthorizer(parse_super_users("User:CN=broker-1,OU=minibroker"))
    assert authorize_cluster_action(authorizer, BROKER, tls=True, verified_certificate=True, carries_credential=None)
    with caplog.at_level(logging.INFO, "kafka.authorizer.logger"):
        assert not authorize_cluster_action(authorizer, ALICE, tls=True, verified_certificate=True,
                                            carries_credential=None)
    assert ("Principal = User:CN=alice,OU=outsiders is Denied Operation = ClusterAction from host = 127.0.0.1 on"
            " resource = Cluster:LITERAL:kafka-cluster") in caplog.text
    # A CLUSTER_ACTION ACL grants it as super.users does; a configured credential changes nothing over TLS.
    authorizer.update(CLUSTER, [AccessControlEntry(str(ALICE.principal), "*", AclOperation.CLUSTER_ACTION,
                                                   AclPermissionType.ALLOW)])
    assert authorize_cluster_action(authorizer, ALICE, tls=True, verified_certificate=True, carries_credential=False)


def test_the_credential_is_the_proof_on_a_plaintext_listener_that_has_one() -> None:
    authorizer = AclAuthorizer()
    assert authorize_cluster_action(authorizer, ALICE, tls=False, verified_certificate=False,
                                    carries_credential=True)
    assert not authorize_cluster_action(None, ALICE, tls=False, verified_certificate=False, carries_credential=False)
    # Without a credential configured, the authorizer decides for ANONYMOUS as Kafka would.
    assert not authorize_cluster_action(authorizer, ALICE, tls=False, verified_certificate=False,
                                        carries_credential=None)


def test_without_an_authorizer_tls_needs_a_verified_certificate_and_plaintext_lets_anyone() -> None:
    assert authorize_cluster_action(None, ALICE, tls=True, verified_certificate=True, carries_credential=None)
    assert not authorize_cluster_action(None, ALICE, tls=True, verified_certificate=False, carries_credential=None)
    assert authorize_cluster_action(None, ALICE, tls=False, verified_certificate=False, carries_credential=None)
