"""The listener probe asks the kind of listener the tool needs first: a Kafka listener given to `acls` is never
sent an HTTP/2 preface (which its broker logs as a frame of an absurd size), and a gRPC one given to the other
tools never a Kafka request."""

from __future__ import annotations

import socket
import struct
import threading

from minibroker.commands.listener_probe import GRPC, KAFKA, listener_kind


class FakeKafkaListener:
    """Answers any Kafka request frame with its correlation id, and records the first bytes of each connection."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(64)
                self.received.append(data)
                if len(data) >= 12 and not data.startswith(b"PRI"):
                    correlation_id = struct.unpack_from(">i", data, 8)[0]
                    conn.sendall(struct.pack(">ii", 4, correlation_id))

    def close(self) -> None:
        self._server.close()


def test_a_kafka_listener_is_probed_with_kafka_first_when_kafka_is_needed() -> None:
    listener = FakeKafkaListener()
    try:
        assert listener_kind(listener.address, timeout=2, expected=KAFKA) == KAFKA
        assert len(listener.received) == 1 and not listener.received[0].startswith(b"PRI * HTTP/2.0")
        # A tool that needs gRPC asks gRPC first, and then learns what it was given.
        assert listener_kind(listener.address, timeout=2, expected=GRPC) == KAFKA
        assert listener.received[1].startswith(b"PRI * HTTP/2.0")
    finally:
        listener.close()
