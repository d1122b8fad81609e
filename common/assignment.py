"""Rack-unaware replica assignment: Kafka's AdminUtils.assignReplicasToBrokers (2.x), no racks.

Pure code with no dependency on the controller's state, so the broker's
CreateTopics handler imports it too. Two goals, as in Kafka:

1. leaders spread evenly: partition p's first replica is broker
   (p + start index) mod n, round-robin from a random start;
2. the followers of the partitions a broker leads spread over the other
   brokers: the distance from the first replica to the others grows by one
   ("replica shift") each time the round-robin wraps around the broker list.

With brokers 0..4, 10 partitions, replication factor 3 and start index = shift = 0:

    broker-0  broker-1  broker-2  broker-3  broker-4
    p0        p1        p2        p3        p4        (1st replica)
    p5        p6        p7        p8        p9        (1st replica)
    p4        p0        p1        p2        p3        (2nd replica)
    p8        p9        p5        p6        p7        (2nd replica)
    p3        p4        p0        p1        p2        (3rd replica)
    p7        p8        p9        p5        p6        (3rd replica)
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from proto.errors import ErrorCode, KafkaError

# Kafka's AdminUtils.rand: one generator for the process, not reseeded per call.
_rand = random.Random()


def assign_replicas_to_brokers(
    n_partitions: int,
    replication_factor: int,
    broker_ids: Sequence[int],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Partition id -> replicas (the first is the preferred leader).

    `broker_ids` is used in the order given; Kafka's callers pass the live
    brokers sorted by id. A negative `fixed_start_index` draws the start index
    and the initial replica shift at random (independently); a fixed one uses it
    for both, which is what makes the result reproducible. `start_partition_id`
    numbers the partitions from there (adding partitions to a topic: Kafka
    passes the existing partition count, and as the start index the position of
    partition 0's first replica in the broker list).

    Raises KafkaError INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR with
    Kafka's messages.
    """
    if n_partitions <= 0:
        raise KafkaError("Number of partitions must be larger than 0.", ErrorCode.INVALID_PARTITIONS)
    if replication_factor <= 0:
        raise KafkaError("Replication factor must be larger than 0.", ErrorCode.INVALID_REPLICATION_FACTOR)
    n_brokers = len(broker_ids)
    if replication_factor > n_brokers:
        raise KafkaError(
            f"Replication factor: {replication_factor} larger than available brokers: {n_brokers}.",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    rng = rng or _rand
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n_brokers)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n_brokers)
    assignment: dict[int, list[int]] = {}
    partition_id = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition_id > 0 and partition_id % n_brokers == 0:
            next_replica_shift += 1
        first_replica_index = (partition_id + start_index) % n_brokers
        replicas = [broker_ids[first_replica_index]]
        replicas += [
            broker_ids[_replica_index(first_replica_index, next_replica_shift, j, n_brokers)]
            for j in range(replication_factor - 1)
        ]
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    # The shift is 1..n-1, never 0: a follower never lands on its leader's broker.
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers
