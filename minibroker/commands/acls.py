"""`minibroker acls`: Kafka's kafka-acls.sh.

    minibroker acls (--bootstrap-server H:P | --data-dir D | --authorizer-properties zookeeper.connect=H:P)
                    [--command-config FILE] (--add | --remove | --list)
                    [--topic T]... [--group G]... [--cluster] [--transactional-id ID]...
                    [--resource-pattern-type literal|prefixed|match|any]
                    [--allow-principal User:alice]... [--deny-principal User:bob]... [--principal P]...
                    [--allow-host H]... [--deny-host H]... [--operation Read]...
                    [--producer [--idempotent]] [--consumer] [--force]

With --bootstrap-server (a broker's Kafka listener, as for kafka-acls.sh) or --data-dir (its cluster's Kafka
listeners) the command is an AdminClient: CreateAcls, DescribeAcls and DeleteAcls through a broker, which needs
Alter (Describe for --list) on the cluster. With --authorizer-properties zookeeper.connect=H:P it writes
ZooKeeper directly, as Kafka 2.x's tool can: the way to grant the first ACLs of a cluster nobody may alter yet.
Either way every broker applies the change at once, without a restart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from common.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
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
)
from common.security.authorizer import AclAuthorizer
from common.security.principal import KafkaPrincipal
from minibroker.commands.client_options import (
    UsageError,
    connect_zookeeper,
    parse_key_values,
    zookeeper_security,
)
from minibroker.commands.kafka_admin import kafka_error, kafka_listeners, open_kafka_admin
from minibroker.commands.usage import CommandLineError
from proto.errors import KafkaError
from zk.acl import OPEN, ZkSecurity
from zk.acl_store import ZkAclStore

PATTERN_TYPES = ("literal", "prefixed", "match", "any")
Results = list[tuple[KafkaError | None, list[tuple[AclBinding, KafkaError | None]]]]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "acls", help="add, remove and list ACLs (kafka-acls.sh)", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="A list of host/port pairs of the brokers' Kafka listeners.")
    parser.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="instead of --bootstrap-server: the cluster `minibroker cluster up --data-dir DIR` runs")
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="A property file containing configs to be passed to Admin Client.")
    parser.add_argument("--authorizer-properties", action="append", default=[], metavar="zookeeper.connect=H:P",
                        help="Write ZooKeeper directly instead of going through a broker.")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    actions.add_argument("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    actions.add_argument("--list", action="store_true",
                         help="List ACLs for the specified resource, use --topic <topic> or --group <group> or"
                              " --cluster to specify a resource.")
    parser.add_argument("--topic", action="append", default=[], help="topic to which ACLs should be added or removed."
                        " A value of * indicates ACL should apply to all topics.")
    parser.add_argument("--group", action="append", default=[], help="Consumer Group to which the ACLs should be"
                        " added or removed. A value of * indicates the ACLs should apply to all groups.")
    parser.add_argument("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    parser.add_argument("--transactional-id", action="append", default=[],
                        help="The transactionalId to which ACLs should be added or removed.")
    parser.add_argument("--resource-pattern-type", default="literal", type=str.lower, choices=PATTERN_TYPES,
                        help="The type of the resource pattern or pattern filter. When adding acls, this should be"
                             " a specific pattern type, e.g. 'literal' or 'prefixed'. When listing or removing"
                             " acls, a specific pattern type can be used to list or remove acls from specific"
                             " resource patterns, or use the filter values of 'any' or 'match'.")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME",
                        help="principal in PrincipalType:name format to which the ALLOW ACL applies.")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME",
                        help="principal in PrincipalType:name format to which the DENY ACL applies.")
    parser.add_argument("--principal", action="append", default=[], metavar="User:NAME",
                        help="List ACLs for the specified principal (with --list).")
    parser.add_argument("--allow-host", action="append", default=[], help="Host from which the principals listed"
                        " in --allow-principal will have access (default: * with --allow-principal).")
    parser.add_argument("--deny-host", action="append", default=[], help="Host from which the principals listed in"
                        " --deny-principal will be denied access (default: * with --deny-principal).")
    parser.add_argument("--operation", action="append", default=[], help="Operation that is being allowed or"
                        " denied: Read, Write, Create, Delete, Alter, Describe, ClusterAction, AlterConfigs,"
                        " DescribeConfigs, IdempotentWrite, All (default: All).")
    parser.add_argument("--producer", action="store_true", help="Convenience option to add/remove ACLs for the"
                        " producer role: Write, Describe and Create on the topics.")
    parser.add_argument("--consumer", action="store_true", help="Convenience option to add/remove ACLs for the"
                        " consumer role: Read and Describe on the topics, Read on the groups (--group required).")
    parser.add_argument("--idempotent", action="store_true",
                        help="With --producer: IdempotentWrite on the cluster too.")
    parser.add_argument("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    parser.set_defaults(func=run)


# ------------------------------------------------------------------ what the command line asks for


def _check(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs: the option combinations Kafka's tool refuses."""
    via_zk = bool(args.authorizer_properties)
    if via_zk and (args.bootstrap_server or args.data_dir or args.command_config):
        raise CommandLineError("Only one of --bootstrap-server or --authorizer-properties must be specified")
    if not via_zk and not (args.bootstrap_server or args.data_dir):
        raise CommandLineError("One of --bootstrap-server or --authorizer-properties must be specified")
    if args.list and (args.producer or args.consumer or args.allow_principal or args.deny_principal
                      or args.allow_host or args.deny_host or args.operation):
        raise CommandLineError("--list takes no --producer, --consumer, --allow/deny-principal, --allow/deny-host"
                               " or --operation: filter with --principal and the resource options")
    if args.principal and not args.list:
        raise CommandLineError("--principal is only valid with --list")
    if (args.producer or args.consumer) and args.operation:
        raise CommandLineError("--operation cannot be used with --producer or --consumer")
    if args.producer and not args.topic:
        raise CommandLineError("With --producer you must specify a --topic")
    if args.consumer and (not args.topic or not args.group):
        raise CommandLineError("With --consumer you must specify a --topic and a --group")
    if args.idempotent and not args.producer:
        raise CommandLineError("--idempotent is only valid with --producer")
    if args.add and args.resource_pattern_type in ("match", "any"):
        raise CommandLineError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid"
                               " when adding acls.")
    for principal in [*args.allow_principal, *args.deny_principal, *args.principal]:
        try:
            KafkaPrincipal.parse(principal)
        except ValueError:
            raise CommandLineError(f"Could not parse principal from `{principal}` (no colon is present separating"
                                   " the principal type from the principal name)") from None


