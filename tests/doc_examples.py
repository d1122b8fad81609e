"""The README's and docs/' examples as tests read them: fenced blocks, which of them run against `make demo`'s
cluster, and the paths the prose names.

A block that runs against the demo cluster is marked by an HTML comment on the line before it (the rendered
page does not show it):

    <!-- example: demo -->                      run it; it must exit 0
    <!-- example: demo | prints: hello -->      ... and print `hello` (repeat `| prints: ...` for more)
    <!-- example: not run | why -->             names the demo cluster but is not run here, and says why

tests/unit/test_docs.py checks that every block addressing the demo cluster carries one of these, and
tests/integration/admin_and_cli/test_doc_examples.py runs the first kind against a real `minibroker demo` cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from local_cluster.cluster_file import ClusterInfo
from local_cluster.ports import GRPC_WELL_KNOWN_PORT, KAFKA_WELL_KNOWN_PORT, ZOOKEEPER_WELL_KNOWN_PORT

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_DATA_DIR = "data/demo"
_MARKER = re.compile(r"^<!-- example: (?P<kind>demo|not run)(?P<rest>.*?)-->\s*$")
_FENCE = re.compile(r"^```(?P<language>\w*)\s*$")
# What makes a block one that talks to the demo cluster: its addresses or its data dir.
_DEMO_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1):(?:909[2-4]|919[2-4]|2181)\b|\bdata/demo\b")
_ADDRESS = re.compile(r"\b(localhost|127\.0\.0\.1):(\d+)\b")


@dataclass(frozen=True)
class Block:
    """A fenced block of a Markdown file and the example marker before it, if any."""
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str | None  # "demo", "not run", or None
    prints: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}"

    @property
    def addresses_demo_cluster(self) -> bool:
        return bool(_DEMO_ADDRESS.search(self.code))



def documents() -> list[Path]:
    """The README and every manual under docs/."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    marker: str | None = None
    prints: tuple[str, ...] = ()
    i = 0
    while i < len(lines):
        line = lines[i]
        if (m := _MARKER.match(line)) is not None:
            marker = m["kind"]
            prints = tuple(part.strip()[len("prints:"):].strip() for part in m["rest"].split("|")
                           if part.strip().startswith("prints:"))
        elif (fence := _FENCE.match(line)) is not None:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            found.append(Block(path, i + 1, fence["language"], "\n".join(lines[i + 1:end]) + "\n", marker, prints))
            marker, prints = None, ()
            i = end
        elif line.strip():
            marker, prints = None, ()  # a marker belongs to the block right after it
        i += 1
    return found


def demo_examples() -> list[Block]:
    """The blocks marked to run against the demo cluster, in reading order."""
    return [b for path in documents() for b in blocks(path) if b.marker == "demo"]


def localized(code: str, info: ClusterInfo, data_dir: Path) -> str:
    """The example as it runs on a machine where `minibroker demo` had to move: each well-known port it did not
    get becomes the one it took (as it said), and `data/demo` the test's data dir."""
    moved = {ZOOKEEPER_WELL_KNOWN_PORT: int(info.zookeeper.connect.rpartition(":")[2])}
    for broker in info.brokers:
        moved[GRPC_WELL_KNOWN_PORT - 1 + broker.id] = broker.port
        if broker.kafka_port is not None:
            moved[KAFKA_WELL_KNOWN_PORT - 1 + broker.id] = broker.kafka_port
    code = _ADDRESS.sub(lambda m: f"{m[1]}:{moved.get(int(m[2]), int(m[2]))}", code)
    return re.sub(rf"\b{re.escape(DEMO_DATA_DIR)}\b", str(data_dir), code)
