"""Kafka's ConfigDef machinery, shared by every process's configuration (broker, controller, tools).

The value types, validators and ConfigError messages of Kafka's ConfigDef, the
listener parsing of its EndPoint / CoreUtils, and the .properties reading with
`--override key=value` on top. The key lists themselves live with their
process: broker/config/kafka_config.py (KafkaConfig), controller/config.py
(ControllerConfig).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from common.properties import PropertiesSyntaxError, load_properties
from proto.types import SECURITY_PROTOCOL_IDS, EndPoint

# Java's Integer and Long ranges: Kafka's INT and LONG config types, and every int32 field on disk.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigError(ValueError):
    """A configuration the broker refuses to start with, naming key, value and reason."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        super().__init__(f"Invalid value {java_string(value)} for configuration {key}: {reason}")


class Type(enum.Enum):
    """Kafka's ConfigDef.Type, for the types the keys here use."""

    BOOLEAN = "BOOLEAN"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    PASSWORD = "PASSWORD"


@dataclass(frozen=True)
class Password:
    """Kafka's Password type: a secret that prints as [hidden] wherever it is logged."""

    value: str = field(repr=False)

    def __str__(self) -> str:
        return "[hidden]"

    def __repr__(self) -> str:
        return "Password([hidden])"


# A validator returns why a (non-null) value is invalid, or None when it is fine.
Validator = Callable[[Any], "str | None"]


def at_least(minimum: int) -> Validator:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def between(low: int, high: int) -> Validator:
    def check(v: int) -> str | None:
        if v < low:
            return f"Value must be at least {low}"
        return None if v <= high else f"Value must be no more than {high}"

    return check


def one_of(*allowed: str) -> Validator:
    return lambda v: None if v in allowed else f"String must be one of: {', '.join(allowed)}"


SECURITY_PROTOCOLS = tuple(SECURITY_PROTOCOL_IDS)
# Kafka listeners serve all four; gRPC listeners are checked by the broker's config (KafkaConfig).
SERVED_SECURITY_PROTOCOLS = SECURITY_PROTOCOLS
# The listener name of minibroker's gRPC front door (its own client, follower fetches, controller
# requests): listeners named in grpc.listener.names speak gRPC, every other one Apache Kafka's protocol.
# The one topic config the controller reads too (an unclean election's permission), besides the broker.
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
GRPC_LISTENER_NAME = "GRPC"
# Kafka's default listener.security.protocol.map (each protocol is a listener name of its own), plus
# the gRPC listener's name, a plaintext one too.
DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP = ",".join(
    [f"{p}:{p}" for p in SECURITY_PROTOCOLS] + [f"{GRPC_LISTENER_NAME}:PLAINTEXT"])
# What inter.broker.listener.name means when unset. Kafka: the listener named after
# security.inter.broker.protocol; here the brokers and controllers talk gRPC, so the gRPC listener.
DEFAULT_INTER_BROKER_LISTENER_NAME = GRPC_LISTENER_NAME
# EndPoint.scala's uriParseExp: an IPv6 host sits in brackets.
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def parse_security_protocol_map(text: str) -> dict[str, str]:
    """`NAME:PROTOCOL,...` (listener.security.protocol.map), names and protocols upper-cased as Kafka's
    ListenerName.normalised and SecurityProtocol.forName do."""
    protocols = {}
    for item in parse_csv(text):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"{item!r} is not of the form LISTENER_NAME:SECURITY_PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"Invalid security protocol `{protocol}` defined in listener.security.protocol.map")
        protocols[name.strip().upper()] = protocol
    return protocols


