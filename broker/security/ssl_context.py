"""The server TLS context of a Kafka listener, from Kafka's ssl.* keys (PEM stores, Kafka 2.7+'s
ssl.keystore.type=PEM), each of them overridable per listener (listener.name.<listener>.ssl.*).

- key store: `ssl.keystore.location` (a PEM file with the private key and its certificate chain), or
  `ssl.keystore.certificate.chain` + `ssl.keystore.key` inline; `ssl.key.password` decrypts the key;
- trust store: `ssl.truststore.location` (PEM CA certificates) or `ssl.truststore.certificates` inline: what
  client certificates are checked against;
- `ssl.client.auth`: none, requested (a certificate is checked if the client sends one) or required;
- `ssl.enabled.protocols` (TLSv1.2, TLSv1.3), `ssl.cipher.suites` (OpenSSL's names: it is OpenSSL underneath).

Python's ssl reads key and chain only from files: inline PEM goes through a private temporary file, removed
at once.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from broker.config.kafka_config import KafkaConfig
from common.config import ConfigError, Password, parse_csv

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _secret(value: object) -> str | None:
    return value.value if isinstance(value, Password) else None


def server_ssl_context(config: KafkaConfig, listener: str) -> ssl.SSLContext:
    """The listener's TLS context; ConfigError naming the key whose file or value does not load."""
    def get(key: str) -> object:
        return config.for_listener(listener, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_VERSIONS[v] for v in parse_csv(str(get("ssl.enabled.protocols")))]
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    if ciphers := str(get("ssl.cipher.suites") or ""):
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError as e:
            raise ConfigError(config.listener_key(listener, "ssl.cipher.suites"), ciphers, str(e)) from None
    password = _secret(get("ssl.key.password"))
    location = get("ssl.keystore.location")
    key_name = config.listener_key(listener, "ssl.keystore.location" if location else "ssl.keystore.certificate.chain")
    try:
        if location:
            context.load_cert_chain(str(location), password=password)
        else:
            chain, key = _secret(get("ssl.keystore.certificate.chain")), _secret(get("ssl.keystore.key"))
            if not chain or not key:
                raise ConfigError(key_name, None, "ssl.keystore.certificate.chain needs ssl.keystore.key")
            _load_inline(context, chain + "\n" + key, password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(key_name, location, f"cannot load the key store: {e}") from None
    trust_location = get("ssl.truststore.location")
    trust_inline = _secret(get("ssl.truststore.certificates"))
    trust_name = config.listener_key(listener, "ssl.truststore.location" if trust_location
                                     else "ssl.truststore.certificates")
    try:
        if trust_location:
            context.load_verify_locations(cafile=str(trust_location))
        elif trust_inline:
            context.load_verify_locations(cadata=trust_inline)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(trust_name, trust_location, f"cannot load the trust store: {e}") from None
    client_auth = str(get("ssl.client.auth"))
    if client_auth != "none" and not (trust_location or trust_inline):
        raise ConfigError(config.listener_key(listener, "ssl.client.auth"), client_auth,
                          "checking client certificates needs ssl.truststore.location or ssl.truststore.certificates")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def _load_inline(context: ssl.SSLContext, pem: str, password: str | None) -> None:
    fd, name = tempfile.mkstemp(suffix=".pem")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        context.load_cert_chain(name, password=password)
    finally:
        Path(name).unlink(missing_ok=True)
