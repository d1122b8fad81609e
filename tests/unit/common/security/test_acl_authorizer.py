"""AclAuthorizer's rules (common/security/authorizer.py) and Kafka's ACL vocabulary (acl.py): which ACLs apply,
DENY over ALLOW, implied operations, hosts, wildcards, prefixes, super users, allow.everyone.if.no.acl.found."""

from __future__ import annotations

import pytest

from common.security.acl import (
    ANY_BINDING,
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    from_acl_name,
    to_32bit_field,
    validate_binding,
)
from common.security.authorizer import AclAuthorizer, Session, parse_super_users
from common.security.principal import ANONYMOUS, KafkaPrincipal

ALICE = Session(KafkaPrincipal("User", "alice"), "10.0.0.1")
BOB = Session(KafkaPrincipal("User", "bob"), "10.0.0.2")
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def ace(principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
        host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer(acls: dict[ResourcePattern, list[AccessControlEntry]], **kwargs: object) -> AclAuthorizer:
    a = AclAuthorizer(**kwargs)  # type: ignore[arg-type]
    a.replace_all(acls)
    return a


def can(a: AclAuthorizer, session: Session, operation: AclOperation, name: str,
        resource_type: ResourceType = ResourceType.TOPIC) -> bool:
    return a.authorize(session, operation, resource_type, name)


def test_an_allow_permits_its_operation_only_and_implies_describe() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.READ)]})
    assert can(a, ALICE, Op.READ, "t")
    assert can(a, ALICE, Op.DESCRIBE, "t")  # Read implies Describe
    assert not can(a, ALICE, Op.WRITE, "t")
    assert not can(a, ALICE, Op.DESCRIBE_CONFIGS, "t")
    assert not can(a, BOB, Op.READ, "t")  # another principal
    assert not can(a, ALICE, Op.READ, "other")  # another topic


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied_by_read_write_delete_and_alter(granted: AclOperation) -> None:
    assert can(authorizer({topic("t"): [ace("User:alice", granted)]}), ALICE, Op.DESCRIBE, "t")


def test_alter_configs_implies_describe_configs_but_not_the_other_way() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.ALTER_CONFIGS)]})
    assert can(a, ALICE, Op.DESCRIBE_CONFIGS, "t")
    b = authorizer({topic("t"): [ace("User:alice", Op.DESCRIBE_CONFIGS)]})
    assert not can(b, ALICE, Op.ALTER_CONFIGS, "t")
    assert not can(b, ALICE, Op.DESCRIBE, "t")


def test_all_allows_every_operation() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.ALL)]})
    assert all(can(a, ALICE, op, "t") for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER_CONFIGS))


def test_deny_wins_over_any_allow() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.ALL), ace("User:alice", Op.WRITE, DENY)],
                    topic("*"): [ace("User:*", Op.ALL)]})
    assert not can(a, ALICE, Op.WRITE, "t")
    assert can(a, ALICE, Op.READ, "t")
    assert can(a, BOB, Op.WRITE, "t")  # the DENY names alice only


def test_a_deny_does_not_spread_to_the_operations_its_operation_implies() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.READ), ace("User:alice", Op.READ, DENY)]})
    assert not can(a, ALICE, Op.READ, "t")
    assert can(a, ALICE, Op.DESCRIBE, "t")  # Kafka: a Read DENY leaves the Read ALLOW's Describe


def test_deny_all_denies_every_operation() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.READ), ace("User:alice", Op.ALL, DENY)]})
    assert not can(a, ALICE, Op.READ, "t")
    assert not can(a, ALICE, Op.DESCRIBE, "t")


def test_hosts_match_exactly_or_by_wildcard() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.READ, host="10.0.0.1")]})
    assert can(a, ALICE, Op.READ, "t")
    assert not can(a, Session(ALICE.principal, "10.0.0.9"), Op.READ, "t")
    b = authorizer({topic("t"): [ace("User:alice", Op.READ), ace("User:alice", Op.READ, DENY, host="10.0.0.9")]})
    assert can(b, ALICE, Op.READ, "t")
    assert not can(b, Session(ALICE.principal, "10.0.0.9"), Op.READ, "t")


def test_the_wildcard_principal_is_everyone() -> None:
    a = authorizer({topic("t"): [ace("User:*", Op.READ)]})
    assert can(a, ALICE, Op.READ, "t") and can(a, BOB, Op.READ, "t")
    assert can(a, Session(ANONYMOUS, "127.0.0.1"), Op.READ, "t")


