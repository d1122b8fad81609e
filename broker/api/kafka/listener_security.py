"""What a Kafka listener's security protocol asks of each connection (Kafka's ChannelBuilders): TLS for SSL
and SASL_SSL, SASL authentication for SASL_PLAINTEXT and SASL_SSL, from the listener's configs
(listener.name.<listener>.* over the broker-wide keys). Built once per listener at start-up, so a bad
key store, trust store or JAAS config stops the broker with the key's name rather than failing clients later.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from broker.api.kafka.api_table import API_TABLE
from broker.api.kafka.sasl_authenticator import SaslAuthenticator
from broker.config.kafka_config import JAAS_CONFIG, LISTENER_PREFIX, KafkaConfig
from broker.security.jaas import JaasConfigError, plain_users
from broker.security.sasl import PLAIN, ServerFactory, server_factory
from broker.security.scram import CredentialCache
from broker.security.ssl_context import server_ssl_context
from common.config import ConfigError, Password, parse_csv
from common.security.ssl_principal import SslPrincipalMapper


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None
    handshake_timeout_s: float
    principal_mapper: SslPrincipalMapper
    sasl_mechanisms: tuple[str, ...]
    sasl_servers: ServerFactory | None
    failed_authentication_delay_s: float
    sasl_max_receive_size: int

    @property
    def uses_sasl(self) -> bool:
        return self.sasl_servers is not None

    def authenticator(self) -> SaslAuthenticator | None:
        if self.sasl_servers is None:
            return None
        return SaslAuthenticator(self.sasl_mechanisms, self.sasl_servers, API_TABLE)

    @classmethod
    def plaintext(cls) -> ListenerSecurity:
        return cls("PLAINTEXT", None, 0, SslPrincipalMapper(), (), None, 0, 0)

    @classmethod
    def of(cls, config: KafkaConfig, listener: str, protocol: str, credentials: CredentialCache) -> ListenerSecurity:
        """ConfigError naming the key that does not load."""
        ssl_context = server_ssl_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
        rules_key = config.listener_key(listener, "ssl.principal.mapping.rules")
        rules = config.for_listener(listener, "ssl.principal.mapping.rules")
        try:
            mapper = SslPrincipalMapper(rules)
        except ValueError as e:
            raise ConfigError(rules_key, rules, str(e)) from None
        mechanisms: tuple[str, ...] = ()
        servers = None
        if protocol.startswith("SASL_"):
            mechanisms = tuple(parse_csv(config.for_listener(listener, "sasl.enabled.mechanisms")))
            servers = server_factory(_plain_users(config, listener) if PLAIN in mechanisms else {}, credentials)
        return cls(protocol, ssl_context, config.ssl_handshake_timeout_ms / 1000, mapper, mechanisms, servers,
                   config.for_listener(listener, "connection.failed.authentication.delay.ms") / 1000,
                   config.for_listener(listener, "sasl.server.max.receive.size"))


def _plain_users(config: KafkaConfig, listener: str) -> dict[str, str]:
    """The users of the listener's PLAIN JAAS config (`user_<name>="<password>"`, Kafka's default callback)."""
    key = f"{LISTENER_PREFIX}{listener.lower()}.plain.{JAAS_CONFIG}"  # brokers read it listener-prefixed only
    jaas = config.for_listener(listener, "plain.sasl.jaas.config")
    if not isinstance(jaas, Password):
        raise ConfigError(key, None, f"listener {listener} enables PLAIN: set {key} with user_<name>=\"<password>\""
                                     " entries (Kafka's PlainLoginModule)")
    try:
        users = plain_users(jaas.value)
    except JaasConfigError as e:
        raise ConfigError(key, jaas, str(e)) from None
    if not users:
        raise ConfigError(key, jaas, "no user_<name>=\"<password>\" entry: no client could log in with PLAIN")
    return users
