"""Bytes on disk per replica, from Kafka's DescribeLogDirs on the brokers' Kafka listeners, through kafka-python's
KafkaAdminClient (confluent-kafka 2.16's AdminClient has no describe_log_dirs): the one fact the console needs
that only the log directories hold. `replica_sizes` reads the answers, with no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# A broker that stops answering (SIGSTOP) holds up the console's slow loop for no longer than this.
REQUEST_TIMEOUT_MS = 2000

ReplicaSizes = dict[tuple[str, int], dict[int, int]]


def replica_sizes(answers: Iterable[Mapping[str, Any]]) -> ReplicaSizes:
    """kafka-python's describe_log_dirs answers ({"broker": id, "log_dirs": [DescribeLogDirsResult as a dict]})
    -> (topic, partition) -> broker -> bytes of its replica. A log dir answering an error (offline:
    KAFKA_STORAGE_ERROR) has nothing to count; a future replica (being moved to another dir of its broker) is
    not the one serving, as kafka-log-dirs.sh shows it apart."""
    sizes: ReplicaSizes = {}
    for answer in answers:
        for log_dir in answer["log_dirs"]:
            if log_dir["error_code"] != 0:
                continue
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    if not p["is_future_key"]:
                        sizes.setdefault((topic["name"], p["partition_index"]), {})[answer["broker"]] = \
                            p["partition_size"]
    return sizes


class LogDirs:
    """DescribeLogDirs of every partition, asked of the brokers given; the client connects on first use."""

    def __init__(self, servers: str, properties: Mapping[str, str]) -> None:
        self._servers = servers
        self._properties = dict(properties)
        self._admin: Any = None

    def describe(self, brokers: Sequence[int]) -> ReplicaSizes:
        """Raises kafka-python's KafkaError when the cluster cannot be asked."""
        from kafka import KafkaAdminClient  # loaded by the console only when it asks

        if self._admin is None:
            self._admin = KafkaAdminClient(bootstrap_servers=self._servers.split(","), client_id="minibroker-console",
                                           request_timeout_ms=REQUEST_TIMEOUT_MS,
                                           **{k.replace(".", "_"): v for k, v in self._properties.items()})
        return replica_sizes(self._admin.describe_log_dirs(brokers=list(brokers)))

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
