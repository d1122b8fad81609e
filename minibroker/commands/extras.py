"""The optional extras some commands need: `minibroker audit` (PySpark, pyarrow, pandas), the chaos
report's plots (matplotlib) and `minibroker console`'s web server (aiohttp). The core install (broker,
controller, client, CLI) has none of them; a command that needs one says which extra brings it instead of
failing with an ImportError deep inside."""

from __future__ import annotations

import importlib.util
import sys

# What each extra of pyproject.toml brings that a command imports (distribution -> module names).
AUDIT_MODULES = ("pyspark", "pyarrow", "pandas", "confluent_kafka")
CHAOS_MODULES = ("matplotlib", *AUDIT_MODULES)  # a chaos run ends with the audit
CONSOLE_MODULES = ("aiohttp",)  # `minibroker console`'s web server


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that are not installed (looked up, not imported: Spark is slow to import)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(command: str, extra: str, modules: tuple[str, ...]) -> bool:
    """True if `modules` are installed; else say on stderr which extra to install and return False."""
    absent = missing(modules)
    if absent:
        print(f"{command} needs {', '.join(absent)}, which the core install leaves out:"
              f" pip install 'minibroker[{extra}]'", file=sys.stderr)
    return not absent
