"""Request adapters: requests in, calls on the layers below, responses out; no rule of their own.

  operations.py  BrokerOperations: what both front doors ask of the broker, in plain values
  grpc_apis.py   KafkaApis: the gRPC front door (client API and the controller's cluster API)
  grpc_group_apis.py  its consumer-group RPCs (FindCoordinator ... DeleteGroups, OffsetDelete) on the GroupCoordinator
  group_operations.py  what both doors ask of the group coordinator, with Kafka's ACL checks in front
  transaction_operations.py  what the doors ask of the transaction coordinator (FindCoordinator for a
                 transactional id, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), Kafka's ACL checks
                 in front
  handler_pools.py  HandlerPools: the bounded threads for requests' ZooKeeper calls and disk work
  replica_state.py  DescribeReplicaState's answer (the project's own request, for `minibroker console`)
  kafka/         Kafka's own wire protocol, beside gRPC, over the same operations
"""
