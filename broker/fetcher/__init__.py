"""Follower fetchers (Kafka 2.x's AbstractFetcherThread / ReplicaFetcherThread / ReplicaFetcherManager).

  manager.py        ReplicaFetcherManager: partitions hashed onto (leader, fetcher id) threads
  thread.py         ReplicaFetcherThread: truncate if needed, one fetch for all its partitions, append
  truncation.py     the truncation rule, as pure decisions: OffsetsForLeaderEpoch's answer, else the HW;
                    what to do on OFFSET_OUT_OF_RANGE
  protocol.py       what the layers exchange: the leader end point, fetch states, the fetcher config
  blocking_send.py  the leader over gRPC (ReplicaFetcherBlockingSend), in a fetch session
  fetch_session_handler.py  the follower's side of a KIP-227 fetch session (FetchSessionHandler): what the
                    next fetch names and forgets, when it must be full again
"""
