"""`minibroker chaos run` against real local clusters: a short run per pair of fault kinds (every kind this build
can inject), each asserting a clean verdict, the schedule its seed gives, and a cluster left whole.

One pair runs against a cluster `minibroker cluster up` started (--data-dir), the others against the cluster
`chaos run` starts itself; every cluster is SIGKILLed at teardown whatever happened."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chaos.client_logs import CLIENT_LOG_FILE
from chaos.nemesis import DEFAULT_FAULTS, schedule
from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from minibroker.commands.chaos import OWN_CLUSTER_OVERRIDES
from zk.server import free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
INTERVAL_S, DURATION_S, SEED = 6, 18, 11
PAIRS = [("kill-leader", "pause-controller"), ("kill-controller", "pause-leader"), ("kill-random", "bounce")]
EXTERNAL = ("kill-random", "bounce")  # this pair runs on a `cluster up` cluster
AUDITED = ("kill-leader", "pause-controller")  # this run ends with the Spark audit of its log dirs (one JVM is enough)


def minibroker(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The command's run; one over `timeout` (kept under the test's own timeout) fails with what it printed."""
    try:
        return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`minibroker {' '.join(args)}` ran over {timeout:g} s\n{e.stdout}\n{str(e.stderr)[-4000:]}")


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
    # The clients' own log lines have their file (test_librdkafka_logs_go_to_the_runs_clients_log).
    assert not LIBRDKAFKA_STDERR_LINE.search(run.stderr) and (output / CLIENT_LOG_FILE).exists()
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


@pytest.mark.timeout(480)
def test_a_transactional_chaos_run_is_exactly_once_and_its_log_audits_clean(output: Path) -> None:
    """Consume-transform-produce processors copy the topic in transactions through SIGKILLs of their transaction
    coordinator and of a leader: every input record is in the read_committed output once, nothing of an aborted
    transaction is, the group's offsets end at the end offsets, and the Spark audit finds the transactional layout
    on disk (markers, .txnindex, aborted ranges) whole and the same on every replica."""
    faults = ("kill-txn-coordinator", "kill-leader")
    run = minibroker("chaos", "run", "--client", "confluent-kafka", "--txn-processors", "2", "--faults",
                     ",".join(faults), "--interval", "8s", "--duration", "32s", "--seed", str(SEED), "--output",
                     str(output), "--partitions", "3", "--writers", "2", "--rate", "40", "--readers", "1", "--audit",
                     timeout=420)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr[-4000:]}"
    assert "VERDICT: every safety check held" in run.stdout
    result = json.loads((output / "result.json").read_text())
    assert result["valid"] and all(n == 0 for name, n in result["anomalies"].items() if name.startswith("txn-"))
    assert "kill-txn-coordinator" in result["faults"] and result["audit"]["status"] == "clean"
    transactions = result["transactions"]
    assert transactions["processors"] == 2 and transactions["transactions"]["ok"] > 10


# librdkafka's own format on stderr: `%3|1700000000.123|FAIL|w1#producer-1| [thrd:...]: ...`.
LIBRDKAFKA_STDERR_LINE = re.compile(r"^%\d\|\d+\.\d+\|", re.MULTILINE)
_DEAD_BROKER_PRODUCER = """
import sys, time
from pathlib import Path
from chaos.client_logs import client_logs
from chaos.clients import ProducerSettings
from chaos.clients.confluent import ConfluentProducer
log = Path(sys.argv[2])
with client_logs(log):
    producer = ConfluentProducer(sys.argv[1], ProducerSettings("w1", "all", True, 1000, 3000))
    deadline = time.monotonic() + 30
    while "Connection refused" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    producer.close()
"""


def test_librdkafka_logs_go_to_the_runs_clients_log(tmp_path: Path) -> None:
    """A chaos writer of `--client confluent-kafka` whose broker is gone: librdkafka's FAIL lines (its
    stderr by default, what a `chaos run` terminal showed among the nemesis' lines) land in clients.log."""
    log = tmp_path / CLIENT_LOG_FILE
    run = subprocess.run([sys.executable, "-c", _DEAD_BROKER_PRODUCER, f"127.0.0.1:{free_port()}", str(log)],
                         capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr
    assert not LIBRDKAFKA_STDERR_LINE.search(run.stderr), run.stderr
    assert "ERROR chaos.clients.librdkafka: FAIL [w1#producer-1]" in log.read_text()
    assert "Connect to ipv4#127.0.0.1:" in log.read_text()


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
