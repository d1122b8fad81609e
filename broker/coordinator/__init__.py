"""Coordinators that ride on replicated internal topics (Kafka's kafka.coordinator).

  group/        the group coordinator: consumer groups' membership, rebalances and committed offsets, stored
                in the compacted, replicated __consumer_offsets topic (Kafka's kafka.coordinator.group)
  transaction/  the transaction coordinator: transactional ids' producer ids, epochs and transactions, stored
                in the compacted, replicated __transaction_state topic (Kafka's kafka.coordinator.transaction)
  schema.py     the primitives both coordinators' record schemas are written in (strings, arrays, versions)
  storage.py    CoordinatorStorage: appends through the ReplicaManager, the leader's log for a load
  internal_topic.py
                an internal topic created on first need (FindCoordinator), and its partitions' leaders

A coordinator reaches the broker through the ReplicaManager (appends with acks=all, reads of the log it
loads from) and the purgatory (its timers); the ReplicaManager tells it about the __consumer_offsets
partitions this broker starts or stops leading through a callback the server injects, so broker.replication
never imports it. Both front doors (broker/api/kafka/groups.py, broker/api/grpc_apis.py) call the same
GroupCoordinator with plain values.
"""
