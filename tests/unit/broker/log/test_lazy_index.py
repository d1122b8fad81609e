"""LazyIndex: an index mapped on first lookup; a peek, a rename, a flush or a close leave an unloaded one unmapped."""

from __future__ import annotations

from pathlib import Path

from broker.log.index import OffsetIndex, OffsetPosition
from broker.log.lazy_index import LazyIndex

BASE = 100


def sealed_index(tmp_path: Path) -> Path:
    """An index file as a rolled segment leaves it: two entries, trimmed."""
    index = OffsetIndex(tmp_path / "00000000000000000100.index", BASE, 80)
    index.append(BASE + 2, 30)
    index.append(BASE + 5, 70)
    index.close()
    return index.path


def lazy(path: Path) -> tuple[LazyIndex[OffsetIndex], list[OffsetIndex]]:
    opened: list[OffsetIndex] = []

    def open_index(p: Path) -> OffsetIndex:
        opened.append(OffsetIndex(p, BASE, 80))
        return opened[-1]

    return LazyIndex(path, open_index), opened


def test_the_index_is_opened_on_first_lookup_and_kept(tmp_path: Path) -> None:
    index, opened = lazy(sealed_index(tmp_path))
    assert (index.is_loaded, opened) == (False, [])
    assert index.get().lookup(BASE + 4) == OffsetPosition(BASE + 2, 30)
    assert index.get() is opened[0] and len(opened) == 1 and opened[0].is_mapped


def test_a_peek_leaves_an_unloaded_index_unmapped_and_a_loaded_one_loaded(tmp_path: Path) -> None:
    index, opened = lazy(sealed_index(tmp_path))
    with index.peek() as peeked:
        assert peeked.last_entry == OffsetPosition(BASE + 5, 70)
    assert (index.is_loaded, opened[0].is_mapped) == (False, False)
    loaded = index.get()
    with index.peek() as peeked:
        assert peeked is loaded
    assert loaded.is_mapped


def test_rename_flush_and_close_of_an_unloaded_index_work_on_the_path_alone(tmp_path: Path) -> None:
    path = sealed_index(tmp_path)
    index, opened = lazy(path)
    target = path.with_name(path.name + ".deleted")
    index.rename(target)
    index.flush()
    index.close_handler()
    index.close()
    assert (opened, index.path, path.exists(), target.stat().st_size) == ([], target, False, 16)
    assert index.get().lookup(BASE + 9) == OffsetPosition(BASE + 5, 70)  # loads from the new name


def test_rename_of_a_loaded_index_moves_the_mapped_file(tmp_path: Path) -> None:
    path = sealed_index(tmp_path)
    index, _ = lazy(path)
    loaded = index.get()
    target = path.with_name(path.name + ".swap")
    index.rename(target)
    assert (index.path, loaded.path, target.exists()) == (target, target, True)
