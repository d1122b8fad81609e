"""`minibroker console`'s picture, from Metadata and DescribeReplicaState answers (console/view.py): a replica's
state (in sync, late, out of the ISR, offline), the follower's lag in offsets and time, the leader's own ISR ahead
of the metadata, group lag; and the server's filtering of what a page gets."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable

import pytest
from aiohttp.test_utils import TestClient, TestServer

from client.metadata import ClusterMetadata
from client.structs import BrokerMetadata, PartitionMetadata
from common.grpc_tls import PLAINTEXT
from console import view
from console.collector import Collector, Picture
from console.log_dirs import replica_sizes
from console.server import MAX_PARTITIONS, REQUESTED_BY, create_app, picture_json
from proto import minibroker_pb2 as pb
from proto.types import EndPoint

LAG_MAX_MS = 3000
NOW = 1_000_000


def metadata(isr: tuple[int, ...] = (1, 2, 3), live: tuple[int, ...] = (1, 2, 3)) -> ClusterMetadata:
    return ClusterMetadata([BrokerMetadata(b, "127.0.0.1", 9000 + b) for b in live],
                           [PartitionMetadata("t", 0, 1, 5, (1, 2, 3), isr, (), 0)], controller_id=1001,
                           cluster_id="c")


def answer(broker_id: int, *partitions: pb.DescribeReplicaStateResponse.PartitionState
           ) -> pb.DescribeReplicaStateResponse:
    return pb.DescribeReplicaStateResponse(broker_id=broker_id, now_ms=NOW, replica_lag_time_max_ms=LAG_MAX_MS,
                                           partitions=list(partitions))


def leader(isr: tuple[int, ...], followers: dict[int, tuple[int, int]]) -> pb.DescribeReplicaStateResponse:
    """Broker 1 leads t-0 at LEO 100, HW 90 and LSO 85 (a transaction open from 85); followers: broker -> (LEO,
    last caught up ms)."""
    state = pb.DescribeReplicaStateResponse.PartitionState(
        topic="t", partition=0, leader=1, leader_epoch=5, log_start_offset=10, log_end_offset=100,
        high_watermark=90, last_stable_offset=85, isr=isr,
        epoch_entries=[pb.DescribeReplicaStateResponse.EpochEntry(epoch=5, start_offset=40)])
    for broker_id, (leo, caught_up) in followers.items():
        state.followers.add(broker_id=broker_id, log_end_offset=leo, log_start_offset=10,
                            last_caught_up_time_ms=caught_up, last_fetch_time_ms=caught_up)
    return answer(1, state)


def follower(broker_id: int, leo: int) -> pb.DescribeReplicaStateResponse:
    return answer(broker_id, pb.DescribeReplicaStateResponse.PartitionState(
        topic="t", partition=0, leader=1, leader_epoch=5, log_start_offset=10, log_end_offset=leo,
        high_watermark=min(leo, 90)))


def bars(meta: ClusterMetadata, *answers: pb.DescribeReplicaStateResponse) -> dict[int, dict[str, object]]:
    by_broker = {a.broker_id: a for a in answers}
    [part] = view.partition_views(meta, by_broker, ["t"])
    return {b["broker"]: b for b in part["bars"]}


@pytest.mark.parametrize(("leader_", "in_isr", "registered", "answering", "ago", "expected"), [
    (False, True, True, True, 100, view.IN_SYNC),
    (False, True, True, True, LAG_MAX_MS // 2, view.LATE),  # half the lag time: on its way out
    (False, True, True, False, 0, view.LATE),  # paused: still counted by its leader, not for long
    (False, False, True, True, 100, view.OUT),
    (False, False, True, False, None, view.OUT),
    (False, True, False, False, None, view.OFFLINE),  # its registration is gone
    (True, True, True, True, None, view.IN_SYNC),
    (True, True, True, False, None, view.LATE),
])
def test_a_replicas_state(leader_: bool, in_isr: bool, registered: bool, answering: bool, ago: int | None,
                          expected: str) -> None:
    assert view.replica_state(leader_, in_isr, registered, answering, ago, LAG_MAX_MS) == expected


def test_a_follower_is_measured_by_its_leader() -> None:
    shown = bars(metadata(), leader((1, 2, 3), {2: (100, NOW - 50), 3: (70, NOW - 2000)}), follower(2, 100),
                 follower(3, 70))
    assert shown[1]["state"] == view.IN_SYNC and shown[1]["leader"]
    assert (shown[2]["lag_offsets"], shown[2]["caught_up_ago_ms"], shown[2]["state"]) == (0, 50, view.IN_SYNC)
    assert (shown[3]["lag_offsets"], shown[3]["caught_up_ago_ms"], shown[3]["state"]) == (30, 2000, view.LATE)


def test_a_paused_follower_shows_where_its_leader_last_saw_it() -> None:
    shown = bars(metadata(), leader((1, 2), {2: (100, NOW), 3: (60, NOW - 4000)}), follower(2, 100))
    assert (shown[3]["answering"], shown[3]["in_isr"], shown[3]["state"]) == (False, False, view.OUT)
    assert (shown[3]["log_end_offset"], shown[3]["lag_offsets"]) == (60, 40)


def test_the_leaders_isr_comes_before_the_metadatas() -> None:
    """The controller propagates an ISR change later than the leader makes it: the page shows the leader's."""
    meta = metadata(isr=(1, 2, 3))
    answers = {1: leader((1, 2), {2: (100, NOW), 3: (60, NOW - 4000)})}
    [part] = view.partition_views(meta, answers, ["t"])
    assert part["isr"] == [1, 2] and part["leader_epoch"] == 5 and part["epochs"] == [[5, 40]]
    assert (part["high_watermark"], part["last_stable_offset"]) == (90, 85)
    assert {b["broker"]: b.get("last_stable_offset") for b in part["bars"]} == {1: 85, 2: None, 3: None}
    assert view.cluster_summary(meta, answers, [part])["under_replicated_partitions"] == 1


