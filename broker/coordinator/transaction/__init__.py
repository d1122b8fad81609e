"""Kafka's transaction coordinator (core/.../coordinator/transaction in Kafka 2.8), in one module per job:

  transaction_coordinator.py
                            TransactionCoordinator: InitProducerId with a transactional id (epochs, the fence of
                            an open transaction, KIP-360), AddPartitionsToTxn (AddOffsetsToTxn's partition too),
                            EndTxn, leadership of __transaction_state partitions, timed-out transactions
  transaction_marker_channel.py
                            TransactionMarkerChannelManager: the markers to each partition's leader, batched per
                            broker, retried through leader changes, then the transaction's completion
  transaction_metadata.py   TransactionMetadata: Kafka's states (Empty, Ongoing, PrepareCommit, PrepareAbort,
                            CompleteCommit, CompleteAbort, Dead, PrepareEpochFence), the transition table, and the
                            prepare / complete pair every transition goes through (no I/O, timestamps passed in)
  transaction_log.py        the __transaction_state record key and value, byte for byte Kafka's schemas
  transaction_state_topic.py
                            __transaction_state created on first need (transaction.state.log.* configs)
  marker_sender.py          GrpcMarkerSender: WriteTxnMarkers on each leader's inter-broker (gRPC) listener
  transaction_state_manager.py
                            TransactionStateManager: partitionFor, the ids this broker coordinates (per
                            __transaction_state partition, with its coordinator epoch), every transition appended
                            with acks=all before it completes, loading on leadership and dropping on its loss,
                            timed-out transactions and expired ids' tombstones
"""
