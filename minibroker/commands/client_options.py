"""What the client commands share: where the cluster is, and Kafka's `key=value` client settings.

Every command that talks to a cluster takes `--bootstrap-server H:P[,H:P]`, as
Kafka's tools do, or `--data-dir D` for a cluster started by `minibroker
cluster up` (its cluster.json names the brokers), and `--command-config FILE`,
Kafka's client properties saying how to connect (TLS, SASL user): a secure
cluster's data dir supplies its admin client's file by itself. Client settings use Kafka's
names (`acks`, `linger.ms`, `group.id` ...) and become the keyword arguments of
the Python client, whose names are kafka-python's: the same words with `_`.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from client.connection import parse_bootstrap_servers
from common.grpc_tls import GrpcSecurity, TlsConfigError
from common.grpc_tls import client_security as grpc_client_security
from common.jaas import JaasError
from common.properties import load_properties
from local_cluster import security as cluster_security
from local_cluster.cluster_file import ClusterFileError, ClusterInfo
from minibroker.commands.listener_probe import GRPC, wrong_listener
from zk.acl import JAAS_CONFIG_KEY, OPEN, ZkCredentials, ZkSecurity
from zk.client import KafkaZkClient, ZooKeeperUnreachableError, connect_checked

BOOTSTRAP_SERVERS = "bootstrap.servers"
SECURITY_PROTOCOL = "security.protocol"
# Client properties that say how to connect, not how the client behaves: client_security() reads them.
SECURITY_PREFIXES = (SECURITY_PROTOCOL, "ssl.", "sasl.")
# The Python types a client's keyword argument may have to be settable from the command line.
_SETTABLE = {"int", "str", "bool", "float", "None"}


class UsageError(Exception):
    """A command line that cannot work; printed as the command's error, exit code 1."""


def add_cluster_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        help="the brokers to connect to first")
    parser.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="instead of --bootstrap-server: the cluster `minibroker cluster up --data-dir DIR` runs")
    add_command_config_option(parser)


def add_command_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="client properties (security.protocol, ssl.ca.location, sasl.username, ...), as Kafka's"
                             " tools take them; default: the admin client's file of a `cluster up --security` data"
                             " dir")


def client_security(args: argparse.Namespace, client_props: Mapping[str, str] | None = None) -> GrpcSecurity:
    """How the tool's gRPC channels are secured (common/grpc_tls.py): from the client properties the tool was
    given (--producer.config and the like, when they set security.protocol), else --command-config, else the
    admin client properties of --data-dir's secure cluster; plaintext without any."""
    props: Mapping[str, str] = {}
    if client_props and SECURITY_PROTOCOL in client_props:
        props = client_props
    elif getattr(args, "command_config", None) is not None:
        props = load_config_file(args.command_config)
    try:
        if not props and getattr(args, "data_dir", None) is not None and ClusterInfo.exists(args.data_dir):
            return cluster_security.grpc_security(cluster_info(args))
        return grpc_client_security(props)
    except (TlsConfigError, OSError) as e:
        raise UsageError(f"cannot secure the connection: {e}") from None


def zookeeper_security(args: argparse.Namespace) -> ZkSecurity:
    """The ZooKeeper identity of an admin tool that writes to ZooKeeper: the JAAS file of
    `KAFKA_OPTS=-Djava.security.auth.login.config=FILE` (as Kafka's tools take it), else the one of --data-dir's
    secure cluster. Like Kafka's tools, it creates znodes with ACLs whenever it has an identity."""
    jaas = _jaas_from_kafka_opts(os.environ.get("KAFKA_OPTS", ""))
    try:
        if jaas is not None:
            return ZkSecurity(set_acl=True, credentials=ZkCredentials.from_jaas_file(Path(jaas)))
        if getattr(args, "data_dir", None) is not None and ClusterInfo.exists(args.data_dir):
            return cluster_security.zookeeper_security(cluster_info(args))
    except JaasError as e:
        raise UsageError(str(e)) from None
    return OPEN


def _jaas_from_kafka_opts(kafka_opts: str) -> str | None:
    for option in shlex.split(kafka_opts):
        key, sep, value = option.partition("=")
        if sep and key == f"-D{JAAS_CONFIG_KEY}":
            return value
    return None


def bootstrap_servers(args: argparse.Namespace, client_props: Mapping[str, str] | None = None,
                      listener: str = GRPC) -> str:
    """--bootstrap-server, else bootstrap.servers among the client properties (where Kafka's perf tools take
    it), else the brokers of --data-dir's cluster. An address given is probed first: a listener of the other
    kind than `listener` (gRPC for every tool but acls) is a UsageError saying which one the tool needs."""
    given = args.bootstrap_server or (client_props or {}).get(BOOTSTRAP_SERVERS)
    if given:
        servers = _checked_servers(str(given))
        problem = wrong_listener(servers, listener, getattr(args, "command", None) or "")
        if problem is not None:
            raise UsageError(problem)
        return servers
    if args.data_dir is not None:
        return cluster_info(args).bootstrap_servers
    raise UsageError('Missing required argument "[bootstrap-server]" (or --data-dir DIR of a cluster started by'
                     " `minibroker cluster up`)")


