"""Request adapters: the front doors onto the broker's parts (gRPC in broker/apis.py, Kafka's wire protocol in
broker/api/kafka/), and what they share (operations.py)."""
