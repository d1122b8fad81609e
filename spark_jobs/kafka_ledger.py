"""The exactly-once sink's ledger: the last micro-batch each (query, task partition) committed, in a Kafka topic.

A task of the `exactlyOnce` sink writes one record to the ledger topic inside the same transaction as its rows:
key `<query id>/<partition>`, value the micro-batch id. The ledger is therefore committed, or aborted, with the
rows. A task that Spark runs again for a micro-batch (the batch failed after some tasks committed, or the
driver stopped before Spark's commit log recorded it and the restarted query replays it) first reads the
ledger with read_committed, after its InitProducerId has fenced and aborted any earlier attempt's transaction:
if its key already holds this micro-batch id or a later one, its rows are in the output and it writes nothing.
The topic is compacted (one record per key is all a reader needs) and created by the driver.

A task's entries go to ledger partition (task partition mod the ledger's partitions), so the tasks of one
micro-batch, up to LEDGER_PARTITIONS of them, write to partitions of their own. That matters after a driver
is killed mid-batch: each task's transaction it left open holds its ledger partition's last stable offset, and
only that task's next attempt aborts it (or the coordinator, at transaction.timeout.ms). A task reading a
partition a sibling's open transaction holds waits for it (read_ledger); alone on its partition, it has just
aborted its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_LEDGER_TOPIC = "minibroker-sink-ledger"
LEDGER_PARTITIONS = 16  # a micro-batch of up to this many tasks: each its own ledger partition
_TIMEOUT_S = 60.0
# Longer than librdkafka's default transaction.timeout.ms (60 s) plus the coordinator's abort sweep (10 s): an
# open transaction nobody fences is aborted by then.
_STABLE_TIMEOUT_S = 120.0
_STABLE_POLL_S = 0.1


def ledger_key(query_id: str, partition: int) -> bytes:
    return f"{query_id}/{partition}".encode()


def already_committed(entries: Mapping[bytes, bytes], key: bytes, batch_id: int) -> bool:
    """Whether the ledger (last value per key) says this partition of this micro-batch, or a later one, committed."""
    value = entries.get(key)
    return value is not None and int(value) >= batch_id


def ledger_partition_of(task_partition: int, ledger_partitions: int) -> int:
    return task_partition % ledger_partitions


def ledger_partition(client: Mapping[str, str], topic: str, task_partition: int) -> TopicPartition:
    """Where a task's entries are: the ledger's partition count from Metadata (a ledger made by another release
    may have another count)."""
    metadata = AdminClient(dict(client)).list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    return TopicPartition(topic, ledger_partition_of(task_partition, len(metadata.partitions)))


def ensure_ledger(client: Mapping[str, str], topic: str) -> None:
    """Create the ledger topic if it is missing (the driver, once per query start)."""
    admin = AdminClient(dict(client))
    future = admin.create_topics([NewTopic(topic, LEDGER_PARTITIONS, -1, config={"cleanup.policy": "compact"})])[topic]
    try:
        future.result(_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # an earlier start, or another query, made it
            raise


def read_ledger(client: Mapping[str, str], partition: TopicPartition) -> dict[bytes, bytes]:
    """Every key's last committed value in one ledger partition: read with read_committed up to its high
    watermark, once every transaction below that is decided.

    The high watermark, not the last stable offset: a transaction some other task left open (a driver killed in
    the middle of a micro-batch) holds the last stable offset below entries committed after it began, and a
    task that read only that far would miss its own committed entry and write its rows a second time. So the
    read waits until the last stable offset reaches the high watermark found first: the open transaction is
    aborted by its own task's next attempt (InitProducerId) or by the coordinator at transaction.timeout.ms.
    """
    topic = partition.topic
    high = _high_watermark(client, partition)
    config = {**client, "group.id": f"minibroker-sink-ledger-{uuid.uuid4()}", "enable.auto.commit": False,
              "isolation.level": "read_committed", "enable.partition.eof": True}
    consumer = Consumer(config)
    try:
        low = _wait_stable(consumer, partition, high)
        entries: dict[bytes, bytes] = {}
        if high <= low:
            return entries
        consumer.assign([TopicPartition(topic, partition.partition, low)])
        while True:
            message = consumer.poll(_TIMEOUT_S)
            if message is None:
                raise TimeoutError(f"the ledger {topic} was not read to offset {high} in {_TIMEOUT_S:.0f} s")
            error, key, value, offset = message.error(), message.key(), message.value(), message.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return entries
                raise KafkaException(error)
            if key is not None and value is not None:
                entries[key] = value
            if offset is None or offset + 1 >= high:
                return entries
    finally:
        consumer.close()


def _high_watermark(client: Mapping[str, str], partition: TopicPartition) -> int:
    consumer = Consumer({**client, "group.id": f"minibroker-sink-ledger-{uuid.uuid4()}",
                         "isolation.level": "read_uncommitted"})
    try:
        return int(consumer.get_watermark_offsets(partition, timeout=_TIMEOUT_S)[1])
    finally:
        consumer.close()


def _wait_stable(consumer: Consumer, partition: TopicPartition, high: int) -> int:
    """Until the last stable offset (read_committed's ListOffsets latest) reaches `high`; the log start offset."""
    deadline = time.monotonic() + _STABLE_TIMEOUT_S
    while True:
        low, stable = consumer.get_watermark_offsets(partition, timeout=_TIMEOUT_S)
        if stable >= high:
            return int(low)
        if time.monotonic() > deadline:
            raise TimeoutError(f"a transaction on the ledger {partition.topic} stayed open below offset {high}"
                               f" for {_STABLE_TIMEOUT_S:.0f} s")
        time.sleep(_STABLE_POLL_S)  # the open transaction ends when it is fenced or times out
