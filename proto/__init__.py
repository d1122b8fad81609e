"""The wire contract between the broker, the controller and the client.

  minibroker.proto  the gRPC services and messages (minibroker_pb2*.py are generated from it by
                    scripts/gen_proto.sh)
  errors.py         Kafka's error codes, shared by broker, controller and client
  types.py          small value types shared by all three (TopicPartition...)
  auth.py           how a cluster action proves it comes from inside the cluster
  produce_request.py  a ProduceRequest's bytes written directly, its records copied once (the producer's requests)
"""
