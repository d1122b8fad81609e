"""Producer: Kafka's KafkaProducer with kafka-python's names and defaults.

send() is asynchronous: it serializes, picks a partition, appends the record
to that partition's open batch and returns a FutureRecordMetadata. A background
I/O thread (client.sender) sends batches to partition leaders and settles the
futures. Errors found before a record reaches a batch (unknown topic after
max_block_ms, a record too large) come back through the future, as in Kafka;
only misuse (a closed producer, a partition that does not exist) raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from time import time_ns
from typing import Any

import grpc

from client.accumulator import RECORD_OVERHEAD_UPPER_BOUND, RecordAccumulator, RecordCallback
from client.connection import ConnectionPool, parse_bootstrap_servers
from client.errors import IllegalStateError, KafkaTimeoutError, MessageTooLargeError
from client.future import FutureRecordMetadata
from client.idempotence import TransactionManager
from client.metadata import ClusterMetadata, Metadata
from client.partitioner import DefaultPartitioner, partition_for_key
from client.sender import Sender
from client.structs import ConsumerGroupMetadata, Header, OffsetAndMetadata
from client.transaction_manager import TransactionalState, TransactionState
from client.transactional_requests import TransactionalRequests
from common.record import HEADER_SIZE, CompressionType, serialized_header_size
from proto.errors import KafkaError
from proto.types import TopicPartition

_MAX_IN_FLIGHT_WITH_IDEMPOTENCE = 5  # the broker remembers the last five batches per producer and partition


def parse_acks(acks: int | str) -> int:
    """acks as Kafka spells it: 0, 1, or 'all' / -1."""
    value = -1 if str(acks).strip().lower() == "all" else _int_or_none(acks)
    if value not in (-1, 0, 1):
        raise ValueError(f"Invalid value {acks} for configuration acks: String must be one of: all, -1, 0, 1")
    return value


def _int_or_none(value: int | str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def idempotence_enabled(enable_idempotence: bool | None, acks: int, retries: int, max_in_flight: int) -> bool:
    """Kafka 3's rule (KIP-679, ProducerConfig.postProcessAndValidateIdempotenceConfigs): idempotence is on
    unless asked otherwise; left unset, it quietly turns off where acks, retries or
    max.in.flight.requests.per.connection rule it out; set to true explicitly, those are errors."""
    if enable_idempotence is None:
        return acks == -1 and retries > 0 and max_in_flight <= _MAX_IN_FLIGHT_WITH_IDEMPOTENCE
    if enable_idempotence:
        if acks != -1:
            raise ValueError("Must set acks to all in order to use the idempotent producer"
                             " (enable.idempotence=true requires acks=all)")
        if retries <= 0:
            raise ValueError("Must set retries to non-zero when using the idempotent producer"
                             " (enable.idempotence=true requires retries > 0)")
        if max_in_flight > _MAX_IN_FLIGHT_WITH_IDEMPOTENCE:
            raise ValueError("Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent"
                             " producer (enable.idempotence=true)")
    return enable_idempotence


def _check_bytes(name: str, data: object, serializer: str) -> None:
    """kafka-python's check, with the parameter and the way out named (the encoder would fail deep inside)."""
    if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"{name} must be bytes (or None), not {type(data).__name__}: pass bytes or give the producer"
                        f" a {serializer} (e.g. {serializer}=str.encode)")


def _check_headers(headers: Sequence[Any]) -> None:
    for header in headers:
        if not (isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str)
                and (header[1] is None or isinstance(header[1], (bytes, bytearray, memoryview)))):
            raise TypeError(f"headers must be (str, bytes or None) pairs, not {header!r}")