def test_the_wildcard_resource_and_prefixes_apply_to_matching_names_only() -> None:
    a = authorizer({topic("*"): [ace("User:alice", Op.READ)],
                    topic("orders-", PatternType.PREFIXED): [ace("User:bob", Op.WRITE)]})
    assert can(a, ALICE, Op.READ, "anything")
    assert can(a, BOB, Op.WRITE, "orders-eu")
    assert can(a, BOB, Op.WRITE, "orders-")
    assert not can(a, BOB, Op.WRITE, "orders")
    assert not can(a, BOB, Op.WRITE, "xorders-eu")
    # A LITERAL "orders-" is not a prefix.
    b = authorizer({topic("orders-"): [ace("User:bob", Op.WRITE)]})
    assert not can(b, BOB, Op.WRITE, "orders-eu")


def test_a_prefixed_deny_beats_a_literal_allow() -> None:
    a = authorizer({topic("orders-eu"): [ace("User:bob", Op.WRITE)],
                    topic("orders-", PatternType.PREFIXED): [ace("User:bob", Op.WRITE, DENY)]})
    assert not can(a, BOB, Op.WRITE, "orders-eu")


def test_resources_of_other_types_do_not_mix() -> None:
    a = authorizer({topic("g"): [ace("User:alice", Op.READ)]})
    assert not can(a, ALICE, Op.READ, "g", ResourceType.GROUP)


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    a = authorizer({topic("t"): [ace("User:*", Op.ALL, DENY)]}, super_users=parse_super_users("User:alice"))
    assert can(a, ALICE, Op.WRITE, "t")
    assert can(a, ALICE, Op.ALTER, CLUSTER_NAME, ResourceType.CLUSTER)
    assert not can(a, BOB, Op.WRITE, "t")


def test_super_users_are_semicolon_separated_principals() -> None:
    assert parse_super_users(" User:admin ; User:broker;") == {KafkaPrincipal("User", "admin"),
                                                               KafkaPrincipal("User", "broker")}
    assert parse_super_users(None) == frozenset()
    with pytest.raises(ValueError, match="<type>:<name>"):
        parse_super_users("admin")


def test_no_acl_at_all_is_decided_by_allow_everyone_if_no_acl_found() -> None:
    assert not can(authorizer({}), ALICE, Op.READ, "t")
    open_cluster = authorizer({topic("locked"): [ace("User:bob", Op.READ)]}, allow_everyone_if_no_acl_found=True)
    assert can(open_cluster, ALICE, Op.WRITE, "t")
    # Once any ACL applies to the resource, the ACLs decide.
    assert not can(open_cluster, ALICE, Op.READ, "locked")


def test_authorize_by_resource_type_needs_an_allow_not_covered_by_a_deny() -> None:
    def by_type(a: AclAuthorizer, session: Session = ALICE) -> bool:
        return a.authorize_by_resource_type(session, Op.WRITE, ResourceType.TOPIC)

    assert not by_type(authorizer({}))
    assert by_type(authorizer({topic("t"): [ace("User:alice", Op.WRITE)]}))
    assert by_type(authorizer({topic("t"): [ace("User:alice", Op.ALL)]}))
    assert not by_type(authorizer({topic("t"): [ace("User:alice", Op.READ)]}))
    assert not by_type(authorizer({topic("t"): [ace("User:alice", Op.WRITE), ace("User:alice", Op.WRITE, DENY)]}))
    assert not by_type(authorizer({topic("t"): [ace("User:alice", Op.WRITE)],
                                   topic("t", PatternType.PREFIXED): [ace("User:alice", Op.WRITE, DENY)]}))
    assert by_type(authorizer({topic("t"): [ace("User:alice", Op.WRITE), ace("User:alice", Op.WRITE, DENY)],
                               topic("u", PatternType.PREFIXED): [ace("User:alice", Op.WRITE)]}))
    assert not by_type(authorizer({topic("u", PatternType.PREFIXED): [ace("User:alice", Op.WRITE)],
                                   topic("*"): [ace("User:*", Op.WRITE, DENY)]}))
    assert by_type(authorizer({}, super_users={ALICE.principal}))
    assert by_type(authorizer({}, allow_everyone_if_no_acl_found=True))


def test_updates_replace_one_pattern_and_an_empty_set_removes_it() -> None:
    a = authorizer({topic("t"): [ace("User:alice", Op.READ)]})
    a.update(topic("t"), [ace("User:alice", Op.WRITE)])
    assert can(a, ALICE, Op.WRITE, "t") and not can(a, ALICE, Op.READ, "t")
    a.update(topic("t"), [])
    assert topic("t") not in a.acls_by_pattern()


# ------------------------------------------------------------------ authorized operations (KIP-430)

TOPIC_OPERATIONS = SUPPORTED_OPERATIONS[ResourceType.TOPIC]


def allowed(a: AclAuthorizer, session: Session = ALICE, name: str = "t",
            resource_type: ResourceType = ResourceType.TOPIC) -> set[AclOperation]:
    return set(a.allowed_operations(session, SUPPORTED_OPERATIONS[resource_type], resource_type, name))


