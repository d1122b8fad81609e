"""Who is asking, and what they may do: principals, Kafka's ACLs and the AclAuthorizer.

  principal.py      KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
  acl.py            Kafka's ACL vocabulary: resource/pattern types, operations, permissions, bindings, filters
  authorizer.py     AclAuthorizer's rules on an in-memory ACL cache (super.users, allow.everyone.if.no.acl.found,
                    DENY wins, Describe implied by Read/Write/Delete/Alter); Session (principal, client host)
  zk_acl_store.py   the ACLs in ZooKeeper as Kafka stores them (/kafka-acl, /kafka-acl-extended), conditional
                    updates, change notifications every broker follows
  grpc_identity.py  the Session of a gRPC call (ANONYMOUS until the gRPC door authenticates)

Where requests are checked: broker/api/operations.py (both doors).
"""
