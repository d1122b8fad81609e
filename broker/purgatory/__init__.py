"""The purgatory (Kafka's DelayedOperationPurgatory): requests that wait for an event, not a poll.

The ground floor: it imports nothing else of the broker. Each delayed operation lives beside its owner, as
Kafka keeps them: DelayedProduce, DelayedFetch and DelayedDeleteRecords in broker/replication/, DelayedJoin,
InitialDelayedJoin and DelayedHeartbeat in broker/coordinator/group/, DelayedCreateTopics beside the
AdminManager.

  purgatory.py              DelayedOperation and the purgatory: watch keys, try-complete on events, expire
  timer.py                  the timer operations expire on
  completion.py             Completion: a delayed operation's answer delivered to the event loop
"""
