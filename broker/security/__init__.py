"""Who is asking on the broker's listeners: authentication. What a principal may do (KafkaPrincipal, Kafka's ACLs,
the AclAuthorizer) is common/security/, shared with the controller; the ACLs in ZooKeeper are zk/acl_store.py.

  ssl_context.py    a Kafka listener's server TLS context from Kafka's ssl.* keys (PEM key and trust stores)
  sasl.py           the SASL mechanisms' server side: PLAIN (JAAS users) and SCRAM-SHA-256/512 (scramp)
  scram.py          SCRAM credentials as Kafka stores them in /config/users/<user>, and the broker's cache of them
  jaas.py           Kafka's sasl.jaas.config value (login module, flag, options; PLAIN's user_<name> entries)
  grpc_identity.py  the Session of a gRPC call: its listener's GrpcAuthenticator's principal
  grpc_authentication.py  TLS on the gRPC listeners (ssl.* / listener.name.<l>.ssl.*), who a gRPC call is (SASL
                    user checked against SCRAM off the event loop, else certificate subject, else ANONYMOUS),
                    ClusterAction for the call's principal, wrong passwords and unknown users refused alike by an
                    interceptor after connection.failed.authentication.delay.ms

Where requests are checked: broker/api/operations.py (both doors). The Kafka protocol around authentication
(SaslHandshake, SaslAuthenticate, the TLS handshake of a connection) is in broker/api/kafka/
(sasl_authenticator.py, listener.py, listener_security.py).
"""
