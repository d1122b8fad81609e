"""Follower fetchers (Kafka 2.x's AbstractFetcherThread / ReplicaFetcherThread / ReplicaFetcherManager).

  manager.py        ReplicaFetcherManager: partitions hashed onto (leader, fetcher id) threads
  thread.py         ReplicaFetcherThread: truncate if needed, one fetch for all its partitions, append
  truncation.py     the truncation rule, as pure decisions: OffsetsForLeaderEpoch's answer, else the HW;
                    what to do on OFFSET_OUT_OF_RANGE
  protocol.py       what the layers exchange: the leader end point, fetch states, the fetcher config
  blocking_send.py  the leader over gRPC (ReplicaFetcherBlockingSend)
"""
