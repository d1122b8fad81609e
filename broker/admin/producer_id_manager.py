"""Producer ids for idempotent producers (Kafka's transaction/ProducerIdManager.scala, ZooKeeper era).

Each broker claims blocks of ids from /latest_producer_id_block (a
conditional update, so no two brokers ever hold the same block) and hands
them out one by one; a restart abandons the rest of its block, as in Kafka.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zk.paths import ProducerIdBlock

logger = logging.getLogger(__name__)


class ProducerIdManager:
    def __init__(self, broker_id: int, allocate_block: Callable[[int], ProducerIdBlock]) -> None:
        self._broker_id = broker_id
        self._allocate_block = allocate_block
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next_producer_id = 0

    def generate_producer_id(self) -> int:
        """The next id; claims a new block from ZooKeeper (blocking) when the current one is used up."""
        with self._lock:
            if self._block is None or self._next_producer_id > self._block.block_end:
                self._block = self._allocate_block(self._broker_id)
                self._next_producer_id = self._block.block_start
                logger.info("Acquired new producerId block %s", self._block)
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id
