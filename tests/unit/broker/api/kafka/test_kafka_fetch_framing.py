"""The hand-framed Fetch response against kio's decoder (generated from Kafka's FetchResponse.json), for every
served version, with the records inline and as file slices sent by the connection with sendfile; and a
segment truncated under a send ends the connection."""

from __future__ import annotations

import asyncio
import datetime
import importlib
import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_reader

from broker.api.kafka import fetch
from broker.api.kafka.connection import KafkaConnection
from broker.api.kafka.protocol import Reply
from broker.log.file_slice import FileSlice, SharedFile
from broker.log.transaction_index import AbortedTxn
from broker.replication.delayed_fetch import LogReadResult
from common.record import ProducerRecord, build_batch
from proto.errors import ErrorCode
from proto.types import TopicPartition


def _slice(tmp_path: Path, name: str, data: bytes) -> FileSlice:
    path = tmp_path / name
    path.write_bytes(b"junk" + data)
    return FileSlice(SharedFile(path, os.O_RDONLY), 4, len(data))


def _results(tmp_path: Path, size: int) -> tuple[list[tuple[TopicPartition, LogReadResult]], bytes]:
    batch = build_batch([ProducerRecord(os.urandom(size), b"k")])
    return [
        # A READ_COMMITTED read: its LSO and the aborted transactions of its range.
        (TopicPartition("a", 0), LogReadResult(ErrorCode.NONE, _slice(tmp_path, "a0", batch), 10, 2,
                                               last_stable_offset=8,
                                               aborted_transactions=[AbortedTxn(4000, 3, 6, 8)])),
        (TopicPartition("a", 1), LogReadResult(ErrorCode.FENCED_LEADER_EPOCH, None, -1, -1)),
        (TopicPartition("b", 0), LogReadResult(ErrorCode.NONE, _slice(tmp_path, "b0", batch), 7, 0,
                                               last_stable_offset=7)),
    ], batch


def _flatten(reply: Reply) -> bytes:
    return b"".join(p.read() if isinstance(p, FileSlice) else p for p in reply.parts)


@pytest.mark.parametrize("version", range(4, 12))
@pytest.mark.parametrize("record_size", [100, fetch.SENDFILE_MIN_BYTES])
def test_framing_decodes_with_kafkas_schema(tmp_path: Path, version: int, record_size: int) -> None:
    results, batch = _results(tmp_path, record_size)
    reply = fetch.frame_fetch_response(version, ErrorCode.NONE, results)
    assert any(isinstance(p, FileSlice) for p in reply.parts) == (record_size >= fetch.SENDFILE_MIN_BYTES)
    schema: Any = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    body = _flatten(reply)
    decoded, used = entity_reader(schema.FetchResponse)(body, 0)
    assert used == len(body) == reply.size
    if version >= 7:
        assert decoded.error_code == 0 and decoded.session_id == 0
    topics = {t.topic: t.partitions for t in decoded.responses}
    assert list(topics) == ["a", "b"]
    a0, a1 = topics["a"]
    assert (a0.partition_index, a0.error_code, a0.high_watermark, a0.last_stable_offset) == (0, 0, 10, 8)
    assert [(t.producer_id, t.first_offset) for t in a0.aborted_transactions] == [(4000, 3)]
    assert a1.last_stable_offset == -1
    # READ_UNCOMMITTED: null, as Kafka sends it.
    assert topics["b"][0].aborted_transactions is None and topics["b"][0].last_stable_offset == 7
    assert bytes(a0.records) == batch
    assert a1.error_code == ErrorCode.FENCED_LEADER_EPOCH and not a1.records
    if version >= 5:
        assert a0.log_start_offset == 2
    if version >= 11:
        assert a0.preferred_read_replica == -1
    assert bytes(topics["b"][0].records) == batch


def _connection(writer: asyncio.StreamWriter, reader: asyncio.StreamReader) -> KafkaConnection:
    config = SimpleNamespace(socket_request_max_bytes=1 << 20, connections_max_idle_ms=60_000)
    return KafkaConnection(SimpleNamespace(config=config, listener_name="PLAINTEXT"),  # type: ignore[arg-type]
                           reader, writer, "peer")


def test_sendfile_sends_the_slices_and_a_truncated_segment_ends_the_connection(tmp_path: Path) -> None:
    data = os.urandom(200_000)
    whole = _slice(tmp_path, "whole", data)
    cut = _slice(tmp_path, "cut", data)

    async def run() -> tuple[bytes, BaseException | None]:
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        connection = _connection(writer, reader)
        received = bytearray()

        async def drain() -> None:
            peer_reader, _ = await asyncio.open_connection(sock=theirs)
            while chunk := await peer_reader.read(1 << 16):
                received.extend(chunk)

        draining = asyncio.create_task(drain())
        await connection._send(5, Reply([b"head", whole, b"tail"], flexible=False))
        os.truncate(cut.file.path, 1000)  # retention or a truncation removed the bytes the response promised
        failure = None
        try:
            await connection._send(6, Reply([cut], flexible=False))
        except ConnectionError as e:
            failure = e
        writer.close()
        await draining
        return bytes(received), failure

    received, failure = asyncio.run(run())
    frame = len(b"head" + data + b"tail") + 4
    assert received[: 4 + frame] == frame.to_bytes(4, "big") + (5).to_bytes(4, "big") + b"head" + data + b"tail"
    assert isinstance(failure, ConnectionError) and "truncated" in str(failure)


def test_small_answers_read_their_records_on_a_disk_thread_not_the_event_loop(tmp_path: Path) -> None:
    """Below SENDFILE_MIN_BYTES the records are copied into the response: that read of the segment happens on
    the broker's disk pool; an answer without records (a long poll that timed out) is framed at once."""
    results, batch = _results(tmp_path, 100)
    framed_on: list[str] = []

    class Pools:
        async def disk(self, call: Any, *args: object) -> Any:
            framed_on.append("disk")
            return await asyncio.to_thread(call, *args)

    async def answer(results: list[tuple[TopicPartition, LogReadResult]]) -> Reply:
        async def fetch_records(*_: object) -> list[tuple[TopicPartition, LogReadResult]]:
            return results
        operations = SimpleNamespace(fetch=fetch_records, pools=Pools(), authorize_follower=lambda session: True)
        context: Any = SimpleNamespace(operations=operations, session=None)
        header: Any = SimpleNamespace(api_version=11)
        request = SimpleNamespace(topics=[], replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                                  max_bytes=1 << 20, isolation_level=0, session_id=0)
        return await fetch.handle_fetch(context, header, request)

    reply = asyncio.run(answer(results))
    assert framed_on == ["disk"] and batch in _flatten(reply)
    asyncio.run(answer([(TopicPartition("a", 0), LogReadResult(ErrorCode.NONE, None, 10, 0))]))
    assert framed_on == ["disk"]
