"""The checker on recorded histories: a clean one passes, and each anomaly is caught, counted and named."""

from __future__ import annotations

from chaos_histories import T0, clean, ok, with_final

from chaos.checker import FAILING, check, writer_seq
from chaos.history import History, Poll, Send


def anomalies(history: History) -> dict[str, int]:
    return {name: n for name, n in check(history).counts.items() if n}


def test_clean_history_is_valid() -> None:
    result = check(clean())
    assert result.valid
    assert all(result.counts.get(name, 0) == 0 for name in FAILING)
    assert result.sends == {"ok": 5, "info": 1, "fail": 1}
    assert result.acks1_sends == {"ok": 1}
    assert result.final_records == 6
    assert result.polled_records == 6


def test_unacknowledged_sends_may_be_missing_or_present() -> None:
    history = with_final(clean(), 0, ((0, "w0-0"), (1, "w0-2"), (2, "w1-0"), (3, "w1-2")))
    assert check(history).valid  # the unknown send w1-2 made it: allowed


def test_lost_write() -> None:
    history = with_final(clean(), 0, ((0, "w0-0"), (1, "w0-2")))
    history.polls[1] = Poll("c0", T0 + 2.0, ((1, 1, "w1-1"), (1, 2, "a1-0")))
    history.polls.append(Poll("c0", T0 + 3.0, ((0, 2, "w1-0"),)))
    result = check(history)
    assert not result.valid
    assert result.counts["lost-write"] == 1
    assert result.examples["lost-write"][0]["value"] == "w1-0"
    # The reader saw it: it was committed, then gone.
    assert result.counts["lost-read"] == 1


def test_duplicate() -> None:
    history = with_final(clean(), 0, ((0, "w0-0"), (1, "w0-2"), (2, "w1-0"), (3, "w0-2")))
    result = check(history)
    assert result.counts["duplicate"] == 1
    assert result.examples["duplicate"][0] == {"value": "w0-2", "at": [(0, 1), (0, 3)]}
    assert not result.valid


def test_inconsistent_offsets_between_reads() -> None:
    history = clean()
    history.polls.append(Poll("c1", T0 + 3.0, ((0, 0, "w0-0"), (0, 1, "w1-0"))))
    result = check(history)
    assert result.counts["inconsistent-offsets"] == 1
    assert result.examples["inconsistent-offsets"][0]["offset"] == 1
    assert not result.valid


def test_inconsistent_offsets_between_ack_and_read() -> None:
    history = clean()
    history.sends[0] = ok("w0", 0, 0, 1, 0.0)  # acknowledged at offset 1, but offset 1 holds w0-2
    result = check(history)
    assert result.counts["inconsistent-offsets"] >= 1
    assert not result.valid


def test_acks_without_an_offset_are_checked_for_loss_not_for_offsets() -> None:
    # librdkafka acknowledges, with offset -1, the messages its idempotent producer knows persisted because a
    # later batch of the partition was acknowledged (an "implicit ack").
    history = clean()
    history.sends[0] = ok("w0", 0, 0, -1, 0.0)
    history.sends[3] = ok("w1", 0, 0, -1, 0.3)
    assert check(history).valid
    history = with_final(history, 0, ((0, "w0-0"), (1, "w0-2")))
    history.polls[1] = Poll("c0", T0 + 2.0, ((1, 1, "w1-1"), (1, 2, "a1-0")))
    assert check(history).counts["lost-write"] == 1  # w1-0 was acknowledged all the same


def test_nonmonotonic_send() -> None:
    history = with_final(clean(), 0, ((0, "w0-2"), (1, "w0-0"), (2, "w1-0")))
    history.polls[0] = Poll("c0", T0 + 1.0, ((0, 0, "w0-2"), (0, 1, "w0-0"), (1, 0, "w0-1")))
    history.sends[0] = ok("w0", 0, 0, 1, 0.0)
    history.sends[2] = ok("w0", 2, 0, 0, 0.2)
    result = check(history)
    assert result.counts["nonmonotonic-send"] == 1
    assert result.examples["nonmonotonic-send"][0]["values"] == ["w0-0", "w0-2"]
    assert anomalies(history) == {"nonmonotonic-send": 1}


