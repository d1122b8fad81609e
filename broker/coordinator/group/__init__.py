"""Kafka's group coordinator (core/.../coordinator/group in Kafka 2.x), in one module per job:

  group_coordinator.py      GroupCoordinator: the requests (FindCoordinator's partition, JoinGroup, SyncGroup,
                            Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
                            DeleteGroups, OffsetDelete) and their plain result types; the rebalance protocol's
                            rules
  group_metadata.py         GroupMetadata and MemberMetadata: the state machine (Empty, PreparingRebalance,
                            CompletingRebalance, Stable, Dead), members, protocol selection by vote, offsets
  group_metadata_manager.py GroupMetadataManager: partitionFor, the groups this broker owns, storing group
                            metadata and offsets in __consumer_offsets (acks=all), loading a partition when this
                            broker becomes its leader, dropping it when it stops, cleanupGroupMetadata (the
                            tombstones of expired, deleted offsets and groups)
  records.py                the __consumer_offsets record keys and values, byte for byte Kafka's schemas
  results.py                what the coordinator takes and answers, in plain values (no wire types)
  storage.py                how it reaches __consumer_offsets: appends through the ReplicaManager
  offsets_topic.py          __consumer_offsets created on first use (offsets.topic.* configs)
  delayed_join.py           DelayedJoin / InitialDelayedJoin: a group's rebalance waiting for its members
                            (group.initial.rebalance.delay.ms for a new group)
  delayed_heartbeat.py      DelayedHeartbeat: a group member's session timeout

Its timers are delayed operations in broker/purgatory/'s purgatory, woken by the coordinator.
"""