class Producer:
    """Publishes records to topics; thread-safe, one instance is meant to be shared.

    `acks`: 0 (no answer), 1 (the leader's append) or 'all' (the whole ISR), by
    default 'all'. `enable_idempotence` (the broker drops retried duplicates by
    sequence number) is on by default where acks='all' allows it, as in Kafka 3
    and kafka-python 3; set to True explicitly, it needs acks='all' and at most 5
    requests in flight per broker.

    `batch_size` (batch.size) is librdkafka's default, 1,000,000 bytes, not the
    Java producer's 16384: a Produce request carries one batch per partition
    (Kafka's rule since v3), so with acks='all' a partition moves at most
    batch_size x max_in_flight_requests_per_connection per round trip through
    the followers' fetches. With 16 KiB batches a partition was held to ~3 MB/s
    whatever the record size (issue 26). A batch is still sent as soon as it
    lingered linger_ms (or the partition has a free in-flight slot and linger_ms
    is 0): a large batch_size only lets records pile up while requests are in
    flight. `buffer_memory` counts the bytes of the records queued, as
    librdkafka's queue.buffering.max.kbytes does, not batch_size per batch.
    As with librdkafka, a topic whose max.message.bytes or segment.bytes is
    below batch_size needs a producer with a smaller batch_size: a batch the
    broker finds too large fails (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE).

    Without a `partitioner`, keys are hashed with murmur2 and keyless records
    go to Kafka 3.3's uniform sticky partitioner (KIP-794): batch_size bytes to
    one partition, then the next, so every partition gets as many bytes however
    fast its leader answers (client/builtin_partitioner.py).
    `partitioner_adaptive_partitioning_enable` (Kafka's
    partitioner.adaptive.partitioning.enable, on) gives the partitions whose
    batches pile up their turn later in each round;
    `partitioner_availability_timeout_ms` (partitioner.availability.timeout.ms,
    0: off) leaves out a partition whose leader had records ready but could
    take no request for that long.
    """

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str] = "localhost:9192",
        *,
        client_id: str | None = None,
        key_serializer: Callable[[Any], bytes] | None = None,
        value_serializer: Callable[[Any], bytes] | None = None,
        acks: int | str = "all",
        compression_type: str | None = None,
        retries: int = 2147483647,
        batch_size: int = 1_000_000,
        linger_ms: int = 0,
        partitioner: DefaultPartitioner | None = None,
        partitioner_adaptive_partitioning_enable: bool = True,
        partitioner_availability_timeout_ms: int = 0,
        buffer_memory: int = 33554432,
        max_block_ms: int = 60000,
        max_request_size: int = 1048576,
        metadata_max_age_ms: int = 300000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        max_in_flight_requests_per_connection: int = 5,
        enable_idempotence: bool | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        channel_factory: Callable[..., grpc.aio.Channel] = grpc.aio.insecure_channel,
    ) -> None:
        self.acks = parse_acks(acks)
        if transactional_id is not None and enable_idempotence is False:
            raise ValueError("Cannot set a transactional_id without also enabling idempotence")
        self.compression = CompressionType.from_name(compression_type)
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError("delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms")
        # A transactional id implies idempotence (Kafka's ProducerConfig), so it needs acks='all' too.
        self.enable_idempotence = idempotence_enabled(True if transactional_id is not None else enable_idempotence,
                                                      self.acks, retries, max_in_flight_requests_per_connection)
        self.client_id = client_id
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        self._buffer_memory = buffer_memory
        self._max_record_payload = min(max_request_size, buffer_memory) - HEADER_SIZE - RECORD_OVERHEAD_UPPER_BOUND
        # None: Kafka 3.3's built-in partitioner (murmur2 for keys, KIP-794's uniform sticky partitioner in the
        # accumulator for the rest); a partitioner given is asked for every record, as Kafka's partitioner.class.
        self._partitioner = partitioner
        # Per topic, its partitions and those with a leader, as of one ClusterMetadata (a new one replaces
        # the entry): send() looks them up once per metadata update rather than once per record.
        self._topics: dict[str, tuple[ClusterMetadata, tuple[TopicPartition, ...], tuple[int, ...]]] = {}
        pool = ConnectionPool(request_timeout_ms=request_timeout_ms, reconnect_backoff_ms=reconnect_backoff_ms,
                              reconnect_backoff_max_ms=reconnect_backoff_max_ms, channel_factory=channel_factory)
        self._metadata = Metadata(parse_bootstrap_servers(bootstrap_servers), pool, retry_backoff_ms=retry_backoff_ms,
                                  metadata_max_age_ms=metadata_max_age_ms, allow_auto_topic_creation=True)
        self._accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            max_in_flight_per_partition=max_in_flight_requests_per_connection if self.enable_idempotence else 1,
            partitioner_adaptive_partitioning_enable=partitioner_adaptive_partitioning_enable,
            partitioner_availability_timeout_ms=partitioner_availability_timeout_ms,
            wakeup=self._wakeup,
        )
        txn = TransactionManager() if self.enable_idempotence else None
        self._transactional: TransactionalState | None = None
        self._txn_requests: TransactionalRequests | None = None
        if transactional_id is not None:
            txn = self._transactional = TransactionalState(transactional_id, transaction_timeout_ms)
            self._txn_requests = TransactionalRequests(self._transactional, self._metadata,
                                                       request_timeout_ms=request_timeout_ms,
                                                       retry_backoff_ms=retry_backoff_ms)
        self._sender = Sender(
            self._accumulator,
            self._metadata,
            acks=self.acks,
            retries=retries,
            compression=self.compression,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
            max_request_size=max_request_size,
            transaction_manager=txn,
            transactional_requests=self._txn_requests,
        )
        self._closed = False
        self._sender.start()

    def _wakeup(self) -> None:
        self._sender.wakeup()

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[Header] | None = None,
        timestamp_ms: int | None = None,
        callback: RecordCallback | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future settles when the broker acknowledges it (or it fails).

        Blocks only to learn the topic's partitions (up to max_block_ms) or to
        wait for buffer_memory to free up. `callback(future)` runs once the
        record is acknowledged or failed, on the producer's I/O thread (Java's
        send(record, callback)): the same as `send(...).add_done_callback(callback)`,
        but cheaper, as it is attached while the record's batch is still open.
        """
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        if self._transactional is not None:
            self._transactional.check_send()
        if timestamp_ms is not None and timestamp_ms < 0:
            raise ValueError(f"Invalid timestamp: {timestamp_ms}. Timestamp should always be non-negative or null.")
        key_bytes = key if key is None or self._key_serializer is None else self._key_serializer(key)
        value_bytes = value if value is None or self._value_serializer is None else self._value_serializer(value)
        if type(value_bytes) is not bytes or (key_bytes is not None and type(key_bytes) is not bytes):
            _check_bytes("value", value_bytes, "value_serializer")
            _check_bytes("key", key_bytes, "key_serializer")
        key_size = -1 if key_bytes is None else len(key_bytes)
        value_size = -1 if value_bytes is None else len(value_bytes)
        if headers:
            headers = tuple(headers)
            _check_headers(headers)
            header_size = serialized_header_size(headers)
        else:
            headers, header_size = (), -1
        timestamp = time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        try:
            # Sizes of null parts are -1, which the upper bound's overhead more than covers.
            if key_size + value_size + header_size > self._max_record_payload:
                raise MessageTooLargeError(
                    f"the record is about {key_size + value_size + header_size + RECORD_OVERHEAD_UPPER_BOUND} bytes"
                    f" when serialized, more than max_request_size ({self._max_request_size})"
                    f" or buffer_memory ({self._buffer_memory}) allows")
            cluster = self._metadata.cluster
            cached = self._topics.get(topic)
            if cached is not None and cached[0] is cluster:
                tps, available = cached[1], cached[2]
            else:
                found = cluster.topic_partitions(topic)
                if found is None:
                    cluster = self._metadata.wait_for_topic(topic, self._max_block_ms)
                    found = cluster.topic_partitions(topic)
                    assert found is not None
                tps = found
                available = cluster.available_partitions(topic)
                self._topics[topic] = (cluster, tps, available)
            if partition is not None:
                if not 0 <= partition < len(tps):
                    tps = self._wait_for_partition(topic, partition, len(tps))
                future = self._accumulator.append(tps[partition], timestamp, key_bytes, value_bytes, headers,
                                                  key_size, value_size, header_size, False, callback)
            elif self._partitioner is None:
                if key_bytes is None:
                    return self._accumulator.append_keyless(topic, tps, available, timestamp, value_bytes, headers,
                                                            value_size, header_size, callback)
                future = self._accumulator.append(tps[partition_for_key(key_bytes, len(tps))], timestamp, key_bytes,
                                                  value_bytes, headers, key_size, value_size, header_size, False,
                                                  callback)
            else:
                future = self._append_partitioned(self._partitioner, topic, tps, available, timestamp, key_bytes,
                                                  value_bytes, headers, key_size, value_size, header_size, callback)
            assert future is not None
            return future
        except IllegalStateError:
            raise  # closed while this send was on its way: misuse, as before the try
        except KafkaError as exc:
            failed = FutureRecordMetadata.failed_with(TopicPartition(topic, -1 if partition is None else partition),
                                                      exc, key_size, value_size, header_size)
            if callback is not None:
                failed.add_done_callback(callback)
            return failed

    def _append_partitioned(self, partitioner: DefaultPartitioner, topic: str, tps: tuple[TopicPartition, ...],
                            available: tuple[int, ...], timestamp: int, key_bytes: bytes | None,
                            value_bytes: bytes | None, headers: Sequence[Header], key_size: int, value_size: int,
                            header_size: int, callback: RecordCallback | None) -> FutureRecordMetadata | None:
        """A record placed by the partitioner given to the producer, told of each new batch (KIP-480's onNewBatch:
        Kafka 3.3 keeps it for a partitioner.class)."""
        append = self._accumulator.append
        chosen = partitioner.partition(topic, key_bytes, len(tps), available)
        future = append(tps[chosen], timestamp, key_bytes, value_bytes, headers, key_size, value_size, header_size,
                        key_bytes is None, callback)
        if future is None:
            # The sticky partition's batch is closed: move on before opening a new one.
            partitioner.on_new_batch(topic, len(tps), available, chosen)
            chosen = partitioner.partition(topic, key_bytes, len(tps), available)
            future = append(tps[chosen], timestamp, key_bytes, value_bytes, headers, key_size, value_size,
                            header_size, False, callback)
        return future

    def _wait_for_partition(self, topic: str, partition: int, known: int) -> tuple[TopicPartition, ...]:
        """Kafka's waitOnMetadata for a partition past the known count: partitions may have been added
        (CreatePartitions), so refresh until the metadata has it, for up to max_block_ms."""
        if partition < 0:
            raise ValueError(f"partition {partition} of {topic!r} is negative")
        cluster = self._metadata.wait_for(lambda c: len(c.topic_partitions(topic) or ()) > partition,
                                          self._max_block_ms,
                                          f"Partition {partition} of topic {topic} with partition count {known} is")
        found = cluster.topic_partitions(topic)
        assert found is not None
        self._topics[topic] = (cluster, found, cluster.available_partitions(topic))
        return found

    # ------------------------------------------------------------------ transactions (KIP-98)

    def _transaction(self) -> tuple[TransactionalState, TransactionalRequests]:
        if self._transactional is None or self._txn_requests is None:
            raise IllegalStateError("Transactional method invoked on a non-transactional producer.")
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        return self._transactional, self._txn_requests

    def init_transactions(self) -> None:
        """Register the transactional id with its coordinator (InitProducerId): fences every earlier producer
        with the same id and waits for a transaction it left open to be aborted or completed. Call once,
        before anything else; blocks up to max_block_ms."""
        state, requests = self._transaction()
        state.begin_init()
        requests.init_producer_id(self._max_block_ms)

    def begin_transaction(self) -> None:
        """Open a transaction: what is sent until commit or abort is written as one unit."""
        state, _ = self._transaction()
        state.begin()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit a consumer's offsets with the transaction (consume-transform-produce): they count only if
        it commits. `offsets`: the next offset to read per partition; `group_metadata`: the consumer's
        Consumer.group_metadata() (KIP-447: a member whose generation has passed is refused) or a bare group
        id. Blocks up to max_block_ms; a refused group or a stale member makes the transaction abortable."""
        state, requests = self._transaction()
        state.begin_send_offsets()
        group = ConsumerGroupMetadata(group_metadata) if isinstance(group_metadata, str) else group_metadata
        requests.send_offsets(offsets, group, self._max_block_ms)

    def commit_transaction(self) -> None:
        """Flush every record sent in the transaction, then commit it (EndTxn). If a record failed, the
        transaction cannot commit: this raises that error and the application calls abort_transaction().
        A fenced producer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) raises and can only be closed."""
        state, requests = self._transaction()
        state.begin_commit()
        self._flush_ignoring_errors()
        if state.state is TransactionState.ABORTABLE_ERROR or state.state is TransactionState.FATAL_ERROR:
            assert state.last_error is not None
            raise state.last_error
        if state.transaction_started:
            requests.end_txn(True, self._max_block_ms)
        state.transition_to(TransactionState.READY)

    def abort_transaction(self) -> None:
        """Fail what is still queued, wait for what is in flight, then abort (EndTxn): read_committed
        consumers never see the transaction's records. Recovers from an abortable error; if a batch's
        sequence was lost, the producer's epoch is bumped (KIP-360) so the next transaction starts clean."""
        state, requests = self._transaction()
        state.begin_abort()
        self._sender.wakeup()
        self._flush_ignoring_errors()
        if state.transaction_started:
            requests.end_txn(False, self._max_block_ms)
        if state.epoch_bump_required:
            state.transition_to(TransactionState.INITIALIZING)
            requests.init_producer_id(self._max_block_ms, bump_epoch=True)
        else:
            state.transition_to(TransactionState.READY)

    def _flush_ignoring_errors(self) -> None:
        """Wait (up to max_block_ms) until every batch is acknowledged or failed; failures reach the state
        through the sender, not here."""
        self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            if not self._accumulator.await_completion(self._accumulator.incomplete_batches(), self._max_block_ms):
                raise KafkaTimeoutError(f"the transaction's records were not acknowledged within"
                                        f" {self._max_block_ms} ms")
        finally:
            self._accumulator.end_flush()

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition numbers, waiting up to max_block_ms for metadata."""
        partitions = self._metadata.wait_for_topic(topic, self._max_block_ms).partitions_for_topic(topic)
        assert partitions is not None
        return partitions

    def metrics(self) -> dict[str, dict[str, float]]:
        """The producer's metrics by group, with Kafka's names (kafka-python's metrics()): producer-metrics'
        request-total and outgoing-byte-total, the Produce requests sent and their bytes."""
        return {"producer-metrics": self._sender.metrics.snapshot()}

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring linger_ms) and wait until it is acknowledged or failed.

        Raises KafkaTimeoutError if that takes longer than `timeout` seconds.
        """
        self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            batches = self._accumulator.incomplete_batches()
            if not self._accumulator.await_completion(batches, None if timeout is None else timeout * 1000):
                raise KafkaTimeoutError(f"flush did not complete within {timeout} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued, then stop; after `timeout` seconds, fail what is left and stop anyway.

        Calling it again bounds a close still under way (one interrupted by KeyboardInterrupt, say).
        """
        if not self._closed:
            self._closed = True
            self._accumulator.close()
            self._sender.initiate_close()
        if not self._sender.join(timeout):
            self._sender.force_close()
            self._sender.join()
        self._metadata.pool.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