def test_nonmonotonic_poll() -> None:
    history = clean()
    history.polls.append(Poll("c0", T0 + 3.0, ((0, 1, "w0-2"),)))  # c0 was past offset 2 already
    result = check(history)
    assert anomalies(history) == {"nonmonotonic-poll": 1}
    assert result.examples["nonmonotonic-poll"][0]["prev"] == 2


def test_poll_skip() -> None:
    history = clean()
    history.polls[0] = Poll("c0", T0 + 1.0, ((0, 0, "w0-0"), (1, 0, "w0-1")))  # offset 1 of partition 0 skipped
    result = check(history)
    assert anomalies(history) == {"poll-skip": 1, "unseen": 1}  # w0-2, at the skipped offset
    assert result.examples["poll-skip"][0]["from"] == 0 and result.examples["poll-skip"][0]["to"] == 2


def test_poll_skip_at_the_start() -> None:
    history = clean()
    history.polls[0] = Poll("c0", T0 + 1.0, ((0, 1, "w0-2"), (1, 0, "w0-1")))
    assert anomalies(history) == {"poll-skip": 1, "unseen": 1}


def test_unseen() -> None:
    history = clean()
    history.polls[1] = Poll("c0", T0 + 2.0, ((0, 2, "w1-0"), (1, 1, "w1-1")))  # reader stops before a1-0
    assert check(history).valid  # an acks=1 value unseen is no anomaly
    history.polls[1] = Poll("c0", T0 + 2.0, ((0, 2, "w1-0"),))
    result = check(history)
    assert anomalies(history) == {"unseen": 1}
    assert result.examples["unseen"][0]["value"] == "w1-1"


def test_lost_read_of_an_unacknowledged_value() -> None:
    history = clean()
    history.polls.append(Poll("c0", T0 + 3.0, ((0, 3, "w1-2"),)))  # the unknown send, read, then gone
    assert anomalies(history) == {"lost-read": 1}


def test_acks1_losses_and_duplicates_are_reported_not_failed() -> None:
    history = with_final(clean(), 1, ((0, "w0-1"), (1, "w1-1")))
    history.polls[1] = Poll("c0", T0 + 2.0, ((0, 2, "w1-0"), (1, 1, "w1-1")))
    result = check(history)
    assert result.counts["acks1-lost"] == 1
    assert result.valid
    # A successor leader gave the lost acks=1 record's offset to another: no inconsistent offset.
    history = with_final(clean(), 1, ((0, "w0-1"), (1, "w1-1"), (2, "w1-2")))
    history.polls[1] = Poll("c0", T0 + 2.0, ((0, 2, "w1-0"), (1, 1, "w1-1")))
    result = check(history)
    assert result.counts["acks1-lost"] == 1
    assert result.valid, result.counts
    history = with_final(clean(), 1, ((0, "w0-1"), (1, "w1-1"), (2, "a1-0"), (3, "a1-0")))
    result = check(history)
    assert result.counts["acks1-duplicate"] == 1
    assert result.valid


def test_without_final_read_or_readers_the_checks_that_need_them_say_so() -> None:
    history = clean()
    history.final_reads = []
    history.polls = []
    history.meta["consumers"] = 0
    result = check(history)
    assert result.valid
    assert any("no final read" in note for note in result.notes)
    assert any("unseen cannot be checked" in note for note in result.notes)


def test_writer_seq() -> None:
    assert writer_seq("w0-12") == ("w0", 12)
    assert writer_seq("a-b-3") == ("a-b", 3)
    assert writer_seq("garbage") is None
    assert writer_seq("w0-x") is None


def test_every_anomaly_at_once_is_counted_separately() -> None:
    history = with_final(clean(), 0, ((0, "w0-0"), (1, "w0-2"), (2, "w1-0"), (3, "w0-0")))
    history.sends.append(Send("w1", "w1-9", "all", 0, T0 + 1, T0 + 1.1, "ok", 9))  # acked, never stored
    history.polls.append(Poll("c0", T0 + 4.0, ((0, 0, "w0-0"),)))
    found = anomalies(history)
    assert found["lost-write"] == 1 and found["duplicate"] == 1 and found["nonmonotonic-poll"] == 1
    assert found["unseen"] == 1
