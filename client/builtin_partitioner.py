"""Kafka 3.3's BuiltInPartitioner (KIP-794): where a topic's keyless records go, the uniform sticky partitioner.

Records without a key stick to one partition until batch.size bytes went to it
and its batches are all full or sent (or twice batch.size went to it, whatever
the batches), then switch: RecordAccumulator.append_keyless applies that rule
under its lock, as Kafka does under the partition's queue lock, and this class
(pure, no I/O) keeps the count and chooses the next partition. So
every partition gets batch.size bytes per turn, however slow its leader: the
KIP-480 sticky partitioner switched only when a batch was closed, and a
partition whose requests were slow to come back kept its open batch longest and
got the most records (KIP-794's motivation; with 1 MB batches one partition got
four times another's records in a run of 20 MB).

The next partition (nextPartition): every available partition once per round, in a
random order. Kafka draws each switch independently; at batch.size = 1 MB a run of a
few dozen switches then leaves one partition with three times another's bytes (a
200k-record run of 100 B records), where a round gives each the same number of turns,
to one turn. With `partitioner.adaptive.partitioning.enable` and queue sizes that
differ (partitions whose leader did not drain its batches), the partitions left in
the round are drawn weighted by (largest queue + 1 - queue size), Kafka's cumulative
frequency table: a partition falling behind gets its turn later in the round.
`partitioner.availability.timeout.ms` (0: off) takes a partition out of the rounds
while its leader has had data ready but could not be sent to for longer than that
(Kafka's NodeLatencyStats): the accumulator leaves it out of the queue sizes it
passes here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class BuiltInPartitioner:
    """One topic's sticky partition and what went to it since it was chosen."""

    __slots__ = ("_rand", "_round", "_round_of", "_weights", "partition", "produced_bytes", "sticky_batch_size")

    def __init__(self, sticky_batch_size: int, rand: random.Random) -> None:
        if sticky_batch_size < 1:
            raise ValueError(f"stickyBatchSize must be >= 1 but got {sticky_batch_size}")
        self.sticky_batch_size = sticky_batch_size
        self._rand = rand
        self.partition = -1  # none chosen yet
        self.produced_bytes = 0
        self._round: list[int] = []  # the partitions left in this round, drawn from the end
        self._round_of: tuple[int, ...] = ()  # the available partitions the round was dealt from
        # The adaptive draw's weight for each partition that may be chosen; None: no load stats.
        self._weights: dict[int, int] | None = None

    def next_partition(self, available: Sequence[int], num_partitions: int) -> int:
        """Switch to the next partition (Kafka's nextPartition) and start counting its bytes afresh."""
        weights = self._weights
        if weights is not None:
            candidates = tuple(weights)
        else:
            candidates = tuple(available) if available else tuple(range(num_partitions))
        if candidates != self._round_of:
            # The partitions that may be chosen changed: the round goes on with those still among them.
            self._round_of = candidates
            self._round = [p for p in self._round if p in candidates]
        if not self._round:
            self._round = list(candidates)
            self._rand.shuffle(self._round)
            if len(self._round) > 1 and self._round[-1] == self.partition:
                # A new round does not start with the partition the last one ended on.
                self._round[0], self._round[-1] = self._round[-1], self._round[0]
        if weights is None:
            partition = self._round.pop()
        else:
            partition = self._rand.choices(self._round, [weights[p] for p in self._round])[0]
            self._round.remove(partition)
        self.partition = partition
        self.produced_bytes = 0
        return partition

    def update_partition_load_stats(self, queue_sizes: list[int] | None, partition_ids: list[int],
                                    num_partitions: int) -> None:
        """Kafka's updatePartitionLoadStats: the adaptive draw's weights from the queue sizes (batches waiting) of
        the partitions that may be chosen; none (the plain round over the available partitions) without queue
        sizes, with fewer than two partitions, or when all may be chosen and their queues are equal."""
        if queue_sizes is None or not queue_sizes or num_partitions < 2:
            self._weights = None
            return
        largest = max(queue_sizes)
        if len(queue_sizes) == num_partitions and min(queue_sizes) == largest:
            self._weights = None
            return
        self._weights = {p: largest + 1 - size for p, size in zip(partition_ids, queue_sizes, strict=True)}
