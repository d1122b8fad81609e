"""The import contracts of pyproject.toml ([tool.importlinter]): the real tree keeps them, and each one
breaks on a copy of the tree given one forbidden import (so no contract can pass by naming nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]

# contract id -> (module file, a forbidden import planted in it)
FORBIDDEN_IMPORTS = {
    "common-is-shared": ("common/limits.py", "import broker.config.kafka_config"),
    "client-is-standalone": ("client/retry.py", "import broker.log.log"),
    "broker-controller-independent": ("broker/replication/rules.py", "import controller.election"),
    # Upward: the ground floor's metadata cache reaching for replication, as the old server/ package did.
    "broker-layers": ("broker/config/metadata_cache.py", "import broker.replication.replica_manager"),
    "coordinators-independent": ("broker/coordinator/transaction/transaction_coordinator.py",
                                 "import broker.coordinator.group.group_coordinator"),
    "replication-below-coordinators": ("broker/replication/replica_manager.py",
                                       "import broker.coordinator.group.group_coordinator"),
    # Indirect: the state store reaches kazoo through zk.client and prometheus through the metrics.
    "rules-are-plain": ("broker/replication/rules.py", "from broker.replication import partition_state_store"),
    "commands-are-the-cli": ("broker/server/kafka_server.py", "import minibroker.commands.broker"),
    "tooling-through-the-library": ("spark_jobs/audit.py", "import minibroker.cli"),
    "console-is-tooling": ("console/view.py", "import broker.replication.partition"),
}


def _lint_imports(cwd: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    args = [str(LINT_IMPORTS), "--no-cache"] + [arg for c in contracts for arg in ("--contract", c)]
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_every_contract_has_a_forbidden_import_here() -> None:
    assert sorted(c["id"] for c in CONFIG["contracts"]) == sorted(FORBIDDEN_IMPORTS)


def test_the_tree_keeps_every_contract() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(FORBIDDEN_IMPORTS)} kept, 0 broken." in done.stdout


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("tree")
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in CONFIG["root_packages"]:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize("contract", sorted(FORBIDDEN_IMPORTS))
def test_a_forbidden_import_breaks_the_contract(tree_copy: Path, contract: str) -> None:
    module, line = FORBIDDEN_IMPORTS[contract]
    assert _lint_imports(tree_copy, contract).returncode == 0
    path = tree_copy / module
    original = path.read_text()
    path.write_text(f"{original}\n{line}  # noqa: E402\n")
    try:
        done = _lint_imports(tree_copy, contract)
    finally:
        path.write_text(original)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout
    assert "Contracts: 0 kept, 1 broken." in done.stdout