def resource_filters(args: argparse.Namespace) -> list[ResourcePatternFilter]:
    """AclCommand.getResourceFilter: one filter per --topic, --group, --transactional-id and --cluster."""
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    found = [ResourcePatternFilter(ResourceType.TOPIC, t, pattern_type) for t in args.topic]
    found += [ResourcePatternFilter(ResourceType.GROUP, g, pattern_type) for g in args.group]
    found += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id]
    if args.cluster or args.idempotent:
        found.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    return found


def _operations(names: Iterable[str]) -> list[AclOperation]:
    try:
        return [AclOperation(from_acl_name(AclOperation, name.strip())) for name in names]
    except ValueError as e:
        raise CommandLineError(str(e)) from None


def _entries(args: argparse.Namespace, operations: Sequence[AclOperation]) -> list[AccessControlEntry]:
    """Every --allow-principal x --allow-host x operation ALLOW, and the same for DENY; a principal's hosts
    default to * (AclCommand.getAcl)."""
    entries: list[AccessControlEntry] = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                entries.extend(AccessControlEntry(principal, host, op, permission) for op in operations)
    return entries


def filter_to_acls(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AccessControlEntry]]:
    """AclCommand.getResourceFilterToAcls: which ACLs each resource (filter) gets; --producer and --consumer
    expand to their roles' operations."""
    wanted: dict[ResourcePatternFilter, list[AccessControlEntry]] = {}

    def add(resource: ResourcePatternFilter, operations: Sequence[AclOperation]) -> None:
        entries = wanted.setdefault(resource, [])
        entries.extend(e for e in _entries(args, operations) if e not in entries)

    if not (args.producer or args.consumer):
        operations = _operations(args.operation or ["All"])
        for resource in resource_filters(args):
            unsupported = [op for op in operations
                           if op is not AclOperation.ALL and op not in SUPPORTED_OPERATIONS[resource.resource_type]]
            if unsupported:
                raise CommandLineError(
                    f"ResourceType {resource.resource_type.acl_name} only supports operations "
                    + ",".join(sorted(op.acl_name for op in SUPPORTED_OPERATIONS[resource.resource_type])))
            add(resource, operations)
        return wanted
    pattern_type = PatternType[args.resource_pattern_type.upper()]
    topics = [ResourcePatternFilter(ResourceType.TOPIC, t, pattern_type) for t in args.topic]
    if args.producer:
        for topic in topics:
            add(topic, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
        for transactional_id in args.transactional_id:
            add(ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, transactional_id, pattern_type),
                [AclOperation.WRITE, AclOperation.DESCRIBE])
        if args.idempotent:
            add(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL),
                [AclOperation.IDEMPOTENT_WRITE])
    if args.consumer:
        for topic in topics:
            add(topic, [AclOperation.READ, AclOperation.DESCRIBE])
        for group in args.group:
            add(ResourcePatternFilter(ResourceType.GROUP, group, pattern_type), [AclOperation.READ])
    return wanted


# ------------------------------------------------------------------ where the ACLs are


class AclBackend(Protocol):
    def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]: ...

    def delete(self, filters: Sequence[AclBindingFilter]) -> Results: ...

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]: ...

    def close(self) -> None: ...


class BrokerAcls:
    """Through a broker's Kafka listener: kafka-python's KafkaAdminClient, given --command-config's client
    properties under kafka-python's names (Kafka's with '_': security.protocol -> security_protocol).

    Not librdkafka: confluent-kafka 2.16's describe_acls drops a DescribeAcls response's top-level error (a
    principal without Describe on the cluster gets an empty list instead of CLUSTER_AUTHORIZATION_FAILED)."""

    def __init__(self, args: argparse.Namespace, servers: str) -> None:
        import kafka.admin as kp_admin  # the CLI's other commands do not load it

        self._kp = kp_admin
        self._admin = open_kafka_admin(args, servers, "minibroker-acls")

    def _entry_args(self, principal: str | None, host: str | None, operation: AclOperation,
                    permission: AclPermissionType) -> dict[str, Any]:
        return {"principal": principal, "host": host, "operation": self._kp.ACLOperation(int(operation)),
                "permission_type": self._kp.ACLPermissionType(int(permission))}

    def _binding(self, binding: AclBinding) -> Any:
        p, e = binding.pattern, binding.entry
        kp = self._kp
        return kp.ACL(**self._entry_args(e.principal, e.host, e.operation, e.permission_type),
                      resource_pattern=kp.ResourcePattern(kp.ResourceType(int(p.resource_type)), p.name,
                                                          kp.ACLResourcePatternType(int(p.pattern_type))))

    def _filter(self, f: AclBindingFilter) -> Any:
        p, e = f.pattern, f.entry
        kp = self._kp
        return kp.ACLFilter(**self._entry_args(e.principal, e.host, e.operation, e.permission_type),
                            resource_pattern=kp.ResourcePatternFilter(kp.ResourceType(int(p.resource_type)), p.name,
                                                                      kp.ACLResourcePatternType(int(p.pattern_type))))

    @staticmethod
    def _from_kp(acl: Any) -> AclBinding:
        p = acl.resource_pattern
        return AclBinding(ResourcePattern(ResourceType(int(p.resource_type)), p.resource_name,
                                          PatternType(int(p.pattern_type))),
                          AccessControlEntry(acl.principal, acl.host, AclOperation(int(acl.operation)),
                                             AclPermissionType(int(acl.permission_type))))

    def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        answer = self._call(self._admin.create_acls, [self._binding(b) for b in bindings])
        return [kafka_error(error) for error in answer["failed"]] or [None] * len(bindings)

    def delete(self, filters: Sequence[AclBindingFilter]) -> Results:
        answer = self._call(self._admin.delete_acls, [self._filter(f) for f in filters])
        return [(None if error.errno == 0 else kafka_error(error), [(self._from_kp(acl), None) for acl in acls])
                for _, acls, error in answer]

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        acls, _ = self._call(self._admin.describe_acls, self._filter(binding_filter))
        return [self._from_kp(acl) for acl in acls]

    @staticmethod
    def _call(call: Any, argument: Any) -> Any:
        from kafka.errors import KafkaError as KpError

        try:
            return call(argument)
        except KpError as e:
            raise kafka_error(e) from None

    def close(self) -> None:
        self._admin.close()