def test_the_bit_field_sets_one_bit_per_operation_code() -> None:
    # Utils.to32BitField: bit n for code n (READ=3, DESCRIBE=8).
    assert to_32bit_field([]) == 0
    assert to_32bit_field([Op.READ, Op.DESCRIBE]) == (1 << 3) | (1 << 8) == 264
    assert to_32bit_field([Op.READ, Op.READ]) == 8
    # What a Kafka broker without an authorizer answers for each resource type.
    assert to_32bit_field(TOPIC_OPERATIONS) == 3576
    assert to_32bit_field(SUPPORTED_OPERATIONS[ResourceType.CLUSTER]) == 8096
    assert to_32bit_field(SUPPORTED_OPERATIONS[ResourceType.GROUP]) == 328
    assert AUTHORIZED_OPERATIONS_OMITTED == -2147483648  # Integer.MIN_VALUE, no bit field's value


def test_allowed_operations_add_what_an_allow_implies() -> None:
    assert allowed(authorizer({topic("t"): [ace("User:alice", Op.READ)]})) == {Op.READ, Op.DESCRIBE}
    assert allowed(authorizer({topic("t"): [ace("User:alice", Op.ALTER_CONFIGS)]})) == {
        Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert allowed(authorizer({topic("t"): [ace("User:alice", Op.ALL)]})) == TOPIC_OPERATIONS
    cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
    assert allowed(authorizer({cluster: [ace("User:alice", Op.ALTER)]}), name=CLUSTER_NAME,
                   resource_type=ResourceType.CLUSTER) == {Op.ALTER, Op.DESCRIBE}
    group = ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL)
    assert allowed(authorizer({group: [ace("User:alice", Op.READ)]}), name="g",
                   resource_type=ResourceType.GROUP) == {Op.READ, Op.DESCRIBE}


def test_allowed_operations_honour_denies_super_users_and_the_no_acl_default() -> None:
    # A DENY removes its operation only: a Describe DENY leaves Read.
    assert allowed(authorizer({topic("t"): [ace("User:alice", Op.READ), ace("User:alice", Op.DESCRIBE, DENY)]})) == {
        Op.READ}
    assert allowed(authorizer({topic("t"): [ace("User:alice", Op.ALL), ace("User:*", Op.ALL, DENY)]})) == set()
    assert allowed(authorizer({topic("t"): [ace("User:bob", Op.READ)]})) == set()
    assert allowed(authorizer({}, super_users={ALICE.principal})) == TOPIC_OPERATIONS
    assert allowed(authorizer({}, allow_everyone_if_no_acl_found=True)) == TOPIC_OPERATIONS
    assert allowed(authorizer({})) == set()


@pytest.mark.parametrize("acls", [
    {topic("t"): [ace("User:alice", Op.WRITE), ace("User:alice", Op.CREATE, DENY)]},
    {topic("t", PatternType.PREFIXED): [ace("User:alice", Op.DELETE)], topic("*"): [ace("User:*", Op.ALTER_CONFIGS)]},
    {topic("t"): [ace("User:alice", Op.ALL, host="10.0.0.9")], topic("*"): [ace("User:alice", Op.READ)]},
    {topic("t"): [ace("User:alice", Op.ALL), ace("User:alice", Op.ALTER, DENY), ace("User:alice", Op.READ, DENY)]},
])
def test_allowed_operations_are_exactly_what_authorize_allows(acls: dict[ResourcePattern, list[AccessControlEntry]]
                                                              ) -> None:
    a = authorizer(acls)
    assert allowed(a) == {op for op in TOPIC_OPERATIONS if a.authorize(ALICE, op, ResourceType.TOPIC, "t")}


# ------------------------------------------------------------------ filters (DescribeAcls, DeleteAcls)

LITERAL_T = AclBinding(topic("t"), ace("User:alice", Op.READ))
WILDCARD = AclBinding(topic("*"), ace("User:bob", Op.WRITE, DENY))
PREFIX = AclBinding(topic("t-", PatternType.PREFIXED), ace("User:alice", Op.WRITE))
GROUP = AclBinding(ResourcePattern(ResourceType.GROUP, "t", PatternType.LITERAL), ace("User:alice", Op.READ))
ALL_BINDINGS = [LITERAL_T, WILDCARD, PREFIX, GROUP]
ANY_ENTRY = AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY)


def matched(resource_type: ResourceType, name: str | None, pattern_type: PatternType,
            entry: AccessControlEntryFilter = ANY_ENTRY) -> list[AclBinding]:
    f = AclBindingFilter(ResourcePatternFilter(resource_type, name, pattern_type), entry)
    return [b for b in ALL_BINDINGS if f.matches(b)]


