"""Every example the README and docs/ say works against `make demo`'s cluster, run as printed against a real one.

`make demo` runs `minibroker demo`; so does this module, once, into a data dir of its own: ZooKeeper, two
controllers and three brokers as real processes, on Kafka's well-known ports where they are free. Each block
marked `<!-- example: demo -->` (tests/doc_examples.py finds them) then runs as a reader would run it, from the
repository's root: a `sh` block with bash, a `python` block with the venv's Python. The only changes are the
ones the reader's machine might force too: a well-known port that was taken becomes the port `minibroker demo`
said it took instead, and `data/demo` becomes this module's data dir. A marker may name text the example
prints (`<!-- example: demo | prints: TEXT -->`); every example must exit 0.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_cluster.cluster import LocalCluster
from local_cluster.cluster_file import ClusterInfo
from local_cluster.ports import GRPC_WELL_KNOWN_PORT, KAFKA_WELL_KNOWN_PORT, ZOOKEEPER_WELL_KNOWN_PORT
from tests.doc_examples import REPO_ROOT, Block, demo_examples, localized

pytestmark = pytest.mark.integration

EXAMPLE_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def demo_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("demo")
    try:
        done = subprocess.run([sys.executable, "-m", "minibroker.cli", "demo", "--data-dir", str(data_dir)],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        (data_dir / "demo.out").write_text(done.stdout + done.stderr)
        yield data_dir
    finally:
        if ClusterInfo.exists(data_dir):
            LocalCluster(data_dir).down(kill=True)


@pytest.mark.parametrize("example", demo_examples(), ids=lambda e: e.where)
def test_documented_example_runs_as_printed_against_the_demo_cluster(example: Block, demo_cluster: Path) -> None:
    code = localized(example.code, ClusterInfo.load(demo_cluster), demo_cluster)
    argv = (["bash", "-euo", "pipefail", "-c", code] if example.language == "sh"
            else [str(REPO_ROOT / ".venv" / "bin" / "python"), "-c", code])
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
    assert done.returncode == 0, f"{example.where} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    for text in example.prints:
        assert text in done.stdout, f"{example.where} did not print {text!r}:\n{done.stdout}\n{done.stderr}"


def test_the_demo_takes_kafkas_well_known_ports_or_names_each_one_taken(demo_cluster: Path) -> None:
    info = ClusterInfo.load(demo_cluster)
    said = (demo_cluster / "demo.out").read_text()
    assert "Ports (Kafka's well-known ports)" in said, said
    wanted = [("zookeeper", int(info.zookeeper.connect.rpartition(":")[2]), ZOOKEEPER_WELL_KNOWN_PORT)]
    for broker in info.brokers:
        wanted += [(f"broker-{broker.id}", broker.port, GRPC_WELL_KNOWN_PORT - 1 + broker.id),
                   (f"broker-{broker.id} Kafka listener", broker.kafka_port, KAFKA_WELL_KNOWN_PORT - 1 + broker.id)]
    for name, port, well_known in wanted:
        assert port == well_known or f"{name} {well_known}: {port}" in said, (name, port, said)
