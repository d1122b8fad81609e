"""History files: what HistoryWriter writes, load() reads back the same; a bad line is named."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from chaos_histories import T0, clean

from chaos.history import Fault, HistoryError, HistoryWriter, Recovered, load, parse


def test_round_trip(tmp_path: Path) -> None:
    history = clean()
    history.faults = [Fault("kill-leader", "broker-2", T0 + 1, T0 + 3, "healed in 2.0 s")]
    history.recovered = Recovered(T0 + 8, True, "full ISR")
    writer = HistoryWriter(tmp_path / "h.jsonl")
    writer.meta(**history.meta)
    for event in [*history.sends, *history.polls, *history.faults, *history.final_reads, history.recovered]:
        writer.write(event)
    writer.close()
    assert load(tmp_path / "h.jsonl") == history


def test_concurrent_writers_never_interleave_lines(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "h.jsonl")
    sends = clean().sends

    def write_many() -> None:
        for _ in range(200):
            for send in sends:
                writer.write(send)

    threads = [threading.Thread(target=write_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    assert len(load(tmp_path / "h.jsonl").sends) == 4 * 200 * len(sends)


def test_bad_lines_are_named() -> None:
    with pytest.raises(HistoryError, match=r"h:2: not a chaos history event"):
        parse(['{"type": "meta"}', "{not json"], "h")
    with pytest.raises(HistoryError, match=r"h:1: .*unknown event type 'nope'"):
        parse(['{"type": "nope"}'], "h")
    with pytest.raises(HistoryError, match=r"h:1: .*'value'"):
        parse(['{"type": "send", "process": "w0"}'], "h")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot read history"):
        load(tmp_path / "absent.jsonl")
