"""A Kafka-protocol listener: an asyncio server on one listener's address, with Kafka's connection
limits (max.connections, max.connections.per.ip: a connection over either is closed at once, logged)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import Counter

from broker.api.kafka.connection import KafkaConnection
from broker.api.kafka.context import KafkaContext

logger = logging.getLogger(__name__)


class KafkaListener:
    def __init__(self, context: KafkaContext, host: str, port: int) -> None:
        self._context = context
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._per_ip: Counter[str] = Counter()
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def connection_count(self) -> int:
        return sum(self._per_ip.values())

    async def start(self) -> int:
        """Listen; the bound port (port 0: a free one)."""
        self._server = await asyncio.start_server(self._accept, self._host or None, self._port,
                                                  limit=1 << 20, reuse_address=True)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        address = writer.get_extra_info("peername")
        ip = str(address[0]) if address else "unknown"
        peer = f"{ip}:{address[1]}" if address else "unknown"
        config = self._context.config
        refusal = None
        if self.connection_count >= config.max_connections:
            refusal = f"max.connections ({config.max_connections}) reached"
        elif self._per_ip[ip] >= config.max_connections_per_ip:
            refusal = f"max.connections.per.ip ({config.max_connections_per_ip}) reached for {ip}"
        if refusal is not None:
            logger.warning("Refusing connection from %s on listener %s: %s", peer, self._context.listener_name,
                           refusal)
            writer.close()
            return
        self._per_ip[ip] += 1
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            # Each connection gets its own context: the listener's, with who is asking (Kafka's RequestContext).
            context = dataclasses.replace(self._context, client_host=ip)
            await KafkaConnection(context, reader, writer, peer).run()
        finally:
            self._connections.discard(task)
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]
