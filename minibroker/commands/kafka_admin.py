"""kafka-python's KafkaAdminClient for the tools that speak to the brokers' Kafka listeners, as Kafka's own tools
do (acls, transactions): where the listeners are, the client built from --command-config's properties under
kafka-python's names, and its errors as the project's."""

from __future__ import annotations

import argparse
from typing import Any

from minibroker.commands.client_options import (
    UsageError,
    bootstrap_servers,
    cluster_info,
    kafka_python_admin_properties,
)
from minibroker.commands.listener_probe import KAFKA
from proto.errors import KafkaError, error_for

REQUEST_TIMEOUT_MS = 30_000
BOOTSTRAP_TIMEOUT_MS = 10_000


def kafka_listeners(args: argparse.Namespace) -> str:
    """--bootstrap-server (probed: it must be a Kafka listener), else --data-dir's cluster's Kafka listeners."""
    if args.bootstrap_server or args.data_dir is None:
        return bootstrap_servers(args, listener=KAFKA)  # without either: Kafka's missing-argument error
    servers = cluster_info(args).kafka_bootstrap_servers
    if not servers:
        raise UsageError(f"the cluster of {args.data_dir} has no Kafka listener in its cluster.json")
    return servers


def open_kafka_admin(args: argparse.Namespace, servers: str, client_id: str) -> Any:
    """A KafkaAdminClient for `servers`, given --command-config's client properties (or a secure --data-dir's)."""
    from kafka import KafkaAdminClient  # the CLI's other commands do not load it
    from kafka.errors import KafkaError as KpError

    properties = kafka_python_admin_properties(args)
    unknown = sorted(k for k in properties if k.replace(".", "_") not in KafkaAdminClient.DEFAULT_CONFIG)
    if unknown:
        raise UsageError(f"unknown client properties in --command-config: {', '.join(unknown)}")
    try:
        return KafkaAdminClient(bootstrap_servers=servers.split(","), client_id=client_id,
                                request_timeout_ms=REQUEST_TIMEOUT_MS, bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                                **{k.replace(".", "_"): v for k, v in properties.items()})
    except KpError as e:
        # Kafka's AdminClient says it this way when no broker answers.
        raise KafkaError(f"Timed out waiting for a node assignment ({servers}: {e})") from None


def kafka_error(error: Any) -> KafkaError:
    """A kafka-python error (class or instance) as ours: its code, and its message when it carries one."""
    message = str(error).partition(": ")[2] if isinstance(error, BaseException) else ""
    code = getattr(error, "errno", None)
    if isinstance(code, int) and code > 0:
        return error_for(code, message or getattr(error, "description", ""))
    return KafkaError(message or str(error))