def test_a_dead_broker_is_offline() -> None:
    shown = bars(metadata(isr=(1, 2), live=(1, 2)), leader((1, 2), {2: (100, NOW)}), follower(2, 100))
    assert shown[3]["state"] == view.OFFLINE


def test_each_broker_shows_the_listeners_it_advertises() -> None:
    listeners = {1: (EndPoint("GRPC", "broker-1", 29192), EndPoint("PLAINTEXT_HOST", "localhost", 9092)),
                 2: (EndPoint("GRPC", "::1", 9193),)}
    summary = view.cluster_summary(metadata(live=(1, 2, 3)), {1: leader((1, 2, 3), {})}, [], listeners)
    assert [(b["id"], b["listeners"], b["answering"]) for b in summary["brokers"]] == [
        (1, ["GRPC://broker-1:29192", "PLAINTEXT_HOST://localhost:9092"], True), (2, ["GRPC://[::1]:9193"], False),
        (3, [], False)]


def test_group_lag_is_the_high_watermark_minus_the_committed_offset() -> None:
    states = view.index_replica_states({1: leader((1, 2, 3), {})})
    rows = view.group_lag({("t", 0): 75, ("gone", 0): 3}, states, metadata())
    assert [(r["topic"], r["high_watermark"], r["lag"]) for r in rows] == [("gone", None, None), ("t", 90, 15)]


def _dir(path: str, error: int, *topics: tuple[str, list[tuple[int, int, bool]]]) -> dict[str, object]:
    """One DescribeLogDirsResult as kafka-python's describe_log_dirs gives it (to_dict of the response)."""
    return {"error_code": error, "log_dir": path, "total_bytes": -1, "usable_bytes": -1, "topics": [
        {"name": name, "partitions": [{"partition_index": i, "partition_size": size, "offset_lag": 0,
                                       "is_future_key": future} for i, size, future in partitions]}
        for name, partitions in topics]}


def test_describe_log_dirs_gives_each_replicas_bytes() -> None:
    answers = [
        {"broker": 1, "log_dirs": [_dir("/d1", 0, ("t", [(0, 4096, False), (1, 0, False)])),
                                   _dir("/d2", 0, ("t", [(0, 4000, True)])),  # a future replica: not the one serving
                                   _dir("/bad", 56, ("t", [(1, 9, False)]))]},  # KAFKA_STORAGE_ERROR: nothing held
        {"broker": 2, "log_dirs": [_dir("/d1", 0, ("t", [(0, 4100, False)]), ("u", [(0, 7, False)]))]},
    ]
    sizes = replica_sizes(answers)
    assert sizes == {("t", 0): {1: 4096, 2: 4100}, ("t", 1): {1: 0}, ("u", 0): {2: 7}}

    meta = metadata()
    by_broker = {1: leader((1, 2, 3), {}), 2: follower(2, 100)}
    [part] = view.partition_views(meta, by_broker, ["t"], sizes)
    assert {b["broker"]: b.get("size_bytes") for b in part["bars"]} == {1: 4096, 2: 4100, 3: None}
    [topic] = view.topic_summaries(meta, by_broker, {}, sizes)
    assert topic["bytes"] == 4096 + 4100 and topic["records"] == 90
    # A console that cannot ask DescribeLogDirs says so: no size, not zero.
    assert view.topic_summaries(meta, by_broker, {})[0]["bytes"] is None


