"""Kafka's AclAuthorizer rules (kafka.security.authorizer.AclAuthorizer, 2.8), on an in-memory ACL cache: who
may do what to which resource. No I/O: the ZooKeeper store (zk_acl_store.py) fills the cache and keeps it
current; both front doors ask `authorize`, and Metadata and DescribeGroups ask `allowed_operations` for what a
principal may do to a resource (KIP-430).

The rules, as Kafka's:
- a super user (`super.users`, "User:a;User:b") may do anything;
- the ACLs that apply to a resource are its LITERAL ones, its type's wildcard ("*") ones and every PREFIXED one
  whose prefix starts its name;
- no ACL applies: `allow.everyone.if.no.acl.found` decides (false by default: denied);
- else a DENY for the principal (or User:*) from the host (or *) on the operation (or ALL) refuses, whatever
  allows it; otherwise an ALLOW on the operation (or ALL) permits. Allowing Read, Write, Delete or Alter
  implies Describe; AlterConfigs implies DescribeConfigs. A DENY does not spread that way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from common.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from common.security.principal import KafkaPrincipal

# Kafka's authorizer logger: every denial of an explicitly requested resource is logged at INFO.
authorizer_logger = logging.getLogger("kafka.authorizer.logger")

# The Kafka name of the authorizer class, accepted as `authorizer.class.name` (as is its 2.x alias).
ACL_AUTHORIZER_CLASS_NAMES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                        "kafka.security.auth.SimpleAclAuthorizer"})

# AclAuthorizer.authorizeAction: the operations whose ALLOW also allows the key.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def parse_super_users(text: str | None) -> frozenset[KafkaPrincipal]:
    """`super.users`: principals separated by semicolons ("User:admin;User:broker"); ValueError on a bad one."""
    return frozenset(KafkaPrincipal.parse(item.strip()) for item in (text or "").split(";") if item.strip())


def invalid_super_users(value: str) -> str | None:
    """Why `super.users` cannot be parsed (a config validator of the broker's and the controller's); None if it
    can."""
    try:
        parse_super_users(value)
    except ValueError as e:
        return str(e)
    return None


def invalid_authorizer_class_name(value: str) -> str | None:
    """`authorizer.class.name`: empty (no authorizer) or AclAuthorizer's name, as a config validator."""
    if value.strip() in ("", *ACL_AUTHORIZER_CLASS_NAMES):
        return None
    return f"Class {value} cannot be found (the one authorizer here is kafka.security.authorizer.AclAuthorizer)"


@dataclass(frozen=True, slots=True)
class Session:
    """Who asks and from where (Kafka's RequestContext principal and clientAddress)."""

    principal: KafkaPrincipal
    client_host: str


def _matches(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation,
             permission: AclPermissionType) -> bool:
    """AclAuthorizer.matchingAclExists for one entry."""
    return (entry.permission_type is permission
            and entry.principal in (principal, WILDCARD_PRINCIPAL)
            and entry.operation in (operation, AclOperation.ALL)
            and entry.host in (host, WILDCARD_HOST))


