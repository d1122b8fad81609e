"""Who is asking, and what they may do: principals, Kafka's ACLs and the AclAuthorizer.

  principal.py      KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
  acl.py            Kafka's ACL vocabulary: resource/pattern types, operations, permissions, bindings, filters
  authorizer.py     AclAuthorizer's rules on an in-memory ACL cache (super.users, allow.everyone.if.no.acl.found,
                    DENY wins, Describe implied by Read/Write/Delete/Alter); Session (principal, client host)
  zk_acl_store.py   the ACLs in ZooKeeper as Kafka stores them (/kafka-acl, /kafka-acl-extended), conditional
                    updates, change notifications every broker follows
  grpc_identity.py  the Session of a gRPC call: its listener's GrpcAuthenticator's principal
  grpc_authentication.py  TLS on the gRPC listeners (ssl.* / listener.name.<l>.ssl.*), who a gRPC call is (SASL
                    user checked against SCRAM, else certificate subject, else ANONYMOUS), cluster actions by
                    certificate over TLS, wrong passwords refused by an interceptor

Where requests are checked: broker/api/operations.py (both doors).
"""
