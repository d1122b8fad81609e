"""`minibroker chaos run` against real local clusters: a short run per pair of fault kinds (every kind this build
can inject), each asserting a clean verdict, the schedule its seed gives, and a cluster left whole.

One pair runs against a cluster `minibroker cluster up` started (--data-dir), the others against the cluster
`chaos run` starts itself; every cluster is SIGKILLed at teardown whatever happened."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.nemesis import DEFAULT_FAULTS, schedule
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.commands.chaos import OWN_CLUSTER_OVERRIDES

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
INTERVAL_S, DURATION_S, SEED = 6, 18, 11
PAIRS = [("kill-leader", "pause-controller"), ("kill-controller", "pause-leader"), ("kill-random", "bounce")]
EXTERNAL = ("kill-random", "bounce")  # this pair runs on a `cluster up` cluster
AUDITED = ("kill-leader", "pause-controller")  # this run ends with the Spark audit of its log dirs (one JVM is enough)


def minibroker(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


@pytest.fixture
def output(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "chaos"
    try:
        yield path
    finally:
        for data_dir in (path / "cluster", tmp_path / "cluster"):
            if ClusterInfo.exists(data_dir):
                LocalCluster(data_dir).down(kill=True)


def test_a_chaos_run_with_confluent_kafka_clients_is_clean(output: Path) -> None:
    """Writers, readers and a consumer group's members are librdkafka's, on the brokers' Kafka listeners; the
    checker judges them unchanged, and the group at least once, through a SIGKILL of its coordinator."""
    faults = ("kill-leader", "kill-coordinator")
    run = minibroker("chaos", "run", "--client", "confluent-kafka", "--faults", ",".join(faults), "--interval", "8s",
                     "--duration", "32s", "--seed", str(SEED), "--output", str(output), "--partitions", "3",
                     "--writers", "2", "--rate", "40", "--readers", "1", "--group-members", "2", "--no-audit",
                     timeout=280)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    assert "VERDICT: every safety check held" in run.stdout
    assert "confluent-kafka clients at 127.0.0.1:" in run.stderr
    result = json.loads((output / "result.json").read_text())
    assert result["valid"] and result["lost"] == 0 and result["duplicated"] == 0
    assert all(n == 0 for name, n in result["anomalies"].items() if not name.startswith("acks1-"))
    assert result["acked"] > 1000 and result["polled_records"] >= result["acked"]
    assert sorted(w["fault"] for w in result["fault_windows"]) == sorted(
        p.fault for p in schedule(faults, 8, 32, random.Random(SEED)))
    assert result["recovery"]["full_isr"]
    group = result["group"]
    assert group["members"] == 2 and group["commits"]["ok"] > 10 and group["polled_records"] >= result["acked"]
    assert "kill-coordinator" in result["faults"]
    cluster = ClusterInfo.load(output / "cluster")
    meta = json.loads((output / "history.jsonl").read_text().splitlines()[0])
    # The workload went through the Kafka listeners, not the gRPC ones.
    assert meta["client"] == "confluent-kafka" and meta["client_bootstrap_servers"] == cluster.kafka_bootstrap_servers


def test_pairs_cover_every_fault_this_build_injects() -> None:
    assert sorted(f for pair in PAIRS for f in pair) == sorted(DEFAULT_FAULTS)


@pytest.mark.parametrize("faults", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_short_chaos_run_is_clean(faults: tuple[str, str], output: Path, tmp_path: Path) -> None:
    args = ["chaos", "run", "--faults", ",".join(faults), "--interval", f"{INTERVAL_S}s", "--duration",
            f"{DURATION_S}s", "--seed", str(SEED), "--output", str(output), "--partitions", "3",
            "--writers", "2", "--rate", "40", "--readers", "1", "--audit" if faults == AUDITED else "--no-audit"]
    external = tmp_path / "cluster"
    if faults == EXTERNAL:
        up = minibroker("cluster", "up", "--data-dir", str(external),
                        *(arg for o in OWN_CLUSTER_OVERRIDES for arg in ("--override", o)), timeout=120)
        assert up.returncode == 0, up.stderr
        args += ["--data-dir", str(external)]
    run = minibroker(*args, timeout=280)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    assert "VERDICT: every safety check held" in run.stdout

    result = json.loads((output / "result.json").read_text())
    assert result["valid"] and result["lost"] == 0 and result["duplicated"] == 0
    assert all(n == 0 for name, n in result["anomalies"].items() if not name.startswith("acks1-"))
    assert result["acked"] > 500
    assert result["polled_records"] >= result["acked"]
    planned = [p.fault for p in schedule(faults, INTERVAL_S, DURATION_S, random.Random(SEED))]
    assert [w["fault"] for w in result["fault_windows"]] == planned
    assert sorted(planned) == sorted(faults)
    assert result["recovery"]["full_isr"]
    if faults == AUDITED:
        assert result["audit"]["status"] == "clean", result["audit"]
        assert json.loads((output / "audit" / "report.json").read_text())["partitions"]
    assert (output / "chaos.png").stat().st_size > 0 and (output / "history.jsonl").exists()

    if faults == EXTERNAL:
        # The user's cluster stays up, whole: every process running again, cluster.json pointing at them.
        status = minibroker("cluster", "status", "--data-dir", str(external), timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
    else:
        assert not any(s.running for s in LocalCluster(output / "cluster").status()[1])
