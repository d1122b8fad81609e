"""ZooKeeper, Kafka 2.x style: the znode layout and formats (paths), the client (client), a local server or the
members of a local ensemble (server), and zookeeper.set.acl (acl: Kafka's default ACLs per path, the digest identity
from a JAAS file), and Kafka's ACLs as its AclAuthorizer stores them (acl_store: ZkAclStore, /kafka-acl and its
change notifications, feeding an AclAuthorizer's cache in the broker and the controller alike)."""
