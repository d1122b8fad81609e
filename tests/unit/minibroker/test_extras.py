"""The lean core install: PySpark, pyarrow, pandas and matplotlib are extras, and a command that needs one
they bring says which extra to install (exit 2, no traceback) instead of failing inside."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
HEAVY = ("pyspark", "pyarrow", "pandas", "matplotlib")


def _requirement_names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_the_core_needs_none_of_the_heavy_packages() -> None:
    assert not _requirement_names(PROJECT["dependencies"]) & set(HEAVY)


def test_the_extras_bring_them() -> None:
    extras = PROJECT["optional-dependencies"]
    assert _requirement_names(extras["audit"]) == {"pyspark", "pyarrow", "pandas", "confluent-kafka"}
    assert _requirement_names(extras["chaos"]) == {"matplotlib", "minibroker"}  # minibroker[audit]: its audit
    assert _requirement_names(extras["console"]) == {"aiohttp"}
    assert extras["chaos"][1] == "minibroker[audit]" and extras["all"] == ["minibroker[audit,chaos,console]"]


def _minibroker_without(hidden: tuple[str, ...], *argv: str) -> subprocess.CompletedProcess[str]:
    """`minibroker ARGV` in a process where `hidden` cannot be imported, as in a core-only install."""
    code = ("import sys\n"
            f"for name in {hidden!r}: sys.modules[name] = None  # find_spec None, import fails\n"
            "from minibroker.cli import main\n"
            f"sys.exit(main({list(argv)!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("hidden", "argv", "extra"), [
    (("pyspark",), ("audit", "--data-dir", "{tmp}", "--output", "{tmp}/out"), "audit"),
    (("pyarrow", "pandas"), ("audit", "--data-dir", "{tmp}", "--output", "{tmp}/out"), "audit"),
    (("matplotlib",), ("chaos", "run", "--data-dir", "{tmp}", "--duration", "1s", "--interval", "1s"), "chaos"),
    (("pyspark",), ("chaos", "run", "--data-dir", "{tmp}", "--duration", "1s", "--interval", "1s"), "chaos"),
    (("matplotlib",), ("chaos", "check", "{tmp}/history.jsonl", "--output", "{tmp}/out"), "chaos"),
    (("aiohttp",), ("console", "--bootstrap-server", "127.0.0.1:1"), "console"),
    (("confluent_kafka",), ("pipeline", "--bootstrap-server", "127.0.0.1:1", "--input", "a", "--output", "b",
                            "--checkpoint", "{tmp}/out"), "audit"),
], ids=["audit-no-spark", "audit-no-arrow", "chaos-no-matplotlib", "chaos-no-spark", "chaos-check-plots",
        "console-no-aiohttp", "pipeline-no-confluent-kafka"])
def test_a_command_names_the_extra_it_misses(tmp_path: Path, hidden: tuple[str, ...], argv: tuple[str, ...],
                                             extra: str) -> None:
    done = _minibroker_without(hidden, *(a.format(tmp=tmp_path) for a in argv))
    assert done.returncode == 2, done.stderr
    assert f"pip install 'minibroker[{extra}]'" in done.stderr
    assert all(name in done.stderr for name in hidden)
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()  # refused before doing anything


def test_chaos_run_without_the_audit_needs_only_matplotlib(tmp_path: Path) -> None:
    # --no-audit: a missing PySpark is no reason to refuse; the run then fails on what it really lacks
    # (no cluster in an empty data dir), not on the extra.
    done = _minibroker_without(("pyspark",), "chaos", "run", "--no-audit", "--data-dir", str(tmp_path),
                               "--duration", "1s", "--interval", "1s")
    assert "minibroker[" not in done.stderr
    assert done.returncode != 0
