"""`minibroker health` (the compose healthchecks) against real processes: healthy only when it should be."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from zk.client import KafkaZkClient
from zk.server import free_port

if TYPE_CHECKING:
    from conftest import StartBroker, StartController, WaitUntil

pytestmark = pytest.mark.integration


def health(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "minibroker.cli", "health", "--timeout-ms", "3000", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_broker_is_healthy_when_serving_and_registered(
    start_broker: StartBroker, zk_connect: str, zk_client: KafkaZkClient
) -> None:
    broker = start_broker(1)
    healthy = health("--bootstrap-server", broker.address, "--broker-id", "1", "--zookeeper", zk_connect)
    assert healthy.returncode == 0
    assert healthy.stdout == f"broker 1 at {broker.address} is healthy: SERVING, registered\n"
    serving = health("--bootstrap-server", broker.address)
    assert (serving.returncode, serving.stdout) == (0, f"broker at {broker.address} is healthy: SERVING\n")
    unregistered = health("--bootstrap-server", broker.address, "--broker-id", "7", "--zookeeper", zk_connect)
    assert unregistered.returncode == 1
    assert "broker 7 is not registered in ZooKeeper (/brokers/ids/7)" in unregistered.stderr
    nobody = health("--bootstrap-server", f"127.0.0.1:{free_port()}")
    assert nobody.returncode == 1 and "does not answer health checks (UNAVAILABLE)" in nobody.stderr
    usage = health("--bootstrap-server", broker.address, "--broker-id", "1")
    assert usage.returncode == 2 and usage.stderr.startswith("usage: minibroker health")
    assert usage.stderr.endswith("minibroker health: error: --broker-id and --zookeeper go together\n")
    # A broker's address is not a controller's: its health service does not know KafkaController.
    not_controller = health("--controller", broker.address)
    assert not_controller.returncode == 1 and not_controller.stdout == ""
    assert not_controller.stderr == (f"minibroker health: {broker.address} is not a controller: it does not serve"
                                     " minibroker.KafkaController (a broker's address?)\n")


def test_a_controller_is_healthy_when_it_accepts_connections(
    start_controller: StartController, zk_client: KafkaZkClient, wait_until: WaitUntil
) -> None:
    start_controller(1000)
    wait_until(lambda: zk_client.get_controller_endpoint() is not None, message="an active controller")
    endpoint = zk_client.get_controller_endpoint()
    assert endpoint is not None
    healthy = health("--controller", endpoint)
    assert (healthy.returncode, healthy.stdout) == (0, f"controller at {endpoint} is healthy: SERVING\n")
    down = health("--controller", f"127.0.0.1:{free_port()}")
    assert down.returncode == 1 and "does not accept connections" in down.stderr
