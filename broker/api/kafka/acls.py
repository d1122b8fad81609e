"""DescribeAcls 1-2, CreateAcls 1-2 and DeleteAcls 1-2 (Kafka's AclApis): the ACLs the authorizer keeps in
ZooKeeper, read and changed through any broker, as AdminClient.describeAcls/createAcls/deleteAcls and
kafka-acls.sh --bootstrap-server do.

Describe needs Describe on the cluster, Create and Delete need Alter on the cluster
(CLUSTER_AUTHORIZATION_FAILED); without an authorizer every answer is SECURITY_DISABLED. A code the wire carries
that Kafka does not know (a resource type 9, say) is UNKNOWN, as Kafka's fromCode makes it, and refused as such.
"""

from __future__ import annotations

import enum
import importlib
from typing import Any, TypeVar

from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis
from common.security.acl import (
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
)
from proto.errors import ErrorCode, KafkaError

E = TypeVar("E", bound=enum.IntEnum)


def _code(cls: type[E], value: int) -> E:
    """Kafka's fromCode: an unknown code is UNKNOWN (0)."""
    try:
        return cls(value)
    except ValueError:
        return cls(0)


def _binding_filter(f: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclBindingFilter."""
    return AclBindingFilter(
        ResourcePatternFilter(_code(ResourceType, f.resource_type_filter), f.resource_name_filter,
                              _code(PatternType, f.pattern_type_filter)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, _code(AclOperation, f.operation),
                                 _code(AclPermissionType, f.permission_type)))


def _schema(api: str, header: RequestHeader) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{header.api_version}.response")


async def handle_describe_acls(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("describe_acls", header)
    try:
        bindings = context.operations.describe_acls(context.session, _binding_filter(request))
        error, message = ErrorCode.NONE, None
    except KafkaError as e:
        bindings, error, message = [], e.code, e.message
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    resources = tuple(
        build(schema.DescribeAclsResource, resource_type=int(p.resource_type), resource_name=p.name,
              pattern_type=int(p.pattern_type), acls=tuple(
                  build(schema.AclDescription, principal=e.principal, host=e.host, operation=int(e.operation),
                        permission_type=int(e.permission_type)) for e in entries))
        for p, entries in by_pattern.items())
    return encode(build(schema.DescribeAclsResponse, throttle_time=millis(0), error_code=kio_error(error),
                        error_message=message, resources=resources))


async def handle_create_acls(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("create_acls", header)
    bindings = [AclBinding(ResourcePattern(_code(ResourceType, c.resource_type), c.resource_name,
                                           _code(PatternType, c.resource_pattern_type)),
                           AccessControlEntry(c.principal, c.host, _code(AclOperation, c.operation),
                                              _code(AclPermissionType, c.permission_type)))
                for c in request.creations]
    try:
        errors = await context.operations.create_acls(context.session, bindings)
    except KafkaError as e:
        errors = [e] * len(bindings)
    return encode(build(schema.CreateAclsResponse, throttle_time=millis(0), results=tuple(
        build(schema.AclCreationResult, error_code=kio_error(ErrorCode.NONE if e is None else e.code),
              error_message=None if e is None else e.message) for e in errors)))


async def handle_delete_acls(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    schema = _schema("delete_acls", header)
    filters = [_binding_filter(f) for f in request.filters]
    try:
        outcomes = await context.operations.delete_acls(context.session, filters)
    except KafkaError as e:
        outcomes = [(e, [])] * len(filters)

    def matching(binding: AclBinding, error: KafkaError | None) -> Any:
        p, e = binding.pattern, binding.entry
        return build(schema.DeleteAclsMatchingAcl,
                     error_code=kio_error(ErrorCode.NONE if error is None else error.code),
                     error_message=None if error is None else error.message, resource_type=int(p.resource_type),
                     resource_name=p.name, pattern_type=int(p.pattern_type), principal=e.principal, host=e.host,
                     operation=int(e.operation), permission_type=int(e.permission_type))

    return encode(build(schema.DeleteAclsResponse, throttle_time=millis(0), filter_results=tuple(
        build(schema.DeleteAclsFilterResult, error_code=kio_error(ErrorCode.NONE if error is None else error.code),
              error_message=None if error is None else error.message,
              matching_acls=tuple(matching(binding, e) for binding, e in deleted))
        for error, deleted in outcomes)))
