"""Who is asking: principals, authentication, and (as it arrives) authorization.

  principal.py      KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
  ssl_context.py    a Kafka listener's server TLS context from Kafka's ssl.* keys (PEM key and trust stores)
  ssl_principal.py  an SSL connection's principal: the client certificate's subject, ssl.principal.mapping.rules
  sasl.py           the SASL mechanisms' server side: PLAIN (JAAS users) and SCRAM-SHA-256/512 (scramp)
  scram.py          SCRAM credentials as Kafka stores them in /config/users/<user>, and the broker's cache of them
  jaas.py           Kafka's sasl.jaas.config value (login module, flag, options; PLAIN's user_<name> entries)

The Kafka protocol around them (SaslHandshake, SaslAuthenticate, the TLS handshake of a connection) is in
broker/api/kafka/ (sasl_authenticator.py, listener.py, listener_security.py).
"""
