"""minibroker's Python client: Producer, Consumer and Admin, in kafka-python's shapes.

Talks to brokers over gRPC (proto/minibroker.proto); records travel as Kafka
RecordBatch v2 bytes (common/record.py), the only part of the broker this
package uses.

The public classes:
  producer.py             Producer: Kafka's KafkaProducer with kafka-python's names and defaults
  consumer.py             Consumer: Kafka's KafkaConsumer with kafka-python's names and defaults
  admin.py                Admin: topics, the cluster, topic and dynamic broker configs (KafkaAdminClient)
  structs.py              the value types a client hands out (kafka.structs)
  errors.py               every error a client raises: Kafka's error codes plus the client-side ones
  future.py               futures for sent records

The producer's machinery:
  partitioner.py          murmur2 for keyed records; DefaultPartitioner (KIP-480's sticky one) when given to a Producer
  builtin_partitioner.py  BuiltInPartitioner: keyless records' sticky partition without one (KIP-794)
  accumulator.py          RecordAccumulator: per-partition batches that send() fills and the sender drains
  sender.py               the producer's I/O thread (Kafka's Sender)
  idempotence.py          the idempotent producer's bookkeeping (TransactionManager's idempotent half)
  transaction_manager.py  the transactional producer's rules: states, partitions in the transaction, answers (pure)
  transactional_requests.py  FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn to the coordinator

Shared by all three:
  connection.py           one gRPC channel per broker address, deadlines on every call
  metadata.py             which brokers exist and which one leads each partition
  retry.py                when to retry and how long to wait (pure)
  fetcher.py              the consumer's Fetcher: Fetch and ListOffsets, records out of their answers
  read_committed.py       what a read_committed consumer drops: aborted transactions' batches (Kafka's Fetcher)

The group consumer (Consumer with a group_id), rules apart from I/O:
  consumer_protocol.py    Kafka's ConsumerProtocol subscription / assignment bytes (protocol type "consumer")
  assignors.py            range and round-robin assignors (the leader's job)
  group_membership.py     a member's state machine: what each JoinGroup/SyncGroup/Heartbeat answer means
  heartbeat.py            the session, heartbeat and max.poll.interval.ms timers
  consumer_coordinator.py the I/O: FindCoordinator, join/sync, commits, the heartbeat thread
  subscription.py         what the consumer reads (topics, pattern, assignment) and its ConsumerRebalanceListener
  metrics.py              records-lag-max (FetchManagerMetrics); the producer's request totals (SenderMetrics)
  offset_requests.py      OffsetCommit / OffsetFetch requests and answers, for the coordinator and group_admin
  group_admin.py          Admin's consumer-group calls (kafka-consumer-groups.sh's)
"""

from client.admin import (
    Admin,
    AlterConfigOp,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    OpType,
    PartitionInfo,
    TopicDescription,
)
from client.assignors import PartitionAssignor, RangeAssignor, RoundRobinAssignor
from client.consumer import Consumer
from client.errors import (
    CommitFailedError,
    CorruptMessageError,
    ErrorCode,
    IllegalStateError,
    InvalidRecordError,
    KafkaError,
    KafkaStorageError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnsupportedCompressionTypeError,
    error_for,
)
from client.future import FutureRecordMetadata
from client.group_admin import ConsumerGroupDescription, ConsumerGroupListing, MemberDescription
from client.partitioner import DefaultPartitioner, murmur2
from client.producer import Producer
from client.structs import (
    BrokerMetadata,
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionMetadata,
    RecordMetadata,
)
from client.subscription import ConsumerRebalanceListener
from proto.types import TopicPartition

__all__ = [
    "Admin",
    "AlterConfigOp",
    "BrokerMetadata",
    "ClusterDescription",
    "CommitFailedError",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "CorruptMessageError",
    "DefaultPartitioner",
    "ErrorCode",
    "FutureRecordMetadata",
    "IllegalStateError",
    "InvalidRecordError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "MemberDescription",
    "MessageTooLargeError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "OpType",
    "PartitionAssignor",
    "PartitionInfo",
    "PartitionMetadata",
    "Producer",
    "RangeAssignor",
    "RecordListTooLargeError",
    "RecordMetadata",
    "RoundRobinAssignor",
    "TopicDescription",
    "TopicPartition",
    "UnsupportedCompressionTypeError",
    "error_for",
    "murmur2",
]