def test_a_page_gets_its_topic_or_the_first_partitions_of_the_users_topics() -> None:
    partitions = [{"topic": t, "partition": i} for t in ("__consumer_offsets", "a") for i in range(MAX_PARTITIONS + 5)]
    topics = [{"name": "__consumer_offsets", "internal": True}, {"name": "a", "internal": False}]
    picture = Picture(1, NOW, {}, partitions, topics, [], [], [], {}, [])
    assert {p["topic"] for p in picture_json(picture, "__consumer_offsets", False)["partitions"]} == {
        "__consumer_offsets"}
    shown = picture_json(picture, None, True)
    assert len(shown["partitions"]) == MAX_PARTITIONS and {p["topic"] for p in shown["partitions"]} == {"a"}
    assert shown["faults_allowed"]


def test_fault_buttons_answer_403_unless_allowed_on_a_local_cluster() -> None:
    collector = Collector("127.0.0.1:1", PLAINTEXT)  # never started: these routes do not read the cluster

    async def scenario() -> tuple[int, str, int, str, int]:
        async with TestClient(TestServer(create_app(collector, None, allow_faults=True))) as client:
            fault = await client.post("/api/faults/broker/1/sigstop", headers=dict([REQUESTED_BY]))
            page = await client.get("/")
            script = await client.get("/static/console.js")
            return fault.status, (await fault.json())["error"], page.status, await page.text(), script.status

    status, error, page_status, page, script_status = asyncio.run(scenario())
    assert (status, error) == (403, "faults are for a local cluster (--data-dir)")
    assert page_status == 200 and '<script src="/static/console.js">' in page and script_status == 200


def test_a_post_another_site_could_send_is_refused() -> None:
    """Another page in the user's browser can POST to 127.0.0.1 without asking, but not with a custom header, and
    its Origin is not the console's: neither may press a fault button, even with --allow-faults."""
    collector = Collector("127.0.0.1:1", PLAINTEXT)

    async def scenario() -> list[tuple[int, str]]:
        async with TestClient(TestServer(create_app(collector, None, allow_faults=True))) as client:
            answers = []
            for headers in ({}, {"Origin": "http://evil.example"},
                            {**dict([REQUESTED_BY]), "Origin": "http://evil.example"}):
                response = await client.post("/api/faults/controller/kill", headers=headers)
                answers.append((response.status, (await response.json())["error"]))
            return answers

    assert asyncio.run(scenario()) == [(403, "a console action needs the console's own page")] * 3


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_the_collector_polls_the_cluster_only_while_a_page_streams() -> None:
    collector = Collector("127.0.0.1:1", PLAINTEXT, interval_ms=20)
    polls: list[int] = []

    def take() -> Picture:  # stands in for the cluster's answers: counts the polls
        polls.append(len(polls))
        return dataclasses.replace(collector.picture, version=collector.picture.version + 1)

    collector._take = take  # type: ignore[method-assign]

    async def stream_once() -> bytes:
        async with TestClient(TestServer(create_app(collector, None, allow_faults=False))) as client:
            response = await client.get("/api/stream")
            first = await response.content.readuntil(b"\n\n")  # the picture there is, at once
            assert collector.pages.open == 1
            deadline = time.monotonic() + 30
            while not polls and time.monotonic() < deadline:  # a loaded machine runs the poll later
                await asyncio.sleep(0.005)
            response.close()  # the page goes away
            while collector.pages.open:
                await asyncio.sleep(0.005)
            return first

    collector.start()
    try:
        # No page: both loops wait for one, and the cluster was asked nothing.
        _until(lambda: collector.pages.idle == 2, "both loops to wait for a page")
        assert polls == []
        first = asyncio.run(stream_once())
        assert first.startswith(b"data: {") and polls, "a page streamed and the cluster was polled for it"
        # The page gone, both loops wait again (in Pages.wait, which returns only for a page or the stop).
        _until(lambda: collector.pages.idle == 2, "both loops to wait for a page again")
        assert collector.pages.open == 0
    finally:
        collector.stop()
    assert not any(thread.is_alive() for thread in threading.enumerate() if thread.name.startswith("console-coll"))
