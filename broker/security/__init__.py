"""Who is asking, and what they may do: principals, authentication, Kafka's ACLs and the AclAuthorizer.

  principal.py      KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
  ssl_context.py    a Kafka listener's server TLS context from Kafka's ssl.* keys (PEM key and trust stores)
  ssl_principal.py  an SSL connection's principal: the client certificate's subject, ssl.principal.mapping.rules
  sasl.py           the SASL mechanisms' server side: PLAIN (JAAS users) and SCRAM-SHA-256/512 (scramp)
  scram.py          SCRAM credentials as Kafka stores them in /config/users/<user>, and the broker's cache of them
  jaas.py           Kafka's sasl.jaas.config value (login module, flag, options; PLAIN's user_<name> entries)
  acl.py            Kafka's ACL vocabulary: resource/pattern types, operations, permissions, bindings, filters;
                    the operations each resource type's ACLs can name, as KIP-430's authorized-operations bit field
  authorizer.py     AclAuthorizer's rules on an in-memory ACL cache (super.users, allow.everyone.if.no.acl.found,
                    DENY wins, Describe implied by Read/Write/Delete/Alter), for one operation or every operation
                    of a resource on one lookup of its ACLs (KIP-430); Session (principal, client host)
  zk_acl_store.py   the ACLs in ZooKeeper as Kafka stores them (/kafka-acl, /kafka-acl-extended), conditional
                    updates, change notifications every broker follows
  grpc_identity.py  the Session of a gRPC call: its listener's GrpcAuthenticator's principal
  grpc_authentication.py  TLS on the gRPC listeners (ssl.* / listener.name.<l>.ssl.*), who a gRPC call is (SASL
                    user checked against SCRAM, else certificate subject, else ANONYMOUS), cluster actions by
                    certificate over TLS, wrong passwords refused by an interceptor

Where requests are checked: broker/api/operations.py (both doors). The Kafka protocol around authentication
(SaslHandshake, SaslAuthenticate, the TLS handshake of a connection) is in broker/api/kafka/ (sasl_authenticator.py,
listener.py, listener_security.py).
"""
