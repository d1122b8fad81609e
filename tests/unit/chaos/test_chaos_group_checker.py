"""The checker on consumer-group histories: at-least-once delivery, commits that never go backwards, acknowledged
commits kept, and a last rebalance that settled."""

from __future__ import annotations

from pathlib import Path

from chaos_histories import GROUP, T0, commit, grouped

from chaos.checker import check
from chaos.history import (
    ASSIGNED,
    INFO,
    REVOKED,
    Assignment,
    FinalCommitted,
    GroupPoll,
    History,
    HistoryWriter,
    load,
)
from chaos.report import summarize, verdict


def anomalies(history: History) -> dict[str, int]:
    return {name: n for name, n in check(history).counts.items() if n}


def test_a_clean_group_history_is_valid_and_summarized() -> None:
    history = grouped()
    result = check(history)
    assert result.valid, result.counts
    summary = summarize(history, result, None)
    assert summary["group"] == {"group": GROUP, "members": 2, "commits": {"ok": 4}, "polled_records": 6,
                                "assignments": 3}
    assert "consumer group       g: 2 members, 6 records, 4 commits acknowledged" in verdict(summary)


def test_group_events_round_trip(tmp_path: Path) -> None:
    history = grouped()
    writer = HistoryWriter(tmp_path / "h.jsonl")
    writer.meta(**history.meta)
    for event in [*history.sends, *history.polls, *history.final_reads, *history.assignments,
                  *history.group_polls, *history.commits, *history.final_committed,
                  commit("g1", 4.0, ((1, 3),), outcome=INFO)]:
        writer.write(event)
    writer.close()
    history.commits.append(commit("g1", 4.0, ((1, 3),), outcome=INFO))
    assert load(tmp_path / "h.jsonl") == history


def test_a_commit_below_one_acknowledged_before_it_went_backwards() -> None:
    history = grouped()
    # g1 resumed below g0's commit of partition 1 (as after a lost commit) and committed that.
    history.commits.append(commit("g1", 3.5, ((1, 0),)))
    result = check(history)
    assert anomalies(history) == {"commit-backwards": 1}
    assert result.examples["commit-backwards"][0] == {
        "group": GROUP, "partition": 1, "offset": 0, "process": "g1", "invoke": T0 + 3.5, "before": 3,
        "before_process": "g1", "before_acked": T0 + 3.11}


def test_overlapping_commits_have_no_order_and_unacknowledged_ones_do_not_count() -> None:
    history = grouped()
    # Sent before g0's commit of offset 3 was acknowledged: the coordinator may have applied it first.
    history.commits.append(commit("g1", 3.105, ((0, 2),), took=1.0))
    # Never acknowledged: it may not have been applied at all.
    history.commits.append(commit("g1", 5.0, ((0, 1),), outcome=INFO))
    assert check(history).valid


def test_a_final_committed_offset_below_an_acknowledged_commit_is_a_lost_commit() -> None:
    history = grouped()
    history.final_committed = [FinalCommitted(GROUP, T0 + 9.5, ((0, 3), (1, 1)))]
    result = check(history)
    assert anomalies(history) == {"lost-commit": 1}
    assert result.examples["lost-commit"][0] == {"group": GROUP, "partition": 1, "committed": 1,
                                                 "acknowledged": 3}


def test_no_final_committed_read_is_a_note_not_a_pass_on_lost_commit() -> None:
    history = grouped()
    history.final_committed = []
    result = check(history)
    assert result.valid
    assert "lost-commit cannot be checked" in " ".join(result.notes)


def test_a_record_below_a_commit_that_no_member_got_is_group_unseen() -> None:
    history = grouped()
    # g1 skipped offset 1 of partition 1 and still committed past it.
    history.group_polls[2] = GroupPoll("g1", GROUP, T0 + 3.0, ((1, 2, "a1-0"),))
    result = check(history)
    assert anomalies(history) == {"group-unseen": 1}
    assert result.examples["group-unseen"][0] == {"group": GROUP, "partition": 1, "committed": 3, "unseen": 1,
                                                  "first": 1}


def test_records_above_the_last_commit_may_be_unseen() -> None:
    history = grouped()
    history.group_polls[1] = GroupPoll("g0", GROUP, T0 + 3.0, ())
    history.commits[2] = commit("g0", 3.1, ((0, 2),))
    history.final_committed = [FinalCommitted(GROUP, T0 + 9.5, ((0, 2), (1, 3)))]
    assert check(history).valid  # offset 2 of partition 0 is above every commit: nobody promised it yet


def test_a_partition_nobody_holds_or_two_members_hold_is_unsettled() -> None:
    history = grouped()
    history.assignments.append(Assignment("g1", GROUP, T0 + 4.0, REVOKED, (1,)))
    result = check(history)
    assert anomalies(history) == {"group-unsettled": 1}
    assert result.examples["group-unsettled"][0] == {"group": GROUP, "unassigned": [1], "held_twice": {}}
    history = grouped()
    history.assignments.append(Assignment("g1", GROUP, T0 + 4.0, ASSIGNED, (0, 1)))
    result = check(history)
    assert result.examples["group-unsettled"][0] == {"group": GROUP, "unassigned": [],
                                                     "held_twice": {"0": ["g0", "g1"]}}


def test_a_group_member_reading_a_value_the_final_read_lacks_is_a_lost_read() -> None:
    history = grouped()
    history.group_polls.append(GroupPoll("g1", GROUP, T0 + 3.5, ((1, 3, "w9-0"),)))
    assert anomalies(history) == {"lost-read": 1}
