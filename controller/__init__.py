"""minibroker: the controller (Kafka 2.x's KafkaController, as a process of its own).

- main.py                    the process: config, ZooKeeper session, signals (`minibroker controller`)
- controller.py              KafkaController: election, failover, resignation, event handlers
- event_manager.py, events.py  one queue, one thread; the events ZooKeeper watches enqueue
- zk_watches.py              ZooKeeper watches and session callbacks -> events
- context.py                 ControllerContext: brokers, assignments, partition/replica states
- states.py                  partition and replica states, valid transitions
- partition_state_machine.py, replica_state_machine.py  the state machines
- election.py                leader election algorithms (pure)
- request_batch.py           ControllerBrokerRequestBatch: LeaderAndIsr / UpdateMetadata per broker (pure)
- channel_manager.py         one gRPC send thread per broker, retrying
- leader_and_isr_update.py   the read-decide-write loop for partition state znodes (updateLeaderAndIsr)
- leader_imbalance.py        auto leader rebalance: its decision only (pure)
- reassignment.py            partition reassignment rules (pure)
- reassignment_manager.py    partition reassignment through /admin/reassign_partitions
- topic_deletion_manager.py  TopicDeletionManager: topics deleted under /admin/delete_topics
- server.py                  the controller's gRPC service: ControlledShutdown, ElectLeaders and DescribeEvents
                             (its event ring, common/event_ring.py, its epoch and ZooKeeper's `srvr` modes, for
                             `minibroker console`)
- metrics.py                 Prometheus metrics named after kafka.controller:type=KafkaController's gauges
- config.py, loggers.py      ControllerConfig; Kafka-style log prefixes
Replica assignment, which the broker's CreateTopics shares, is common/assignment.py.
"""
