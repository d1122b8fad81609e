"""Request adapters: requests in, calls on the layers below, responses out; no rule of their own.

  grpc_apis.py  KafkaApis: the gRPC front door (client API and the controller's cluster API)
  kafka/        (next) Kafka's own wire protocol, beside gRPC, over the same layers
"""
