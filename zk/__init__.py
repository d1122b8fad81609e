"""ZooKeeper, Kafka 2.x style.

  paths.py   Kafka's znode layout and JSON formats (kafka/zk/ZkData.scala), nothing else
  client.py  KafkaZkClient: Kafka 2.x's ZooKeeper operations over kazoo
  server.py  a real, local ZooKeeper server process, standalone or one member of an ensemble
  acl.py        zookeeper.set.acl: Kafka's default ACLs per path, the digest identity from a JAAS file
  acl_store.py  Kafka's ACLs as its AclAuthorizer stores them (ZkAclStore: /kafka-acl and its change
                notifications), feeding an AclAuthorizer's cache in the broker and the controller alike
"""
