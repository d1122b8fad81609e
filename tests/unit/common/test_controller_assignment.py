"""Rack-unaware replica assignment, against the assignments Kafka's own tests expect."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from common.assignment import assign_replicas_to_brokers
from proto.errors import ErrorCode, KafkaError


def test_kafka_admin_test_replica_assignment() -> None:
    # Kafka's AdminTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start index 0.
    assert assign_replicas_to_brokers(10, 3, [0, 1, 2, 3, 4], fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_kafka_add_partitions_test_placements() -> None:
    # Kafka's AddPartitionsTest: adding partitions starts at the existing count, from the position of
    # partition 0's first replica in the broker list.
    # testReplicaPlacementAllServers: partition 0 is [2, 3, 0, 1]; grow to 7 partitions.
    added = assign_replicas_to_brokers(6, 4, [0, 1, 2, 3], fixed_start_index=2, start_partition_id=1)
    assert {p: (r[0], set(r)) for p, r in added.items()} == {
        1: (3, {0, 1, 2, 3}),
        2: (0, {0, 1, 2, 3}),
        3: (1, {0, 1, 2, 3}),
        4: (2, {0, 1, 2, 3}),
        5: (3, {0, 1, 2, 3}),
        6: (0, {0, 1, 2, 3}),
    }
    # testReplicaPlacementPartialServers: partition 0 is [1, 2]; grow to 3 partitions.
    assert assign_replicas_to_brokers(2, 2, [0, 1, 2, 3], fixed_start_index=1, start_partition_id=1) == {
        1: [2, 0],
        2: [3, 1],
    }


def test_broker_ids_are_used_in_the_given_order() -> None:
    assert assign_replicas_to_brokers(3, 2, [30, 10, 20], fixed_start_index=0) == {
        0: [30, 10],
        1: [10, 20],
        2: [20, 30],
    }


@pytest.mark.parametrize(
    ("partitions", "rf", "brokers", "code", "message"),
    [
        (0, 1, [1], ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."),
        (1, 0, [1], ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."),
        (10, 6, [0, 1, 2, 3, 4], ErrorCode.INVALID_REPLICATION_FACTOR, "larger than available brokers: 5."),
        (1, 1, [], ErrorCode.INVALID_REPLICATION_FACTOR, "larger than available brokers: 0."),
    ],
)
def test_invalid_requests(partitions: int, rf: int, brokers: list[int], code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError) as caught:
        assign_replicas_to_brokers(partitions, rf, brokers)
    assert caught.value.code == code
    assert message in str(caught.value)


@pytest.mark.parametrize("seed", range(20))
def test_random_start_spreads_leaders_and_replicas_evenly(seed: int) -> None:
    brokers = [1, 2, 3, 4, 5]
    assignment = assign_replicas_to_brokers(20, 3, brokers, rng=random.Random(seed))
    assert sorted(assignment) == list(range(20))
    for replicas in assignment.values():
        assert len(replicas) == 3
        assert len(set(replicas)) == 3, "two replicas of one partition on one broker"
    assert Counter(r[0] for r in assignment.values()) == {b: 4 for b in brokers}
    assert Counter(b for r in assignment.values() for b in r) == {b: 12 for b in brokers}


def test_start_index_and_shift_are_drawn_from_the_given_rng() -> None:
    brokers = list(range(7))
    assert assign_replicas_to_brokers(9, 3, brokers, rng=random.Random(42)) == assign_replicas_to_brokers(
        9, 3, brokers, rng=random.Random(42)
    )
    leaders = {assign_replicas_to_brokers(1, 1, brokers, rng=random.Random(seed))[0][0] for seed in range(50)}
    assert len(leaders) > 1, "the start index is not random"
