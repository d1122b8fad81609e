"""`minibroker configs`: Kafka's kafka-configs.sh for topic and dynamic broker configs, and users' SCRAM
credentials.

    minibroker configs (--bootstrap-server H:P | --zookeeper H:P[/CHROOT] | --data-dir D)
                       --entity-type topics|brokers|users (--entity-name NAME | --entity-default)
                       (--describe | --alter [--add-config k=v[,k=v]] [--delete-config k[,k]])
    minibroker configs (--zookeeper H:P | --data-dir D) --entity-type users --entity-name alice
                       --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'

Users' credentials go to /config/users/<user> as Kafka stores them (salted keys, never the password) with a
change notification, through ZooKeeper; every broker's SASL listeners use them from the next login. The brokers'
Kafka listeners also serve DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554) to Kafka's admin
clients, writing the same znodes; this command's --bootstrap-server is the gRPC door, which has no such API,
so users stay on --zookeeper / --data-dir here.

The change lands in ZooKeeper as Kafka writes it (/config/topics/<t>, /config/brokers/<id|<default>>, and a
/config/changes/config_change_<seq> notification) and every broker applies it live, without a restart.
With --bootstrap-server (or --data-dir) it goes through a broker's IncrementalAlterConfigs /
DescribeConfigs; with --zookeeper it is validated and written directly, as Kafka 2.x's --zookeeper mode.
A broker config Kafka cannot change live is refused with Kafka's "Cannot update these configs dynamically".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from broker.admin.config_admin import AlterConfigOp, ConfigAdmin, ConfigSource
from broker.config.kafka_config import KafkaConfig
from broker.config.topic_config import TopicConfigs
from broker.security.scram import alter_user_config, describe_user_config
from client.admin import Admin, ConfigResource, ConfigResourceType, OpType
from client.admin import AlterConfigOp as ClientAlterConfigOp
from minibroker.commands.client_options import (
    UsageError,
    add_cluster_options,
    add_zookeeper_option,
    bootstrap_servers,
    client_security,
    connect_zookeeper,
    zookeeper_connect,
    zookeeper_security,
)
from proto.errors import ErrorCode, KafkaError, error_for
from zk import paths
from zk.client import KafkaZkClient

ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER}
USERS = "users"


class Entry(NamedTuple):
    name: str
    value: str | None
    source: int


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "configs", help="describe and alter topic and broker configs live (kafka-configs.sh)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cluster_options(parser)
    add_zookeeper_option(parser)
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    actions.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    parser.add_argument("--entity-type", required=True, choices=sorted([*ENTITY_TYPES, USERS]),
                        help="Type of entity (topics/brokers/users)")
    names = parser.add_mutually_exclusive_group(required=True)
    names.add_argument("--entity-name", help="Name of entity (topic name/broker id)")
    names.add_argument("--entity-default", action="store_true",
                       help="Default entity name for brokers (applies to corresponding entity type in command line)")
    parser.add_argument("--add-config", metavar="k1=v1,k2=[v1,v2,v2],k3=v3",
                        help="Key Value pairs of configs to add. Square brackets can be used to group values which"
                             " contain commas.")
    parser.add_argument("--delete-config", metavar="k1,k2", help="config keys to remove")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.entity_type == USERS:
            _run_users(args)
            return 0
        resource_type, name = _entity(args)
        if args.alter:
            ops = [*((k, AlterConfigOp.SET, v) for k, v in parse_add_config(args.add_config or "").items()),
                   *((k, AlterConfigOp.DELETE, None) for k in _csv(args.delete_config or ""))]
            if not ops:
                raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
            _alter(args, resource_type, name, ops)
            print(f"Completed updating {_what(args, resource_type, name)}.")
        else:
            entries = _describe(args, resource_type, name)
            for line in describe_lines(args.entity_type, name, entries):
                print(line)
    except (KafkaError, UsageError) as e:
        print(f"Error while executing config command with args '{' '.join(sys.argv[2:])}'")
        print(e.message if isinstance(e, KafkaError) else str(e))
        return 1
    return 0


def _run_users(args: argparse.Namespace) -> None:
    """SCRAM credentials of a user, in /config/users/<user> (Kafka's ConfigCommand with --zookeeper)."""
    if args.entity_default or not args.entity_name:
        raise UsageError("--entity-default is not supported for users' SCRAM credentials: give --entity-name")
    user = str(args.entity_name)
    connect = zookeeper_connect(args, "users' SCRAM credentials", "AlterUserScramCredentials",
                                "--bootstrap-server is the brokers' gRPC door; AlterUserScramCredentials is served"
                                " to Kafka's admin clients on the Kafka listeners")
    with connect_zookeeper(connect, security=zookeeper_security(args)) as zk:
        current = zk.get_entity_config(paths.USERS_ENTITY, user)
        if not args.alter:
            print(f"SCRAM credential configs for user-principal '{user}' are {describe_user_config(current)}")
            return
        add = parse_add_config(args.add_config or "")
        delete = _csv(args.delete_config or "")
        if not add and not delete:
            raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
        try:
            config = alter_user_config(current, add, delete)
        except ValueError as e:
            raise KafkaError(str(e), ErrorCode.INVALID_CONFIG) from None
        zk.set_entity_config(paths.USERS_ENTITY, user, config)
    print(f"Completed updating config for user {user}.")


def _entity(args: argparse.Namespace) -> tuple[ConfigResourceType, str]:
    resource_type = ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if resource_type is ConfigResourceType.TOPIC:
            raise UsageError("--entity-default is not supported for topics: give --entity-name")
        return resource_type, ""
    name = str(args.entity_name)
    if resource_type is ConfigResourceType.BROKER and not (name.isascii() and name.isdigit()):
        raise UsageError(f"The entity name for brokers must be a valid integer broker id, found: {name}")
    return resource_type, name


def parse_add_config(text: str) -> dict[str, str]:
    """Kafka's ConfigCommand.parseConfigsToBeAdded: k=v pairs split at commas outside [...]; [a,b] -> a,b."""
    pairs: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "," and depth == 0:
            pairs.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        current += char
    pairs.append(current)
    configs = {}
    for pair in (p.strip() for p in pairs if p.strip()):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid entity config: all configs to be added must be in the format \"key=val\","
                             f" found: {pair}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


def _csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _alter(args: argparse.Namespace, resource_type: ConfigResourceType, name: str,
           ops: list[tuple[str, AlterConfigOp, str | None]]) -> None:
    if args.zookeeper:
        with connect_zookeeper(args.zookeeper, security=zookeeper_security(args)) as zk:
            (result,) = _zk_admin(args.zookeeper, zk).incremental_alter_configs(
                [(resource_type, name, ops)], validate_only=False)
        if result.error != ErrorCode.NONE:
            raise error_for(result.error, result.message or name)
        return
    with Admin(bootstrap_servers(args), client_id="minibroker-configs",
               channel_factory=client_security(args).channel_factory) as admin:
        admin.incremental_alter_configs({ConfigResource(resource_type, name): [
            ClientAlterConfigOp(key, OpType(op), value) for key, op, value in ops]})


def _describe(args: argparse.Namespace, resource_type: ConfigResourceType, name: str) -> list[Entry]:
    if args.zookeeper:
        with connect_zookeeper(args.zookeeper, security=zookeeper_security(args)) as zk:
            (result,) = _zk_admin(args.zookeeper, zk).describe_configs([(resource_type, name, None)])
        if result.error != ErrorCode.NONE:
            raise error_for(result.error, result.message or name)
        entries = [Entry(e.name, e.value, e.source) for e in result.entries]
    else:
        with Admin(bootstrap_servers(args), client_id="minibroker-configs",
               channel_factory=client_security(args).channel_factory) as admin:
            resource = ConfigResource(resource_type, name)
            entries = [Entry(e.name, e.value, e.source) for e in admin.describe_configs([resource])[resource]]
    # As kafka-configs.sh --describe: the dynamic ones only (overrides stored in ZooKeeper).
    dynamic = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
               ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}
    if resource_type is ConfigResourceType.BROKER and name:
        dynamic.discard(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)  # the default has its own --entity-default
    return [e for e in entries if e.source in dynamic]


def _zk_admin(connect: str, zk: KafkaZkClient) -> ConfigAdmin:
    """The brokers' own validation, with Kafka's defaults for the broker-level values (ConfigCommand's way)."""
    config = KafkaConfig.from_props({"broker.id": "0", "zookeeper.connect": connect})
    return ConfigAdmin(config, zk, TopicConfigs(config))


def describe_lines(entity_type: str, name: str, entries: Iterable[Entry]) -> Iterator[str]:
    """kafka-configs.sh --describe's output."""
    if name == "":
        yield "Default configs for brokers in the cluster are:"
    else:
        yield f"Dynamic configs for {entity_type[:-1]} {name} are:"
    for entry in entries:
        source = ConfigSource(entry.source).name
        yield f"  {entry.name}={entry.value} sensitive=false synonyms={{{source}:{entry.name}={entry.value}}}"


def _what(args: argparse.Namespace, resource_type: ConfigResourceType, name: str) -> str:
    if name == "":
        return "default config for brokers in the cluster"
    return f"config for {args.entity_type[:-1]} {name}"

