"""One client connection on a Kafka listener: size-prefixed frames in, responses out in request order.

Requests are pipelined: each is dispatched as soon as it is read (a produce reaches the ReplicaManager in
the order its connection sent it, before any await), and a writer sends the answers strictly in request
order, as Kafka promises. acks=0 produces have no answer. The Fetch records go out with sendfile
(loop.sendfile: os.sendfile on a plain socket, a pread loop elsewhere) after the response's header bytes; a
segment truncated under a send cuts the response short, so the connection is closed, as Kafka does.

Bad input never takes the broker down: a size that is negative or above socket.request.max.bytes (checked
before anything is allocated), an unknown API key, an unsupported version, a malformed or truncated request:
the connection is closed with a log line naming the peer and the reason, except a too-new ApiVersions, which
is answered (v0 body, UNSUPPORTED_VERSION, the supported versions) as Kafka answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from broker.api.kafka.api_table import API_TABLE, APIS
from broker.api.kafka.api_versions import supported_versions_reply
from broker.api.kafka.context import KafkaContext
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
from broker.log.file_slice import FileSlice
from proto.errors import ErrorCode

logger = logging.getLogger(__name__)

# Requests read ahead of their answers on one connection; reading waits beyond this (back pressure).
MAX_IN_FLIGHT = 64

_Pending = tuple[RequestHeader, "asyncio.Future[Reply | None]"]


class KafkaConnection:
    def __init__(self, context: KafkaContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer: str) -> None:
        self._context = context
        self._reader = reader
        self._writer = writer
        self.peer = peer
        self._max_request_bytes = context.config.socket_request_max_bytes
        self._idle_s = context.config.connections_max_idle_ms / 1000
        self._pending: asyncio.Queue[_Pending | None] = asyncio.Queue(MAX_IN_FLIGHT)
        self._in_flight = 0

    async def run(self) -> None:
        responder = asyncio.create_task(self._write_responses())
        try:
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

    # ------------------------------------------------------------------ reading

    async def _read_requests(self) -> None:
        while True:
            try:
                head = await asyncio.wait_for(self._reader.readexactly(SIZE.size), self._idle_s)
            except TimeoutError:
                if self._in_flight:
                    continue
                logger.info("Closing connection from %s: idle for more than connections.max.idle.ms (%d ms)",
                            self.peer, self._context.config.connections_max_idle_ms)
                return
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise RequestError(f"connection closed inside a request's size ({len(e.partial)} of 4"
                                       " bytes)") from None
                return  # a clean close between requests
            (size,) = SIZE.unpack(head)
            if size < HEADER_PREFIX.size:
                raise RequestError(f"invalid request size {size}")
            if size > self._max_request_bytes:
                raise RequestError(f"request size {size} is larger than socket.request.max.bytes"
                                   f" ({self._max_request_bytes})")
            try:
                frame = await self._reader.readexactly(size)
            except asyncio.IncompleteReadError as e:
                raise RequestError(f"connection closed after {len(e.partial)} of a request's {size} bytes") from None
            header, answer = self._dispatch(frame)
            self._in_flight += 1
            await self._pending.put((header, answer))

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
        request = parse_body(cls, frame, start)
        began = time.monotonic()
        task = asyncio.ensure_future(spec.handler(self._context, header, request))
        task.add_done_callback(lambda _: self._context.metrics.record_request(
            spec.name, (time.monotonic() - began) * 1000))
        return header, task

    # ------------------------------------------------------------------ writing

    async def _write_responses(self) -> None:
        while (item := await self._pending.get()) is not None:
            header, answer = item
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
            finally:
                self._in_flight -= 1
            if reply is not None:
                await self._send(header.correlation_id, reply)

    async def _send(self, correlation_id: int, reply: Reply) -> None:
        writer = self._writer
        writer.write(response_frame_header(correlation_id, reply))
        for part in reply.parts:
            if isinstance(part, FileSlice):
                await self._sendfile(part)
            else:
                writer.write(part)
        await writer.drain()

    async def _sendfile(self, records: FileSlice) -> None:
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
