"""The test tree's one rule pytest does not check until it collects: with no `__init__.py` in the test folders,
pytest imports each test file by its basename, so two files of one name anywhere under tests/ break the whole
run's collection ("import file mismatch"). `conftest.py` is the exception: pytest imports each folder's own
and drops the previous one from `sys.modules` first."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
_PER_FOLDER = {"__init__.py", "conftest.py"}


def test_every_test_file_has_a_name_of_its_own() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "__pycache__" not in path.parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in places.items() if len(paths) > 1 and name not in _PER_FOLDER}
    assert not shared, f"test files sharing a name: {shared}"