def parse_endpoints(text: str, protocols: Mapping[str, str] | None = None,
                    require_distinct_ports: bool = False) -> tuple[EndPoint, ...]:
    """`NAME://host:port,...` as Kafka's CoreUtils.listenerListToEndPoints reads it: each listener
    name resolved to its security protocol through `protocols` (Kafka's default map if None)."""
    if protocols is None:
        protocols = parse_security_protocol_map(DEFAULT_LISTENER_SECURITY_PROTOCOL_MAP)
    endpoints = []
    for item in parse_csv(text):
        match = _ENDPOINT.match(item)
        if match is None:
            raise ValueError(f"{item!r} is not of the form LISTENER_NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        protocol = protocols.get(name)
        if protocol is None:
            raise ValueError(f"No security protocol defined for listener {name}")
        if protocol not in SERVED_SECURITY_PROTOCOLS:
            raise ValueError(f"listener {name} uses security protocol {protocol}, which is not served")
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} of {item!r} is not in 0..65535")
        endpoints.append(EndPoint(name, host, port, protocol))
    if not endpoints:
        raise ValueError("at least one listener is needed")
    names = [e.listener_name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError("each listener must have a different name")
    # Port 0 (any free port) may repeat.
    ports = [e.port for e in endpoints if e.port]
    if require_distinct_ports and len(set(ports)) != len(ports):
        raise ValueError("each listener must have a different port")
    return tuple(endpoints)


def parse_csv(text: str) -> list[str]:
    """Kafka's CoreUtils.parseCsvList: comma-separated, blanks around items and empty items dropped."""
    return [item for item in (part.strip() for part in text.split(",")) if item]


@dataclass(frozen=True)
class ConfigKey:
    type: Type
    doc: str
    validator: Validator | None
    required: bool


REQUIRED: Any = object()


def define(type_: Type, default: Any, doc: str, validator: Validator | None = None) -> Any:
    """ConfigDef.define: a config dataclass field with its Kafka type, default, validator and doc line."""
    required = default is REQUIRED
    return field(
        default=None if required else default,
        metadata={"key": ConfigKey(type_, doc, validator, required)},
    )


def config_name(attribute: str) -> str:
    """`log_retention_ms` -> `log.retention.ms`: no Kafka key contains an underscore."""
    return attribute.replace("_", ".")


def parse_value(key: str, type_: Type, text: str) -> Any:
    """ConfigDef.parseType: the typed value of an (already trimmed) string."""
    if type_ is Type.STRING:
        return text
    if type_ is Type.PASSWORD:
        return Password(text)
    if type_ is Type.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise ConfigError(key, text, "Expected value to be either true or false")
        return text.lower() == "true"
    if type_ is Type.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(key, text, "Not a number of type DOUBLE") from None
    low, high = (INT_MIN, INT_MAX) if type_ is Type.INT else (LONG_MIN, LONG_MAX)
    # Java's Integer.parseInt / Long.parseLong: optional sign and ASCII digits only.
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not low <= int(text) <= high:
        raise ConfigError(key, text, f"Not a number of type {type_.value}")
    return int(text)


class _Typed(Protocol):
    @property
    def type(self) -> Type: ...


def typed_values(props: Mapping[str, str], keys: Mapping[str, _Typed],
                 unknown: Callable[[str, str], ConfigError]) -> dict[str, Any]:
    """Kafka key -> typed value of each property (values trimmed, as Kafka does); an unknown key raises
    `unknown(key, text)`, which decides how much of the value the message may show."""
    values: dict[str, Any] = {}
    for key, text in props.items():
        spec = keys.get(key)
        if spec is None:
            raise unknown(key, text)
        values[key] = parse_value(key, spec.type, text.strip())
    return values


def java_string(value: object) -> str:
    """How Java's toString prints a config value: null, true/false, [hidden]."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # Double.toString: 0.5, 1.7976931348623157E308
        return repr(value).replace("e+", "E").replace("e-", "E-")
    return str(value)


def read_properties(path: Path | None, overrides: Iterable[str],
                    loggable: Callable[[str, str], object]) -> dict[str, str]:
    """A .properties file's entries with `key=value` overrides on top (kafka-server-start's --override).

    `loggable` says how a value may appear in an error (secrets as [hidden]).
    """
    props: dict[str, str] = {}
    if path is not None:
        try:
            props.update(load_properties(path))
        except PropertiesSyntaxError as e:
            raise ConfigError(e.key, loggable(e.key, e.text), f"{path}:{e.line}: malformed \\uxxxx escape") from None
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep:
            raise ConfigError(override, None, "an override must be key=value")
        props[key.strip()] = value
    return props
