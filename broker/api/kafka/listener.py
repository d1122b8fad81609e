"""A Kafka-protocol listener: an asyncio server on one listener's address, with Kafka's connection
limits (max.connections, max.connections.per.ip: a connection over either is closed at once, logged).

On an SSL or SASL_SSL listener each accepted connection is upgraded to TLS before anything is read, within
ssl.handshake.timeout.ms: a handshake that fails (a plaintext client, a certificate from a CA the trust store
does not hold, an expired one, none where ssl.client.auth=required) or does not finish in time is logged with
the peer and the reason, and only that connection is closed, after Kafka's failed authentication delay. On
SSL the connection acts as the principal of its client certificate (ssl.principal.mapping.rules), or
User:ANONYMOUS without one; on SASL_SSL the SASL exchange decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from collections import Counter

from broker.api.kafka.connection import KafkaConnection
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.listener_security import ListenerSecurity
from common.security.principal import ANONYMOUS, KafkaPrincipal

logger = logging.getLogger(__name__)


class KafkaListener:
    def __init__(self, context: KafkaContext, host: str, port: int, security: ListenerSecurity | None = None) -> None:
        self._context = context
        self._security = security or ListenerSecurity.plaintext()
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
            principal = await self._start_tls(writer, peer) if self._security.ssl_context else ANONYMOUS
            if principal is None:
                return
            # Each connection gets its own context: the listener's, with who is asking (Kafka's RequestContext).
            context = dataclasses.replace(self._context, client_host=ip, principal=principal)
            await KafkaConnection(context, reader, writer, peer, self._security).run()
        finally:
            self._connections.discard(task)
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]

    async def _start_tls(self, writer: asyncio.StreamWriter, peer: str) -> KafkaPrincipal | None:
        """The TLS handshake; the certificate's principal, or None when the connection was refused (closed)."""
        security = self._security
        assert security.ssl_context is not None
        try:
            await writer.start_tls(security.ssl_context, ssl_handshake_timeout=security.handshake_timeout_s)
            ssl_object = writer.get_extra_info("ssl_object")
            return security.principal_mapper.principal(ssl_object.getpeercert(binary_form=True))
        except (ssl.SSLError, OSError, TimeoutError, ValueError) as e:
            reason = str(e) or type(e).__name__
            logger.warning("Failed TLS handshake with %s on listener %s: %s", peer, self._context.listener_name,
                           reason)
        # Kafka delays closing after a failed SSL handshake as after a failed SASL login (SslAuthenticationException).
        await asyncio.sleep(security.failed_authentication_delay_s)
        writer.transport.abort()
        return None
