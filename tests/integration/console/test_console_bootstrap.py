"""`minibroker console --bootstrap-server H:P` (no data dir: as a user points it at a compose cluster) against a
real local cluster: through the brokers alone it shows ZooKeeper's members with their `srvr` mode and the
controller epoch and the active controller's events on the timeline (a broker's forwarded DescribeEvents), each
topic's bytes from DescribeLogDirs on the Kafka listener a broker advertises, a group's lag, __consumer_offsets as
internal, and an open transaction's last stable offset. Read over the console's JSON API while an event stream
keeps a page open."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from client import Admin, Consumer, NewTopic, Producer, TopicPartition
from local_cluster.cluster import LocalCluster
from tests.integration.conftest import StartProcess, WaitUntil
from tests.integration.transaction_wire import TransactionWire

pytestmark = pytest.mark.integration

TOPIC = "remote"
TXN_TOPIC = "remote-txn"
GROUP = "remote-readers"


@contextmanager
def _page_open(host: str, port: int) -> Iterator[None]:
    """An open /api/stream, read on a thread: the collector polls only while a page streams."""
    stream = socket.create_connection((host, port), timeout=60)
    stream.sendall(f"GET /api/stream HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = stream.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head

    def drain() -> None:
        with contextlib.suppress(OSError):
            while stream.recv(65536):
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        yield
    finally:
        stream.shutdown(socket.SHUT_RDWR)  # the reader's recv returns b"": the page is gone
        reader.join(10)
        stream.close()


def test_the_console_from_a_bootstrap_server_shows_zookeeper_the_controller_and_bytes(
        data_dir: Path, processes: StartProcess, wait_until: WaitUntil) -> None:
    info = LocalCluster(data_dir).up(brokers=2, controllers=1)
    with Admin(info.bootstrap_servers) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 2), NewTopic(TXN_TOPIC, 1, 2)])
    producer = Producer(info.bootstrap_servers, acks=-1)
    try:
        for i in range(100):
            producer.send(TOPIC, f"record {i}".encode())
        producer.flush(30)
    finally:
        producer.close(timeout=5)
    # A group's commit: the coordinator creates __consumer_offsets, an internal topic the page keeps apart.
    with Consumer(bootstrap_servers=info.bootstrap_servers, group_id=GROUP, enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.commit({TopicPartition(TOPIC, 0): 40}, timeout_ms=30_000)

    bootstrap = info.bootstrap_servers.split(",")[0]  # one broker's gRPC listener, nothing local
    console = processes("console", [sys.executable, "-m", "minibroker.cli", "console", "--bootstrap-server",
                                    bootstrap, "--port", "0"])
    found: list[tuple[str, str]] = []

    def console_url() -> bool:
        found.extend(re.findall(r"http://(127\.0\.0\.1):(\d+)/", console.log()))
        return bool(found)

    wait_until(console_url, 60, "the console to print its URL")
    host, port = found[0]
    pictures: list[dict[str, Any]] = []

    def picture(topic: str = TOPIC) -> dict[str, Any]:
        with urlopen(f"http://{host}:{port}/api/picture?topic={topic}", timeout=10) as response:
            pictures.append(json.load(response))
        return pictures[-1]

    def txn_offsets() -> tuple[int, int]:
        """The transactions topic's (high watermark, last stable offset), as the page gets them."""
        [partition] = picture(TXN_TOPIC)["partitions"]
        return partition["high_watermark"], partition["last_stable_offset"]

    with _page_open(host, int(port)):
        wait_until(lambda: (z := picture()["zookeeper"]).get("servers")
                   and all(s["mode"] in ("standalone", "leader", "follower") for s in z["servers"]), 60,
                   "ZooKeeper's members and their modes")
        assert [s["connect"] for s in pictures[-1]["zookeeper"]["servers"]] == \
            info.zookeeper.connect.partition("/")[0].split(",")
        wait_until(lambda: isinstance(picture()["zookeeper"].get("controller_epoch"), int)
                   and pictures[-1]["zookeeper"]["controller_epoch"] >= 1, 60, "the controller epoch")
        wait_until(lambda: any(e["source"].startswith("controller-") for e in picture()["events"]), 60,
                   "a controller event on the timeline")
        wait_until(lambda: any(t["name"] == TOPIC and (t.get("bytes") or 0) > 0 for t in picture()["topics"]), 60,
                   "the topic's bytes from DescribeLogDirs")
        wait_until(lambda: any(g["group_id"] == GROUP and g["partitions"] == [
            {"topic": TOPIC, "partition": 0, "committed": 40, "high_watermark": 100, "lag": 60}]
            for g in picture()["groups"]), 60, "the group's lag")
        # Each broker's listeners, as it advertises them (its own DescribeConfigs).
        wait_until(lambda: {b["id"]: b["listeners"] for b in picture()["cluster"]["brokers"]} == {
            b.id: [f"GRPC://{b.address}", f"PLAINTEXT://{b.kafka_address}"] for b in info.brokers},
            60, "each broker's listeners")
        internal = {t["name"]: t["internal"] for t in picture()["topics"]}
        assert internal == {TOPIC: False, TXN_TOPIC: False, "__consumer_offsets": True}, internal

        # An open transaction holds the last stable offset at its first offset, below the high watermark, until
        # its marker. Written as its producer and coordinator would (there is no transaction coordinator yet), on
        # the leader's Kafka listener.
        with Admin(info.bootstrap_servers) as admin:
            leader = admin.describe_topics([TXN_TOPIC])[0].partitions[0].leader
        address = info.broker(leader).kafka_address
        assert address is not None
        wire = TransactionWire(address, TXN_TOPIC)
        try:
            wire.produce([b"before"])  # 0
            producer_id = wire.init_producer_id()
            wire.produce([b"in", b"transaction"], producer_id)  # 1..2
            wire.produce([b"after"])  # 3
            wait_until(lambda: txn_offsets() == (4, 1), 60, "the open transaction's last stable offset")
            wire.write_marker(producer_id, commit=True)  # 4
            wait_until(lambda: txn_offsets() == (5, 5), 60, "the last stable offset at the HW after the commit")
        finally:
            wire.conn.close()