def _checked_servers(servers: str) -> str:
    """Each address parsed as the client will parse it, so a bad one is a usage error here, not a traceback later
    (Kafka's ClientUtils.parseAndValidateAddresses message)."""
    for item in servers.split(","):
        try:
            parse_bootstrap_servers(item)
        except ValueError:
            raise UsageError(f"Invalid url in bootstrap.servers: {item}") from None
    return servers


def add_zookeeper_option(parser: argparse.ArgumentParser) -> None:
    """For the admin commands that go through ZooKeeper's /admin znodes, as Kafka's --zookeeper tools do."""
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="the cluster's ZooKeeper connect string")


def zookeeper_connect(args: argparse.Namespace, request: str, api: str, why: str | None = None) -> str:
    """--zookeeper, else the ZooKeeper of --data-dir's cluster: --bootstrap-server alone cannot do what the
    brokers have no `api` API for (or, `why` says, not on the door --bootstrap-server reaches)."""
    if args.zookeeper:
        return str(args.zookeeper)
    if args.data_dir is not None:
        return cluster_info(args).zookeeper.connect
    raise UsageError(f"the {request} is requested through ZooKeeper: give --zookeeper H:P or --data-dir DIR"
                     f" ({why or f'the brokers have no {api} API for --bootstrap-server yet'})")


def connect_zookeeper(connect: str, timeout: float = 15.0, security: ZkSecurity = OPEN) -> KafkaZkClient:
    """A session with the cluster's ZooKeeper for an admin command (logged in as `security` says:
    zookeeper_security(args)); a UsageError, at once when nothing listens there, after `timeout` when what
    listens does not answer as ZooKeeper."""
    try:
        return connect_checked(connect, timeout, security)
    except ZooKeeperUnreachableError as e:
        raise UsageError(f"cannot connect to ZooKeeper at {connect}: {e}") from None


def cluster_info(args: argparse.Namespace) -> ClusterInfo:
    try:
        return ClusterInfo.load(args.data_dir)
    except ClusterFileError as e:
        raise UsageError(str(e)) from None


def parse_key_values(items: Iterable[str]) -> dict[str, str]:
    """Kafka's CommandLineUtils.parseKeyValueArgs: `key=value` each, split at the first '='."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"Invalid command line properties: {item!r} is not key=value")
        props[key] = value
    return props


# librdkafka's names (the admin.properties of `cluster up --security`) as kafka-python calls them.
_KAFKA_PYTHON_NAMES = {"sasl.username": "sasl.plain.username", "sasl.password": "sasl.plain.password",
                       "ssl.ca.location": "ssl.cafile", "ssl.certificate.location": "ssl.certfile",
                       "ssl.key.location": "ssl.keyfile", "ssl.key.password": "ssl.password"}


def kafka_python_admin_properties(args: argparse.Namespace) -> dict[str, str]:
    """The admin's client properties for kafka-python's KafkaAdminClient on the Kafka listeners (`acls`, the
    console's DescribeLogDirs): --command-config, else those of --data-dir's secure cluster, under kafka-python's
    names (still dotted: security.protocol, sasl.plain.username)."""
    properties = load_config_file(args.command_config)
    if args.command_config is None and args.data_dir is not None and (secure := cluster_info(args).security):
        properties = load_config_file(Path(secure.client_config))  # a secure cluster's admin
    return {_KAFKA_PYTHON_NAMES.get(k, k): v for k, v in properties.items()}


def load_config_file(path: Path | None) -> dict[str, str]:
    """A --producer.config / --consumer.config properties file (nothing when not given)."""
    if path is None:
        return {}
    try:
        return load_properties(path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


def client_kwargs(client_class: type, props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka-named client settings as keyword arguments of `client_class` (Producer, Consumer), typed by
    the parameters' annotations. A name the client does not know is warned about and left out, as Kafka's
    clients do (AbstractConfig.logUnused); a known one with a bad value is an error."""
    parameters = inspect.signature(client_class).parameters
    kwargs: dict[str, Any] = {}
    for key, text in props.items():
        if key == BOOTSTRAP_SERVERS or key.startswith(SECURITY_PREFIXES):
            continue  # bootstrap_servers() and client_security() took them
        parameter = parameters.get(key.replace(".", "_"))
        types = _annotation_types(parameter)
        if parameter is None or not types or not types <= _SETTABLE:
            print(f"WARN The configuration '{key}' was supplied but isn't a known config.", file=sys.stderr)
            continue
        kwargs[parameter.name] = _typed(key, text.strip(), types)
    return kwargs


def _annotation_types(parameter: inspect.Parameter | None) -> set[str]:
    # The client modules use `from __future__ import annotations`: annotations are strings like "int | str".
    if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
        return set()
    return {t.strip() for t in str(parameter.annotation).split("|")}


def _typed(key: str, text: str, types: set[str]) -> Any:
    if "str" in types:  # e.g. acks: 1 or "all", which the client parses itself
        return text
    try:
        if "bool" in types:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if "int" in types:
            return int(text)
        return float(text)
    except ValueError:
        raise UsageError(f"Invalid value {text} for configuration {key}: not a {' or '.join(sorted(types))}") from None