class ZooKeeperAcls:
    """Straight into ZooKeeper, as Kafka 2.x's --authorizer-properties mode (the brokers follow the change
    notifications)."""

    def __init__(self, connect: str, security: ZkSecurity = OPEN) -> None:
        self._zk = connect_zookeeper(connect, security=security)
        self._store = ZkAclStore(self._zk, AclAuthorizer())
        self._store.load()

    def create(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        return self._store.create_acls(bindings)

    def delete(self, filters: Sequence[AclBindingFilter]) -> Results:
        return self._store.delete_acls(filters)

    def describe(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        return self._store.authorizer.acls(binding_filter)

    def close(self) -> None:
        self._store.shutdown()
        self._zk.close()


def _backend(args: argparse.Namespace) -> AclBackend:
    if args.authorizer_properties:
        props = parse_key_values(args.authorizer_properties)
        if not props.get("zookeeper.connect"):
            raise UsageError("--authorizer-properties needs zookeeper.connect=HOST:PORT")
        return ZooKeeperAcls(props["zookeeper.connect"], zookeeper_security(args))
    return BrokerAcls(args, kafka_listeners(args))  # as kafka-acls.sh: a Kafka listener


# ------------------------------------------------------------------ the actions


def _entry_filter(entry: AccessControlEntry) -> AccessControlEntryFilter:
    return AccessControlEntryFilter(entry.principal, entry.host, entry.operation, entry.permission_type)


def _print_acls(title: str, pattern: object, entries: Iterable[object]) -> None:
    # Kafka's exact layout: "<title> `<pattern>`: \n \t<acl>\n\t<acl> \n"
    print(f"{title} `{pattern}`: \n " + "\n".join(f"\t{e}" for e in entries) + " \n")


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def list_acls(backend: AclBackend, args: argparse.Namespace) -> None:
    """AclCommand.listAcls: the ACLs of every resource matching the resource options (all without any), per
    resource pattern; with --principal, only that principal's."""
    filters = resource_filters(args) or [ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)]
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for resource in filters:
        any_entry = AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY)
        for binding in backend.describe(AclBindingFilter(resource, any_entry)):
            by_pattern.setdefault(binding.pattern, set()).add(binding.entry)
    if not args.principal:
        for pattern, entries in sorted(by_pattern.items()):
            _print_acls("Current ACLs for resource", pattern, sorted(entries))
        return
    for principal in args.principal:
        print(f"ACLs for principal `{principal}`")
        for pattern, entries in sorted(by_pattern.items()):
            own = sorted(e for e in entries if e.principal == principal)
            if own:
                _print_acls("Current ACLs for resource", pattern, own)


def add_acls(backend: AclBackend, args: argparse.Namespace) -> None:
    wanted = filter_to_acls(args)
    if any(not entries for entries in wanted.values()):
        raise CommandLineError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if not wanted:
        raise CommandLineError("You must provide at least one resource: --topic <topic> or --cluster or"
                               " --group <group> or --transactional-id <id>")
    for resource, entries in wanted.items():
        pattern = ResourcePattern(resource.resource_type, str(resource.name), resource.pattern_type)
        _print_acls("Adding ACLs for resource", pattern, entries)
        errors = backend.create([AclBinding(pattern, e) for e in entries])
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed
    list_acls(backend, args)


def remove_acls(backend: AclBackend, args: argparse.Namespace) -> None:
    wanted = filter_to_acls(args)
    if not wanted:
        raise CommandLineError("You must provide at least one resource: --topic <topic> or --cluster or"
                               " --group <group> or --transactional-id <id>")
    for resource, entries in wanted.items():
        if not entries:
            if not _confirm(args, f"Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"):
                continue
            filters = [AclBindingFilter(resource, AccessControlEntryFilter(None, None, AclOperation.ANY,
                                                                           AclPermissionType.ANY))]
        else:
            listed = "\n".join(f"\t{e}" for e in entries)
            if not _confirm(args, f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter"
                                  f" `{resource}`? (y/n)"):
                continue
            filters = [AclBindingFilter(resource, _entry_filter(e)) for e in entries]
        for error, deleted in backend.delete(filters):
            failed = error or next((e for _, e in deleted if e is not None), None)
            if failed is not None:
                raise failed
    list_acls(backend, args)


def run(args: argparse.Namespace) -> int:
    _check(args)
    backend: AclBackend | None = None
    try:
        if args.add or args.remove:
            filter_to_acls(args)  # a bad --operation is a usage error before anything is connected
        backend = _backend(args)
        if args.add:
            add_acls(backend, args)
        elif args.remove:
            remove_acls(backend, args)
        else:
            list_acls(backend, args)
    except (KafkaError, UsageError) as e:
        print(f"Error while executing ACL command: {e.message if isinstance(e, KafkaError) else e}")
        return 1
    finally:
        if backend is not None:
            backend.close()
    return 0
