"""The `minibroker` command line end to end, as a user runs it: every command a real process, against a real
cluster that `minibroker cluster up` starts (ZooKeeper, controllers, brokers) in a temporary data dir."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from zk.client import KafkaZkClient

if TYPE_CHECKING:
    from conftest import WaitUntil

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
PRODUCER_SUMMARY = re.compile(
    r"^2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency,"
    r" \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$", re.MULTILINE)


def minibroker(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT)


def ok(*args: str, stdin: str | None = None) -> str:
    """stdout of a command that must succeed."""
    result = minibroker(*args, stdin=stdin)
    assert result.returncode == 0, f"minibroker {' '.join(args)}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def cluster_pids(data_dir: Path) -> list[int]:
    info = json.loads((data_dir / "cluster.json").read_text())
    pids = [info["zookeeper"]["pid"], *(p["pid"] for p in info["controllers"] + info["brokers"])]
    return [pid for pid in pids if pid is not None]


def test_cluster_topics_console_and_perf(data_dir: Path, wait_until: WaitUntil) -> None:
    d = ("--data-dir", str(data_dir))
    bootstrap = ok("cluster", "up", *d, "--brokers", "3", "--controllers", "2").strip()
    info = json.loads((data_dir / "cluster.json").read_text())
    assert bootstrap == info["bootstrap_servers"] == ",".join(f"{b['host']}:{b['port']}" for b in info["brokers"])
    assert [b["id"] for b in info["brokers"]] == [1, 2, 3] and [c["id"] for c in info["controllers"]] == [1001, 1002]
    assert all(Path(b["log_dir"]) == data_dir.resolve() / f"broker-{b['id']}" / "data" for b in info["brokers"])
    pids = cluster_pids(data_dir)
    assert len(pids) == 6 and not any(gone(pid) for pid in pids)

    status = ok("cluster", "status", *d)
    assert status.count("running") == 6 and status.count("registered,") == 3
    assert status.count("active controller") == 1 and status.count("standby") == 1
    again = minibroker("cluster", "up", *d)
    assert again.returncode == 1 and "already running" in again.stderr

    # topics, with kafka-topics.sh's output and errors
    assert ok("topics", *d, "--create", "--topic", "events", "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=600000") == "Created topic events.\n"
    exists = minibroker("topics", *d, "--create", "--topic", "events", "--partitions", "3")
    assert exists.returncode == 1
    assert exists.stdout == "Error while executing topic command : Topic 'events' already exists.\n"
    assert ok("topics", *d, "--create", "--topic", "events", "--if-not-exists") == ""
    assert ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "pairs",
              "--replica-assignment", "1:2,2:3") == "Created topic pairs.\n"
    assert ok("topics", *d, "--list").split() == ["events", "pairs"]
    assert ok("topics", *d, "--describe", "--topic", "events").splitlines()[0] == \
        "Topic: events\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=600000"
    described = ok("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "pairs").splitlines()
    assert described == [
        "Topic: pairs\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: pairs\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: pairs\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3",
    ]
    missing = minibroker("topics", *d, "--describe", "--topic", "nothing")
    assert (missing.returncode, missing.stdout) == (
        1, "Error while executing topic command : Topic 'nothing' does not exist as expected\n")

    # console producer -> console consumer
    lines = [f"key-{i % 7}:value {i}" for i in range(100)]
    ok("console-producer", *d, "--topic", "events", "--property", "parse.key=true", "--property", "key.separator=:",
       stdin="\n".join(lines) + "\n")
    consumed = minibroker("console-consumer", *d, "--topic", "events", "--from-beginning", "--max-messages", "100",
                          "--property", "print.key=true", "--property", "key.separator=:")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)
    assert "Processed a total of 100 messages" in consumed.stderr
    # Per key, in the order sent: a key's records share a partition.
    assert [line for line in consumed.stdout.splitlines() if line.startswith("key-3:")] == \
        [line for line in lines if line.startswith("key-3:")]
    one = ok("console-consumer", *d, "--topic", "events", "--partition", "0", "--offset", "0", "--max-messages", "1",
             "--property", "print.timestamp=true", "--property", "print.partition=true",
             "--property", "print.offset=true")
    assert re.fullmatch(r"CreateTime:\d+\tPartition:0\tOffset:0\tvalue \d+\n", one)

    # perf
    produced = ok("perf", "produce", *d, "--topic", "perf", "--num-records", "2000", "--record-size", "100",
                  "--throughput", "-1", "--producer-props", "acks=1", "linger.ms=5")
    assert PRODUCER_SUMMARY.search(produced), produced
    header, values = ok("perf", "consume", *d, "--topic", "perf", "--messages", "2000").splitlines()
    assert header.startswith("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec")
    assert values.split(", ")[4] == "2000"

    # delete: the topic is marked for deletion (the controller deletes it) or already gone
    assert ok("topics", *d, "--delete", "--topic", "pairs") == ""
    with KafkaZkClient.connect(info["zookeeper"]["connect"], timeout=15) as zk:
        wait_until(lambda: "pairs" in zk.get_topic_deletions() or "pairs" not in zk.get_all_topics(), timeout=10)

    stopped = ok("cluster", "down", *d)
    assert stopped.startswith("Stopped broker-1, broker-2, broker-3, controller-1001, controller-1002, zookeeper")
    wait_until(lambda: all(gone(pid) for pid in pids), timeout=10, message=f"every process of {pids} to be gone")


def test_down_kill_and_start_up_failures(data_dir: Path, zk_connect: str, wait_until: WaitUntil) -> None:
    d = ("--data-dir", str(data_dir))
    refused = minibroker("cluster", "up", *d, "--override", "min.insync.replica=2")
    assert refused.returncode == 2 and "did you mean min.insync.replicas?" in refused.stderr
    assert not (data_dir / "cluster.json").exists()

    # A broker that cannot start: named, with its log, and nothing is left running.
    failed = minibroker("cluster", "up", *d, "--brokers", "1", "--controllers", "1", "--zookeeper", zk_connect,
                        "--override", "log.dirs=/dev/null/cannot-be-a-dir")
    assert failed.returncode == 1
    assert "broker-1 exited with code 1 before the cluster was ready" in failed.stderr
    assert f"last lines of {data_dir.resolve() / 'logs' / 'broker-1.log'}" in failed.stderr
    assert all(gone(pid) for pid in cluster_pids(data_dir))

    assert "Traceback" not in (data_dir / "logs" / "broker-1.log").read_text()

    # The data dir's configs are kept, the failed --override with them: this run's --override replaces it.
    log_dir = data_dir.resolve() / "broker-1" / "data"
    again = minibroker("cluster", "up", *d, "--brokers", "1", "--controllers", "1", "--override", f"log.dirs={log_dir}")
    assert again.returncode == 0, again.stderr
    assert "Kept broker-1/server.properties, set zookeeper.connect, log.dirs\n" in again.stderr
    pids = cluster_pids(data_dir)
    assert ok("cluster", "down", *d, "--kill").startswith("Stopped broker-1, controller-1001, zookeeper")
    wait_until(lambda: all(gone(pid) for pid in pids), timeout=10, message=f"every process of {pids} to be gone")
    status = minibroker("cluster", "status", *d)
    assert status.returncode == 1 and status.stdout.count("stopped") == 3
