"""Kafka's JAAS config value (`sasl.jaas.config`): `<LoginModule class> <flag> key="value" ...;`.

The brokers read `listener.name.<listener>.<mechanism>.sasl.jaas.config` (Kafka's JaasContext.loadServerContext).
For PLAIN, Kafka's default server callback (PlainServerCallbackHandler) takes the users from the login module's
options: `user_<name>="<password>"`; the `username`/`password` options are the broker's own client identity
(unused here: brokers talk gRPC to each other).
"""

from __future__ import annotations

from common import jaas
from common.jaas import LoginModule

PLAIN_USER_PREFIX = "user_"


class JaasConfigError(ValueError):
    pass


def parse_jaas_config(text: str) -> list[LoginModule]:
    """Every login module of the value, in order (common/jaas.py: the one JAAS parser); JaasConfigError naming
    what is wrong."""
    try:
        return jaas.parse_jaas_config(text)
    except jaas.JaasError as e:
        raise JaasConfigError(f"Invalid JAAS config: {e}") from None


def plain_users(text: str) -> dict[str, str]:
    """user name -> password from the `user_<name>="<password>"` options of a PLAIN login module config."""
    users = {}
    for module in parse_jaas_config(text):
        for key, value in module.options.items():
            if key.startswith(PLAIN_USER_PREFIX) and len(key) > len(PLAIN_USER_PREFIX):
                users[key[len(PLAIN_USER_PREFIX):]] = value
    return users
