"""Kafka's ACL vocabulary (org.apache.kafka.common.acl and .resource): resource types, pattern types, operations,
permission types with their wire codes and their names, ACL bindings and the filters that match them.

Plain values only: the authorizer's rules (authorizer.py), the ZooKeeper store, the Kafka APIs and the
`minibroker acls` command all speak in these.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from common.security.principal import KafkaPrincipal

WILDCARD_RESOURCE = "*"  # ResourcePattern.WILDCARD_RESOURCE: a LITERAL pattern naming every resource of its type
WILDCARD_HOST = "*"  # AclEntry.WildcardHost
WILDCARD_PRINCIPAL = "User:*"  # AclEntry.WildcardPrincipalString
CLUSTER_NAME = "kafka-cluster"  # CLUSTER_NAME: the one Cluster resource


class _KafkaNamed:
    """Kafka's camel-case word for an enum member: SecurityUtils.resourceTypeName / operationName ("Topic",
    "TransactionalId", "IdempotentWrite", "Allow"): the ZooKeeper paths', the JSON's and the CLI's word."""

    name: str

    @property
    def acl_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_KafkaNamed, enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: LITERAL or PREFIXED patterns of exactly the given name
    MATCH = 2  # filters only: every pattern that would match the given name (literal, wildcard, prefixes)
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_KafkaNamed, enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(_KafkaNamed, enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def from_acl_name(cls: type[enum.IntEnum], text: str) -> enum.IntEnum:
    """An enum member from its camel-case name or its upper-case one ("IdempotentWrite", "IDEMPOTENT_WRITE",
    "idempotentwrite"), as Kafka's fromString/SecurityUtils accept; ValueError names the bad word."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for member in cls:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {cls.__name__} {text!r}")


# AclEntry.supportedOperations: what an ACL on each resource type may name (ALL on any).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
}


# MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED: the schemas' default of an authorized-operations field (KIP-430),
# what a response carries when the request did not ask for it.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def to_32bit_field(operations: Iterable[AclOperation]) -> int:
    """Utils.to32BitField: the operations as the bit field of their codes (bit n set for code n), KIP-430's
    authorized-operations fields of Metadata, DescribeGroups and DescribeCluster."""
    field = 0
    for operation in operations:  # codes 0-12: Kafka's range check (0-31) cannot fail for an AclOperation
        field |= 1 << operation
    return field


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name},"
                f" patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # "User:alice", or WILDCARD_PRINCIPAL
    host: str  # an IP address, or WILDCARD_HOST
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name},"
                f" permissionType={self.permission_type.name})")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """Kafka's checks on an ACL to create (AclApis/AclAuthorizer.createAcls, AclControlManager.validateNewAcl):
    ValueError with Kafka's words when it cannot be stored."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise ValueError(f"Invalid resource type {pattern.resource_type.name}")
    if not pattern.pattern_type.is_specific:
        raise ValueError(f"Invalid pattern type {pattern.pattern_type.name}: an ACL is LITERAL or PREFIXED")
    if not pattern.name:
        raise ValueError("Resource name should not be empty")
    if "/" in pattern.name or pattern.name in (".", ".."):
        # Its znode path is /kafka-acl/<type>/<name>: a slash or a dot name would escape it.
        raise ValueError(f"Resource name {pattern.name!r} cannot be stored in ZooKeeper")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise ValueError(f"Invalid operation {entry.operation.name}")
    if entry.operation is not AclOperation.ALL and entry.operation not in SUPPORTED_OPERATIONS[pattern.resource_type]:
        raise ValueError(f"ACL operation {entry.operation.name} is not supported for resource type"
                         f" {pattern.resource_type.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise ValueError(f"Invalid permission type {entry.permission_type.name}")
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError:
        raise ValueError(f"Could not parse principal from `{entry.principal}` (no colon is present separating"
                         " the principal type from the principal name)") from None
    if not entry.host:
        raise ValueError("Host should not be empty")


# ------------------------------------------------------------------ filters (DescribeAcls, DeleteAcls)


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType  # ANY matches every type
    name: str | None  # None matches every name
    pattern_type: PatternType  # ANY, MATCH, LITERAL or PREFIXED

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={name},"
                f" patternType={self.pattern_type.name})")

    def matches(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches: MATCH takes every pattern that applies to the name (its literal, the
        type's wildcard, any prefix of it), the others take patterns of that exact name."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not pattern.resource_type:
            return False
        if (self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.pattern_type is not pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type is not PatternType.MATCH or self.name == pattern.name:
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name == WILDCARD_RESOURCE
        return pattern.pattern_type is PatternType.PREFIXED and self.name.startswith(pattern.name)

    def find_indefinite_field(self) -> str | None:
        """What makes this filter unable to name one pattern, or None (ResourcePatternFilter.findIndefiniteField)."""
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None  # None: any
    host: str | None
    operation: AclOperation  # ANY: any
    permission_type: AclPermissionType  # ANY: any

    def __str__(self) -> str:
        return (f"(principal={self.principal or '<any>'}, host={self.host or '<any>'},"
                f" operation={self.operation.name}, permissionType={self.permission_type.name})")

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission_type in (AclPermissionType.ANY, entry.permission_type))

    def find_indefinite_field(self) -> str | None:
        if self.operation is AclOperation.UNKNOWN:
            return "Operation is UNKNOWN."
        if self.permission_type is AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def find_indefinite_field(self) -> str | None:
        return self.pattern.find_indefinite_field() or self.entry.find_indefinite_field()


ANY_BINDING = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                               AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))
