"""Kafka's consumer Heartbeat: the three timers of a group member, as plain state over a given clock.

- the heartbeat timer: the next heartbeat is due heartbeat_interval_ms after the
  last one was sent (retry_backoff_ms after one failed);
- the session timer: session_timeout_ms after the last heartbeat answer the
  member gives up on its coordinator (the coordinator has given up on the
  member by then) and looks for it again;
- the poll timer: max_poll_interval_ms after the last poll() the member leaves
  the group, so a stuck application hands its partitions to the others.

Every method takes the time (milliseconds, any monotonic origin) so the rules
are tested with a fake clock; the heartbeat thread (client/group_coordinator.py)
reads the real one.
"""

from __future__ import annotations


class Heartbeat:
    def __init__(self, *, session_timeout_ms: int, heartbeat_interval_ms: int, max_poll_interval_ms: int,
                 retry_backoff_ms: int, now_ms: float) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._heartbeat_due_ms = now_ms + heartbeat_interval_ms
        self._session_deadline_ms = now_ms + session_timeout_ms
        self._poll_deadline_ms = now_ms + max_poll_interval_ms
        self.heartbeat_in_flight = False

    # -- events

    def poll(self, now_ms: float) -> None:
        """The application called poll(): it is alive."""
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms

    def sent_heartbeat(self, now_ms: float) -> None:
        self.heartbeat_in_flight = True
        self._heartbeat_due_ms = now_ms + self.heartbeat_interval_ms

    def fail_heartbeat(self, now_ms: float) -> None:
        """No answer or a retriable error: try again after the backoff, not a whole interval later."""
        self.heartbeat_in_flight = False
        self._heartbeat_due_ms = now_ms + self.retry_backoff_ms

    def received_heartbeat(self, now_ms: float) -> None:
        self.heartbeat_in_flight = False
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def reset_timeouts(self, now_ms: float) -> None:
        """A (re)join completed: every timer starts again."""
        self._session_deadline_ms = now_ms + self.session_timeout_ms
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms
        self._heartbeat_due_ms = now_ms + self.heartbeat_interval_ms
        self.heartbeat_in_flight = False

    # -- questions

    def should_heartbeat(self, now_ms: float) -> bool:
        return now_ms >= self._heartbeat_due_ms

    def time_to_next_heartbeat(self, now_ms: float) -> float:
        return max(self._heartbeat_due_ms - now_ms, 0.0)

    def session_timeout_expired(self, now_ms: float) -> bool:
        return now_ms >= self._session_deadline_ms

    def poll_timeout_expired(self, now_ms: float) -> bool:
        return now_ms >= self._poll_deadline_ms
