"""The committed generated code in proto/ matches proto/minibroker.proto.

Regenerating into a temporary directory and comparing byte for byte makes a
.proto edit without `scripts/gen_proto.sh` fail CI instead of shipping stubs
that disagree with the contract.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.types import CONTROLLER_SERVICE

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ["minibroker_pb2.py", "minibroker_pb2_grpc.py", "minibroker_pb2.pyi", "minibroker_pb2_grpc.pyi"]


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(["bash", str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)], check=True, env=env)
    stale = [
        name for name in GENERATED if (tmp_path / "proto" / name).read_bytes() != (ROOT / "proto" / name).read_bytes()
    ]
    assert not stale, f"proto/{', proto/'.join(stale)} out of date: run scripts/gen_proto.sh"


@pytest.mark.parametrize(
    ("service", "methods"),
    [
        (
            "KafkaClient",
            [
                "Produce",
                "Fetch",
                "ListOffsets",
                "Metadata",
                "CreateTopics",
                "DeleteTopics",
                "CreatePartitions",
                "DeleteRecords",
                "InitProducerId",
                "AddPartitionsToTxn",
                "AddOffsetsToTxn",
                "EndTxn",
                "FindCoordinator",
                "JoinGroup",
                "SyncGroup",
                "Heartbeat",
                "LeaveGroup",
                "OffsetCommit",
                "TxnOffsetCommit",
                "OffsetFetch",
                "DescribeGroups",
                "ListGroups",
                "DeleteGroups",
                "OffsetDelete",
                "DescribeConfigs",
                "AlterConfigs",
                "IncrementalAlterConfigs",
                "DescribeReplicaState",
                "DescribeEvents",
            ],
        ),
        ("KafkaCluster", ["LeaderAndIsr", "UpdateMetadata", "StopReplica", "OffsetsForLeaderEpoch", "WriteTxnMarkers"]),
        ("KafkaController", ["ControlledShutdown", "ElectLeaders", "DescribeEvents"]),
    ],
)
def test_services(service: str, methods: list[str]) -> None:
    descriptor = pb.DESCRIPTOR.services_by_name[service]
    assert [m.name for m in descriptor.methods] == methods
    assert hasattr(pb_grpc, f"add_{service}Servicer_to_server")


def test_records_survive_a_round_trip_byte_for_byte() -> None:
    batch = bytes(range(256)) * 4
    request = pb.ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topics=[
            pb.ProduceRequest.TopicProduceData(
                name="t", partitions=[pb.ProduceRequest.PartitionProduceData(index=3, records=batch)]
            )
        ],
    )
    parsed = pb.ProduceRequest.FromString(request.SerializeToString())
    assert parsed.topics[0].partitions[0].records == batch
    assert not parsed.HasField("transactional_id")  # Kafka's null, distinct from ""


def test_the_controller_service_name_is_the_generated_one() -> None:
    assert pb.DESCRIPTOR.services_by_name["KafkaController"].full_name == CONTROLLER_SERVICE
