"""KIP-794's built-in partitioner: the next sticky partition, by rounds or by the adaptive draw."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from client.builtin_partitioner import BuiltInPartitioner


def test_every_available_partition_gets_one_turn_per_round() -> None:
    partitioner = BuiltInPartitioner(1000, random.Random(1))
    turns = [partitioner.next_partition((0, 1, 2, 3, 4, 5), 6) for _ in range(60)]
    for start in range(0, 60, 6):
        assert sorted(turns[start:start + 6]) == [0, 1, 2, 3, 4, 5]
    # No partition twice in a row, not even where one round ends and the next begins.
    assert all(a != b for a, b in itertools.pairwise(turns))


def test_choice_counts_bytes_afresh() -> None:
    partitioner = BuiltInPartitioner(1000, random.Random(2))
    partitioner.produced_bytes = 1500
    partitioner.next_partition((0, 1), 2)
    assert partitioner.produced_bytes == 0


def test_rounds_keep_to_available_partitions() -> None:
    partitioner = BuiltInPartitioner(1000, random.Random(3))
    partitioner.next_partition((0, 1, 2, 3), 4)
    assert {partitioner.next_partition((1, 3), 4) for _ in range(10)} == {1, 3}
    # Without any leader known, every partition may be chosen.
    assert {partitioner.next_partition((), 3) for _ in range(9)} == {0, 1, 2}


def test_adaptive_draw_weighs_queue_sizes_as_kafka_within_a_round() -> None:
    first = Counter()
    for seed in range(4000):
        partitioner = BuiltInPartitioner(1000, random.Random(seed))
        # BuiltInPartitionerTest's example: queues 0 3 1 become the frequencies 4 1 3.
        partitioner.update_partition_load_stats([0, 3, 1], [0, 1, 2], 3)
        turns = [partitioner.next_partition((0, 1, 2), 3) for _ in range(3)]
        assert sorted(turns) == [0, 1, 2]  # still one turn each per round
        first[turns[0]] += 1
    # The round's first turn goes by the weights: the partition with the longest queue comes last most often.
    assert first[0] / 4000 == pytest.approx(4 / 8, abs=0.03)
    assert first[1] / 4000 == pytest.approx(1 / 8, abs=0.03)
    assert first[2] / 4000 == pytest.approx(3 / 8, abs=0.03)


def test_adaptive_draw_only_among_partitions_given() -> None:
    partitioner = BuiltInPartitioner(1000, random.Random(5))
    # Partition 1 left out (its leader past partitioner.availability.timeout.ms): equal queues still weigh.
    partitioner.update_partition_load_stats([0, 0], [0, 2], 3)
    assert {partitioner.next_partition((0, 1, 2), 3) for _ in range(50)} == {0, 2}


@pytest.mark.parametrize(("sizes", "ids", "partitions"), [
    ([2, 2, 2], [0, 1, 2], 3),  # all equal and all there: the plain rounds
    ([5], [0], 1),  # one partition
    (None, [], 3),  # not every partition has had a batch yet
])
def test_no_adaptive_draw_without_differences(sizes: list[int] | None, ids: list[int], partitions: int) -> None:
    partitioner = BuiltInPartitioner(1000, random.Random(6))
    partitioner.update_partition_load_stats([0, 9, 9], [0, 1, 2], 3)
    partitioner.update_partition_load_stats(sizes, ids, partitions)
    turns = [partitioner.next_partition(tuple(range(partitions)), partitions) for _ in range(3 * partitions)]
    assert Counter(turns) == Counter({p: 3 for p in range(partitions)})


def test_sticky_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stickyBatchSize"):
        BuiltInPartitioner(0, random.Random())
