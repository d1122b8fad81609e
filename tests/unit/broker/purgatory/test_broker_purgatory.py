"""The purgatory completes each delayed operation exactly once: by an event on one of its keys, by its
timeout, or at once - never by polling. All on a hand-driven timer: no sleeps."""

from __future__ import annotations

from broker.purgatory.purgatory import DelayedOperation, DelayedOperationPurgatory
from tests.fakes import FakeClock
from tests.unit.broker.broker_helpers import MockTimer


class Waiting(DelayedOperation):
    """Completes once `ready` is set; records how it completed."""

    def __init__(self, delay_ms: int = 1000, ready: bool = False) -> None:
        super().__init__(delay_ms)
        self.ready = ready
        self.completions = 0
        self.checks = 0

    def try_complete(self) -> bool:
        self.checks += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.completions += 1


def purgatory() -> tuple[DelayedOperationPurgatory[Waiting], MockTimer]:
    timer = MockTimer(FakeClock())
    return DelayedOperationPurgatory("test", timer), timer


def test_satisfied_operation_completes_at_once_and_is_never_watched() -> None:
    p, timer = purgatory()
    op = Waiting(ready=True)
    assert p.try_complete_else_watch(op, ["a"])
    assert op.completions == 1
    assert p.watched() == 0 and timer.pending == 0


def test_event_on_a_key_completes_the_operation_and_unwatches_every_key() -> None:
    p, timer = purgatory()
    op = Waiting()
    assert not p.try_complete_else_watch(op, ["a", "b"])
    assert p.watched() == 1 and p.watched_keys() == 2 and timer.pending == 1
    assert p.check_and_complete("a") == 0  # an event that does not satisfy it
    op.ready = True
    assert p.check_and_complete("b") == 1
    assert op.completions == 1
    assert p.watched() == 0 and p.watched_keys() == 0
    assert timer.pending == 0  # its timeout was cancelled
    assert p.check_and_complete("a") == 0


def test_timeout_completes_once_and_leaves_no_watcher_behind() -> None:
    p, timer = purgatory()
    op = Waiting(delay_ms=500)
    p.try_complete_else_watch(op, ["a"])
    timer.advance(499)
    assert op.completions == 0
    timer.advance(1)
    assert op.completions == 1
    assert p.watched() == 0 and p.watched_keys() == 0
    op.ready = True
    assert p.check_and_complete("a") == 0
    assert op.completions == 1


def test_operations_on_other_keys_are_not_checked() -> None:
    p, _ = purgatory()
    a, b = Waiting(), Waiting()
    p.try_complete_else_watch(a, ["a"])
    p.try_complete_else_watch(b, ["b"])
    checks = b.checks
    a.ready = True
    p.check_and_complete("a")
    assert b.checks == checks and b.completions == 0


def test_force_complete_wins_once() -> None:
    p, timer = purgatory()
    op = Waiting()
    p.try_complete_else_watch(op, ["a"])
    assert op.force_complete()
    assert not op.force_complete()
    timer.advance(10_000)
    assert op.completions == 1 and p.watched() == 0


def test_complete_all_answers_everything_waiting() -> None:
    p, timer = purgatory()
    ops = [Waiting() for _ in range(3)]
    for i, op in enumerate(ops):
        p.try_complete_else_watch(op, [i])
    p.complete_all()
    assert [op.completions for op in ops] == [1, 1, 1]
    assert p.watched() == 0 and timer.pending == 0


def test_a_failing_check_completes_that_operation_and_still_checks_the_others() -> None:
    class Broken(Waiting):
        def try_complete(self) -> bool:
            if self.ready:
                raise RuntimeError("boom")
            return False

    p, _ = purgatory()
    broken, fine = Broken(), Waiting()
    p.try_complete_else_watch(broken, ["a"])
    p.try_complete_else_watch(fine, ["a"])
    broken.ready = fine.ready = True
    assert p.check_and_complete("a") == 2
    assert broken.completions == 1 and fine.completions == 1
    assert p.watched() == 0
