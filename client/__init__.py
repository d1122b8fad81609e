"""minibroker's Python client: Producer, Consumer and Admin, in kafka-python's shapes.

Talks to brokers over gRPC (proto/minibroker.proto); records travel as Kafka
RecordBatch v2 bytes (common/record.py), the only part of the broker this
package uses.
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
from client.consumer import Consumer
from client.errors import (
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
from client.partitioner import DefaultPartitioner, murmur2
from client.producer import Producer
from client.structs import (
    BrokerMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionMetadata,
    RecordMetadata,
)
from proto.types import TopicPartition

__all__ = [
    "Admin",
    "AlterConfigOp",
    "BrokerMetadata",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
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
    "MessageTooLargeError",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "OpType",
    "PartitionInfo",
    "PartitionMetadata",
    "Producer",
    "RecordListTooLargeError",
    "RecordMetadata",
    "TopicDescription",
    "TopicPartition",
    "UnsupportedCompressionTypeError",
    "error_for",
    "murmur2",
]
