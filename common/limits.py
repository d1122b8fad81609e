"""Wire limits every gRPC channel and server here shares (broker, follower fetchers, clients).

Produce and Fetch carry whole record batches, and a follower's fetch carries up to
replica.fetch.response.max.bytes; gRPC's default cap of 4 MiB would refuse them.
"""

from __future__ import annotations

MAX_MESSAGE_BYTES = 100 << 20

# The channel / server options that apply MAX_MESSAGE_BYTES both ways.
MESSAGE_SIZE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
)
