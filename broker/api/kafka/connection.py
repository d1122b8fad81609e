"""One client connection on a Kafka listener: size-prefixed frames in, responses out in request order.

Requests are pipelined: each is dispatched as soon as it is read (a produce reaches the ReplicaManager in
the order its connection sent it, before any await), and a writer sends the answers strictly in request
order, as Kafka promises. What one connection can make the broker hold is bounded (RequestBudget): Kafka
mutes a connection while one of its requests is handled; here up to MAX_QUEUED_REQUESTS requests and
MAX_QUEUED_REQUEST_BYTES of their frames are read ahead of their answers, and beyond that the connection is
not read (its size prefix is, its body waits in the socket) until an answer goes out. acks=0 produces have
no answer. The Fetch records go out with sendfile
(loop.sendfile: os.sendfile on a plain socket) after the response's header bytes; under TLS the bytes must be
encrypted in this process, so they are read with os.pread (off the event loop, a chunk at a time) and
written like any other part (asyncio's own sendfile fallback seeks the shared descriptor, which concurrent
fetches of one segment must not do). A segment truncated under a send cuts the response short, so the
connection is closed, as Kafka does.

On a SASL listener the connection first authenticates (sasl_authenticator.py): frames go to the authenticator
until it completes, and only then are requests dispatched, as the principal it established.

Bad input never takes the broker down: a size that is negative or above socket.request.max.bytes (checked
before anything is allocated), an unknown API key, an unsupported version, a malformed or truncated request:
the connection is closed with a log line naming the peer and the reason, except a too-new ApiVersions, which
is answered (v0 body, UNSUPPORTED_VERSION, the supported versions) as Kafka answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
from typing import Any

from broker.api.kafka.api_table import API_TABLE, APIS
from broker.api.kafka.api_versions import supported_versions_reply
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.listener_security import ListenerSecurity
from broker.api.kafka.protocol import (
    API_VERSIONS_KEY,
    HEADER_PREFIX,
    SIZE,
    Reply,
    RequestError,
    RequestHeader,
    parse_body,
    parse_header,
    request_class,
    response_frame_header,
)
from broker.api.kafka.sasl_authenticator import AuthenticationFailed
from broker.log.file_slice import FileSlice
from common.security.principal import USER_TYPE, KafkaPrincipal
from proto.errors import ErrorCode

logger = logging.getLogger(__name__)

# Requests read ahead of their answers on one connection, and their frames' bytes; reading waits beyond these
# (back pressure through TCP). Kafka allows one (a muted connection); its broker-wide queued.max.requests and
# queued.max.request.bytes are the nearest configs. Five is the Java producer's max.in.flight.requests.
MAX_QUEUED_REQUESTS = 5
MAX_QUEUED_REQUEST_BYTES = 16 << 20
# Record bytes read per os.pread when they cannot be sent with sendfile (TLS): each chunk is encrypted on the
# event loop, so a modest size keeps the other connections of the listener responsive.
TLS_READ_CHUNK = 256 << 10

_Pending = tuple[RequestHeader, "asyncio.Future[Reply | None]", int]


class RequestBudget:
    """What one connection holds: requests read and not yet answered, and their frames' bytes. One request is
    always admitted (socket.request.max.bytes bounds its size); a further one waits until it fits."""

    def __init__(self, max_requests: int = MAX_QUEUED_REQUESTS, max_bytes: int = MAX_QUEUED_REQUEST_BYTES) -> None:
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.requests = 0
        self.bytes = 0
        self._released = asyncio.Event()
        self._closed = False

    def fits(self, size: int) -> bool:
        return self.requests == 0 or (self.requests < self.max_requests and self.bytes + size <= self.max_bytes)

    async def acquire(self, size: int) -> None:
        """Wait until a request of `size` bytes fits (one reader per connection waits here)."""
        while not self.fits(size):
            if self._closed:
                raise ConnectionError("the connection's answers stopped")
            self._released.clear()
            await self._released.wait()
        self.requests += 1
        self.bytes += size

    def release(self, size: int) -> None:
        self.requests -= 1
        self.bytes -= size
        self._released.set()

    def close(self) -> None:
        """No answer will go out any more: a reader waiting for room gives up."""
        self._closed = True
        self._released.set()


class KafkaConnection:
    def __init__(self, context: KafkaContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer: str, security: ListenerSecurity | None = None) -> None:
        self._context = context
        self._security = security or ListenerSecurity.plaintext()
        # Under TLS the transport encrypts: no sendfile.
        self._use_sendfile = writer.get_extra_info("ssl_object") is None
        self._reader = reader
        self._writer = writer
        self.peer = peer
        self._max_request_bytes = context.config.socket_request_max_bytes
        self._idle_s = context.config.connections_max_idle_ms / 1000
        # Bounded by the budget: an entry is queued only once its request was admitted.
        self._pending: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._budget = RequestBudget()

    async def run(self) -> None:
        responder = asyncio.create_task(self._write_responses())
        try:
            if self._security.uses_sasl and not await self._authenticate():
                return
            await self._read_requests()
            await self._pending.put(None)  # the client closed its side: answer what it asked, then close
            await responder
        except RequestError as e:
            logger.warning("Closing connection from %s (listener %s): %s", self.peer, self._context.listener_name, e)
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            logger.info("Connection from %s closed: %s", self.peer, e or type(e).__name__)
        finally:
            responder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await responder
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()

    # ------------------------------------------------------------------ authenticating

    async def _authenticate(self) -> bool:
        """Run the SASL exchange; True once the connection acts as the authenticated principal."""
        authenticator = self._security.authenticator()
        assert authenticator is not None
        limit = (self._security.sasl_max_receive_size, "sasl.server.max.receive.size")
        while not authenticator.complete:
            frame = await self._read_frame(limit, min_size=1)
            if frame is None:
                return False
            try:
                answer = authenticator.receive(frame)
            except AuthenticationFailed as e:
                logger.warning("Failed authentication with %s (listener %s, %s): %s", self.peer,
                               self._context.listener_name, e.code.name, e)
                if e.delayed:  # Kafka's connection.failed.authentication.delay.ms: slows down guessing
                    await asyncio.sleep(self._security.failed_authentication_delay_s)
                if e.response is not None:
                    self._writer.write(e.response)
                    await self._writer.drain()
                return False
            if answer is not None:
                self._writer.write(answer)
                await self._writer.drain()
        assert authenticator.authorization_id is not None
        principal = KafkaPrincipal(USER_TYPE, authenticator.authorization_id)
        self._context = dataclasses.replace(self._context, principal=principal)
        logger.debug("Authenticated %s as %s with %s", self.peer, principal, authenticator.mechanism)
        return True

    # ------------------------------------------------------------------ reading

    async def _read_frame(self, limit: tuple[int, str], min_size: int = HEADER_PREFIX.size,
                          budget: RequestBudget | None = None) -> bytes | None:
        """One size-prefixed frame; None when the client closed between frames or stayed idle too long. With a
        budget, the frame's body is read only once the budget admits it."""
        max_bytes, limit_name = limit
        while True:
            try:
                head = await asyncio.wait_for(self._reader.readexactly(SIZE.size), self._idle_s)
                break
            except TimeoutError:
                if self._budget.requests:
                    continue
                logger.info("Closing connection from %s: idle for more than connections.max.idle.ms (%d ms)",
                            self.peer, self._context.config.connections_max_idle_ms)
                return None
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise RequestError(f"connection closed inside a request's size ({len(e.partial)} of 4"
                                       " bytes)") from None
                return None  # a clean close between requests
        (size,) = SIZE.unpack(head)
        if size < min_size:
            raise RequestError(f"invalid request size {size}")
        if size > max_bytes:
            raise RequestError(f"request size {size} is larger than {limit_name} ({max_bytes})")
        if budget is not None:
            await budget.acquire(size)
        try:
            return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as e:
            raise RequestError(f"connection closed after {len(e.partial)} of a request's {size} bytes") from None

    async def _read_requests(self) -> None:
        limit = (self._max_request_bytes, "socket.request.max.bytes")
        while (frame := await self._read_frame(limit, budget=self._budget)) is not None:
            header, answer = self._dispatch(frame)
            self._pending.put_nowait((header, answer, len(frame)))

    def _dispatch(self, frame: bytes) -> tuple[RequestHeader, asyncio.Future[Reply | None]]:
        api_key, version, correlation_id = HEADER_PREFIX.unpack_from(frame)
        spec = APIS.get(api_key)
        if spec is None:
            raise RequestError(f"unknown API key {api_key} (correlation id {correlation_id})")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == API_VERSIONS_KEY:
                # KIP-511: a newer client's ApiVersions gets a v0 answer it can read, with what is supported.
                header = RequestHeader(api_key, version, correlation_id, None)
                return header, _done(supported_versions_reply(API_TABLE, ErrorCode.UNSUPPORTED_VERSION, 0))
            raise RequestError(f"{spec.name} v{version} is not supported (versions {spec.min_version}-"
                               f"{spec.max_version})")
        cls = request_class(api_key, version)
        header, start = parse_header(frame, bool(cls.__flexible__))
        request = parse_body(cls, frame, start, spec.trailing_bytes_allowed)
        began = time.monotonic()
        task = asyncio.ensure_future(spec.handler(self._context, header, request))
        task.add_done_callback(lambda _: self._context.metrics.record_request(
            spec.name, (time.monotonic() - began) * 1000))
        return header, task

    # ------------------------------------------------------------------ writing

    async def _write_responses(self) -> None:
        try:
            await self._answer_in_order()
        finally:
            self._budget.close()

    async def _answer_in_order(self) -> None:
        while (item := await self._pending.get()) is not None:
            header, answer, size = item
            try:
                reply = await answer
            except RequestError as e:
                logger.warning("Closing connection from %s: %s", self.peer, e)
                self._writer.close()
                return
            except Exception:
                logger.exception("Error handling %s request (correlation id %d) from %s: closing the connection",
                                 APIS[header.api_key].name, header.correlation_id, self.peer)
                self._writer.close()
                return
            if reply is not None:
                await self._send(header.correlation_id, reply)
            # Answered (and on its way out): the next request may be read.
            self._budget.release(size)

    async def _send(self, correlation_id: int, reply: Reply) -> None:
        writer = self._writer
        writer.write(response_frame_header(correlation_id, reply))
        for part in reply.parts:
            if isinstance(part, FileSlice):
                await (self._send_file(part) if self._use_sendfile else self._write_slice(part))
            else:
                writer.write(part)
        await writer.drain()

    async def _write_slice(self, records: FileSlice) -> None:
        """The slice's bytes through the transport (TLS): positional reads, so concurrent fetches of one segment
        never disturb each other, off the event loop (on a disk thread: never behind ZooKeeper calls) in case the bytes
        are not in the page cache."""
        position, remaining = records.position, records.size
        while remaining:
            chunk = await self._context.operations.pools.disk(os.pread, records.fd, min(remaining, TLS_READ_CHUNK),
                                                              position)
            if not chunk:
                raise ConnectionError(f"segment {records.file.path} truncated during a fetch response"
                                      f" ({records.size - remaining} of {records.size} bytes sent)")
            self._writer.write(chunk)
            position += len(chunk)
            remaining -= len(chunk)
            await self._writer.drain()

    async def _send_file(self, records: FileSlice) -> None:
        loop = asyncio.get_running_loop()
        # closefd=False: the segment (SharedFile) owns the descriptor; every read of it is positional.
        with open(records.fd, "rb", buffering=0, closefd=False) as file:
            sent = await loop.sendfile(self._writer.transport, file, records.position, records.size)
        if sent != records.size:
            # The response's size is on the wire already: nothing can make the frame whole again.
            raise ConnectionError(f"segment {records.file.path} truncated during a fetch response"
                                  f" ({sent} of {records.size} bytes sent)")


def _done(reply: Any) -> asyncio.Future[Reply | None]:
    future: asyncio.Future[Reply | None] = asyncio.get_running_loop().create_future()
    future.set_result(reply)
    return future
