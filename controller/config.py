"""ControllerConfig: the controller process's configuration, with Kafka's key names and KafkaConfig's rules.

The controller is a process of its own here, so it has its own (short) list of
keys; everything else is shared with the broker (common/config.py): the .properties
reader, the value types, validators and ConfigError messages, unknown keys refused with a suggestion, secrets never
printed. `controller.id` is ours (in Kafka the controller is a broker and uses
broker.id); `controller.socket.timeout.ms` is Kafka's.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import (
    DEFAULT_INTER_BROKER_LISTENER_NAME,
    ConfigError,
    Password,
    Type,
    Validator,
    at_least,
    between,
    parse_endpoints,
    read_properties,
    typed_values,
)
from common.grpc_tls import PLAINTEXT, GrpcSecurity, KeyStore, TlsConfigError, read_truststore
from common.security.authorizer import invalid_authorizer_class_name, invalid_super_users
from zk.acl import JAAS_CONFIG_KEY, ZkSecurity, zk_security_from_config

_REQUIRED: Any = object()


def _valid_listeners(text: str) -> str | None:
    try:
        parse_endpoints(text)
    except ValueError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class _Key:
    type: Type
    default: Any
    doc: str
    validator: Validator | None = None


_KEYS = {
    "zookeeper.connect": _Key(Type.STRING, _REQUIRED, "ZooKeeper connection string host1:port1,host2:port2[/chroot]"),
    "zookeeper.session.timeout.ms": _Key(
        Type.INT, 18000, "ZooKeeper session timeout: how long a killed active controller holds its seat", at_least(1)
    ),
    "zookeeper.set.acl": _Key(
        Type.BOOLEAN, False, "Create znodes with ACLs: only the cluster's ZooKeeper user may change them (zk/acl.py)"
    ),
    JAAS_CONFIG_KEY: _Key(
        Type.STRING, None, "JAAS login file whose Client section (DigestLoginModule username, password) is the"
        " ZooKeeper identity: Kafka's system property of this name"
    ),
    "controller.id": _Key(
        Type.INT,
        _REQUIRED,
        "This controller's id, unique among controllers, written to /controller (e.g. 1000 + N: not a broker id)",
        at_least(0),
    ),
    "controller.socket.timeout.ms": _Key(
        Type.INT, 30000, "Timeout of one controller-to-broker request attempt (it is retried)", at_least(1)
    ),
    "listeners": _Key(
        Type.STRING,
        "PLAINTEXT://127.0.0.1:0",
        "Where the controller serves ControlledShutdown; port 0 picks a free port. Brokers find the active "
        "controller's endpoint in /controller, so no port needs to be known in advance",
        _valid_listeners,
    ),
    "inter.broker.listener.name": _Key(
        Type.STRING,
        DEFAULT_INTER_BROKER_LISTENER_NAME,
        "The brokers' listener the controller sends its requests to and tells followers to fetch from (Kafka's "
        "controller uses its broker's inter.broker.listener.name); set it as on the brokers",
    ),
    "ssl.keystore.location": _Key(
        Type.STRING, None, "PEM key store (private key and certificate chain): the controller's certificate on an"
        " SSL listener and towards brokers' SSL listeners"
    ),
    "ssl.key.password": _Key(Type.PASSWORD, None, "The password of the key store's (encrypted) private key"),
    "ssl.truststore.location": _Key(
        Type.STRING, None, "PEM CA certificates that brokers' certificates (and brokers as clients) are checked with"
    ),
    "default.replication.factor": _Key(Type.INT, 1, "Replication factor of automatically created topics", at_least(1)),
    "num.partitions": _Key(Type.INT, 1, "Default number of partitions per topic", at_least(1)),
    "unclean.leader.election.enable": _Key(
        Type.BOOLEAN, False, "Elect a leader outside the ISR as a last resort, losing data"
    ),
    "auto.leader.rebalance.enable": _Key(
        Type.BOOLEAN, True, "Move leadership back to the preferred replicas when a broker's imbalance is too high"
    ),
    "leader.imbalance.check.interval.seconds": _Key(
        Type.LONG, 300, "How often the controller checks leader balance", at_least(1)
    ),
    "leader.imbalance.per.broker.percentage": _Key(
        Type.INT,
        10,
        "The share (%) of a broker's preferred partitions led by others above which they move back to it",
        between(0, 100),
    ),
    "cluster.credential": _Key(
        Type.PASSWORD, None, "Shared secret the controller's requests carry as gRPC metadata x-cluster-credential"
    ),
    # Kafka's ACLs, as on the brokers: the controller reads the same ones from ZooKeeper (zk/acl_store.py).
    "authorizer.class.name": _Key(
        Type.STRING, "", "The authorizer: kafka.security.authorizer.AclAuthorizer, or empty for none",
        invalid_authorizer_class_name,
    ),
    "super.users": _Key(
        Type.STRING, None, "Principals allowed everything, separated by semicolons: User:admin;User:broker",
        invalid_super_users,
    ),
    "allow.everyone.if.no.acl.found": _Key(
        Type.BOOLEAN, False, "Whether a resource without any ACL is open to everyone (else to super users only)"
    ),
    "ssl.principal.mapping.rules": _Key(
        Type.STRING, "DEFAULT", "Rules mapping a client certificate's distinguished name to a principal name"
    ),
    "metrics.port": _Key(Type.INT, 0, "Port of the Prometheus metrics endpoint (0: off)", between(0, 65535)),
}


def _unknown_key(key: str, text: str) -> ConfigError:
    close = difflib.get_close_matches(key, _KEYS, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    # The value of an unknown key may be a misspelt secret: never printed.
    return ConfigError(key, Password(text), f"not a controller configuration minibroker knows{hint}")


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    # One field per key of _KEYS, named as the key with '.' -> '_'.
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_set_acl: bool
    java_security_auth_login_config: str | None
    controller_id: int
    controller_socket_timeout_ms: int
    listeners: str
    inter_broker_listener_name: str
    ssl_keystore_location: str | None
    ssl_key_password: Password | None
    ssl_truststore_location: str | None
    default_replication_factor: int
    num_partitions: int
    unclean_leader_election_enable: bool
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    cluster_credential: Password | None
    authorizer_class_name: str
    super_users: str | None
    allow_everyone_if_no_acl_found: bool
    ssl_principal_mapping_rules: str
    metrics_port: int

    @classmethod
    def from_properties(cls, path: Path | None, overrides: Iterable[str] = ()) -> ControllerConfig:
        """From a .properties file and `key=value` overrides, which win over the file."""
        # Any value may be a secret in an error message: none is printed.
        props = read_properties(path, overrides, lambda _key, text: Password(text))
        return cls.from_props(props)

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ControllerConfig:
        values = typed_values(props, _KEYS, _unknown_key)
        kwargs: dict[str, Any] = {}
        for key, spec in _KEYS.items():
            value = values.get(key, spec.default)
            if value is _REQUIRED:
                raise ConfigError(key, None, "Missing required configuration which has no default value")
            if value is not None and spec.validator is not None and (reason := spec.validator(value)) is not None:
                raise ConfigError(key, value, reason)
            kwargs[key.replace(".", "_")] = value
        config = cls(**kwargs)
        config.zk_security  # noqa: B018 (raises ConfigError on a bad JAAS file)
        config.grpc_security  # noqa: B018 (and on a store that cannot be read)
        return config

    @property
    def grpc_security(self) -> GrpcSecurity:
        """TLS towards the brokers' SSL listeners and on an SSL `listeners` (with client certificates required:
        only brokers call the controller); plaintext without a key store."""
        if self.ssl_keystore_location is None:
            return PLAINTEXT
        password = None if self.ssl_key_password is None else self.ssl_key_password.value
        try:
            keystore = KeyStore.load(self.ssl_keystore_location, password)
        except TlsConfigError as e:
            raise ConfigError("ssl.keystore.location", self.ssl_keystore_location, str(e)) from None
        if self.ssl_truststore_location is None:
            raise ConfigError("ssl.truststore.location", None, "a controller with a key store checks the brokers'"
                              " certificates with a trust store: set ssl.truststore.location")
        try:
            return GrpcSecurity(read_truststore(self.ssl_truststore_location), keystore)
        except TlsConfigError as e:
            raise ConfigError("ssl.truststore.location", self.ssl_truststore_location, str(e)) from None

    @property
    def zk_security(self) -> ZkSecurity:
        """zookeeper.set.acl and the JAAS file's ZooKeeper identity (zk/acl.py)."""
        return zk_security_from_config(self.zookeeper_set_acl, self.java_security_auth_login_config)

    @property
    def inter_broker_listener(self) -> str:
        """As Kafka's ListenerName.normalised: upper case."""
        return self.inter_broker_listener_name.upper()

    @property
    def cluster_credential_value(self) -> str | None:
        return None if self.cluster_credential is None else self.cluster_credential.value
