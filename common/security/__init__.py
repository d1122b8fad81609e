"""Who is asking, and what they may do: what the broker and the controller share to decide it (Kafka keeps the
vocabulary in the clients' `common.acl`, `common.resource` and `common.security.auth`, and AclAuthorizer in
`kafka.security.authorizer`, which its controller, a broker, consults too). Only grpc_peer.py knows gRPC;
nothing here does I/O.

  principal.py      KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
  ssl_principal.py  an SSL connection's principal: the client certificate's subject, ssl.principal.mapping.rules
  acl.py            Kafka's ACL vocabulary: resource/pattern types, operations, permissions, bindings, filters;
                    the operations each resource type's ACLs can name, as KIP-430's authorized-operations bit field
  authorizer.py     AclAuthorizer's rules on an in-memory ACL cache (super.users, allow.everyone.if.no.acl.found,
                    DENY wins, Describe implied by Read/Write/Delete/Alter), for one operation or every operation
                    of a resource on one lookup of its ACLs (KIP-430); Session (principal, client host)
  cluster_action.py who may act for the cluster on a gRPC listener (a broker's or the controller's): CLUSTER_ACTION
                    from the authorizer, or the cluster credential on plaintext
  grpc_peer.py      a gRPC peer's host and the subject of its verified certificate

The ACLs themselves are in ZooKeeper: zk/acl_store.py fills an AclAuthorizer's cache and keeps it current.
"""
