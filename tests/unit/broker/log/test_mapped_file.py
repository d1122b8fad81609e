"""MappedFile: a shared mapping of a file that holds no descriptor, written back by msync, unmapped on close."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from log_helpers import open_files_under

from broker.log.mapped_file import MappedFile


def mapped(path: Path, length: int, flags: int = os.O_RDWR | os.O_CREAT) -> MappedFile:
    fd = os.open(path, flags, 0o644)
    try:
        if flags & os.O_RDWR:
            os.ftruncate(fd, length)
        return MappedFile(fd, length)
    finally:
        os.close(fd)


def test_writes_through_the_mapping_reach_the_file_after_its_descriptor_is_closed(tmp_path: Path) -> None:
    mapping = mapped(tmp_path / "a.index", 16)
    assert open_files_under(tmp_path) == []
    struct.pack_into(">ii", mapping.view, 8, 7, 4096)
    mapping.flush()
    assert (tmp_path / "a.index").read_bytes() == bytes(8) + struct.pack(">ii", 7, 4096)
    assert struct.unpack_from(">ii", mapping.view, 8) == (7, 4096)
    mapping.close()


def test_a_closed_mapping_refuses_access_instead_of_reading_unmapped_memory(tmp_path: Path) -> None:
    mapping = mapped(tmp_path / "a.index", 8)
    mapping.close()
    with pytest.raises(ValueError):
        struct.unpack_from(">q", mapping.view, 0)


def test_mapping_a_file_open_read_only_for_writing_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "a.index").write_bytes(bytes(8))
    with pytest.raises(PermissionError):
        mapped(tmp_path / "a.index", 8, os.O_RDONLY)