class AclAuthorizer:
    """The ACL cache and the decisions on it. The cache maps each resource pattern to its ACLs and is replaced a
    pattern at a time (`update`), so a reader on another thread sees each pattern's ACLs whole."""

    def __init__(self, super_users: Iterable[KafkaPrincipal] = (), allow_everyone_if_no_acl_found: bool = False
                 ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._cache: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        # The same ACLs by (resource type, pattern type) then name, so a decision looks names up as plain
        # strings (the literal, the wildcard, each prefix of the name) without building a pattern for each.
        self._by_name: dict[tuple[ResourceType, PatternType], dict[str, frozenset[AccessControlEntry]]] = {}
        self._lock = threading.Lock()  # writers only; readers take a snapshot of the dict

    # ------------------------------------------------------------------ the cache

    def update(self, pattern: ResourcePattern, acls: Iterable[AccessControlEntry]) -> None:
        """The pattern's ACLs are now `acls` (none: the pattern is gone)."""
        entries = frozenset(acls)
        key = (pattern.resource_type, pattern.pattern_type)
        with self._lock:
            # Copy on write, then one reference swap per map: a reader sees a pattern's old or new ACLs whole.
            cache = dict(self._cache)
            names = dict(self._by_name.get(key, {}))
            if entries:
                cache[pattern] = names[pattern.name] = entries
            else:
                cache.pop(pattern, None)
                names.pop(pattern.name, None)
            self._by_name = {**self._by_name, key: names}
            self._cache = cache

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        cache = {p: frozenset(e) for p, e in acls.items() if e}
        by_name: dict[tuple[ResourceType, PatternType], dict[str, frozenset[AccessControlEntry]]] = {}
        for pattern, entries in cache.items():
            by_name.setdefault((pattern.resource_type, pattern.pattern_type), {})[pattern.name] = entries
        with self._lock:
            self._by_name = by_name
            self._cache = cache

    def acls_by_pattern(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        """A snapshot of the whole cache."""
        return self._cache

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every ACL the filter matches (DescribeAcls), ordered by pattern then entry."""
        return [AclBinding(pattern, entry) for pattern, entries in sorted(self._cache.items())
                for entry in sorted(entries) if binding_filter.matches(AclBinding(pattern, entry))]

    # ------------------------------------------------------------------ decisions

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return principal in self.super_users

    def matching_acls(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to the resource: its literal ones, the type's wildcard ones, the prefixes of its
        name."""
        by_name = self._by_name
        literal = by_name.get((resource_type, PatternType.LITERAL), {})
        found = [*literal.get(name, ()), *literal.get(WILDCARD_RESOURCE, ())]
        prefixed = by_name.get((resource_type, PatternType.PREFIXED))
        if prefixed:
            for end in range(1, len(name) + 1):
                found.extend(prefixed.get(name[:end], ()))
        return found

    def _acls_allow(self, session: Session, operation: AclOperation, acls: list[AccessControlEntry]) -> bool:
        """AclAuthorizer.aclsAllowAccess on the resource's matching ACLs (a super user is decided before)."""
        if not acls:
            return self.allow_everyone_if_no_acl_found
        who, host = str(session.principal), session.client_host
        if any(_matches(e, who, host, operation, AclPermissionType.DENY) for e in acls):
            return False
        return any(_matches(e, who, host, op, AclPermissionType.ALLOW)
                   for op in IMPLIED_BY.get(operation, (operation,)) for e in acls)

    def authorize(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str,
                  log_if_denied: bool = True) -> bool:
        principal = session.principal
        if self.is_super_user(principal):
            return True
        allowed = self._acls_allow(session, operation, self.matching_acls(resource_type, name))
        if not allowed and log_if_denied:
            authorizer_logger.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s:%s",
                                   principal, operation.acl_name, session.client_host, resource_type.acl_name,
                                   PatternType.LITERAL.name, name)
        return allowed

    def allowed_operations(self, session: Session, operations: Iterable[AclOperation], resource_type: ResourceType,
                           name: str) -> frozenset[AclOperation]:
        """AclAuthorizer.authorize of one action per operation on one resource, as KafkaApis' authorizedOperations
        asks it (nothing logged): the operations allowed, decided by `authorize`'s rules on one lookup of the
        resource's ACLs."""
        if self.is_super_user(session.principal):
            return frozenset(operations)
        acls = self.matching_acls(resource_type, name)
        return frozenset(op for op in operations if self._acls_allow(session, op, acls))

    def authorize_by_resource_type(self, session: Session, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """AclAuthorizer.authorizeByResourceType (KIP-679): may the principal do `operation` on at least one
        resource of the type? An ALLOW counts unless a DENY covers everything it allows (a literal DENY of
        the same name, a DENY prefix of it, a wildcard DENY)."""
        if self.is_super_user(session.principal):
            return True
        who, host = str(session.principal), session.client_host

        def names(permission: AclPermissionType, pattern_type: PatternType) -> set[str]:
            return {pattern.name for pattern, entries in self._cache.items()
                    if pattern.resource_type is resource_type and pattern.pattern_type is pattern_type
                    and any(_matches(e, who, host, operation, permission) for e in entries)}

        deny_literals = names(AclPermissionType.DENY, PatternType.LITERAL)
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(AclPermissionType.DENY, PatternType.PREFIXED)

        def denied_by_prefix(name: str) -> bool:
            return any(name[:end] in deny_prefixes for end in range(1, len(name) + 1))

        if any(not denied_by_prefix(prefix) for prefix in names(AclPermissionType.ALLOW, PatternType.PREFIXED)):
            return True
        return any(literal == WILDCARD_RESOURCE or (literal not in deny_literals and not denied_by_prefix(literal))
                   for literal in names(AclPermissionType.ALLOW, PatternType.LITERAL))