def test_pattern_filters_match_as_kafkas() -> None:
    assert matched(ResourceType.TOPIC, "t", PatternType.LITERAL) == [LITERAL_T]
    assert matched(ResourceType.TOPIC, "t-", PatternType.PREFIXED) == [PREFIX]
    assert matched(ResourceType.TOPIC, "t", PatternType.ANY) == [LITERAL_T]
    # MATCH: every pattern that applies to the name, the wildcard and prefixes included.
    assert matched(ResourceType.TOPIC, "t-1", PatternType.MATCH) == [WILDCARD, PREFIX]
    assert matched(ResourceType.TOPIC, "t", PatternType.MATCH) == [LITERAL_T, WILDCARD]
    assert matched(ResourceType.ANY, None, PatternType.ANY) == ALL_BINDINGS
    assert matched(ResourceType.ANY, "t", PatternType.LITERAL) == [LITERAL_T, GROUP]


def test_entry_filters_match_on_every_given_field() -> None:
    alice = AccessControlEntryFilter("User:alice", None, Op.ANY, AclPermissionType.ANY)
    assert matched(ResourceType.ANY, None, PatternType.ANY, alice) == [LITERAL_T, PREFIX, GROUP]
    deny = AccessControlEntryFilter(None, "*", Op.ANY, DENY)
    assert matched(ResourceType.ANY, None, PatternType.ANY, deny) == [WILDCARD]
    write = AccessControlEntryFilter(None, None, Op.WRITE, AclPermissionType.ANY)
    assert matched(ResourceType.ANY, None, PatternType.ANY, write) == [WILDCARD, PREFIX]


def test_acls_lists_what_a_filter_matches() -> None:
    a = AclAuthorizer()
    for b in ALL_BINDINGS:
        a.update(b.pattern, [*a.acls_by_pattern().get(b.pattern, ()), b.entry])
    assert sorted(map(str, (b.pattern for b in a.acls(ANY_BINDING)))) == sorted(str(b.pattern) for b in ALL_BINDINGS)


def test_indefinite_filters_name_their_unknown_field() -> None:
    unknown_type = AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN, None, PatternType.ANY), ANY_ENTRY)
    assert unknown_type.find_indefinite_field() == "Resource type is UNKNOWN."
    unknown_op = AclBindingFilter(ANY_BINDING.pattern, AccessControlEntryFilter(None, None, Op.UNKNOWN,
                                                                                 AclPermissionType.ANY))
    assert unknown_op.find_indefinite_field() == "Operation is UNKNOWN."
    assert ANY_BINDING.find_indefinite_field() is None


@pytest.mark.parametrize(("binding", "message"), [
    (AclBinding(ResourcePattern(ResourceType.CLUSTER, "other", PatternType.LITERAL), ace("User:a", Op.ALTER)),
     "only valid name for the CLUSTER resource is kafka-cluster"),
    (AclBinding(topic(""), ace("User:a", Op.READ)), "should not be empty"),
    (AclBinding(topic("a/b"), ace("User:a", Op.READ)), "cannot be stored in ZooKeeper"),
    (AclBinding(topic("t", PatternType.MATCH), ace("User:a", Op.READ)), "LITERAL or PREFIXED"),
    (AclBinding(ResourcePattern(ResourceType.ANY, "t", PatternType.LITERAL), ace("User:a", Op.READ)),
     "Invalid resource type ANY"),
    (AclBinding(topic("t"), ace("User:a", Op.ANY)), "Invalid operation ANY"),
    (AclBinding(ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL), ace("User:a", Op.WRITE)),
     "WRITE is not supported for resource type GROUP"),
    (AclBinding(topic("t"), ace("User:a", Op.READ, AclPermissionType.ANY)), "Invalid permission type ANY"),
    (AclBinding(topic("t"), ace("alice", Op.READ)), "Could not parse principal"),
])
def test_bindings_that_cannot_be_stored_are_refused_with_kafkas_words(binding: AclBinding, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_binding(binding)


def test_names_read_both_spellings_and_print_kafkas() -> None:
    assert from_acl_name(AclOperation, "IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert from_acl_name(AclOperation, "describe_configs") is Op.DESCRIBE_CONFIGS
    assert from_acl_name(ResourceType, "TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert Op.CLUSTER_ACTION.acl_name == "ClusterAction" and ResourceType.TOPIC.acl_name == "Topic"
    assert DENY.acl_name == "Deny"
    with pytest.raises(ValueError, match="unknown AclOperation 'Fly'"):
        from_acl_name(AclOperation, "Fly")
    assert str(LITERAL_T.pattern) == "ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)"
    assert str(LITERAL_T.entry) == "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
