"""Delayed operations (Kafka's DelayedOperationPurgatory): requests that wait for an event, not a poll.

  purgatory.py              DelayedOperation and the purgatory: watch keys, try-complete on events, expire
  timer.py                  the timer operations expire on
  delayed_produce.py        acks=all produce: until the HW passes its last offset (min.insync.replicas
                            is checked by broker/replication/rules.py)
  delayed_fetch.py          fetch long poll: until min_bytes or max_wait_ms
  delayed_create_topics.py  CreateTopics / CreatePartitions waiting for its partitions' leaders
  delayed_delete_records.py DeleteRecords: until every in-sync replica's log start offset reached the offset
  delayed_join.py           DelayedJoin / InitialDelayedJoin: a group's rebalance waiting for its members
                            (group.initial.rebalance.delay.ms for a new group)
  delayed_heartbeat.py      DelayedHeartbeat: a group member's session timeout
  completion.py             Completion: a delayed operation's answer delivered to the event loop
"""
